"""The bare model backends the settings name: the OpenAI-compatible clients or the embedded
offline models. Apart from :mod:`unirag.llm.factory` so that a worker builds them from the
settings (:mod:`unirag.llm.remote`) without the layers around them."""

from __future__ import annotations

from unirag.config import EMBEDDED_CHAT_MODEL, EMBEDDED_EMBEDDING_MODEL, FAST_EMBEDDING_MODEL, Settings
from unirag.errors import ConfigError
from unirag.llm.base import ChatModel, EmbeddingModel
from unirag.llm.embedded import EmbeddedChat, EmbeddedEmbedder
from unirag.llm.wordllama_embedder import WordLlamaEmbedder


def backend_chat(settings: Settings) -> ChatModel:
    """The bare chat backend the settings name (no layers)."""
    chat = settings.chat
    if chat.resolved_provider == "openai":
        if not chat.base_url:
            raise ConfigError("chat.provider is openai but chat.base_url is not set (UNIRAG_CHAT_BASE_URL)")
        from unirag.llm.openai_compat import OpenAIChat  # deferred: it imports httpx (the embedded model needs none)

        if chat.model == EMBEDDED_CHAT_MODEL:
            raise ConfigError("chat.base_url is set but chat.model is not: name the server's model (UNIRAG_CHAT_MODEL)")
        key = chat.api_key.get_secret_value() if chat.api_key else None
        return OpenAIChat(chat.base_url, chat.model, key, chat.timeout, chat.json_mode)
    if chat.model != EMBEDDED_CHAT_MODEL:
        raise ConfigError(
            f"chat.model '{chat.model}' needs an endpoint: set chat.base_url (the embedded model is {EMBEDDED_CHAT_MODEL})"
        )

    return EmbeddedChat(chat.model, chat.context_window, chat.n_threads, chat.embedded_time_limit)


def backend_embedder(settings: Settings) -> EmbeddingModel:
    emb = settings.embedding
    if emb.resolved_provider == "openai":
        if not emb.base_url:
            raise ConfigError(
                "embedding.provider is openai but embedding.base_url is not set (UNIRAG_EMBEDDING_BASE_URL)"
            )
        from unirag.llm.openai_compat import OpenAIEmbedder  # deferred: it imports httpx

        if emb.model == EMBEDDED_EMBEDDING_MODEL:
            raise ConfigError(
                "embedding.base_url is set but embedding.model is not: name the server's model (UNIRAG_EMBEDDING_MODEL)"
            )
        if emb.int8_kernels:
            raise ConfigError("embedding.int8_kernels applies to the embedded model only; unset it for an endpoint")
        key = emb.api_key.get_secret_value() if emb.api_key else None
        return OpenAIEmbedder(emb.base_url, emb.model, key, emb.timeout)
    if emb.model == FAST_EMBEDDING_MODEL:
        if emb.int8_kernels:
            raise ConfigError(f"embedding.int8_kernels applies to the embedded MiniLM only; unset it for {emb.model}")

        return WordLlamaEmbedder(emb.model)
    if emb.model != EMBEDDED_EMBEDDING_MODEL:
        raise ConfigError(
            f"embedding.model '{emb.model}' needs an endpoint: set embedding.base_url "
            f"(the embedded models are {EMBEDDED_EMBEDDING_MODEL} and {FAST_EMBEDDING_MODEL})"
        )

    return EmbeddedEmbedder(emb.model, emb.n_threads, int8_kernels=emb.int8_kernels)
