"""Running the app under uvicorn (``unirag serve``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from unirag.server.settings import ServerSettings


def serve(app: FastAPI, settings: ServerSettings) -> None:
    """Serve until interrupted. uvicorn's access log holds method, path and status, never
    headers, so a bearer key does not reach the log."""
    import uvicorn

    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", access_log=True)
