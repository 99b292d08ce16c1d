"""The embedded model's replies are bounded: a time limit, a stop at rambling, Ctrl-C seen.

A scripted stand-in for xllamacpp's server streams tokens through the callback the
way the real one does (and stops when the callback returns True), so the backend's
own loop is tested without the model; the Ctrl-C test runs the real model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from fakes import HashEmbedder, ScriptedChat, small_corpus
from typer.testing import CliRunner

import unirag.cli as cli
from unirag.config import load_settings
from unirag.llm.backends import backend_chat
from unirag.llm.base import INVENTED_CONTEXT, REPETITION, TIME_LIMIT, ChatRequest, ChatResponse, UsageLedger
from unirag.llm.cache import ResponseCache
from unirag.llm.embedded import EmbeddedChat
from unirag.llm.factory import build_stack
from unirag.llm.layers import AccountedChat, CachedChat

REQUEST = ChatRequest(({"role": "user", "content": "Who was Kabir?"},), stage="query.generate", max_tokens=10_000)


class ScriptedLlama:
    """Streams ``tokens`` (then, if ``endless``, ``" w1 w2 ..."`` forever) as xllamacpp does:
    a prompt-progress chunk, one chunk per token, a final chunk with usage. Stops when
    the callback returns True, and records that it was told to."""

    def __init__(self, tokens: list[str], endless: bool = False, pause: float = 0.0,
                 loop: list[str] | None = None) -> None:
        self.tokens, self.endless, self.pause, self.loop = tokens, endless, pause, loop
        self.told_to_stop = threading.Event()
        self.finished = threading.Event()
        self.generated = 0

    def _tokens(self) -> Iterator[str]:
        yield from self.tokens
        while self.loop:  # the same tokens over and over, until told to stop
            yield from self.loop
        n = 0
        while self.endless:  # words that never repeat: no rambling to stop on
            n += 1
            yield f" w{n}"

    def handle_chat_completions(self, body: dict[str, Any], callback: Any = None) -> None:
        assert body["stream"] and callback is not None
        try:
            if callback({"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}],
                         "prompt_progress": {"total": 42, "processed": 42}}):
                self.told_to_stop.set()
                return
            for token in self._tokens():
                if self.pause:
                    time.sleep(self.pause)  # a slow machine: the deadline, not the reply, ends it
                self.generated += 1
                if callback({"choices": [{"delta": {"content": token}, "finish_reason": None}]}):
                    self.told_to_stop.set()
                    return
            callback({"choices": [{"delta": {}, "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 42, "completion_tokens": self.generated}})
        finally:
            self.finished.set()


def embedded(llama: ScriptedLlama, time_limit: float = 60.0) -> EmbeddedChat:
    chat = EmbeddedChat(time_limit=time_limit)
    chat._server = llama
    return chat


def streamed(chat: EmbeddedChat) -> tuple[str, ChatResponse]:
    events = list(chat.stream(REQUEST))
    final = events[-1]
    assert isinstance(final, ChatResponse)
    return "".join(e for e in events[:-1] if isinstance(e, str)), final


def test_an_ordinary_reply_keeps_the_models_usage_and_reason() -> None:
    llama = ScriptedLlama(["Kabir", " was", " a", " poet", "."])
    response = embedded(llama).complete(REQUEST)
    assert (response.text, response.finish_reason) == ("Kabir was a poet.", "stop")
    assert (response.prompt_tokens, response.completion_tokens, response.usage_estimated) == (42, 5, False)
    assert not llama.told_to_stop.is_set()


@pytest.mark.parametrize("use_stream", [False, True])
def test_a_reply_that_never_ends_stops_at_the_time_limit_and_the_model_is_stopped(use_stream: bool) -> None:
    # The scripted model never finishes by itself, so only the time limit can end this
    # (whatever the machine's load): the test does not depend on how fast it runs.
    llama = ScriptedLlama(["Kabir", " was"], endless=True, pause=0.001)
    chat = embedded(llama, time_limit=0.3)
    if use_stream:
        shown, response = streamed(chat)
        assert shown == response.text
    else:
        response = chat.complete(REQUEST)
    assert response.finish_reason == TIME_LIMIT
    # On a loaded machine the worker may get few turns before the deadline (and tokens it made may
    # still wait in the queue when the caller gives up): only what it read is checked.
    assert response.text.startswith("Kabir was")
    assert response.prompt_tokens == 42  # from llama.cpp's prompt progress
    assert llama.finished.wait(10) and llama.told_to_stop.is_set()  # generation itself ended
    assert 2 <= response.completion_tokens <= llama.generated


def test_invented_context_stops_the_model_and_keeps_the_answer() -> None:
    tokens = ["Kabir", " was", " a", " poet", ".\n\n", "[5]", " (chunk", ":", " kabir", ")\n", "Kabir", " lived"]
    llama = ScriptedLlama(tokens, endless=True)
    shown, response = streamed(embedded(llama))
    assert (response.text, response.finish_reason) == ("Kabir was a poet.", INVENTED_CONTEXT)
    assert "[5]" not in shown  # the header was held back, never shown
    assert llama.told_to_stop.wait(10)


def test_repetition_stops_the_model_and_keeps_one_copy() -> None:
    llama = ScriptedLlama(["Rome.\n"], loop=["It is old.\n"])
    response = embedded(llama).complete(REQUEST)
    assert (response.text, response.finish_reason) == ("Rome.\nIt is old.", REPETITION)
    assert llama.told_to_stop.wait(10)


def test_a_new_turn_is_a_normal_end() -> None:
    llama = ScriptedLlama(["Varanasi", ".\n", "Question", ":", " where", " else", "?"], endless=True)
    response = embedded(llama).complete(REQUEST)
    assert (response.text, response.finish_reason) == ("Varanasi.", "stop")
    assert llama.told_to_stop.wait(10)


def test_a_reader_that_leaves_stops_the_model() -> None:
    llama = ScriptedLlama([], endless=True, pause=0.001)
    events = embedded(llama).stream(REQUEST)
    assert next(events) == " w1"
    events.close()
    assert llama.told_to_stop.wait(10)


def test_waiting_for_another_request_does_not_count_against_the_limit() -> None:
    llama = ScriptedLlama(["ok"])
    chat = embedded(llama, time_limit=0.2)
    with chat._lock:  # another request holds the model for longer than the limit
        result: list[ChatResponse] = []
        worker = threading.Thread(target=lambda: result.append(chat.complete(REQUEST)))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()
    worker.join(10)
    assert (result[0].text, result[0].finish_reason) == ("ok", "stop")


def test_time_limited_replies_are_counted_and_not_cached(tmp_path: Path) -> None:
    cache, ledger = ResponseCache(tmp_path / "llm.sqlite"), UsageLedger()
    try:
        chat = AccountedChat(CachedChat(embedded(ScriptedLlama([], endless=True), time_limit=0.2), cache), ledger)
        assert chat.complete(REQUEST).finish_reason == TIME_LIMIT
        assert chat.complete(REQUEST).cached is False  # asked again: not served from the cache
        rambling = AccountedChat(CachedChat(embedded(ScriptedLlama([], loop=["a b\n"])), cache), ledger)
        other = ChatRequest(({"role": "user", "content": "again"},), stage="query.generate")
        assert rambling.complete(other).finish_reason == REPETITION
        assert rambling.complete(other).cached is True  # deterministic: kept
    finally:
        cache.close()
    usage = ledger.stages["query.generate"]
    assert (usage.timed_out_replies, usage.rambling_replies, usage.cut_replies) == (2, 2, 0)


def test_the_time_limit_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(None).chat.embedded_time_limit == 60.0
    monkeypatch.setenv("UNIRAG_CHAT_EMBEDDED_TIME_LIMIT", "7.5")
    settings = load_settings(None)
    assert settings.chat.embedded_time_limit == 7.5
    assert backend_chat(settings)._time_limit == 7.5  # type: ignore[attr-defined]


# -- the advice on a cut answer ---------------------------------------------------------------

runner = CliRunner()


def _query_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, finish_reason: str) -> Result:
    def stack(settings: Any, ws: Any) -> Any:
        chat = ScriptedChat()
        chat.finish_reason = finish_reason
        return build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", stack)
    ws = tmp_path / "ws"
    index = runner.invoke(cli.app, ["index", str(small_corpus(tmp_path)), "-w", str(ws), "-q"])
    assert index.exit_code == 0, index.stderr
    result = runner.invoke(cli.app, ["query", "What is the capital of France?", "-w", str(ws), "-m", "vanilla"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result


def _warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("unirag: warning:")]


def test_advice_for_a_time_limited_answer_names_the_time_limit(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    [warning] = _warnings(_query_with(monkeypatch, tmp_path, TIME_LIMIT))
    assert "time limit of 60 s" in warning and "chat.embedded_time_limit" in warning
    assert "max_tokens" not in warning


@pytest.mark.parametrize("reason", [REPETITION, INVENTED_CONTEXT])
def test_advice_for_a_rambling_answer_points_to_a_real_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             reason: str) -> None:
    [warning] = _warnings(_query_with(monkeypatch, tmp_path, reason))
    assert "ramble" in warning and "chat.base_url" in warning
    assert "max_tokens" not in warning


def test_advice_for_max_tokens_is_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    [warning] = _warnings(_query_with(monkeypatch, tmp_path, "length"))
    assert "raise chat.max_tokens" in warning


# -- Ctrl-C with the real model -----------------------------------------------------------------

# Runs the CLI's entry point in a process that says on stdout when the embedded model's
# generation thread runs the model, so the test interrupts generation itself, not start-up
# (loading the model, about a second, holds the GIL: Ctrl-C waits for it).
_LAUNCHER = """
import signal, sys, threading, time
# As in a terminal's foreground process, even where this test runs in the background
# (a shell starts background jobs with SIGINT ignored, and children inherit that).
signal.signal(signal.SIGINT, signal.default_int_handler)
def generating():
    # The worker exists and is past loading the model (xllamacpp's load holds the GIL).
    frames = sys._current_frames()
    return any(t.name == "unirag-embedded-chat" and t.ident in frames
               and frames[t.ident].f_code.co_name == "generate" for t in threading.enumerate())
def watch():
    while not generating():
        time.sleep(0.02)
    print("generating", flush=True)
threading.Thread(target=watch, daemon=True).start()
sys.argv = ["unirag"] + sys.argv[1:]
from unirag.cli import main
main()
"""


@pytest.mark.slow
def test_ctrl_c_during_an_offline_answer_ends_the_process_with_one_line(tmp_path: Path) -> None:
    passages = [{"title": f"Place {i}", "text": f"Place {i} is a town on river {i % 7} with {i * 13} people."}
                for i in range(20)]
    source = tmp_path / "passages.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in passages), encoding="utf-8")
    ws = tmp_path / "ws"
    env = {**os.environ, "UNIRAG_CHAT_EMBEDDED_TIME_LIMIT": "600", "UNIRAG_RETRIEVAL_MAX_QUESTION_TOKENS": "6000"}
    done = subprocess.run([sys.executable, "-m", "unirag", "index", str(source), "-w", str(ws), "-q"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # A long question: several seconds of prompt processing even on an idle machine, in C.
    question = " ".join(f"Which town on river {i % 7} has {i * 13} people?" for i in range(400))
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, "query", question, "-w", str(ws), "-m", "vanilla",
                             "--max-tokens", "512", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "generating"
        time.sleep(0.5)  # inside llama.cpp now
        assert proc.poll() is None, "the answer finished before it could be interrupted"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        # The product's target is well under a second; 10 s keeps a loaded machine from failing this.
        rc = proc.wait(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr is not None else ""
    assert rc == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("unirag: interrupted"), stderr
    assert elapsed < 10
