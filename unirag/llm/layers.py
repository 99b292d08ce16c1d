"""Composable layers around every model call.

The stack built by :mod:`unirag.llm.factory`, outermost first::

    Accounted -> Cached -> Limited -> Retrying -> backend

Accounting sees cache hits and wall time; a cache hit never waits for a
concurrency slot; a retry keeps its slot so a 429 storm does not fan out.

Every chat layer also streams (``stream(request)``: text chunks, then one
:class:`ChatResponse`): a cached reply is replayed as one chunk, a streamed
reply is cached only once it finished, and a stream cut mid-way is retried
like any transient failure (see :func:`stream_with_retry`). The async twins
live in :mod:`unirag.llm.async_layers`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from unirag.errors import LLMUnavailableError, RetryableLLMError, embedding_mismatch
from unirag.llm.base import (
    RAMBLING,
    TIME_LIMIT,
    ChatEvent,
    ChatModel,
    ChatRequest,
    ChatResponse,
    EmbeddingBatch,
    EmbeddingModel,
    UsageLedger,
    embedding_cache_key,
)
from unirag.llm.cache import ResponseCache
from unirag.llm.streaming import stream_chat

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, honouring ``Retry-After``.

    ``on_retry`` gets one line per wait (endpoint, attempt, reason, seconds): without it a
    hung or rate-limited endpoint means minutes without a word. The CLI prints it on stderr.
    """

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 30.0
    on_retry: Callable[[str], None] | None = None

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_delay, max(0.0, retry_after))
        return min(self.max_delay, self.base_delay * (2**attempt)) * (0.5 + random.random() / 2)


class RetryBudget:
    """The attempts of one call under a :class:`RetryPolicy`: how long to wait after each
    transient failure, and the final error once the retries are spent. Shared by the sync
    and async retry loops, which differ only in how they sleep."""

    def __init__(self, what: str, policy: RetryPolicy) -> None:
        self.what, self.policy, self.attempt = what, policy, 0

    def next_delay(self, exc: RetryableLLMError) -> float:
        """Seconds to wait before the next attempt; :class:`LLMUnavailableError` when none is left."""
        allowed = self.policy.max_retries if exc.max_retries is None else min(exc.max_retries, self.policy.max_retries)
        if self.attempt >= allowed:
            raise LLMUnavailableError(f"{self.what}: gave up after {self.attempt + 1} attempts ({exc})") from None
        delay = self.policy.delay(self.attempt, exc.retry_after)
        self.attempt += 1
        if self.policy.on_retry is not None:
            self.policy.on_retry(retry_line(self.what, exc, self.attempt, allowed, delay))
        return delay


def retry_line(what: str, exc: RetryableLLMError, attempt: int, allowed: int, delay: float) -> str:
    """``chat model M at host:port: 429 Too Many Requests; retry 2/5 in 3.1 s`` (no key, one line)."""
    where = f" at {exc.endpoint}" if exc.endpoint else ""
    reason = exc.reason or " ".join(str(exc).split())[:160]
    return f"{what}{where}: {reason}; retry {attempt}/{allowed} in {delay:.1f} s"


def call_with_retry(
    what: str, fn: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run ``fn``; on :class:`RetryableLLMError` back off and try again."""
    budget = RetryBudget(what, policy)
    while True:
        try:
            return fn()
        except RetryableLLMError as exc:
            sleep(budget.next_delay(exc))


class ResumedStream:
    """What a retried stream may still say, given what an earlier attempt already yielded.

    The consumer has seen ``sent``; a retry's reply (the same prompt, usually
    the same text at temperature 0) is passed on only past that prefix. A retry
    that says something else cannot be stitched to what was shown: that is a
    final error, never a garbled answer.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.sent = ""  # text yielded to the consumer over every attempt
        self.seen = ""  # text of the current attempt

    def start_attempt(self) -> None:
        self.seen = ""

    def new_text(self, chunk: str) -> str:
        """The part of ``chunk`` the consumer has not seen yet ("" while replaying the prefix)."""
        self.seen += chunk
        if len(self.seen) <= len(self.sent):
            if not self.sent.startswith(self.seen):
                raise self.diverged()
            return ""
        if not self.seen.startswith(self.sent):
            raise self.diverged()
        fresh = self.seen[len(self.sent):]
        self.sent = self.seen
        return fresh

    def check_complete(self, response: ChatResponse) -> None:
        if not response.text.startswith(self.sent):
            raise self.diverged()

    def accept(self, event: ChatEvent) -> ChatEvent | None:
        """What to pass on of one event of the current attempt: the unseen part of a chunk
        (None when there is none), or the final response once it agrees with what was sent."""
        if isinstance(event, ChatResponse):
            self.check_complete(event)
            return event
        return self.new_text(event) or None

    def pass_on(self, events: Iterator[ChatEvent]) -> Iterator[ChatEvent]:
        """One attempt's events, less the text already sent; ends at the final response."""
        for event in events:
            passed = self.accept(event)
            if passed is not None:
                yield passed
            if isinstance(event, ChatResponse):
                return

    def diverged(self) -> LLMUnavailableError:
        return LLMUnavailableError(
            f"{self.what}: the reply stream was cut after {len(self.sent)} characters and the retry answered "
            "differently; ask again"
        )


def stream_with_retry(
    what: str, open_stream: Callable[[], Iterator[ChatEvent]], policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ChatEvent]:
    """Stream ``open_stream()``; on :class:`RetryableLLMError` (also mid-stream) back off and
    open it again, passing on only text the consumer has not seen (:class:`ResumedStream`)."""
    resumed, budget = ResumedStream(what), RetryBudget(what, policy)
    while True:
        resumed.start_attempt()
        try:
            yield from resumed.pass_on(open_stream())
            return
        except RetryableLLMError as exc:
            sleep(budget.next_delay(exc))


class RetryingChat:
    def __init__(self, inner: ChatModel, policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner, self.policy, self.sleep, self.name = inner, policy, sleep, inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        return call_with_retry(f"chat model {self.name}", lambda: self.inner.complete(request), self.policy, self.sleep)

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        return stream_with_retry(f"chat model {self.name}", lambda: stream_chat(self.inner, request), self.policy,
                                 self.sleep)


class RetryingEmbedder:
    def __init__(self, inner: EmbeddingModel, policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner, self.policy, self.sleep, self.name = inner, policy, sleep, inner.name

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        return call_with_retry(
            f"embedding model {self.name}", lambda: self.inner.embed(texts, stage), self.policy, self.sleep
        )


class LimitedChat:
    """At most ``limit`` calls in flight across threads sharing this object."""

    def __init__(self, inner: ChatModel, limit: int) -> None:
        self.inner, self.name = inner, inner.name
        self._slots = threading.BoundedSemaphore(limit)

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self._slots:
            return self.inner.complete(request)

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """Holds its slot until the stream ends (or its consumer closes it)."""
        with self._slots:
            yield from stream_chat(self.inner, request)


def cacheable(response: ChatResponse) -> bool:
    """Whether a reply may be served again: not one cut by a time limit, whose length
    depends on how busy the machine was (the same request on an idle one gets further)."""
    return response.finish_reason != TIME_LIMIT


class CachedChat:
    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        self.inner, self.cache, self.name = inner, cache, inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        key = request.cache_key(self.name)
        hit = self.cache.get_chat(key)
        if hit is not None:
            return ChatResponse(**hit, cached=True)
        response = self.inner.complete(request)
        if cacheable(response):
            self.cache.put_chat(key, self.name, request.stage, response.to_json())
        return response

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """A hit is replayed as one chunk; a streamed reply is stored only once it finished."""
        key = request.cache_key(self.name)
        hit = self.cache.get_chat(key)
        if hit is not None:
            response = ChatResponse(**hit, cached=True)
            if response.text:
                yield response.text
            yield response
            return
        for event in stream_chat(self.inner, request):
            if isinstance(event, ChatResponse) and cacheable(event):
                self.cache.put_chat(key, self.name, request.stage, event.to_json())
            yield event


class CachedEmbedder:
    """Embeds only texts not cached; one inner call for all the misses.

    Vectors are checked against the dimension the workspace's vectors have
    (``cache.embedding_dim``): only cached vectors of that dimension are served, and an
    endpoint answering another dimension is one line naming both, with nothing stored. A
    workspace without vectors yet (new, or rebuilt) is served the dimension the endpoint
    answered last (``cache.served_dim``), so a rebuild for an endpoint that now answers
    another one re-embeds instead of building the old vectors into an index the endpoint
    no longer fits; vectors of two dimensions are never stacked."""

    def __init__(self, inner: EmbeddingModel, cache: ResponseCache) -> None:
        self.inner, self.cache, self.name = inner, cache, inner.name
        self._recorded_dim: int | None = None  # the served dimension this process wrote last

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        expected = self.cache.embedding_dim(self.name)
        dim = expected[1] if expected is not None else self.cache.served_dim(self.name)
        keys = [embedding_cache_key(self.name, text) for text in texts]
        found = self.cache.get_vectors(keys, dim)
        if dim is None and len({vec.shape[0] for vec in found.values()}) > 1:
            found = {}  # cached under two dimensions and none known: ask the endpoint
        calls, tokens, sent, embedded = 0, 0, 0, 0
        missing = [i for i in range(len(keys)) if keys[i] not in found]
        if missing:
            fresh, got = self._embed_into(found, texts, keys, missing, expected, stage)
            if got != dim:  # none expected, and the endpoint answers another dimension than it did
                found = {key: vec for key, vec in found.items() if vec.shape[0] == got}
                found.update(self.cache.get_vectors([key for key in keys if key not in found], got))
                again = [i for i in range(len(keys)) if keys[i] not in found]
                if again:
                    fresh += self._embed_into(found, texts, keys, again, expected, stage)[0]
            calls = sum(batch.calls for batch, _ in fresh)
            tokens = sum(batch.prompt_tokens for batch, _ in fresh)
            sent = sum(batch.tokens_sent for batch, _ in fresh)
            embedded = sum(count for _, count in fresh)
        vectors = np.stack([found[key] for key in keys]) if keys else np.zeros((0, dim or 0), dtype=np.float32)
        return EmbeddingBatch(vectors, prompt_tokens=tokens, calls=calls, cache_hits=len(texts) - embedded,
                              sent_tokens=sent)

    def _embed_into(self, found: dict[str, np.ndarray], texts: list[str], keys: list[str], rows: list[int],
                    expected: tuple[str, int] | None, stage: str) -> tuple[list[tuple[EmbeddingBatch, int]], int]:
        """Embed the texts of ``rows`` (each distinct key once) into ``found`` and the cache,
        their dimension recorded as the endpoint's and checked against ``expected`` (nothing
        of another is stored). Returns the call's batch with the number of texts it
        embedded, and their dimension."""
        distinct = list({keys[i]: i for i in rows}.values())
        fresh = self.inner.embed([texts[i] for i in distinct], stage)
        got = int(fresh.vectors.shape[1]) if fresh.vectors.ndim == 2 else 0
        if got and got != self._recorded_dim:  # kept even when refused: a rebuild for it must not reuse others
            self.cache.put_served_dim(self.name, got)
            self._recorded_dim = got
        if expected is not None and got != expected[1]:
            raise embedding_mismatch(expected[0], f"{expected[1]}-dimension vectors",
                                     f"{got}-dimension vectors (from {self.name})")
        self.cache.put_vectors(self.name, ((keys[i], fresh.vectors[j]) for j, i in enumerate(distinct)), got)
        for j, i in enumerate(distinct):
            found[keys[i]] = fresh.vectors[j]
        return [(fresh, len(distinct))], got


class AccountedChat:
    """Charges each call to ``request.stage``: real calls, cache hits, tokens, seconds.

    Tokens are counted for cache hits too: they are the method's cost, which a
    fair comparison needs; ``llm_calls`` counts only calls a model really served.
    """

    def __init__(self, inner: ChatModel, ledger: UsageLedger) -> None:
        self.inner, self.ledger, self.name = inner, ledger, inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        response = self.inner.complete(request)
        charge(self.ledger, request, response, time.perf_counter() - start)
        return response

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """Charged when the final response arrives, exactly as :meth:`complete` is."""
        start = time.perf_counter()
        for event in stream_chat(self.inner, request):
            if isinstance(event, ChatResponse):
                charge(self.ledger, request, event, time.perf_counter() - start)
            yield event


def charge(ledger: UsageLedger, request: ChatRequest, response: ChatResponse, seconds: float) -> None:
    """One chat reply on ``request.stage``: a real call or a cache hit, its tokens, whether it was cut."""
    ledger.record(
        request.stage,
        llm_calls=0 if response.cached else 1,
        cache_hits=1 if response.cached else 0,
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
        cut_replies=1 if response.finish_reason == "length" else 0,
        timed_out_replies=1 if response.finish_reason == TIME_LIMIT else 0,
        rambling_replies=1 if response.finish_reason in RAMBLING else 0,
        estimated_replies=1 if response.usage_estimated else 0,
        sanitised_replies=1 if response.sanitised else 0,
        seconds=seconds,
    )


class AccountedEmbedder:
    def __init__(self, inner: EmbeddingModel, ledger: UsageLedger) -> None:
        self.inner, self.ledger, self.name = inner, ledger, inner.name

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        start = time.perf_counter()
        batch = self.inner.embed(texts, stage)
        self.ledger.record(
            stage,
            embedding_calls=batch.calls,
            embedded_texts=len(texts) - batch.cache_hits,
            embedding_cache_hits=batch.cache_hits,
            embedding_tokens=batch.prompt_tokens,
            embedding_tokens_sent=batch.tokens_sent,
            seconds=time.perf_counter() - start,
        )
        return batch
