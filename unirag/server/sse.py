"""Server-sent events: ``event: NAME`` / ``data: JSON`` frames, and a query's events as a stream.

Errors before the first event (unknown method, a workspace not ready) are raised
while the route still can answer with a status; an error after the stream began
can only be one last ``error`` event, in the same ``{"error": ...}`` body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from unirag.api_types import QueryEvent
from unirag.errors import UniragError
from unirag.server.errors import error_body, internal_message, unirag_status

log = logging.getLogger("unirag.server")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_frame(data: Any, event: str | None = None) -> str:
    """One event; ``data`` is JSON unless it is already a string (``[DONE]``)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def error_payload(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, UniragError):
        return error_body(str(exc), unirag_status(exc)[1])
    log.error("stream failed: %s", internal_message(exc), exc_info=exc)
    return error_body(internal_message(exc), "server_error")


async def started(events: AsyncIterator[QueryEvent]) -> tuple[QueryEvent, AsyncIterator[QueryEvent]]:
    """The first event (retrieval has run, so a user's mistake has raised by now) and the rest."""
    first = await anext(events)
    return first, events


async def framed(first: QueryEvent, rest: AsyncIterator[QueryEvent],
                 frame: Callable[[QueryEvent], list[str]], error: Callable[[dict[str, Any]], list[str]],
                 ending: list[str]) -> AsyncIterator[str]:
    """Frames of every event (``frame``), then ``ending``; a failure midway is ``error``'s frames."""
    try:
        for text in frame(first):
            yield text
        async for event in rest:
            for text in frame(event):
                yield text
    except Exception as exc:  # the status line is gone: the error travels as the last event
        for text in error(error_payload(exc)):
            yield text
    for text in ending:
        yield text
