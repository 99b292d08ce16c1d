"""A local OpenAI-compatible endpoint for the documentation's examples (tests/test_docs.py).

It answers like the scripted model of tests/fakes.py, over real HTTP so that the CLI
subprocesses of the docs' shell blocks can use it: extraction JSON for extraction prompts,
NO to YES/NO checks, the title of passage [1] to an answer prompt, the last question to the
multi-turn rewrite prompt, a one-line summary otherwise; hash embeddings (fakes.HashEmbedder); ``stream: true`` as server-sent events;
``GET /v1/models``. Usage is counted in words, as the scripted model does.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fakes import _FIRST_SOURCE, HashEmbedder, scripted_extraction


def reply_text(messages: list[dict[str, Any]]) -> str:
    """What the scripted model says to this conversation (by the kind of prompt)."""
    user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if "YES or NO" in user or "YES/NO" in user:
        return "NO"
    if "Passages:" in user:
        return scripted_extraction(user)
    if "Context:" in user:
        match = _FIRST_SOURCE.search(user)
        return match.group(1) if match else "no context"
    if "Last question:" in user:  # the multi-turn rewrite: the question, unchanged
        return user.split("Last question:", 1)[1].strip().splitlines()[0]
    return f"summary of {len(user.splitlines())} lines"


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-request (a docs example that stops its stream early) is no
    error worth a traceback in the test output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class DocsEndpoint:
    """Serve on 127.0.0.1 and a free port while the ``with`` block runs; ``base_url`` ends in /v1."""

    def __init__(self) -> None:
        self.chat_calls = 0
        self._embedder = HashEmbedder()
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return {"object": "list", "model": body.get("model", "hash"),
                "data": [{"object": "embedding", "index": i, "embedding": self._embedder.vector(t).tolist()}
                         for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0}}

    def chat(self, body: dict[str, Any]) -> tuple[str, dict[str, int]]:
        with self._lock:
            self.chat_calls += 1
        text = reply_text(body["messages"])
        prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        return text, {"prompt_tokens": prompt, "completion_tokens": len(text.split()),
                      "total_tokens": prompt + len(text.split())}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._send(json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode())

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.endswith("/embeddings"):
                    self._send(json.dumps(endpoint.embeddings(body)).encode())
                    return
                text, usage = endpoint.chat(body)
                model = body.get("model", "scripted")
                if not body.get("stream"):
                    self._send(json.dumps({
                        "id": "c1", "object": "chat.completion", "model": model,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}], "usage": usage}).encode())
                    return
                events = [{"choices": [{"index": 0, "delta": {"content": text[i:i + 4]}, "finish_reason": None}]}
                          for i in range(0, len(text), 4)]
                events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
                stream = "".join(f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', 'model': model, **e})}\n\n"
                                 for e in events) + "data: [DONE]\n\n"
                self._send(stream.encode(), "text/event-stream")

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the docs test reads what it needs from the examples' own output."""

        return Handler

    def __enter__(self) -> DocsEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
