"""The API's own pages, ``/docs`` (Swagger UI) and ``/redoc``, with their scripts served by this server.

FastAPI's defaults load Swagger UI and ReDoc from a CDN, so on a machine without
internet (the case unirag is built for: offline models, a local workspace) ``/docs``
is a blank page. ``fastapi-offline`` ships those files in its wheel; this module
mounts them under ``/static/api-docs`` so they are served like the web page's own
files: without a key (they are the same public library files for every visitor
and hold no workspace data) and behind the same Host/Origin guard. ``/docs``,
``/redoc`` and ``/openapi.json`` themselves stay behind the key when there is one.

ReDoc's bundle still draws a logo from cdn.redoc.ly; ``/redoc`` is served here with a
Content-Security-Policy that keeps images, fonts and fetches on this server, so the
browser never asks (the bundle hides the image when it cannot load).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request  # the route's annotations are resolved when it is declared
from fastapi.responses import HTMLResponse

from unirag.errors import import_optional
from unirag.server.page import STATIC_PREFIX

#: Where the Swagger UI and ReDoc files are served; under the page's prefix, hence key-less.
API_DOCS_ASSETS = f"{STATIC_PREFIX}/api-docs"
#: Swagger UI would send the schema's URL to validator.swagger.io to draw a badge: a request
#: to elsewhere that an offline (or private) server must never make.
SWAGGER_UI_PARAMETERS: dict[str, Any] = {"validatorUrl": None}
#: ReDoc's page: its inline start-up script runs, nothing it draws or fetches comes from elsewhere.
REDOC_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                           "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                           "worker-src 'self' blob:; object-src 'none'; base-uri 'none'"}


def offline_fastapi(**kwargs: Any) -> FastAPI:
    """A ``FastAPI`` app (``kwargs`` as FastAPI's) whose ``/docs`` and ``/redoc`` need no network.

    Mounted before the page's ``/static`` so that ``/static/api-docs/...`` reaches these files."""
    offline = import_optional("fastapi_offline", "server", "the server's /docs page")
    app: FastAPI = offline.FastAPIOffline(static_url=API_DOCS_ASSETS, redoc_url=None,
                                          swagger_ui_parameters=SWAGGER_UI_PARAMETERS, **kwargs)

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        from fastapi.openapi.docs import get_redoc_html

        root = request.scope.get("root_path", "")
        page = get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{API_DOCS_ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{API_DOCS_ASSETS}/favicon.png", with_google_fonts=False)
        page.headers.update(REDOC_HEADERS)
        return page

    return app
