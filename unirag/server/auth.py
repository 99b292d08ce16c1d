"""Bearer-key check on every request but ``/health`` and the web page's files when the server has a key.

An ASGI middleware, not a route dependency, so the routes FastAPI adds itself
(``/openapi.json``, ``/docs``) and unknown paths are guarded too. The key is
compared with :func:`secrets.compare_digest` (no timing leak) and never logged:
uvicorn's access log has the client, method, path and status, never headers.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from unirag.server.errors import error_body
from unirag.server.page import is_page_path

OPEN_PATHS = frozenset({"/health"})
_REFUSAL = json.dumps(error_body("missing or wrong API key: send 'Authorization: Bearer KEY'",
                                 "authentication_error")).encode("utf-8")


class BearerKeyMiddleware:
    """Refuse (401, the usual error body) an HTTP request without ``Authorization: Bearer <key>``."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app = app
        self._expected = api_key.encode("utf-8")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan (startup, shutdown) has no path and no key to check
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in OPEN_PATHS or is_page_path(path) or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
            (b"content-length", str(len(_REFUSAL)).encode())]})
        await send({"type": "http.response.body", "body": _REFUSAL})

    def _authorised(self, scope: dict[str, Any]) -> bool:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, given = header.partition(b" ")
        return scheme.lower() == b"bearer" and secrets.compare_digest(given.strip(), self._expected)
