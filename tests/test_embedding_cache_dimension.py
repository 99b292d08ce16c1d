"""An endpoint that answers another embedding dimension once never poisons the model cache.

Issue 29 §3.2: one query against an endpoint serving another dimension stored its vectors
in ``cache/llm.sqlite``; the right endpoint then kept failing (HippoRAG: ``internal error:
ValueError: all input arrays must have the same shape``) and ``index --rebuild`` did not
help. The cache now serves and stores only vectors of the workspace's dimension, and the
wrong endpoint is one line naming both dimensions.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from test_cli import assert_one_line_error, ok, run

import unirag.cli as cli
from unirag.errors import WorkspaceError
from unirag.llm.base import embedding_cache_key
from unirag.llm.cache import ResponseCache
from unirag.llm.factory import build_stack
from unirag.llm.layers import CachedEmbedder
from unirag.llm.openai_compat import OpenAIEmbedder

MODEL = "embed-model"


class EmbeddingServer:
    """A scripted OpenAI-compatible ``/v1/embeddings`` on 127.0.0.1: hashed bag-of-words
    vectors of ``dim`` dimensions (set it to serve another, as a wrong endpoint would)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests += 1
                embedder = HashEmbedder(dim=server.dim)
                data = [{"index": i, "embedding": (embedder.vector(text) + 0.01).tolist()}
                        for i, text in enumerate(body["input"])]
                reply = json.dumps({"object": "list", "data": data,
                                    "usage": {"prompt_tokens": len(data), "total_tokens": len(data)}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer(dim=64)
    yield server
    server.close()


def test_a_wrong_dimension_endpoint_once_leaves_the_cache_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: EmbeddingServer) -> None:
    monkeypatch.setattr(cli, "_stack", lambda settings, ws: build_stack(
        settings, ws.cache(), chat=ScriptedChat(), embedder=OpenAIEmbedder(endpoint.base_url, MODEL)))
    ws = tmp_path / "ws"
    ok("index", small_corpus(tmp_path), "-w", ws, "-q")
    question = ["query", "Where does the quokka live?", "-w", ws, "-m", "hipporag"]
    ok(*question)  # builds what HippoRAG needs at the right dimension

    endpoint.dim = 8  # the wrong endpoint behind the same model name
    assert_one_line_error(run("query", "Who won the Nobel Prize in 1903?", "-w", ws, "-m", "hipporag"),
                          "was embedded with 64-dimension vectors", "8-dimension vectors", "--rebuild")
    assert_one_line_error(run("query", "Who won the Nobel Prize in 1903?", "-w", ws, "-m", "vanilla"),
                          "64-dimension", "8-dimension")

    endpoint.dim = 64  # the right endpoint again: the same questions are answered
    ok("query", "Who won the Nobel Prize in 1903?", "-w", ws, "-m", "hipporag")
    ok("query", "Who won the Nobel Prize in 1903?", "-w", ws, "-m", "vanilla")
    cache = ResponseCache(ws / "cache" / "llm.sqlite")
    try:
        dims = {row[0] for row in cache._db.execute("SELECT DISTINCT dim FROM embedding")}
    finally:
        cache.close()
    assert dims == {64}


def test_vectors_of_another_dimension_already_cached_are_not_served(tmp_path: Path) -> None:
    """A cache poisoned before the fix (8-dimension rows of the right keys) is a miss, re-embedded."""
    cache = ResponseCache(tmp_path / "llm.sqlite", expected_dim=lambda model: ("chunk_vectors", 64))
    embedder = HashEmbedder(name=MODEL)
    texts = ["a quokka", "a river"]
    cache.put_vectors(MODEL, [(embedding_cache_key(MODEL, text), np.ones(8, np.float32)) for text in texts])
    try:
        batch = CachedEmbedder(embedder, cache).embed(texts)
        assert batch.vectors.shape == (2, 64) and (batch.calls, batch.cache_hits) == (1, 0)
        again = CachedEmbedder(embedder, cache).embed(texts)
        assert (again.calls, again.cache_hits) == (0, 2)
        np.testing.assert_array_equal(again.vectors, batch.vectors)  # the same stored bytes, no arithmetic
    finally:
        cache.close()


def test_a_new_workspace_takes_the_endpoints_dimension(tmp_path: Path) -> None:
    """No vectors yet (a new or rebuilt workspace): a cached vector of another dimension than
    the endpoint's now is embedded again, never stacked with the new ones."""
    cache = ResponseCache(tmp_path / "llm.sqlite")
    cache.put_vectors(MODEL, [(embedding_cache_key(MODEL, "old"), np.ones(8, np.float32))])
    try:
        batch = CachedEmbedder(HashEmbedder(name=MODEL), cache).embed(["old", "new"])
        assert batch.vectors.shape == (2, 64) and batch.cache_hits == 0
    finally:
        cache.close()


def test_a_rebuild_for_an_endpoint_of_another_dimension_is_not_served_the_old_vectors(tmp_path: Path) -> None:
    """Every text cached at 8 dimensions; the endpoint now answers 64 and was refused once (a
    query of the old workspace); the workspace is rebuilt (expects nothing): the old vectors
    are embedded again, not built into an index that the endpoint's queries cannot search."""
    cache = ResponseCache(tmp_path / "llm.sqlite")
    texts = ["a quokka", "a river", "a tower"]
    cache.put_vectors(MODEL, [(embedding_cache_key(MODEL, text), np.ones(8, np.float32)) for text in texts])
    embedder = HashEmbedder(name=MODEL)
    try:
        refused = ResponseCache(tmp_path / "llm.sqlite", expected_dim=lambda model: ("chunk_vectors", 8))
        with pytest.raises(WorkspaceError, match="8-dimension vectors, but the query embeds with 64"):
            CachedEmbedder(embedder, refused).embed(["the question"])
        refused.close()
        batch = CachedEmbedder(embedder, cache).embed(texts)
        assert batch.vectors.shape == (3, 64) and (batch.calls, batch.cache_hits) == (1, 0)
        again = CachedEmbedder(embedder, cache).embed(texts)  # another process: cached at 64 now
        assert again.vectors.shape == (3, 64) and (again.calls, again.cache_hits) == (0, 3)
    finally:
        cache.close()


def test_a_rebuild_after_one_wrong_answer_re_embeds_one_batch_only(tmp_path: Path) -> None:
    """The issue's order: one query refused at 8 dimensions, then ``index --rebuild`` with the
    right endpoint (64): the first batch finds the endpoint is back at 64 and the rest is
    served from the cache."""
    cache = ResponseCache(tmp_path / "llm.sqlite")
    embedder = HashEmbedder(name=MODEL)
    right = [f"passage {n}" for n in range(6)]
    cache.put_vectors(MODEL, [(embedding_cache_key(MODEL, t), embedder.vector(t)) for t in right])
    cache.put_served_dim(MODEL, 8)  # what the wrong endpoint's refused answer recorded
    try:
        cached = CachedEmbedder(embedder, cache)
        first, rest = cached.embed(right[:2]), cached.embed(right[2:])
        assert first.vectors.shape == (2, 64) and first.calls == 1
        assert rest.vectors.shape == (4, 64) and (rest.calls, rest.cache_hits) == (0, 4)
    finally:
        cache.close()
