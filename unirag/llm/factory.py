"""Build the layered chat and embedding clients from settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from unirag.config import EMBEDDED_CHAT_MODEL, EMBEDDED_EMBEDDING_MODEL, Settings
from unirag.errors import ConfigError
from unirag.llm.base import AsyncChatModel, ChatModel, EmbeddingModel, UsageLedger
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


def backend_chat(settings: Settings) -> ChatModel:
    """The bare chat backend the settings name (no layers)."""
    chat = settings.chat
    if chat.resolved_provider == "openai":
        if not chat.base_url:
            raise ConfigError("chat.provider is openai but chat.base_url is not set (UNIRAG_CHAT_BASE_URL)")
        from unirag.llm.openai_compat import OpenAIChat

        if chat.model == EMBEDDED_CHAT_MODEL:
            raise ConfigError("chat.base_url is set but chat.model is not: name the server's model (UNIRAG_CHAT_MODEL)")
        key = chat.api_key.get_secret_value() if chat.api_key else None
        return OpenAIChat(chat.base_url, chat.model, key, chat.timeout, chat.json_mode)
    if chat.model != EMBEDDED_CHAT_MODEL:
        raise ConfigError(
            f"chat.model '{chat.model}' needs an endpoint: set chat.base_url (the embedded model is {EMBEDDED_CHAT_MODEL})"
        )
    from unirag.llm.embedded import EmbeddedChat

    return EmbeddedChat(chat.model, chat.context_window, chat.n_threads)


def backend_embedder(settings: Settings) -> EmbeddingModel:
    emb = settings.embedding
    if emb.resolved_provider == "openai":
        if not emb.base_url:
            raise ConfigError(
                "embedding.provider is openai but embedding.base_url is not set (UNIRAG_EMBEDDING_BASE_URL)"
            )
        from unirag.llm.openai_compat import OpenAIEmbedder

        if emb.model == EMBEDDED_EMBEDDING_MODEL:
            raise ConfigError(
                "embedding.base_url is set but embedding.model is not: name the server's model (UNIRAG_EMBEDDING_MODEL)"
            )
        key = emb.api_key.get_secret_value() if emb.api_key else None
        return OpenAIEmbedder(emb.base_url, emb.model, key, emb.timeout)
    if emb.model != EMBEDDED_EMBEDDING_MODEL:
        raise ConfigError(
            f"embedding.model '{emb.model}' needs an endpoint: set embedding.base_url "
            f"(the embedded model is {EMBEDDED_EMBEDDING_MODEL})"
        )
    from unirag.llm.embedded import EmbeddedEmbedder

    return EmbeddedEmbedder(emb.model, emb.n_threads)


@dataclass
class Models:
    """The chat and embedding clients of one run, charging one ledger."""

    chat: ChatModel
    embedder: EmbeddingModel
    ledger: UsageLedger


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

    def accounted(self, ledger: UsageLedger | None = None) -> Models:
        ledger = ledger if ledger is not None else UsageLedger()
        return Models(AccountedChat(self.chat, ledger), AccountedEmbedder(self.embedder, ledger), ledger)


def retry_policy(settings: Settings, on_retry: Callable[[str], None] | None = None) -> RetryPolicy:
    return RetryPolicy(settings.max_retries, settings.retry_base_delay, settings.retry_max_delay, on_retry)


def build_stack(
    settings: Settings,
    cache: ResponseCache | None,
    chat: ChatModel | None = None,
    embedder: EmbeddingModel | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> ModelStack:
    """Wrap backends (built from settings unless given) in the standard layers.

    Backends are cheap to construct: the embedded models load on first use, so
    a method that never calls the chat model never loads it. ``on_retry`` gets one
    line per retry wait (the CLI prints it on stderr).
    """
    policy = retry_policy(settings, on_retry)
    backend = chat or backend_chat(settings)
    chat_model: ChatModel = LimitedChat(RetryingChat(backend, policy), settings.concurrency)
    embed_model: EmbeddingModel = RetryingEmbedder(embedder or backend_embedder(settings), policy)
    if cache is not None and settings.cache:
        chat_model = CachedChat(chat_model, cache)
        embed_model = CachedEmbedder(embed_model, cache)
    return ModelStack(chat_model, embed_model, backend)


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
    from unirag.llm.async_layers import AsyncCachedChat, AsyncLimitedChat, AsyncRetryingChat, ThreadedChat

    policy = retry_policy(settings, on_retry)
    inner: AsyncChatModel = ThreadedChat(backend)
    if type(backend).__name__ == "OpenAIChat":  # checked by name: no httpx import for the embedded model
        from unirag.llm.openai_async import AsyncOpenAIChat
        from unirag.llm.openai_compat import OpenAIChat

        if isinstance(backend, OpenAIChat):
            inner = AsyncOpenAIChat(backend)
    chat: AsyncChatModel = AsyncLimitedChat(AsyncRetryingChat(inner, policy), settings.concurrency)
    if cache is not None and settings.cache:
        chat = AsyncCachedChat(chat, cache)
    return AsyncChatStack(chat, inner)
