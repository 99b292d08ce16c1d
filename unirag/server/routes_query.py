"""``POST /query``, ``POST /query/stream``, ``GET /methods``.

Async routes: a query's retrieval runs in a worker thread and its generation is
awaited (``UniRAG.aquery``/``astream``), so many queries run at once and the
event loop never waits on an index or a model.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from unirag.api_types import QueryEvent
from unirag.methods.spec import group_order
from unirag.server.deps import server_state
from unirag.server.sse import SSE_HEADERS, framed, sse_frame, started
from unirag.server.state import ServerState

State = Annotated[ServerState, Depends(server_state)]


class QueryRequest(BaseModel):
    """A question for one method; ``top_k`` items per retrieval operator (default: the workspace's)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    method: str | None = Field(None, description="a method name or alias (GET /methods); default: the workspace's")
    top_k: int | None = Field(None, ge=1, le=1000)
    retrieve_only: bool = False

    @field_validator("question")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty")
        return value.strip()


def query_options(state: ServerState, body: QueryRequest) -> dict[str, Any]:
    top_k = min(body.top_k, state.settings.max_top_k) if body.top_k else None
    return {"top_k": top_k, "retrieve_only": body.retrieve_only, "build": state.settings.query_build}


router = APIRouter(tags=["query"])


@router.post("/query", summary="Answer a question (the JSON of `unirag query --json`)")
async def query(body: QueryRequest, state: State) -> dict[str, Any]:
    spec = state.method(body.method)
    result = await state.rag.aquery(body.question, spec, **query_options(state, body))
    return result.to_json()


@router.post("/query/stream", summary="Answer as server-sent events: `delta` per answer chunk, then `done`",
             response_class=StreamingResponse)
async def query_stream(body: QueryRequest, state: State) -> StreamingResponse:
    spec = state.method(body.method)
    first, rest = await started(state.rag.astream(body.question, spec, **query_options(state, body)))

    def frame(event: QueryEvent) -> list[str]:
        return [sse_frame(event.to_json(), event.event)]

    def error(payload: dict[str, Any]) -> list[str]:
        return [sse_frame(payload, "error")]

    return StreamingResponse(framed(first, rest, frame, error, []), media_type="text/event-stream",
                             headers=SSE_HEADERS)


@router.get("/methods", summary="Every method a query can name, with its group, in group order")
async def methods(state: State) -> list[dict[str, Any]]:
    return [info.to_json() for info in sorted(state.rag.methods(), key=lambda m: group_order(m.group, m.name))]
