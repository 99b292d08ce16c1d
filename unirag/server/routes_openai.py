"""The OpenAI-compatible chat API: ``POST /v1/chat/completions``, ``GET /v1/models``.

A chat client (the ``openai`` package, Open WebUI, LibreChat) talks to the
workspace: ``model`` names the method, the last user message is the question and
the messages before it make it self-contained (:mod:`unirag.generate.standalone`).
``stream: true`` gives ``chat.completion.chunk`` events ending with
``data: [DONE]``; usage is the query's own (retrieval and rewrite calls included).
The sources are the extra field ``citations`` (:meth:`QueryResult.citations`): on the
completion, and on the streamed chunk whose ``finish_reason`` is ``stop``
(docs/chat-clients.md).
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from unirag.api_types import AnswerDelta, QueryEvent
from unirag.server.conversation import question_and_history
from unirag.server.deps import server_state
from unirag.server.sse import SSE_HEADERS, framed, sse_frame, started
from unirag.server.state import ServerState

State = Annotated[ServerState, Depends(server_state)]

router = APIRouter(prefix="/v1", tags=["openai"])


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's request; sampling fields (temperature, ...) are accepted and ignored: the workspace's settings rule."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None


def usage_of(result: Any) -> dict[str, int]:
    total = result.ledger.total()
    return {"prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens,
            "total_tokens": total.prompt_tokens + total.completion_tokens}


@router.get("/models", summary="The methods, as OpenAI models")
async def models(state: State) -> dict[str, Any]:
    created = int(time.time())
    return {"object": "list", "data": [{"id": info.name, "object": "model", "created": created, "owned_by": "unirag"}
                                       for info in state.rag.methods()]}


@router.post("/chat/completions", summary="OpenAI chat completions: model = method, last user message = question")
async def chat_completions(body: ChatCompletionRequest, state: State) -> Any:
    spec = state.method(body.model)
    question, history = question_and_history([message.model_dump() for message in body.messages])
    common = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": spec.name}
    if not body.stream:
        result = await state.rag.aquery(question, spec, build=state.settings.query_build, history=history)
        return {**common, "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer},
                             "finish_reason": "stop"}],
                "usage": usage_of(result), "citations": result.citations()}
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    first, rest = await started(state.rag.astream(question, spec, build=state.settings.query_build, history=history))
    chunk = {**common, "object": "chat.completion.chunk"}

    def choice(delta: dict[str, str], finish: str | None, **extra: Any) -> str:
        return sse_frame({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    def frame(event: QueryEvent) -> list[str]:
        if isinstance(event, AnswerDelta):
            return [choice({"content": event.text}, None)]
        frames = [choice({}, "stop", citations=event.result.citations())]
        if include_usage:
            frames.append(sse_frame({**chunk, "choices": [], "usage": usage_of(event.result)}))
        return frames

    def error(payload: dict[str, Any]) -> list[str]:
        return [sse_frame(payload)]

    opening = choice({"role": "assistant", "content": ""}, None)
    frames = framed(first, rest, frame, error, [sse_frame("[DONE]")])
    return StreamingResponse(_after(opening, frames), media_type="text/event-stream", headers=SSE_HEADERS)


async def _after(opening: str, frames: Any) -> Any:
    yield opening
    async for text in frames:
        yield text
