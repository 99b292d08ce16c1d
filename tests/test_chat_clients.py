"""The chat APIs through the official clients over real HTTP: citations, multi-turn, Ollama.

A uvicorn server around the scripted model (``server_harness``); the ``openai`` and
``ollama`` packages talk to it as they would to the real services. The scripted model
records every request, so a test sees what the rewrite prompt was shown and which
question the answer prompt (hence retrieval) got.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from server_harness import running_server

from unirag import UniRAG, package_version
from unirag.generate.standalone import FALLBACK_CHARS, fallback_question, is_referential
from unirag.server.settings import ServerSettings

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
ollama = pytest.importorskip("ollama")

QUOKKA = "Which marsupial lives on Rottnest Island near Perth?"
FIRST = "Tell me about the quokka marsupial."
FOLLOW_UP = "Where does it live?"
HISTORY = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "A small marsupial."}]
REWRITTEN = "Where does the quokka live on Rottnest Island near Perth?"


def answer_questions(chat: ScriptedChat) -> list[str]:
    """The question of each answer prompt the model got, in order."""
    return [ScriptedChat.user_message(request).rsplit("Question: ", 1)[1].split("\n", 1)[0]
            for request in chat.requests if request.prompt_version.startswith("answer_with_context")]


def rewrite_requests(chat: ScriptedChat) -> list[str]:
    return [ScriptedChat.user_message(request) for request in chat.requests
            if request.prompt_version.startswith("standalone_question")]


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedChat]]:
    """A server whose chat model is the embedded kind (no ``chat.base_url``): the offline rule."""
    tmp = tmp_path_factory.mktemp("chat-offline")
    chat = ScriptedChat()
    with UniRAG(tmp / "ws", chat_backend=chat, embedding_backend=HashEmbedder(), cache=False) as rag:
        rag.index(small_corpus(tmp))
        with running_server(rag) as url:
            yield url, chat


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ScriptedChat]]:
    """A server configured with a chat endpoint (``chat.base_url``): the LLM rewrite rule. The
    scripted model stands in for the endpoint and rewrites every question to ``REWRITTEN``."""
    tmp = tmp_path_factory.mktemp("chat-remote")
    chat = ScriptedChat(answers={"standalone_question": lambda user: f'"{REWRITTEN}"'})
    with UniRAG(tmp / "ws", chat_backend=chat, embedding_backend=HashEmbedder(), cache=False,
                chat={"base_url": "http://127.0.0.1:9/v1", "model": "scripted"}) as rag:
        rag.index(small_corpus(tmp))
        with running_server(rag) as url:
            yield url, chat


def assert_citations(citations: list[dict[str, Any]], first_title: str) -> None:
    assert [c["index"] for c in citations] == list(range(1, len(citations) + 1))
    assert citations[0]["title"] == first_title and citations[0]["kind"] == "chunk"
    assert citations[0]["chunk_id"] and first_title.lower() in citations[0]["text"].lower()
    assert set(citations[0]) == {"index", "kind", "source", "title", "chunk_id", "score", "text"}


# -- OpenAI-compatible ------------------------------------------------------------------------------


def test_openai_reply_and_stream_carry_numbered_citations(offline: tuple[str, ScriptedChat]) -> None:
    client = openai.OpenAI(base_url=f"{offline[0]}/v1", api_key="unused")
    reply = client.chat.completions.create(model="vanilla", messages=[{"role": "user", "content": QUOKKA}])
    assert reply.choices[0].message.content == "Quokka"  # the scripted model answers with passage [1]'s title
    assert_citations(reply.model_extra["citations"], "Quokka")
    chunks = list(client.chat.completions.create(model="vanilla", stream=True,
                                                 messages=[{"role": "user", "content": QUOKKA}]))
    finishing = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason == "stop"]
    assert len(finishing) == 1 and chunks[-1] is finishing[0]
    assert_citations(finishing[0].model_extra["citations"], "Quokka")
    assert all("citations" not in (chunk.model_extra or {}) for chunk in chunks[:-1])


def test_openai_two_turns_offline_put_the_previous_question_first(offline: tuple[str, ScriptedChat]) -> None:
    url, chat = offline
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    before = len(chat.requests)
    reply = client.chat.completions.create(model="vanilla", messages=[
        {"role": "system", "content": "be brief"}, *HISTORY, {"role": "user", "content": FOLLOW_UP}])
    assert answer_questions(_since(chat, before)) == [f"{FIRST} {FOLLOW_UP}"]
    assert not rewrite_requests(_since(chat, before))  # the embedded model is never asked to rewrite
    assert reply.choices[0].message.content == "Quokka"
    before = len(chat.requests)
    stream = client.chat.completions.create(model="vanilla", stream=True, messages=[
        *HISTORY, {"role": "user", "content": "What is the capital of France?"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "paris"
    assert answer_questions(_since(chat, before)) == ["What is the capital of France?"]  # not referential


def _since(chat: ScriptedChat, start: int) -> ScriptedChat:
    """A view of the requests ``chat`` got from ``start`` on."""
    view = ScriptedChat()
    view.requests = chat.requests[start:]
    return view


def test_openai_two_turns_with_a_chat_endpoint_rewrite_the_question(remote: tuple[str, ScriptedChat]) -> None:
    url, chat = remote
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    for stream in (False, True):
        before = len(chat.requests)
        messages = [*HISTORY, {"role": "user", "content": FOLLOW_UP}]
        if stream:
            chunks = list(client.chat.completions.create(model="vanilla", messages=messages, stream=True,
                                                         stream_options={"include_usage": True}))
            answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            usage = chunks[-1].usage
        else:
            reply = client.chat.completions.create(model="vanilla", messages=messages)
            answer, usage = reply.choices[0].message.content, reply.usage
        seen = _since(chat, before)
        [rewrite] = rewrite_requests(seen)
        assert f"User: {FIRST}" in rewrite and "Assistant: A small marsupial." in rewrite
        assert f"Last question: {FOLLOW_UP}" in rewrite
        assert answer_questions(seen) == [REWRITTEN]  # retrieval and the answer read the rewritten question
        assert answer == "Quokka"
        asked = sum(sum(len(m["content"].split()) for m in request.messages) for request in seen.requests)
        assert usage.prompt_tokens >= asked  # the rewrite call is the query's usage too
    before = len(chat.requests)
    client.chat.completions.create(model="vanilla", messages=[{"role": "user", "content": QUOKKA}])
    assert not rewrite_requests(_since(chat, before))  # one turn: nothing to rewrite


def test_offline_rule() -> None:
    assert is_referential("Where does it live?") and is_referential("And Tokyo?")
    assert not is_referential("What is the capital of France?")
    earlier = [("user", "a" * 1000), ("assistant", "x"), ("user", "Tell me about Paris."), ("assistant", "y")]
    assert fallback_question("Why there?", earlier) == (f"{'a' * FALLBACK_CHARS} Tell me about Paris. Why there?",
                                                      "previous")
    assert fallback_question("What is the capital of Japan?", earlier) == ("What is the capital of Japan?",
                                                                         "as_asked")
    assert fallback_question("Why?", [("assistant", "hello")]) == ("Why?", "as_asked")
    more = [("user", "one"), ("user", "two"), ("user", "three")]
    assert fallback_question("And it?", more)[0] == "two three And it?"  # the last two only


def test_python_api_history(tmp_path: Path) -> None:
    with UniRAG(tmp_path / "ws", chat_backend=ScriptedChat(), embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path))
        result = rag.query(FOLLOW_UP, history=HISTORY)
        assert (result.asked, result.question, result.rewrite) == (FOLLOW_UP, f"{FIRST} {FOLLOW_UP}", "previous")
        assert result.to_json()["asked"] == FOLLOW_UP and result.answer == "Quokka"
        assert "rewrite" not in rag.query(QUOKKA).to_json()


# -- Ollama-compatible ------------------------------------------------------------------------------


def test_ollama_client_chat_generate_list_show(offline: tuple[str, ScriptedChat]) -> None:
    url, chat = offline
    client = ollama.Client(host=url)
    reply = client.chat(model="vanilla", messages=[{"role": "user", "content": QUOKKA}], stream=False)
    assert reply.message.content == "Quokka" and reply.done and reply.done_reason == "stop"
    assert reply.eval_count and reply.prompt_eval_count and reply.total_duration and reply.total_duration > 0
    parts = list(client.chat(model="vanilla:latest", messages=[{"role": "user", "content": QUOKKA}], stream=True))
    assert "".join(part.message.content for part in parts) == "Quokka"
    assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].done_reason == "stop" and parts[-1].eval_count
    generated = client.generate(model="vanilla", prompt=QUOKKA, stream=False)
    assert generated.response == "Quokka" and generated.done
    pieces = list(client.generate(model="vanilla", prompt=QUOKKA, stream=True))
    assert "".join(piece.response for piece in pieces) == "Quokka" and pieces[-1].done
    names = {model.model for model in client.list().models}
    assert {"vanilla", "hipporag"} <= names
    shown = client.show("vanilla")
    assert shown.details.format == "unirag" and shown.modelinfo["unirag.method"] == "vanilla"
    assert client.ps().models == []
    before = len(chat.requests)
    follow = client.chat(model="vanilla", messages=[*HISTORY, {"role": "user", "content": FOLLOW_UP}], stream=True)
    assert "".join(part.message.content for part in follow) == "Quokka"
    assert answer_questions(_since(chat, before)) == [f"{FIRST} {FOLLOW_UP}"]


def test_ollama_raw_lines_carry_citations_and_version(offline: tuple[str, ScriptedChat]) -> None:
    with httpx.Client(base_url=offline[0], timeout=60) as http:
        assert http.get("/api/version").json() == {"version": package_version()}
        with http.stream("POST", "/api/chat", json={"model": "vanilla", "messages": [  # streams by default
                {"role": "user", "content": QUOKKA}]}) as response:
            assert response.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in response.iter_lines() if line]
        assert lines[-1]["done"] and "citations" not in lines[0]
        assert_citations(lines[-1]["citations"], "Quokka")
        whole = http.post("/api/chat", json={"model": "vanilla", "stream": False,
                                             "messages": [{"role": "user", "content": QUOKKA}]}).json()
        assert_citations(whole["citations"], "Quokka")
        generated = http.post("/api/generate", json={"model": "vanilla", "prompt": QUOKKA, "stream": False}).json()
        assert_citations(generated["citations"], "Quokka")


def test_ollama_errors_are_one_line(offline: tuple[str, ScriptedChat]) -> None:
    client = ollama.Client(host=offline[0])
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="gpt-4o", messages=[{"role": "user", "content": QUOKKA}], stream=False)
    assert caught.value.status_code == 404 and "unknown method 'gpt-4o'" in caught.value.error
    with pytest.raises(ollama.ResponseError) as caught:
        list(client.chat(model="nope", messages=[{"role": "user", "content": QUOKKA}]))
    assert caught.value.status_code == 404
    with httpx.Client(base_url=offline[0]) as http:
        for path, body in (("/api/chat", b"{not json"), ("/api/chat", b'{"model": "vanilla"}'),
                           ("/api/chat", b'{"model": "vanilla", "messages": [{"role": "assistant", "content": "x"}]}'),
                           ("/api/generate", b'{"model": "vanilla", "prompt": "  "}'), ("/api/show", b"{}")):
            response = http.post(path, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400, (path, body, response.text)
            error = response.json()["error"]
            assert isinstance(error, str) and error and "\n" not in error


def test_ollama_routes_need_the_key_and_refuse_other_origins(tmp_path: Path) -> None:
    with UniRAG(tmp_path / "ws", chat_backend=ScriptedChat(), embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(api_key="sekrit")) as url:
            with pytest.raises(ollama.ResponseError) as caught:
                ollama.Client(host=url).list()
            assert caught.value.status_code == 401
            keyed = ollama.Client(host=url, headers={"Authorization": "Bearer sekrit"})
            assert keyed.chat(model="vanilla", messages=[{"role": "user", "content": QUOKKA}],
                              stream=False).message.content == "Quokka"
            with httpx.Client(base_url=url, headers={"Authorization": "Bearer sekrit"}) as http:
                refused = http.post("/api/chat", headers={"Origin": "http://evil.example"},
                                    json={"model": "vanilla", "messages": [{"role": "user", "content": QUOKKA}]})
                assert refused.status_code == 403
