"""Build the layered chat and embedding clients from settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from unirag.config import Settings
from unirag.executors.base import Executor
from unirag.llm.async_layers import AsyncCachedChat, AsyncLimitedChat, AsyncRetryingChat, ThreadedChat
from unirag.llm.backends import backend_chat, backend_embedder
from unirag.llm.base import AsyncChatModel, ChatModel, EmbeddingModel, Reranker, UsageLedger
from unirag.llm.cache import ResponseCache
from unirag.llm.layers import (
    AccountedChat,
    AccountedEmbedder,
    CachedChat,
    CachedEmbedder,
    LimitedChat,
    RetryingChat,
    RetryingEmbedder,
    RetryPolicy,
)
from unirag.llm.remote import ClientRecipe, RemoteChat, RemoteEmbedder
from unirag.llm.rerank import AccountedReranker, RetryingReranker, backend_reranker


@dataclass
class Models:
    """The chat and embedding clients of one run, charging one ledger (and the reranker, when
    ``rerank.base_url`` configures one)."""

    chat: ChatModel
    embedder: EmbeddingModel
    ledger: UsageLedger
    reranker: Reranker | None = None


@dataclass
class ModelStack:
    """Cached, limited, retrying clients, built once per process.

    :meth:`accounted` gives views that charge a given ledger, so each query of
    a long evaluation gets its own usage without reloading any model.
    """

    chat: ChatModel
    embedder: EmbeddingModel
    # The bare chat backend under the layers: an async stack wraps the same model
    # (the embedded SmolLM2 loads once per process, whichever way it is called).
    backend: ChatModel | None = None
    # The bare embedding backend, and how a worker builds each client (``None``: a backend
    # given in code, which stays in this process under a remote executor; ``llm.remote``).
    embedding_backend: EmbeddingModel | None = None
    recipes: tuple[ClientRecipe | None, ClientRecipe | None] = (None, None)
    on_retry: Callable[[str], None] | None = None
    # The retried cross-encoder (``context.rerank``); None without ``rerank.base_url``.
    reranker: Reranker | None = None

    def accounted(self, ledger: UsageLedger | None = None) -> Models:
        ledger = ledger if ledger is not None else UsageLedger()
        reranker = AccountedReranker(self.reranker, ledger) if self.reranker is not None else None
        return Models(AccountedChat(self.chat, ledger), AccountedEmbedder(self.embedder, ledger), ledger, reranker)


def retry_policy(settings: Settings, on_retry: Callable[[str], None] | None = None) -> RetryPolicy:
    return RetryPolicy(settings.max_retries, settings.retry_base_delay, settings.retry_max_delay, on_retry)


def build_stack(
    settings: Settings,
    cache: ResponseCache | None,
    chat: ChatModel | None = None,
    embedder: EmbeddingModel | None = None,
    on_retry: Callable[[str], None] | None = None,
    reranker: Reranker | None = None,
) -> ModelStack:
    """Wrap backends (built from settings unless given) in the standard layers.

    Backends are cheap to construct: the embedded models load on first use, so
    a method that never calls the chat model never loads it. ``on_retry`` gets one
    line per retry wait (the CLI prints it on stderr). The reranker (given, else
    ``rerank.base_url``'s) is retried, never cached: a query reranks its own candidates once.
    """
    policy = retry_policy(settings, on_retry)
    backend = chat or backend_chat(settings)
    embedding_backend = embedder or backend_embedder(settings)
    chat_model: ChatModel = LimitedChat(RetryingChat(backend, policy), settings.concurrency)
    embed_model: EmbeddingModel = RetryingEmbedder(embedding_backend, policy)
    if cache is not None and settings.cache:
        chat_model = CachedChat(chat_model, cache)
        embed_model = CachedEmbedder(embed_model, cache)
    recipes = (ClientRecipe("chat", settings) if chat is None else None,
               ClientRecipe("embedding", settings) if embedder is None else None)
    rerank_backend = reranker or backend_reranker(settings)
    rerank_model = RetryingReranker(rerank_backend, policy) if rerank_backend is not None else None
    return ModelStack(chat_model, embed_model, backend, embedding_backend, recipes, on_retry, rerank_model)


@dataclass
class AsyncChatStack:
    """The async chat layers of one event loop, and the backend to close on that loop."""

    chat: AsyncChatModel
    backend: AsyncChatModel

    async def aclose(self) -> None:
        close = getattr(self.backend, "aclose", None)
        if callable(close):
            await close()


def build_async_chat(settings: Settings, cache: ResponseCache | None, backend: ChatModel,
                     on_retry: Callable[[str], None] | None = None) -> AsyncChatStack:
    """The async chat stack over ``backend``: cached, limited, retrying, as :func:`build_stack`'s.

    The OpenAI-compatible client answers with real async HTTP (an
    :class:`~unirag.llm.openai_async.AsyncOpenAIChat` mirroring it); any other (the embedded model, test doubles) runs its
    blocking calls in worker threads. Build one per event loop: its client and its
    semaphore belong to the loop they first ran on. Charge a ledger with
    :class:`unirag.llm.async_layers.AsyncAccountedChat`.
    """
    policy = retry_policy(settings, on_retry)
    inner: AsyncChatModel = ThreadedChat(backend)
    if type(backend).__name__ == "OpenAIChat":  # checked by name: no httpx import for the embedded model
        # deferred: both import httpx, which the embedded model never needs
        from unirag.llm.openai_async import AsyncOpenAIChat
        from unirag.llm.openai_compat import OpenAIChat

        if isinstance(backend, OpenAIChat):
            inner = AsyncOpenAIChat(backend)
    chat: AsyncChatModel = AsyncLimitedChat(AsyncRetryingChat(inner, policy), settings.concurrency)
    if cache is not None and settings.cache:
        chat = AsyncCachedChat(chat, cache)
    return AsyncChatStack(chat, inner)


def run_by(stack: ModelStack, settings: Settings, cache: ResponseCache | None, executor: Executor) -> ModelStack:
    """``stack`` with its backends run by ``executor`` (:mod:`unirag.llm.remote`): the same
    layers here, each call that misses the cache one task. The local executor changes nothing;
    a backend given in code without a recipe (no way for a worker to build it) stays here."""
    if not executor.remote:
        return stack
    chat_recipe, embedding_recipe = stack.recipes
    retries = settings.ray.max_retries
    chat = RemoteChat(executor, chat_recipe, retries) if chat_recipe is not None else stack.backend
    embedder = (RemoteEmbedder(executor, embedding_recipe, retries) if embedding_recipe is not None
                else stack.embedding_backend)
    remote = build_stack(settings, cache, chat=chat, embedder=embedder, on_retry=stack.on_retry)
    return replace(remote, backend=stack.backend, recipes=stack.recipes, reranker=stack.reranker)
