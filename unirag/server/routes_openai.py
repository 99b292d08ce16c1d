"""The OpenAI-compatible chat API: ``POST /v1/chat/completions``, ``GET /v1/models``.

A chat client (the ``openai`` package, Open WebUI, LibreChat) talks to the
workspace: ``model`` names the method, the last user message is the question
(earlier turns are not used: each question is retrieved on its own).
``stream: true`` gives ``chat.completion.chunk`` events ending with
``data: [DONE]``; usage is the query's own (retrieval calls included).
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from unirag.api_types import AnswerDelta, QueryEvent
from unirag.server.deps import server_state
from unirag.server.errors import ApiError
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


def last_question(messages: list[ChatMessage]) -> str:
    """The text of the last user message (text parts of a multi-part content joined)."""
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        text = content if isinstance(content, str) else " ".join(
            str(part.get("text", "")) for part in content or [] if part.get("type") == "text")
        if text.strip():
            return text.strip()
        break
    raise ApiError(400, "no question: the last user message is missing or empty")


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
    question = last_question(body.messages)
    common = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": spec.name}
    if not body.stream:
        result = await state.rag.aquery(question, spec, build=state.settings.query_build)
        return {**common, "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer},
                             "finish_reason": "stop"}],
                "usage": usage_of(result)}
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    first, rest = await started(state.rag.astream(question, spec, build=state.settings.query_build))
    chunk = {**common, "object": "chat.completion.chunk"}

    def choice(delta: dict[str, str], finish: str | None) -> str:
        return sse_frame({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def frame(event: QueryEvent) -> list[str]:
        if isinstance(event, AnswerDelta):
            return [choice({"content": event.text}, None)]
        frames = [choice({}, "stop")]
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
