"""The async twins of the chat layers in :mod:`unirag.llm.layers`, same order and rules::

    AsyncAccounted -> AsyncCached -> AsyncLimited -> AsyncRetrying -> async backend

Backends: :class:`unirag.llm.openai_async.AsyncOpenAIChat` (real async HTTP), or
:class:`ThreadedChat` around a blocking one (the embedded SmolLM2, test doubles),
whose calls run in a worker thread so the event loop never waits on them.
Cache reads and writes (SQLite, sub-millisecond) run in a worker thread too.

The limit here is an :class:`asyncio.Semaphore`, separate from the sync stack's:
async and sync callers in one process may together have twice ``concurrency``
calls in flight. A semaphore belongs to one event loop: build a stack per loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from unirag.errors import RetryableLLMError
from unirag.llm.base import AsyncChatModel, ChatEvent, ChatModel, ChatRequest, ChatResponse, UsageLedger
from unirag.llm.cache import ResponseCache
from unirag.llm.layers import ResumedStream, RetryBudget, RetryPolicy, cacheable, charge
from unirag.llm.streaming import stream_chat

_END = object()  # marks the end of a threaded stream in its queue


class ThreadedChat:
    """A blocking chat model behind the async protocol: each call runs in a worker thread.

    A stream runs the blocking stream in a thread that hands each event to the
    loop as it comes, so chunks still arrive one by one.
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner, self.name = inner, inner.name

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        return await asyncio.to_thread(self.inner.complete, request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            events: Generator[ChatEvent, None, None] = stream_chat(self.inner, request)
            try:
                for event in events:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                    if stop.is_set():
                        break
            except BaseException as exc:  # handed to the consumer, which re-raises it
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                events.close()  # a consumer that stopped early releases the backend's stream here
                loop.call_soon_threadsafe(queue.put_nowait, _END)

        worker = loop.run_in_executor(None, pump)
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            await worker


async def _retrying(what: str, attempt_fn: Callable[[], Any], policy: RetryPolicy) -> Any:
    budget = RetryBudget(what, policy)
    while True:
        try:
            return await attempt_fn()
        except RetryableLLMError as exc:
            await asyncio.sleep(budget.next_delay(exc))


class AsyncRetryingChat:
    """Backs off on transient failures, mid-stream cuts included (as :func:`layers.stream_with_retry`)."""

    def __init__(self, inner: AsyncChatModel, policy: RetryPolicy) -> None:
        self.inner, self.policy, self.name = inner, policy, inner.name

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        result: ChatResponse = await _retrying(f"chat model {self.name}", lambda: self.inner.acomplete(request),
                                               self.policy)
        return result

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        what = f"chat model {self.name}"
        resumed, budget = ResumedStream(what), RetryBudget(what, self.policy)
        while True:
            resumed.start_attempt()
            try:
                async for event in self.inner.astream(request):  # as ResumedStream.pass_on, awaited
                    passed = resumed.accept(event)
                    if passed is not None:
                        yield passed
                    if isinstance(event, ChatResponse):
                        return
                return
            except RetryableLLMError as exc:
                await asyncio.sleep(budget.next_delay(exc))


class AsyncLimitedChat:
    """At most ``limit`` calls in flight on this loop; a stream holds its slot until it ends."""

    def __init__(self, inner: AsyncChatModel, limit: int) -> None:
        self.inner, self.name = inner, inner.name
        self._slots = asyncio.Semaphore(limit)

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        async with self._slots:
            return await self.inner.acomplete(request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        async with self._slots:
            async for event in self.inner.astream(request):
                yield event


class AsyncCachedChat:
    """The same cache as :class:`layers.CachedChat`: one key per request, whichever way it was asked."""

    def __init__(self, inner: AsyncChatModel, cache: ResponseCache) -> None:
        self.inner, self.cache, self.name = inner, cache, inner.name

    async def _hit(self, request: ChatRequest) -> tuple[str, ChatResponse | None]:
        key = request.cache_key(self.name)
        hit = await asyncio.to_thread(self.cache.get_chat, key)
        return key, (ChatResponse(**hit, cached=True) if hit is not None else None)

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        key, hit = await self._hit(request)
        if hit is not None:
            return hit
        response = await self.inner.acomplete(request)
        if cacheable(response):
            await asyncio.to_thread(self.cache.put_chat, key, self.name, request.stage, response.to_json())
        return response

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        key, hit = await self._hit(request)
        if hit is not None:
            if hit.text:
                yield hit.text
            yield hit
            return
        async for event in self.inner.astream(request):
            if isinstance(event, ChatResponse) and cacheable(event):
                await asyncio.to_thread(self.cache.put_chat, key, self.name, request.stage, event.to_json())
            yield event


class AsyncAccountedChat:
    """Charges ``ledger`` per reply, exactly as :class:`layers.AccountedChat`."""

    def __init__(self, inner: AsyncChatModel, ledger: UsageLedger) -> None:
        self.inner, self.ledger, self.name = inner, ledger, inner.name

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        response = await self.inner.acomplete(request)
        charge(self.ledger, request, response, time.perf_counter() - start)
        return response

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        start = time.perf_counter()
        async for event in self.inner.astream(request):
            if isinstance(event, ChatResponse):
                charge(self.ledger, request, event, time.perf_counter() - start)
            yield event
