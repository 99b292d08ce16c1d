"""The web page: ``GET /`` is ``static/index.html``, ``/static/...`` its scripts, styles and the vendored renderer.

The files are the same for every visitor and hold no workspace data (the page
fetches that from the API with the visitor's key), so they are served without
a key: a browser cannot send ``Authorization`` when it opens a URL. The page
allows scripts and styles from this server only (Content-Security-Policy): no
inline script, nothing from elsewhere, so text from the workspace can never run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_PREFIX = "/static"

#: The renderer sets element styles from script, hence 'unsafe-inline' for styles only.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def is_page_path(path: str) -> bool:
    """A path of the page's own files (served without a key)."""
    return path == "/" or path.startswith(STATIC_PREFIX + "/")


def install_page(app: FastAPI) -> None:
    """``GET /`` and the ``/static`` files on ``app``."""
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="static")
