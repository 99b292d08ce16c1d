"""The async twin of :class:`unirag.llm.openai_compat.OpenAIChat`: real async HTTP (httpx.AsyncClient).

Why a twin that mirrors a sync client instead of a second implementation: the
request body, the JSON-mode fallback (learned once, shared by both), the
parsing of replies and the classification of every failure stay in one place,
:class:`OpenAIChat`. This class only moves the bytes without blocking an
event loop, so a server can answer many queries on one thread.

An ``httpx.AsyncClient`` belongs to the event loop it first ran on: build one
:class:`AsyncOpenAIChat` per loop (``unirag.api`` does) and close it there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx

from unirag.llm.base import ChatEvent, ChatRequest, ChatResponse
from unirag.llm.streaming import ChunkAssembler, sse_line

if TYPE_CHECKING:
    from unirag.llm.openai_compat import OpenAIChat

_PATH = "/chat/completions"


class AsyncOpenAIChat:
    """``acomplete`` / ``astream`` against the endpoint of ``sync`` (same model, key, timeout, rules)."""

    def __init__(self, sync: OpenAIChat, client: httpx.AsyncClient | None = None) -> None:
        self.sync = sync
        self.name = sync.name
        self._endpoint = sync._endpoint
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(timeout=sync._endpoint.timeout)

    @property
    def _url(self) -> str:
        return f"{self._endpoint.base_url}{_PATH}"

    async def _post(self, payload: dict[str, Any]) -> httpx.Response:
        try:
            return await self._client.post(self._url, json=payload, headers=self._endpoint.headers,
                                           timeout=self._endpoint.timeout)
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise self._endpoint.transport_error(exc, self._url) from None

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        payload, with_format = self.sync.payload(request)
        response = await self._post(payload)
        if self.sync.rejected_json_mode(with_format, response):
            del payload["response_format"]
            response = await self._post(payload)
        self._endpoint.check(response)
        return self.sync._parse(self._endpoint.json_body(response))

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        """As :meth:`OpenAIChat.stream`, without blocking the loop."""
        payload, with_format = self.sync.payload(request)
        payload.update(stream=True, stream_options={"include_usage": True})
        assembler = ChunkAssembler(f"chat model {self.name}")
        try:
            async with self._client.stream("POST", self._url, json=payload, headers=self._endpoint.headers,
                                           timeout=self._endpoint.timeout) as response:
                if not 200 <= response.status_code < 300:
                    await response.aread()
                    if self.sync.rejected_json_mode(with_format, response):
                        async for event in self.astream(request):
                            yield event
                        return
                    self._endpoint.check(response)
                async for line in response.aiter_lines():
                    done, chunk = sse_line(line)
                    if done:
                        break
                    text = assembler.feed(chunk) if chunk is not None else ""
                    if text:
                        yield text
        except httpx.TransportError as exc:
            raise self._endpoint.transport_error(exc, self._url, mid_stream=bool(assembler.parts)) from None
        except httpx.InvalidURL as exc:
            raise self._endpoint.transport_error(exc, self._url) from None
        yield assembler.response(request)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
