"""The Ollama-compatible API: ``POST /api/chat``, ``POST /api/generate``, ``GET /api/tags``,
``POST /api/show``, ``GET /api/ps``, ``GET /api/version``.

For clients that speak Ollama (the ``ollama`` package, Open WebUI's Ollama connection):
``model`` names the method (a name or alias, ``:latest`` accepted), as the OpenAI routes
resolve it. As Ollama, ``stream`` defaults to true and a stream is NDJSON
(``application/x-ndjson``): one JSON object per answer piece, then a last one with
``done: true``, ``done_reason``, durations in nanoseconds and token counts from the
query's usage, and the extra field ``citations`` (:meth:`QueryResult.citations`). A
chat's earlier messages make its question self-contained (:mod:`unirag.generate.standalone`).

Errors are Ollama's ``{"error": "one line"}`` (404 unknown model, 400 bad body; a failure
mid-stream is a last ``{"error": ...}`` line, which the ``ollama`` client raises). The bodies
are read here, not by FastAPI, so a bad one is a 400 in that shape rather than a 422 in the
OpenAI shape of the other routes. Auth and the origin guard apply as to ``/v1``: the key
middleware guards every path, and a POST is refused from another origin.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from hashlib import sha256
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unirag import package_version
from unirag.api_types import AnswerDelta, MethodInfo, QueryEvent
from unirag.errors import UniragError
from unirag.server.conversation import question_and_history
from unirag.server.deps import server_state
from unirag.server.errors import ApiError, one_line, unirag_status, validation_message
from unirag.server.sse import SSE_HEADERS, framed, started
from unirag.server.state import ServerState

if TYPE_CHECKING:
    from unirag.methods.runner import QueryResult

State = Annotated[ServerState, Depends(server_state)]
Body = TypeVar("Body", bound=BaseModel)

router = APIRouter(prefix="/api", tags=["ollama"])

NDJSON = "application/x-ndjson"
NANOS = 1_000_000_000


class OllamaChatRequest(BaseModel):
    """Ollama's chat request; ``options``, ``format``, ``keep_alive``, ``tools`` are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = True


class OllamaGenerateRequest(BaseModel):
    """Ollama's generate request: ``prompt`` is the question (``system``, ``options`` ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    prompt: str = ""
    stream: bool = True


class OllamaShowRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    name: str | None = None  # older clients name the model so


def ollama_error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status)


async def answered(work: Callable[[], Awaitable[Any]]) -> Any:
    """``work``'s response, or a user's mistake as Ollama's one-line error body."""
    try:
        return await work()
    except ApiError as exc:
        return ollama_error(exc.status, str(exc))
    except UniragError as exc:
        return ollama_error(unirag_status(exc)[0], str(exc))


async def parsed(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as ``model``; a 400 naming the first problem otherwise."""
    try:
        data = json.loads(await request.body() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, validation_message(exc.errors())) from None


def model_name(name: str) -> str:
    """Ollama names carry a tag (``vanilla:latest``); a method has one version, the served one."""
    return name.removesuffix(":latest")


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def finished(result: QueryResult) -> dict[str, Any]:
    """The fields of Ollama's last object: why it ended, durations (ns) and counts, and the sources."""
    total = result.ledger.total()
    timings = result.timings
    return {"done": True, "done_reason": "stop",
            "total_duration": int(timings.get("total", 0.0) * NANOS), "load_duration": 0,
            "prompt_eval_count": total.prompt_tokens,
            "prompt_eval_duration": int(timings.get("retrieval", 0.0) * NANOS),
            "eval_count": total.completion_tokens, "eval_duration": int(timings.get("generate", 0.0) * NANOS),
            "citations": result.citations()}


def ndjson_line(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False) + "\n"


def streamed(first: QueryEvent, rest: AsyncIterator[QueryEvent],
             piece: Callable[[str], dict[str, Any]], last: Callable[[QueryResult], dict[str, Any]]) -> StreamingResponse:
    """A query's events as NDJSON: ``piece(text)`` per answer chunk, ``last(result)`` at the end,
    ``{"error": ...}`` for a failure after the stream began."""

    def frame(event: QueryEvent) -> list[str]:
        if isinstance(event, AnswerDelta):
            return [ndjson_line(piece(event.text))]
        return [ndjson_line(last(event.result))]

    def error(payload: dict[str, Any]) -> list[str]:
        return [ndjson_line({"error": payload["error"]["message"]})]

    return StreamingResponse(framed(first, rest, frame, error, []), media_type=NDJSON, headers=SSE_HEADERS)


@router.post("/chat", summary="Ollama chat: model = method, last user message = question")
async def chat(request: Request, state: State) -> Any:
    async def work() -> Any:
        body = await parsed(request, OllamaChatRequest)
        spec = state.method(model_name(body.model))
        question, history = question_and_history(body.messages)
        common = {"model": spec.name}
        options = {"build": state.settings.query_build, "history": history}
        if not body.stream:
            result = await state.rag.aquery(question, spec, **options)
            return {**common, "created_at": now(), "message": {"role": "assistant", "content": result.answer},
                    **finished(result)}
        first, rest = await started(state.rag.astream(question, spec, **options))
        return streamed(first, rest,
                        lambda text: {**common, "created_at": now(),
                                      "message": {"role": "assistant", "content": text}, "done": False},
                        lambda result: {**common, "created_at": now(),
                                        "message": {"role": "assistant", "content": ""}, **finished(result)})

    return await answered(work)


@router.post("/generate", summary="Ollama generate: model = method, prompt = question")
async def generate(request: Request, state: State) -> Any:
    async def work() -> Any:
        body = await parsed(request, OllamaGenerateRequest)
        spec = state.method(model_name(body.model))
        if not body.prompt.strip():
            raise ApiError(400, "no question: the prompt is empty")
        common = {"model": spec.name}
        if not body.stream:
            result = await state.rag.aquery(body.prompt.strip(), spec, build=state.settings.query_build)
            return {**common, "created_at": now(), "response": result.answer, **finished(result)}
        first, rest = await started(state.rag.astream(body.prompt.strip(), spec, build=state.settings.query_build))
        return streamed(first, rest,
                        lambda text: {**common, "created_at": now(), "response": text, "done": False},
                        lambda result: {**common, "created_at": now(), "response": "", **finished(result)})

    return await answered(work)


def details(info: MethodInfo) -> dict[str, Any]:
    return {"parent_model": "", "format": "unirag", "family": info.group, "families": [info.group],
            "parameter_size": "", "quantization_level": ""}


def listed(info: MethodInfo, modified: str) -> dict[str, Any]:
    return {"name": info.name, "model": info.name, "modified_at": modified, "size": 0,
            "digest": sha256(f"unirag:{info.name}".encode()).hexdigest(), "details": details(info)}


@router.get("/tags", summary="The methods, as Ollama models")
async def tags(state: State) -> dict[str, Any]:
    modified = now()
    return {"models": [listed(info, modified) for info in state.rag.methods()]}


@router.post("/show", summary="One method, as Ollama describes a model")
async def show(request: Request, state: State) -> Any:
    async def work() -> Any:
        body = await parsed(request, OllamaShowRequest)
        name = body.model or body.name
        if not name:
            raise ApiError(400, "model: field required")
        spec = state.method(model_name(name))
        info = next(info for info in state.rag.methods() if info.name == spec.name)
        return {"modelfile": "", "parameters": "", "template": "", "details": details(info),
                "model_info": {"general.architecture": "unirag", "unirag.method": info.name,
                               "unirag.title": info.title, "unirag.description": info.description,
                               "unirag.aliases": info.aliases, "unirag.requires": info.requires},
                "capabilities": ["completion"], "modified_at": now()}

    return await answered(work)


@router.get("/ps", summary="Running models: none (methods load nothing a client could unload)")
async def ps() -> dict[str, Any]:
    return {"models": []}


@router.get("/version", summary="The server's version")
async def version() -> dict[str, str]:
    return {"version": package_version()}
