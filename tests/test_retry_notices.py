"""Issue 17 item 11: one line per retry wait, and a refused local endpoint fails fast."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import HashEmbedder
from test_cli import assert_one_line_error, fakes, run, workspace  # noqa: F401 (fixtures)
from test_openai_compat import FakeServer, Reply, ask

import unirag.cli as cli
from unirag.errors import LLMUnavailableError, RetryableLLMError
from unirag.llm.factory import build_stack
from unirag.llm.layers import RetryingChat, RetryPolicy, call_with_retry
from unirag.llm.openai_compat import OpenAIChat

KEY = "sk-very-secret-key"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_each_retry_wait_is_one_line() -> None:
    lines: list[str] = []
    attempts = iter([RetryableLLMError("x", reason="timeout", endpoint="h:1"), None])

    def flaky() -> str:
        error = next(attempts)
        if error is not None:
            raise error
        return "ok"

    assert call_with_retry("chat model m", flaky, RetryPolicy(3, 0.0, on_retry=lines.append), sleep=lambda s: None)
    assert lines == ["chat model m at h:1: timeout; retry 1/3 in 0.0 s"]


def test_rate_limit_retry_names_host_attempt_reason_and_never_the_key() -> None:
    server = FakeServer()
    server.start()
    lines: list[str] = []
    client = OpenAIChat(server.base_url, "m", api_key=KEY, client=httpx.Client())
    try:
        server.script(Reply(429, {}, headers={"Retry-After": "0"}), Reply(503, {}), Reply())
        chat = RetryingChat(client, RetryPolicy(5, 0.0, on_retry=lines.append))
        assert chat.complete(ask()).text == "hello"
    finally:
        client.close()
        server.stop()
    host = server.base_url.split("//")[1].split("/")[0]
    assert len(lines) == 2
    assert f"at {host}: 429 Too Many Requests; retry 1/5 in 0.0 s" in lines[0]
    assert "503 Service Unavailable; retry 2/5" in lines[1]
    assert all(KEY not in line and "\n" not in line for line in lines)


def test_refused_local_connection_is_retried_once_then_says_what_to_do() -> None:
    lines: list[str] = []
    port = closed_port()
    client = OpenAIChat(f"http://localhost:{port}/v1", "m", client=httpx.Client())
    chat = RetryingChat(client, RetryPolicy(5, 0.5, on_retry=lines.append))
    started = time.perf_counter()
    with pytest.raises(LLMUnavailableError) as info:
        chat.complete(ask())
    client.close()
    assert time.perf_counter() - started < 3
    message = str(info.value)
    assert "gave up after 2 attempts" in message and f"localhost:{port}" in message
    assert "start the server or fix chat.base_url" in message and "\n" not in message
    assert len(lines) == 1 and "connection refused; retry 1/1" in lines[0]


def test_cli_prints_retry_lines_on_stderr(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def real_chat_stack(settings: Any, ws: Any) -> Any:
        return build_stack(settings, ws.cache(), embedder=HashEmbedder(), on_retry=cli._err)

    monkeypatch.setattr(cli, "_stack", real_chat_stack)
    monkeypatch.setenv("UNIRAG_RETRY_BASE_DELAY", "0")
    monkeypatch.setenv("UNIRAG_CHAT_API_KEY", KEY)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = run("query", "What is the capital of France?", "-w", workspace, "-m", "zeroshot",
                 "--chat-base-url", url, "--chat-model", "some-model")
    retry_lines = [line for line in result.stderr.splitlines() if "retry 1/1" in line]
    assert len(retry_lines) == 1 and "127.0.0.1" in retry_lines[0]
    assert KEY not in result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("unirag: error:")]
    assert len(error) == 1 and "start the server or fix chat.base_url" in error[0]
