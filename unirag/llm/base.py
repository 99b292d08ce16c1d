"""What a model call is, independent of any backend.

A :class:`ChatRequest` is plain data: it hashes to the cache key, it names the
stage its cost is charged to, and it carries the version of the prompt that
produced it so that editing a prompt file invalidates the cache honestly.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion. ``stage`` and ``prompt_version`` are not sent to the model."""

    messages: tuple[dict[str, str], ...]
    stage: str = "generate"
    prompt_version: str = ""
    temperature: float = 0.0
    max_tokens: int = 512
    json_mode: bool = False

    def cache_key(self, model: str) -> str:
        """sha256 of a canonical JSON of everything that changes the answer."""
        payload = {
            "kind": "chat",
            "model": model,
            "messages": list(self.messages),
            "prompt_version": self.prompt_version,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "json_mode": self.json_mode,
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


#: Finish reasons a backend gives when it ended a reply itself, not the model (the embedded
#: backend, :mod:`unirag.llm.degeneration`): each has its own advice for the user.
TIME_LIMIT = "time_limit"  # the generation time limit (``chat.embedded_time_limit``) passed
REPETITION = "repetition"  # the model repeated itself
INVENTED_CONTEXT = "invented_context"  # the model wrote context blocks of its own
RAMBLING = frozenset({REPETITION, INVENTED_CONTEXT})


@dataclass(frozen=True)
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    cached: bool = False
    # True when the server reported no token counts and ours are the tokenizer's estimate
    # (streamed replies of servers that ignore ``stream_options.include_usage``).
    usage_estimated: bool = False
    # True when the reply held code points that cannot be stored as UTF-8 (a lone
    # surrogate such as ``\ud800``) and they were replaced (:func:`clean_model_text`).
    sanitised: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("cached")
        return data


def clean_model_text(text: str) -> tuple[str, bool]:
    """``text`` with every code point UTF-8 cannot encode (lone surrogates) replaced by U+FFFD,
    and whether any was.

    Why at the client boundary: such a reply cannot be cached (SQLite stores UTF-8), printed
    or written to JSON, so one bad reply would crash every later step, and a model that keeps
    sending it would block indexing for good. A valid surrogate *pair* (a server that escaped
    an emoji as two halves) is joined into its character, not replaced.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), True
    return text, False


@dataclass(frozen=True)
class EmbeddingBatch:
    """Vectors for a batch of texts (rows L2-normalised, float32).

    ``prompt_tokens`` are the tokens the model read (after its own truncation: all-MiniLM
    reads at most 256 word pieces of a text); ``sent_tokens`` those of the texts as sent,
    None when the model reads them all (or cannot say)."""

    vectors: np.ndarray
    prompt_tokens: int = 0
    calls: int = 0
    cache_hits: int = 0
    sent_tokens: int | None = None

    @property
    def tokens_sent(self) -> int:
        """The tokens of the texts as sent: what a truncating model did not read counts too."""
        return self.prompt_tokens if self.sent_tokens is None else self.sent_tokens


@runtime_checkable
class ChatModel(Protocol):
    """Anything that completes a chat request. ``name`` goes into cache keys."""

    name: str

    def complete(self, request: ChatRequest) -> ChatResponse: ...


#: What a streamed chat call yields: text chunks in order, then exactly one
#: :class:`ChatResponse` whose ``text`` is the whole reply (with usage and finish reason).
ChatEvent = str | ChatResponse


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A chat model that can also hand its reply over as it is generated.

    Optional: models without ``stream`` are streamed as one chunk
    (:func:`unirag.llm.streaming.stream_chat`), so test doubles need not implement it.
    """

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]: ...


@runtime_checkable
class AsyncChatModel(Protocol):
    """The async twin of :class:`StreamingChatModel`, for callers on an event loop."""

    name: str

    async def acomplete(self, request: ChatRequest) -> ChatResponse: ...

    def astream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]: ...


@runtime_checkable
class EmbeddingModel(Protocol):
    """Anything that embeds texts. ``name`` goes into cache keys; ``dim`` may be 0 until first use."""

    name: str

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch: ...


@dataclass(frozen=True)
class RerankScores:
    """A reranker's relevance score for every document it was given (input order), and its cost."""

    scores: tuple[float, ...]
    calls: int = 0
    tokens: int = 0


@runtime_checkable
class Reranker(Protocol):
    """Anything that scores documents against a query (a cross-encoder). ``name`` is for messages."""

    name: str

    def rerank(self, query: str, documents: list[str], top_n: int) -> RerankScores:
        """A score for each of ``documents``; ``top_n`` (0: all) tells a server how many it
        must score well: the ones below it may come back without a score (then ``-inf``)."""
        ...


def embedding_cache_key(model: str, text: str) -> str:
    return hashlib.sha256(f"embed\x00{model}\x00{text}".encode()).hexdigest()


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise rows (zero rows stay zero) so inner product = cosine."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


@dataclass
class StageUsage:
    """Cost of one named stage: real model calls, cache hits, tokens, seconds."""

    llm_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Replies that ended at max_tokens or the context window (finish_reason "length"):
    # their text is cut short, so a points list or JSON reply may be incomplete.
    cut_replies: int = 0
    # Replies the embedded backend ended at its time limit (finish_reason "time_limit").
    timed_out_replies: int = 0
    # Replies ended where the model started to ramble (finish_reason in RAMBLING): the
    # text before is kept, and a larger max_tokens would not help.
    rambling_replies: int = 0
    # Replies whose token counts are our tokenizer's estimate (the server streamed no usage).
    estimated_replies: int = 0
    # Replies with invalid code points (lone surrogates) that were replaced before use.
    sanitised_replies: int = 0
    embedding_calls: int = 0
    embedded_texts: int = 0
    embedding_cache_hits: int = 0
    embedding_tokens: int = 0  # read by the model (after its truncation)
    embedding_tokens_sent: int = 0  # in the texts as sent (a truncating model reads fewer)
    # Cross-encoder calls (``context.rerank``): calls, documents scored, tokens where the API reports them.
    rerank_calls: int = 0
    reranked_documents: int = 0
    rerank_tokens: int = 0
    seconds: float = 0.0

    def add(self, other: StageUsage) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 4)
        return data


#: Receives the usage recorded since its last call (per stage); False when it could not
#: store it now (the same usage comes again, with more, next time).
UsageSink = Callable[[dict[str, StageUsage]], bool]


@dataclass
class UsageLedger:
    """Usage per stage for one run (an index or a query). Thread-safe enough:
    each update is a handful of integer additions under the GIL on one dataclass;
    the concurrency layer serialises nothing here, so we guard with a lock.

    With a ``sink``, usage is handed over as calls finish (every ``flush_calls`` model
    calls or ``flush_seconds``), not only at the end: a run killed mid-way (SIGKILL,
    an out-of-memory kill) still leaves the calls it was served in ``unirag stats``.
    :meth:`flush` hands over the rest; the sink gets each call once, as deltas.
    """

    stages: dict[str, StageUsage] = field(default_factory=dict)
    sink: UsageSink | None = None
    flush_calls: int = 10
    flush_seconds: float = 5.0

    def __post_init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._flushed: dict[str, StageUsage] = {}
        self._unflushed_calls = 0
        self._last_flush = time.monotonic()

    def record(self, stage: str, **delta: float) -> None:
        with self._lock:
            usage = self.stages.setdefault(stage, StageUsage())
            for name, value in delta.items():
                setattr(usage, name, getattr(usage, name) + value)
            if self.sink is None:
                return
            self._unflushed_calls += int(delta.get("llm_calls", 0) + delta.get("embedding_calls", 0)
                                         + delta.get("rerank_calls", 0))
            if (self._unflushed_calls >= self.flush_calls
                    or time.monotonic() - self._last_flush >= self.flush_seconds):
                self._flush_locked()

    def flush(self) -> None:
        """Hand the usage not yet handed over to the sink (at the end of a run)."""
        with self._lock:
            if self.sink is not None:
                self._flush_locked()

    def _flush_locked(self) -> None:
        assert self.sink is not None
        delta: dict[str, StageUsage] = {}
        for stage, usage in self.stages.items():
            done = self._flushed.get(stage, StageUsage())
            change = StageUsage(**{name: value - getattr(done, name) for name, value in asdict(usage).items()})
            if any(asdict(change).values()):
                delta[stage] = change
        self._last_flush = time.monotonic()
        if not delta or self.sink(delta):
            self._flushed = {stage: StageUsage(**asdict(usage)) for stage, usage in self.stages.items()}
            self._unflushed_calls = 0

    def total(self) -> StageUsage:
        out = StageUsage()
        for usage in self.stages.values():
            out.add(usage)
        return out

    def to_json(self) -> dict[str, Any]:
        return {name: usage.to_json() for name, usage in sorted(self.stages.items())}
