"""Bearer-key check: every route but ``/health`` when the server has a key.

The key is compared with :func:`secrets.compare_digest` (no timing leak) and
never logged: uvicorn's access log has the method, path and status, never headers.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from fastapi import Request

from unirag.server.errors import ApiError

OPEN_PATHS = frozenset({"/health"})


def bearer_guard(api_key: str | None) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency that refuses requests without ``Authorization: Bearer <api_key>``."""
    expected = api_key.encode("utf-8") if api_key else None

    async def require_key(request: Request) -> None:
        if expected is None or request.url.path in OPEN_PATHS:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode("utf-8"), expected):
            raise ApiError(401, "missing or wrong API key: send 'Authorization: Bearer KEY'", "authentication_error")

    return require_key
