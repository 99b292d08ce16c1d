"""The layers around every model call: cache, accounting, concurrency limit, retries."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedChat, make_settings

from unirag.errors import LLMError, LLMUnavailableError, RetryableLLMError
from unirag.llm.base import ChatRequest, ChatResponse, UsageLedger, embedding_cache_key
from unirag.llm.cache import ResponseCache
from unirag.llm.factory import build_stack
from unirag.llm.layers import (
    AccountedChat,
    AccountedEmbedder,
    CachedChat,
    CachedEmbedder,
    LimitedChat,
    RetryingChat,
    RetryPolicy,
    call_with_retry,
)

REQUEST = ChatRequest(
    messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Question: why?"}),
    stage="query.generate",
    prompt_version="zeroshot@1+abcd",
    temperature=0.0,
    max_tokens=64,
    json_mode=False,
)


@pytest.fixture
def cache(tmp_path: Path):
    cache = ResponseCache(tmp_path / "cache" / "llm.sqlite")
    yield cache
    cache.close()


# -- ResponseCache ------------------------------------------------------------


def test_response_cache_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "llm.sqlite"
    cache = ResponseCache(path)
    cache.put_chat("k1", "m", "stage", {"text": "hello", "prompt_tokens": 3, "completion_tokens": 1})
    vec = np.arange(5, dtype=np.float32)
    cache.put_vectors("emb", [("v1", vec)])
    cache.close()

    reopened = ResponseCache(path)
    try:
        assert reopened.get_chat("k1") == {"text": "hello", "prompt_tokens": 3, "completion_tokens": 1}
        assert reopened.get_chat("nope") is None
        found = reopened.get_vectors(["v1", "missing"])
        assert list(found) == ["v1"]
        np.testing.assert_array_equal(found["v1"], vec)
        assert reopened.counts() == {"chat_responses": 1, "embeddings": 1}
    finally:
        reopened.close()


def test_response_cache_many_vector_keys(cache: ResponseCache) -> None:
    # more keys than one SQL IN (...) batch
    items = [(f"k{i}", np.full(3, i, dtype=np.float32)) for i in range(1234)]
    cache.put_vectors("m", items)
    found = cache.get_vectors([key for key, _ in items])
    assert len(found) == 1234
    assert found["k1000"][0] == 1000


# -- CachedChat -----------------------------------------------------------------


def test_cached_chat_hit_on_identical_request(cache: ResponseCache) -> None:
    inner = ScriptedChat()
    chat = CachedChat(inner, cache)
    first = chat.complete(REQUEST)
    second = chat.complete(dataclasses.replace(REQUEST))
    assert inner.calls == 1
    assert not first.cached and second.cached
    assert (second.text, second.prompt_tokens, second.completion_tokens, second.finish_reason) == (
        first.text, first.prompt_tokens, first.completion_tokens, first.finish_reason)


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.7},
        {"max_tokens": 65},
        {"json_mode": True},
        {"prompt_version": "zeroshot@2+abcd"},
        {"messages": ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Question: why not?"})},
        {"messages": ({"role": "user", "content": "Question: why?"},)},
    ],
    ids=lambda change: next(iter(change)),
)
def test_cached_chat_miss_when_request_changes(cache: ResponseCache, change: dict) -> None:
    inner = ScriptedChat()
    chat = CachedChat(inner, cache)
    chat.complete(REQUEST)
    response = chat.complete(dataclasses.replace(REQUEST, **change))
    assert inner.calls == 2
    assert not response.cached


def test_cached_chat_miss_when_model_changes(cache: ResponseCache) -> None:
    a, b = ScriptedChat(name="model-a"), ScriptedChat(name="model-b")
    CachedChat(a, cache).complete(REQUEST)
    CachedChat(b, cache).complete(REQUEST)
    assert (a.calls, b.calls) == (1, 1)
    # and the same model name over the shared cache hits
    again = ScriptedChat(name="model-a")
    assert CachedChat(again, cache).complete(REQUEST).cached
    assert again.calls == 0


def test_cached_chat_stage_is_not_part_of_the_key(cache: ResponseCache) -> None:
    inner = ScriptedChat()
    chat = CachedChat(inner, cache)
    chat.complete(REQUEST)
    response = chat.complete(dataclasses.replace(REQUEST, stage="index.extract"))
    assert inner.calls == 1 and response.cached


def test_cache_key_is_sha256_of_canonical_json() -> None:
    key = REQUEST.cache_key("m")
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    reordered = dataclasses.replace(
        REQUEST, messages=tuple({"content": m["content"], "role": m["role"]} for m in REQUEST.messages)
    )
    assert reordered.cache_key("m") == key
    assert REQUEST.cache_key("other") != key
    payload = {
        "kind": "chat", "model": "m", "messages": list(REQUEST.messages), "prompt_version": REQUEST.prompt_version,
        "temperature": REQUEST.temperature, "max_tokens": REQUEST.max_tokens, "json_mode": REQUEST.json_mode,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert key == hashlib.sha256(blob.encode("utf-8")).hexdigest()


def test_cached_chat_stores_under_the_request_key(cache: ResponseCache) -> None:
    inner = ScriptedChat(name="m")
    CachedChat(inner, cache).complete(REQUEST)
    stored = cache.get_chat(REQUEST.cache_key("m"))
    assert stored is not None and stored["text"] == "scripted answer"
    assert "cached" not in stored


def test_cached_chat_does_not_cache_failures(cache: ResponseCache) -> None:
    inner = ScriptedChat(fail_on={1: LLMError("boom")})
    chat = CachedChat(inner, cache)
    with pytest.raises(LLMError):
        chat.complete(REQUEST)
    assert chat.complete(REQUEST).text == "scripted answer"
    assert inner.calls == 2


# -- CachedEmbedder -----------------------------------------------------------------


def test_cached_embedder_embeds_only_misses_in_input_order(cache: ResponseCache) -> None:
    inner = HashEmbedder()
    embedder = CachedEmbedder(inner, cache)
    first = embedder.embed(["alpha text", "beta text"])
    assert (first.calls, first.cache_hits) == (1, 0)

    texts = ["gamma words", "alpha text", "delta words", "beta text"]
    batch = embedder.embed(texts)
    assert inner.batches[-1] == ["gamma words", "delta words"]
    assert (batch.calls, batch.cache_hits) == (1, 2)
    expected = HashEmbedder().embed(texts).vectors
    np.testing.assert_allclose(batch.vectors, expected, rtol=1e-6)

    again = embedder.embed(texts[::-1])
    assert inner.calls == 2  # all cached: no inner call
    assert (again.calls, again.cache_hits) == (0, 4)
    np.testing.assert_allclose(again.vectors, expected[::-1], rtol=1e-6)


def test_cached_embedder_key_depends_on_model(cache: ResponseCache) -> None:
    assert embedding_cache_key("a", "t") != embedding_cache_key("b", "t")
    CachedEmbedder(HashEmbedder(name="a"), cache).embed(["some text"])
    other = HashEmbedder(name="b")
    CachedEmbedder(other, cache).embed(["some text"])
    assert other.calls == 1


# -- accounting ---------------------------------------------------------------------


def test_accounted_chat_per_stage_usage(cache: ResponseCache) -> None:
    ledger = UsageLedger()
    chat = AccountedChat(CachedChat(ScriptedChat(), cache), ledger)
    first = chat.complete(REQUEST)
    chat.complete(REQUEST)
    chat.complete(dataclasses.replace(REQUEST, stage="index.extract", max_tokens=10))
    gen, ext = ledger.stages["query.generate"], ledger.stages["index.extract"]
    assert (gen.llm_calls, gen.cache_hits) == (1, 1)
    assert gen.prompt_tokens == 2 * first.prompt_tokens > 0
    assert gen.completion_tokens == 2 * first.completion_tokens > 0
    assert (ext.llm_calls, ext.cache_hits) == (1, 0)
    total = ledger.total()
    assert (total.llm_calls, total.cache_hits) == (2, 1)
    assert set(ledger.to_json()) == {"index.extract", "query.generate"}


def test_accounted_chat_counts_cut_replies_also_from_the_cache(cache: ResponseCache) -> None:
    ledger, scripted = UsageLedger(), ScriptedChat()
    chat = AccountedChat(CachedChat(scripted, cache), ledger)
    chat.complete(REQUEST)
    scripted.finish_reason = "length"
    cut = dataclasses.replace(REQUEST, stage="query.map", max_tokens=3)
    assert chat.complete(cut).finish_reason == "length"
    chat.complete(cut)  # a cache hit: the stored reply is still the cut one
    assert ledger.stages["query.generate"].cut_replies == 0
    assert ledger.stages["query.map"].cut_replies == 2
    assert ledger.total().cut_replies == 2


def test_accounted_embedder_per_stage_usage(cache: ResponseCache) -> None:
    ledger = UsageLedger()
    embedder = AccountedEmbedder(CachedEmbedder(HashEmbedder(), cache), ledger)
    embedder.embed(["one a", "two b", "three c"], stage="index.embed_chunks")
    embedder.embed(["one a", "four d"], stage="index.embed_chunks")
    embedder.embed(["four d"], stage="query.embed")
    idx, query = ledger.stages["index.embed_chunks"], ledger.stages["query.embed"]
    assert (idx.embedding_calls, idx.embedded_texts, idx.embedding_cache_hits) == (2, 4, 1)
    assert idx.embedding_tokens == 8
    assert (query.embedding_calls, query.embedded_texts, query.embedding_cache_hits) == (0, 0, 1)
    assert idx.llm_calls == 0


def test_model_stack_accounted_gives_independent_ledgers(tmp_path: Path, cache: ResponseCache) -> None:
    settings = make_settings(tmp_path)
    inner_chat, inner_emb = ScriptedChat(), HashEmbedder()
    stack = build_stack(settings, cache, chat=inner_chat, embedder=inner_emb)
    one, two = stack.accounted(), stack.accounted()
    assert one.ledger is not two.ledger
    one.chat.complete(REQUEST)
    one.embedder.embed(["x y"], stage="query.embed")
    two.chat.complete(REQUEST)
    two.embedder.embed(["x y"], stage="query.embed")
    assert (inner_chat.calls, inner_emb.calls) == (1, 1)
    a, b = one.ledger.total(), two.ledger.total()
    assert (a.llm_calls, a.cache_hits, a.embedding_calls) == (1, 0, 1)
    assert (b.llm_calls, b.cache_hits, b.embedding_calls, b.embedding_cache_hits) == (0, 1, 0, 1)
    mine = UsageLedger()
    assert stack.accounted(mine).ledger is mine


def test_build_stack_without_cache_calls_every_time(tmp_path: Path, cache: ResponseCache) -> None:
    settings = make_settings(tmp_path, cache=False)
    inner = ScriptedChat()
    models = build_stack(settings, cache, chat=inner, embedder=HashEmbedder()).accounted()
    models.chat.complete(REQUEST)
    models.chat.complete(REQUEST)
    assert inner.calls == 2
    assert cache.counts()["chat_responses"] == 0


# -- concurrency limit ------------------------------------------------------------------


def test_limited_chat_never_exceeds_limit() -> None:
    inner = ScriptedChat(delay=0.02)
    chat = LimitedChat(inner, 3)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(4):
                chat.complete(dataclasses.replace(REQUEST, max_tokens=n * 10 + i + 1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert inner.calls == 32
    assert inner.max_in_flight <= 3
    assert inner.max_in_flight >= 2  # the threads really overlapped


# -- retries ---------------------------------------------------------------------------


def test_retry_delays_grow_and_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = RetryPolicy(max_retries=10, base_delay=1.0, max_delay=8.0)
    monkeypatch.setattr(random, "random", lambda: 1.0)  # the top of the jitter range
    top = [policy.delay(a, None) for a in range(8)]
    assert top == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    monkeypatch.setattr(random, "random", lambda: 0.0)  # the bottom: half
    assert [policy.delay(a, None) for a in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_retry_delay_jitter_stays_in_range() -> None:
    policy = RetryPolicy(max_retries=10, base_delay=0.5, max_delay=5.0)
    for attempt in range(12):
        ceiling = min(5.0, 0.5 * 2**attempt)
        for _ in range(20):
            assert ceiling / 2 <= policy.delay(attempt, None) <= ceiling


def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=10.0)
    assert policy.delay(0, 3.0) == 3.0
    assert policy.delay(0, 100.0) == 10.0
    assert policy.delay(2, -5.0) == 0.0


def test_call_with_retry_gives_up_after_max_retries_plus_one() -> None:
    attempts: list[int] = []
    sleeps: list[float] = []

    def always_fails() -> str:
        attempts.append(1)
        raise RetryableLLMError("server error 503")

    with pytest.raises(LLMUnavailableError) as info:
        call_with_retry("chat model x", always_fails, RetryPolicy(3, 0.01, 0.1), sleep=sleeps.append)
    assert len(attempts) == 4
    assert len(sleeps) == 3
    assert "4 attempts" in str(info.value) and "503" in str(info.value)


def test_call_with_retry_zero_retries() -> None:
    attempts: list[int] = []

    def fails() -> None:
        attempts.append(1)
        raise RetryableLLMError("cannot reach http://x")

    with pytest.raises(LLMUnavailableError, match="cannot reach"):
        call_with_retry("chat", fails, RetryPolicy(0), sleep=lambda s: pytest.fail("no sleep with 0 retries"))
    assert len(attempts) == 1


def test_call_with_retry_recovers_and_uses_retry_after() -> None:
    outcomes = [RetryableLLMError("429", retry_after=2.5), RetryableLLMError("503"), "ok"]
    sleeps: list[float] = []

    def flaky() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert call_with_retry("x", flaky, RetryPolicy(5, 0.01, 10.0), sleep=sleeps.append) == "ok"
    assert sleeps[0] == 2.5 and len(sleeps) == 2


def test_call_with_retry_does_not_retry_permanent_errors() -> None:
    attempts: list[int] = []

    def bad_request() -> None:
        attempts.append(1)
        raise LLMError("400 bad request")

    with pytest.raises(LLMError):
        call_with_retry("x", bad_request, RetryPolicy(5, 0.0), sleep=lambda s: None)
    assert len(attempts) == 1


def test_retrying_chat_wraps_a_model() -> None:
    inner = ScriptedChat(fail_on={1: RetryableLLMError("503"), 2: RetryableLLMError("503")})
    sleeps: list[float] = []
    chat = RetryingChat(inner, RetryPolicy(5, 0.0, 0.0), sleep=sleeps.append)
    assert isinstance(chat.complete(REQUEST), ChatResponse)
    assert inner.calls == 3 and len(sleeps) == 2
    assert chat.name == inner.name
