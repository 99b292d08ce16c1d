"""Reading streamed chat replies: OpenAI-style chunks in, text deltas and one final response out.

The OpenAI-compatible client (server-sent events over HTTP) and the embedded
model (xllamacpp calls back with the same chunk dictionaries) both feed a
:class:`ChunkAssembler`, so a streamed reply is read, and its usage counted,
the same way whichever backend produced it. A stream that ends without a
finish reason was cut (a dropped connection, a proxy timeout): that is a
transient failure the retry layer handles, never a short answer.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from unirag.errors import RetryableLLMError
from unirag.llm.base import ChatEvent, ChatModel, ChatRequest, ChatResponse, clean_model_text
from unirag.text.tokenizer import get_tokenizer

#: The tokenizer that estimates usage when a server streams none: the chunking default.
ESTIMATE_ENCODING = "cl100k_base"


class ChunkAssembler:
    """Accumulates one streamed reply: its text, finish reason and usage.

    ``feed`` takes one decoded chunk (``{"choices": [{"delta": {"content": ...}}], ...}``)
    and returns the new text it carries ("" for none).
    """

    def __init__(self, what: str) -> None:
        self.what = what  # "chat model NAME", for messages
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.sanitised = False  # some chunk held invalid code points, replaced

    def feed(self, chunk: Any) -> str:
        if not isinstance(chunk, dict):
            raise RetryableLLMError(f"{self.what}: malformed stream chunk (not a JSON object)")
        if isinstance(chunk.get("error"), (dict, str)):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise RetryableLLMError(f"{self.what}: the server failed mid-stream: {' '.join(str(message).split())[:200]}")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if content is None:
            return ""
        if not isinstance(content, str):
            raise RetryableLLMError(f"{self.what}: malformed stream chunk (content is not text)")
        content, replaced = clean_model_text(content)
        self.sanitised = self.sanitised or replaced
        self.parts.append(content)
        return content

    def response(self, request: ChatRequest) -> ChatResponse:
        """The finished reply; a stream without a finish reason was cut and is retryable."""
        text = "".join(self.parts)
        if self.finish_reason is None:
            raise RetryableLLMError(
                f"{self.what}: the reply stream was cut after {len(text)} characters (no finish reason)"
            )
        prompt, completion = _count(self.usage, "prompt_tokens"), _count(self.usage, "completion_tokens")
        if prompt is None or completion is None:
            return ChatResponse(text, estimate_prompt_tokens(request), estimate_tokens(text), self.finish_reason,
                                usage_estimated=True, sanitised=self.sanitised)
        return ChatResponse(text, prompt, completion, self.finish_reason, sanitised=self.sanitised)


def _count(usage: dict[str, Any] | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def estimate_tokens(text: str) -> int:
    return get_tokenizer(ESTIMATE_ENCODING).count(text) if text else 0


def estimate_prompt_tokens(request: ChatRequest) -> int:
    """Our count of a request's message tokens (the chat template's own tokens are not known here)."""
    return sum(estimate_tokens(message["content"]) for message in request.messages)


def sse_line(line: str) -> tuple[bool, Any]:
    """One line of a server-sent event stream: (the stream is done, its JSON payload or None).

    Comments (``: keep-alive``), ``event:``/``id:`` fields and blank lines carry
    no payload; ``data: [DONE]`` ends the stream; a payload that is not JSON is a
    malformed (retryable) reply.
    """
    if not line.startswith("data:"):
        return False, None
    data = line[5:].strip()
    if data == "[DONE]":
        return True, None
    try:
        return False, json.loads(data)
    except ValueError:
        raise RetryableLLMError(f"malformed stream event (not JSON): {data[:80]!r}") from None


def sse_data(lines: Iterable[str]) -> Iterator[Any]:
    """The JSON payloads of a server-sent event stream, until ``data: [DONE]``."""
    for line in lines:
        done, payload = sse_line(line)
        if done:
            return
        if payload is not None:
            yield payload


def stream_chat(model: ChatModel, request: ChatRequest) -> Generator[ChatEvent, None, None]:
    """``model.stream(request)`` where the model streams; else its whole reply as one chunk."""
    stream = getattr(model, "stream", None)
    if callable(stream):
        yield from stream(request)
        return
    response = model.complete(request)
    if response.text:
        yield response.text
    yield response


def final_response(events: Iterable[ChatEvent]) -> ChatResponse:
    """Drain a stream to its final response (for callers that want only the whole reply)."""
    for event in events:
        if isinstance(event, ChatResponse):
            return event
    raise RetryableLLMError("the reply stream ended without a final response")
