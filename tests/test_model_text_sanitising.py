"""Issue 17 item 1: a reply with a lone surrogate must not crash the cache, and is counted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from test_openai_compat import FakeServer, Reply, chat_body
from test_openai_stream import SseServer, StreamReply, reply_events

from unirag.llm.async_layers import AsyncAccountedChat, AsyncCachedChat
from unirag.llm.base import ChatRequest, UsageLedger, clean_model_text
from unirag.llm.cache import ResponseCache
from unirag.llm.embedded import EmbeddedChat
from unirag.llm.layers import AccountedChat, CachedChat
from unirag.llm.openai_async import AsyncOpenAIChat
from unirag.llm.openai_compat import OpenAIChat
from unirag.llm.streaming import final_response

BAD = "Paris\ud800 it is."
CLEAN = "Paris\ufffd it is."
REQUEST = ChatRequest(({"role": "user", "content": "Where?"},), stage="query.generate")


def test_clean_model_text_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert clean_model_text(BAD) == (CLEAN, True)
    assert clean_model_text("ok \u00e9") == ("ok \u00e9", False)
    assert clean_model_text("\ud83d\ude00") == ("\U0001f600", True)  # a pair sent as two halves


def _layers(chat: Any, cache: ResponseCache, ledger: UsageLedger) -> AccountedChat:
    return AccountedChat(CachedChat(chat, cache), ledger)


def test_openai_reply_with_lone_surrogate_is_cached_and_counted(tmp_path: Path) -> None:
    server = FakeServer()
    server.start()
    cache, ledger = ResponseCache(tmp_path / "llm.sqlite"), UsageLedger()
    client = OpenAIChat(server.base_url, "m", client=httpx.Client())
    try:
        server.script(Reply(200, chat_body(BAD)))
        chat = _layers(client, cache, ledger)
        assert chat.complete(REQUEST).text == CLEAN
        again = chat.complete(REQUEST)  # the cache held it
        assert again.cached and again.text == CLEAN
        assert ledger.stages["query.generate"].sanitised_replies == 2
        assert ledger.stages["query.generate"].llm_calls == 1
    finally:
        client.close()
        cache.close()
        server.stop()


def test_streamed_and_async_replies_are_sanitised(tmp_path: Path) -> None:
    server = SseServer()
    server.start()
    cache, ledger = ResponseCache(tmp_path / "llm.sqlite"), UsageLedger()
    client = OpenAIChat(server.base_url, "m", timeout=5.0)
    try:
        server.script(StreamReply(events=reply_events("Paris", "\ud800", " it is.")))
        final = final_response(_layers(client, cache, ledger).stream(REQUEST))
        assert final.text == CLEAN and final.sanitised

        other = ChatRequest(({"role": "user", "content": "Again?"},), stage="query.generate")
        server.script(StreamReply(events=reply_events("Paris", "\ud800", " it is.")))

        async def main() -> str:
            backend = AsyncOpenAIChat(client)
            chat = AsyncAccountedChat(AsyncCachedChat(backend, cache), ledger)
            events = [event async for event in chat.astream(other)]
            await backend.aclose()
            return events[-1].text

        assert asyncio.run(main()) == CLEAN
        assert ledger.stages["query.generate"].sanitised_replies == 2
    finally:
        client.close()
        cache.close()
        server.stop()


class _StubLlama:
    """Stands in for xllamacpp's server: streams one chat completion with a lone surrogate."""

    def handle_chat_completions(self, body: dict[str, Any], callback: Any = None) -> None:
        assert body["stream"] and callback is not None  # the embedded backend always streams
        callback({"choices": [{"delta": {"content": BAD}, "finish_reason": None}]})
        callback({"choices": [{"delta": {}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 4}})


def test_embedded_reply_is_sanitised() -> None:
    chat = EmbeddedChat()
    chat._server = _StubLlama()
    response = chat.complete(REQUEST)
    assert (response.text, response.sanitised) == (CLEAN, True)
