"""Model calls as executor tasks: each call that misses the driver's cache runs on a worker.

The layer stack stays on the driver (Accounted -> Cached -> Limited -> Retrying), and a
:class:`RemoteChat` / :class:`RemoteEmbedder` takes the backend's place under it. So the
driver looks up the cache, sends only misses out, and stores each reply as it comes back:
a killed driver or worker resumes without repeating a finished call, as the local path does.
Transient endpoint errors come back to the driver's retry layer (backoff, ``Retry-After``);
the executor itself only re-runs a call whose worker died.

Workers build their own clients from a :class:`ClientRecipe` (the settings, or a builder a
caller gives), once per worker process. Settings travel pickled in the task's arguments:
an API key is a :class:`pydantic.SecretStr` there, so no repr or log line shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from unirag.config import Settings, config_hash
from unirag.executors.base import Executor
from unirag.llm.backends import backend_chat, backend_embedder
from unirag.llm.base import ChatModel, ChatRequest, ChatResponse, EmbeddingBatch, EmbeddingModel

#: CPUs a model call holds on the cluster: a call to an HTTP endpoint mostly waits, the
#: embedded models compute (and use their own ``n_threads``).
ENDPOINT_CALL_CPUS = 0.1
EMBEDDED_CALL_CPUS = 1.0


class ClientRecipe:
    """How a worker builds one model client: the settings' backend, or ``build()`` (test doubles,
    a custom client). Picklable; equal recipes share one client per worker process.

    The key hashes the settings section as :meth:`pydantic.BaseModel.model_dump` shows it in
    JSON mode (secrets masked), so it holds no key either.
    """

    def __init__(self, kind: Literal["chat", "embedding"], settings: Settings,
                 build: Callable[[], Any] | None = None) -> None:
        self.kind = kind
        self.settings = settings
        self.builder = build
        section = settings.chat if kind == "chat" else settings.embedding
        self.key = config_hash({"kind": kind, "section": section.model_dump(mode="json"), "build": repr(build)})

    def build(self) -> Any:
        """A new client (unloaded: the embedded models load on their first call)."""
        if self.builder is not None:
            return self.builder()

        return backend_chat(self.settings) if self.kind == "chat" else backend_embedder(self.settings)

    def cpus(self) -> float:
        section = self.settings.chat if self.kind == "chat" else self.settings.embedding
        return ENDPOINT_CALL_CPUS if section.resolved_provider == "openai" else EMBEDDED_CALL_CPUS

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientRecipe) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


@lru_cache(maxsize=8)
def worker_client(recipe: ClientRecipe) -> Any:
    """The recipe's client in this process, built once: an embedded model loads once per worker."""
    return recipe.build()


@dataclass(frozen=True)
class ChatCall:
    """One chat call, run where the executor puts it."""

    recipe: ClientRecipe

    def __call__(self, request: ChatRequest) -> ChatResponse:
        return worker_client(self.recipe).complete(request)


@dataclass(frozen=True)
class EmbedCall:
    """One embedding batch, run where the executor puts it: ``(texts, stage)``."""

    recipe: ClientRecipe

    def __call__(self, item: tuple[list[str], str]) -> EmbeddingBatch:
        texts, stage = item
        return worker_client(self.recipe).embed(texts, stage)


class RemoteChat:
    """A chat backend whose every call is one executor task (blocking the calling thread)."""

    def __init__(self, executor: Executor, recipe: ClientRecipe, retries: int) -> None:
        self.executor, self.retries = executor, retries
        self.name = worker_client(recipe).name  # built here only for its name (cache keys)
        self._call, self._cpus = ChatCall(recipe), recipe.cpus()

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.executor.call(self._call, request, retries=self.retries, desc=request.stage, cpus=self._cpus)


class RemoteEmbedder:
    """An embedding backend whose every batch (the cache's misses) is one executor task."""

    def __init__(self, executor: Executor, recipe: ClientRecipe, retries: int) -> None:
        self.executor, self.retries = executor, retries
        self.name = worker_client(recipe).name
        self._call, self._cpus = EmbedCall(recipe), recipe.cpus()

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        return self.executor.call(self._call, (list(texts), stage), retries=self.retries, desc=stage,
                                  cpus=self._cpus)
