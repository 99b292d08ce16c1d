"""Rerankers as operators: ``context.rerank`` against a real rerank HTTP server.

A small ``http.server`` app on a free port scores documents by word overlap with the query
and serves both shapes of the common rerank API: Cohere/Jina/vLLM's ``/v1/rerank``
(``{query, documents, top_n}`` -> ``{results: [{index, relevance_score}]}``) and TEI's
``/rerank`` (``{query, texts}`` -> ``[{index, score}]``). It can also fail on purpose (a
status, a stall, a malformed body) and records every request with its headers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedChat, make_settings, overlap_score, small_corpus
from typer.testing import CliRunner

import unirag.cli as cli
from unirag.config import Settings
from unirag.errors import ConfigError, LLMError, UniragError
from unirag.llm.factory import build_stack
from unirag.llm.rerank_http import HttpReranker
from unirag.methods.runner import MethodRunner, QueryResult
from unirag.methods.spec import MethodSpec, resolve_method
from unirag.pipeline import run_index
from unirag.workspace import Workspace

KEY = "sk-rerank-test-7f3a9c"
QUESTION = "Which river flows through Paris, the capital city?"


@dataclass
class RerankServer:
    """What the test server does (``fail``: ``None`` | a status | ``"stall"`` | ``"malformed"``)
    and what it was sent."""

    fail: int | str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def _handler(state: RerankServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:  # keep the test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            if state.fail == "stall":
                time.sleep(3)
                return
            if state.fail == "malformed":
                return self._send(200, b"{not json")
            if isinstance(state.fail, int):
                return self._send(state.fail, json.dumps({"error": {"message": f"boom, key {KEY} rejected"}}).encode())
            texts = body.get("documents", body.get("texts", []))  # lenient, so a wrong shape shows in the reply
            if self.path == "/v1/rerank":
                scored = sorted(((overlap_score(body["query"], t), i) for i, t in enumerate(texts)),
                                key=lambda pair: (-pair[0], pair[1]))[: body.get("top_n") or len(texts)]
                reply: Any = {"results": [{"index": i, "relevance_score": s} for s, i in scored],
                              "usage": {"total_tokens": sum(len(t.split()) for t in texts)}}
            elif self.path == "/rerank":
                reply = [{"index": i, "score": overlap_score(body["query"], t)} for i, t in enumerate(texts)]
            else:
                return self._send(404, b'{"error": "no such route"}')
            self._send(200, json.dumps(reply).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def server() -> Iterator[RerankServer]:
    state = RerankServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("rerank")
    ws = Workspace.init(root / "ws")
    settings = make_settings(ws.root)
    run_index(ws, [small_corpus(root)], settings,
              build_stack(settings, ws.cache(), chat=ScriptedChat(), embedder=HashEmbedder()), graphs=[])
    yield ws
    ws.close()


def _settings(ws: Workspace, **rerank: Any) -> Settings:
    return make_settings(ws.root, max_retries=0, **{f"rerank__{key}": value for key, value in rerank.items()})


def _ask(ws: Workspace, settings: Settings, method: str | MethodSpec = "vanilla-rerank") -> QueryResult:
    embedder = HashEmbedder()
    stack = build_stack(settings, ws.cache(), chat=ScriptedChat(), embedder=embedder)
    spec = resolve_method(method) if isinstance(method, str) else method
    return MethodRunner(ws, settings, stack).run(spec, QUESTION)


def _candidates(ws: Workspace) -> list[str]:
    """The texts vanilla-rerank's first stage hands the reranker (its 20 nearest chunks)."""
    first = resolve_method("vanilla-rerank").model_copy(deep=True)
    first.operators = first.operators[:1]
    return [item.text for item in _ask(ws, make_settings(ws.root), first).context]


@pytest.mark.parametrize("api,path", [("cohere", "/v1"), ("tei", "")])
def test_rerank_orders_the_context_as_the_server_scores(indexed: Workspace, server: RerankServer, api: str,
                                                        path: str) -> None:
    candidates = _candidates(indexed)
    assert len(candidates) > 4  # more candidates than the context keeps: the cut is the reranker's
    result = _ask(indexed, _settings(indexed, base_url=server.url + path, api=api, model="bge-reranker"))
    best = sorted(range(len(candidates)), key=lambda i: (-overlap_score(QUESTION, candidates[i]), i))[:4]
    assert [item.text for item in result.context] == [candidates[i] for i in best]
    assert best != [0, 1, 2, 3]  # the reranker changed the first stage's order
    scores = [item.score for item in result.context]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert result.context[0].provenance["rerank"]["rank_before"] == best[0] + 1
    sent = server.requests[0]
    assert sent["path"] == path + "/rerank"
    if api == "cohere":  # top_n honoured: the server is asked for the context's size, and the model named
        assert sent["body"] == {"model": "bge-reranker", "query": QUESTION, "documents": candidates, "top_n": 4}
    else:
        assert sent["body"] == {"query": QUESTION, "texts": candidates}
    # The query's usage has a rerank stage: one call, every candidate scored, its milliseconds.
    stage = result.to_json()["usage_by_stage"]["rerank"]
    assert stage["rerank_calls"] == 1 and stage["reranked_documents"] == len(candidates)
    assert stage["seconds"] > 0 and result.usage()["rerank_calls"] == 1
    assert stage["rerank_tokens"] == (sum(len(t.split()) for t in candidates) if api == "cohere" else 0)


def test_retrieval_top_k_sets_how_many_the_reranker_keeps(indexed: Workspace, server: RerankServer) -> None:
    settings = _settings(indexed, base_url=server.url + "/v1")
    settings.retrieval.top_k = 2
    result = _ask(indexed, settings)
    assert len(result.context) == 2 and server.requests[0]["body"]["top_n"] == 2


def test_long_candidate_lists_go_in_batches_and_merge(indexed: Workspace, server: RerankServer) -> None:
    candidates = _candidates(indexed)
    whole = _ask(indexed, _settings(indexed, base_url=server.url + "/v1"))
    server.requests.clear()
    batched = _ask(indexed, _settings(indexed, base_url=server.url + "/v1", batch_size=2))
    assert [item.id for item in batched.context] == [item.id for item in whole.context]
    assert len(server.requests) == -(-len(candidates) // 2)
    assert all(len(r["body"]["documents"]) <= 2 and r["body"]["top_n"] == len(r["body"]["documents"])
               for r in server.requests)  # every score is needed to merge batches
    assert batched.usage()["rerank_calls"] == len(server.requests)


def test_the_key_goes_as_a_bearer_header_and_never_into_messages_or_logs(
        indexed: Workspace, server: RerankServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings = _settings(indexed, base_url=server.url + "/v1", api_key=KEY)
    assert KEY not in repr(settings) and KEY not in json.dumps(settings.public_dict())
    _ask(indexed, settings)
    assert server.requests[-1]["auth"] == f"Bearer {KEY}"
    server.fail = 401  # the server echoes the key in its error text
    with pytest.raises(LLMError) as caught:
        _ask(indexed, settings)
    assert KEY not in str(caught.value) and "rerank.api_key" in str(caught.value)
    assert KEY not in caplog.text


def test_the_key_comes_from_the_environment_only(tmp_path: Path) -> None:
    (tmp_path / "unirag.yaml").write_text(f"rerank:\n  base_url: http://localhost:8080/v1\n  api_key: {KEY}\n")
    with pytest.raises(ConfigError) as caught:
        make_settings(tmp_path)
    assert "UNIRAG_RERANK_API_KEY" in str(caught.value) and KEY not in str(caught.value)
    (tmp_path / "unirag.yaml").write_text("rerank:\n  api_key: ${COHERE_API_KEY}\n")
    settings = make_settings(tmp_path, env={"COHERE_API_KEY": KEY})
    assert settings.rerank.api_key is not None and settings.rerank.api_key.get_secret_value() == KEY
    assert make_settings(tmp_path.parent, env={"UNIRAG_RERANK_API_KEY": KEY}).rerank.api_key is not None


@pytest.mark.parametrize("fail,words", [(500, "server error 500"), (400, "answered 400"),
                                        ("malformed", "malformed response"), ("stall", "timed out")])
def test_server_failures_are_one_line(indexed: Workspace, server: RerankServer, fail: int | str, words: str) -> None:
    server.fail = fail
    with pytest.raises(UniragError) as caught:
        _ask(indexed, _settings(indexed, base_url=server.url + "/v1", api_key=KEY, timeout=0.5))
    message = str(caught.value)
    assert words in message and "reranker" in message and "\n" not in message and KEY not in message


def test_an_unreachable_reranker_is_one_line(indexed: Workspace, server: RerankServer) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UniragError) as caught:
        _ask(indexed, _settings(indexed, base_url=f"http://127.0.0.1:{port}/v1"))
    assert "cannot reach" in str(caught.value) and "rerank.base_url" in str(caught.value)


def test_the_wrong_api_shape_names_the_setting(server: RerankServer) -> None:
    """TEI's list read as Cohere's ``{results}``, and the other way round: ``check rerank.api``."""
    for reranker in (HttpReranker(server.url, api="cohere"), HttpReranker(server.url + "/v1", api="tei")):
        with pytest.raises(LLMError, match="malformed response .*check rerank.api"):
            reranker.rerank("river", ["a river", "a city"], 1)
        reranker.close()


def test_a_rerank_method_without_a_reranker_stops_at_query_start(indexed: Workspace) -> None:
    embedder = HashEmbedder()
    settings = make_settings(indexed.root)
    runner = MethodRunner(indexed, settings, build_stack(settings, indexed.cache(), chat=ScriptedChat(),
                                                         embedder=embedder))
    for method in ("vanilla-rerank", "hybrid-rerank", "hipporag2-rerank", "linearrag-rerank"):
        with pytest.raises(ConfigError, match=r"set rerank\.base_url \(UNIRAG_RERANK_BASE_URL\)"):
            runner.run(resolve_method(method), QUESTION)
    assert embedder.calls == 0  # before any model call


def test_the_cli_says_it_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: RerankServer) -> None:
    def fake_stack(settings: Any, ws: Any) -> Any:
        return build_stack(settings, ws.cache(), chat=ScriptedChat(), embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", fake_stack)
    runner = CliRunner()
    ws = tmp_path / "ws"
    assert runner.invoke(cli.app, ["index", str(small_corpus(tmp_path)), "-w", str(ws), "-q"]).exit_code == 0
    missing = runner.invoke(cli.app, ["query", QUESTION, "-w", str(ws), "-m", "vanilla-rerank"])
    assert missing.exit_code != 0 and missing.stderr.strip().count("\n") == 0
    assert "set rerank.base_url" in missing.stderr and "Traceback" not in missing.stderr
    monkeypatch.setenv("UNIRAG_RERANK_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("UNIRAG_RERANK_API_KEY", KEY)
    monkeypatch.setenv("UNIRAG_MAX_RETRIES", "0")
    answered = runner.invoke(cli.app, ["query", QUESTION, "-w", str(ws), "-m", "vanilla-rerank", "--json"])
    assert answered.exit_code == 0, answered.stderr
    assert json.loads(answered.stdout)["usage_by_stage"]["rerank"]["rerank_calls"] == 1
    server.fail = 503
    failed = runner.invoke(cli.app, ["query", QUESTION, "-w", str(ws), "-m", "vanilla-rerank"])
    assert failed.exit_code != 0 and failed.stderr.strip().count("\n") == 0 and "reranker" in failed.stderr
    assert KEY not in failed.stderr + failed.stdout + answered.stdout
