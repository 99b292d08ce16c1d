"""Streamed chat replies (server-sent events) against a real local HTTP server, sync and async.

As in ``test_openai_compat.py``, a real server on 127.0.0.1: a stream cut
mid-way is a socket closing before the chunked body ended, which only a real
connection shows. Each scripted reply is a list of SSE events written one by
one (flushed), optionally cut before the end of the body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from test_openai_compat import FakeServer, Seen

from unirag.errors import LLMError, LLMUnavailableError
from unirag.llm.async_layers import AsyncAccountedChat, AsyncCachedChat, AsyncRetryingChat
from unirag.llm.base import ChatRequest, ChatResponse, UsageLedger
from unirag.llm.cache import ResponseCache
from unirag.llm.layers import AccountedChat, CachedChat, RetryingChat, RetryPolicy
from unirag.llm.openai_async import AsyncOpenAIChat
from unirag.llm.openai_compat import OpenAIChat
from unirag.llm.streaming import estimate_tokens

MODEL = "stream-model"
NO_WAIT = RetryPolicy(max_retries=3, base_delay=0.0)
REQUEST = ChatRequest(({"role": "user", "content": "Where is the Eiffel Tower?"},), stage="query.generate")


def chunk(text: str | None = None, finish: str | None = None) -> str:
    delta = {"content": text} if text is not None else {"role": "assistant"}
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


def usage_event(prompt: int = 11, completion: int = 3) -> str:
    body = {"object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    return f"data: {json.dumps(body)}\n\n"


def reply_events(*pieces: str, usage: bool = True) -> list[str]:
    """A whole streamed reply: role chunk, the pieces, the finish chunk, usage, [DONE]."""
    return [chunk(), *(chunk(piece) for piece in pieces), chunk(finish="stop"),
            *([usage_event()] if usage else []), "data: [DONE]\n\n"]


@dataclass
class StreamReply:
    events: list[str] = field(default_factory=lambda: reply_events("Par", "is", " it is."))
    cut_after: int | None = None  # close the connection after this many events, mid-body
    status: int = 200


class SseServer(FakeServer):
    """``FakeServer`` answering with server-sent events: one :class:`StreamReply` per request."""

    @property
    def bodies(self) -> list[Any]:
        return [seen.body for seen in self.seen]

    def next_reply(self, body: Any) -> StreamReply:
        with self._lock:
            self.seen.append(Seen("/v1/chat/completions", {}, body, 0))
            reply = self.replies.popleft() if self.replies else StreamReply()
        assert isinstance(reply, StreamReply)
        return reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 3

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                reply = server.next_reply(body)
                if reply.status != 200:
                    payload = json.dumps({"error": {"message": "bad key"}}).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for number, event in enumerate(reply.events):
                    if reply.cut_after is not None and number == reply.cut_after:
                        self.close_connection = True  # no terminating chunk: the body is cut
                        return
                    data = event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                """Keep test output clean."""

        return Handler


@pytest.fixture
def server() -> Iterator[SseServer]:
    running = SseServer()
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client(server: SseServer) -> Iterator[OpenAIChat]:
    chat = OpenAIChat(server.base_url, MODEL, timeout=5.0)
    yield chat
    chat.close()


def split(events: list[Any]) -> tuple[list[str], ChatResponse]:
    *texts, final = events
    assert all(isinstance(text, str) for text in texts) and isinstance(final, ChatResponse)
    return texts, final


def test_stream_yields_pieces_in_order_then_usage(server: SseServer, client: OpenAIChat) -> None:
    texts, final = split(list(client.stream(REQUEST)))
    assert texts == ["Par", "is", " it is."]
    assert final == ChatResponse("Paris it is.", prompt_tokens=11, completion_tokens=3, finish_reason="stop")
    sent = server.bodies[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == MODEL and sent["messages"] == list(REQUEST.messages)


def test_stream_without_usage_is_counted_and_marked_estimated(server: SseServer, client: OpenAIChat) -> None:
    server.script(StreamReply(reply_events("Paris", usage=False)))
    ledger = UsageLedger()
    _, final = split(list(AccountedChat(client, ledger).stream(REQUEST)))
    assert final.usage_estimated and final.completion_tokens == estimate_tokens("Paris")
    assert final.prompt_tokens == estimate_tokens(REQUEST.messages[0]["content"])
    usage = ledger.stages["query.generate"]
    assert (usage.llm_calls, usage.estimated_replies, usage.completion_tokens) == (1, 1, final.completion_tokens)


def test_cut_stream_is_retried_without_repeating_text(server: SseServer, client: OpenAIChat) -> None:
    server.script(StreamReply(cut_after=3), StreamReply())
    texts, final = split(list(RetryingChat(client, NO_WAIT, sleep=lambda s: None).stream(REQUEST)))
    assert "".join(texts) == "Paris it is." == final.text
    assert len(server.bodies) == 2


def test_stream_ending_without_finish_reason_is_a_cut(server: SseServer, client: OpenAIChat) -> None:
    cut_clean = [chunk(), chunk("Par"), "data: [DONE]\n\n"]  # the body ends properly, the reply does not
    server.script(StreamReply(cut_clean), StreamReply())
    texts, final = split(list(RetryingChat(client, NO_WAIT, sleep=lambda s: None).stream(REQUEST)))
    assert "".join(texts) == final.text == "Paris it is."


def test_cut_every_time_is_a_clear_error_and_nothing_is_cached(tmp_path: Path, server: SseServer,
                                                                client: OpenAIChat) -> None:
    server.script(*(StreamReply(cut_after=2) for _ in range(4)))
    cache = ResponseCache(tmp_path / "cache.sqlite")
    chat = CachedChat(RetryingChat(client, NO_WAIT, sleep=lambda s: None), cache)
    seen: list[Any] = []
    with pytest.raises(LLMUnavailableError, match="gave up after 4 attempts.*cut"):
        for event in chat.stream(REQUEST):
            seen.append(event)
    assert seen == ["Par"]  # shown once, never repeated by the retries
    assert cache.counts()["chat_responses"] == 0
    cache.close()


def test_retry_that_answers_differently_is_refused(server: SseServer, client: OpenAIChat) -> None:
    server.script(StreamReply(cut_after=3), StreamReply(reply_events("Lyon")))
    with pytest.raises(LLMUnavailableError, match="answered differently"):
        list(RetryingChat(client, NO_WAIT, sleep=lambda s: None).stream(REQUEST))


def test_stream_rejected_key_is_final(server: SseServer, client: OpenAIChat) -> None:
    server.script(StreamReply(status=401))
    with pytest.raises(LLMError, match="rejected the API key") as caught:
        list(RetryingChat(client, NO_WAIT, sleep=lambda s: None).stream(REQUEST))
    assert not isinstance(caught.value, LLMUnavailableError)
    assert len(server.bodies) == 1


def test_cached_stream_is_replayed_as_one_chunk(tmp_path: Path, server: SseServer, client: OpenAIChat) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    chat = CachedChat(client, cache)
    first, _ = split(list(chat.stream(REQUEST)))
    again, final = split(list(chat.stream(REQUEST)))
    assert len(first) == 3 and again == ["Paris it is."] and final.cached
    assert len(server.bodies) == 1
    cache.close()


def test_async_streams_run_concurrently_and_retry_cuts(tmp_path: Path, server: SseServer,
                                                       client: OpenAIChat) -> None:
    server.script(StreamReply(cut_after=2))  # the first request is cut, retried
    cache = ResponseCache(tmp_path / "cache.sqlite")

    async def main() -> tuple[list[Any], list[Any], ChatResponse]:
        backend = AsyncOpenAIChat(client)
        ledger = UsageLedger()
        chat = AsyncAccountedChat(AsyncCachedChat(AsyncRetryingChat(backend, NO_WAIT), cache), ledger)
        other = ChatRequest(({"role": "user", "content": "Again?"},), stage="query.generate")

        async def collect(request: ChatRequest) -> list[Any]:
            return [event async for event in chat.astream(request)]

        first, second = await asyncio.gather(collect(REQUEST), collect(other))
        whole = await chat.acomplete(REQUEST)  # now cached
        await backend.aclose()
        assert ledger.stages["query.generate"].llm_calls == 2
        return first, second, whole

    first, second, whole = asyncio.run(main())
    for events in (first, second):
        texts, final = split(events)
        assert "".join(texts) == final.text == "Paris it is."
    assert whole.cached and whole.text == "Paris it is."
    assert len(server.bodies) == 3
    cache.close()
