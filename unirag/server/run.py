"""Running the app under uvicorn (``unirag serve``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from unirag.server.settings import ServerSettings


KEEP_ALIVE_SECONDS = 30  # uvicorn's 5 s lets a busy client reuse a connection the server just closed


def serve(app: FastAPI, settings: ServerSettings) -> None:
    """Serve until interrupted. uvicorn's access log holds method, path and status, never
    headers, so a bearer key does not reach the log. Idle keep-alive connections are kept
    longer than uvicorn's default: with its 5 s, a client whose next request was slow to
    come (a loaded machine) raced the server's close and saw a connection reset."""
    import uvicorn

    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", access_log=True,
                timeout_keep_alive=KEEP_ALIVE_SECONDS)
