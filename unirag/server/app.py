"""``create_app``: the FastAPI application around one workspace.

    from unirag.server.app import create_app
    app = create_app("my-ws", ServerSettings(api_key="..."))      # or create_app(UniRAG(...))

The app serves exactly that workspace: no request names a directory or a file.
Routes are async; a query's blocking work runs in worker threads (module
docstring of :mod:`unirag.server.routes_query`), writes are queued jobs
(:mod:`unirag.server.jobs`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unirag import package_version
from unirag.api import UniRAG
from unirag.server.auth import BearerKeyMiddleware
from unirag.server.errors import install_error_handlers
from unirag.server.guard import OriginGuardMiddleware, served_names
from unirag.server.page import install_page
from unirag.server.settings import ServerSettings
from unirag.server.state import ServerState

if TYPE_CHECKING:
    from fastapi import FastAPI


def create_app(rag_or_workspace: UniRAG | str | Path, settings: ServerSettings | None = None,
               **overrides: Any) -> FastAPI:
    """The app for one workspace: a :class:`~unirag.api.UniRAG` (the caller keeps it and closes it)
    or a workspace path (opened now, which must exist, and closed at shutdown; ``overrides`` as
    ``UniRAG``'s). The reader answers from the built artifacts while a job writes
    (``stale_while_writing`` is set on a given UniRAG too)."""
    # deferred: the routes import fastapi, so `import unirag.server.app` stays cheap and works without the extra
    from unirag.server import routes_corpus, routes_graph, routes_ollama, routes_openai, routes_query
    from unirag.server.api_docs import offline_fastapi

    settings = settings or ServerSettings()
    if isinstance(rag_or_workspace, UniRAG):
        rag, owns = rag_or_workspace, False
    else:
        rag, owns = UniRAG(rag_or_workspace, create=False, **overrides), True
    rag.stale_while_writing = True
    state = ServerState(rag, settings, owns_rag=owns)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.close()

    app = offline_fastapi(title="unirag", summary=f"Graph RAG over the workspace {rag.root.name}",
                          version=package_version(), lifespan=lifespan)
    app.state.unirag = state
    if settings.api_key:
        app.add_middleware(BearerKeyMiddleware, api_key=settings.api_key)
    app.add_middleware(OriginGuardMiddleware, names=served_names(settings.host, settings.allowed_hosts))  # outermost
    install_error_handlers(app)

    @app.get("/health", tags=["health"], summary="Liveness (no key needed)")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    for module in (routes_query, routes_corpus, routes_graph, routes_openai, routes_ollama):
        app.include_router(module.router)
    install_page(app)
    return app
