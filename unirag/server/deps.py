"""FastAPI dependencies shared by the routers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request

if TYPE_CHECKING:
    from unirag.server.state import ServerState


def server_state(request: Request) -> ServerState:
    """The process's :class:`ServerState` (set by ``create_app``)."""
    return request.app.state.unirag
