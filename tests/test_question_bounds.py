"""Issue 17 items 7, 8, 13: empty and huge questions are refused, prompts fit the window,
empty answers are flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from test_cli import assert_one_line_error, fakes, ok, run, workspace  # noqa: F401 (fixtures)

from unirag import QuestionError, UniRAG
from unirag.prompts.prompt import load_prompt

LONG_QUESTION = "Where does the quokka live and why? " * 1200  # ~10k tokens


@pytest.mark.parametrize("question", ["", "   \n\t "])
def test_cli_refuses_an_empty_question(workspace: Path, fakes: dict[str, Any], question: str) -> None:
    result = run("query", question, "-w", workspace, "-m", "vanilla")
    assert result.exit_code == 2
    assert_one_line_error(result, "question is empty")
    assert fakes["chats"][-1].calls == 0 and fakes["embedders"][-1].calls == 0


def test_cli_refuses_a_question_past_max_question_tokens(workspace: Path, fakes: dict[str, Any]) -> None:
    result = run("query", LONG_QUESTION, "-w", workspace, "-m", "hipporag")
    assert result.exit_code == 2
    assert_one_line_error(result, "retrieval.max_question_tokens (2000)")
    assert fakes["chats"][-1].calls == 0  # nothing built, nothing asked


def test_api_refuses_empty_and_huge_questions(tmp_path: Path) -> None:
    chat = ScriptedChat()
    with UniRAG(tmp_path / "ws", chat_backend=chat, embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path))
        for question in ("", " ", LONG_QUESTION):
            with pytest.raises(QuestionError):
                rag.query(question)
        assert chat.calls == 0


def test_prompt_fields_are_cut_to_fit_the_window() -> None:
    prompt = load_prompt("question_entities")
    fields = {"question": LONG_QUESTION}
    fitted, cut = prompt.fitted_fields(fields, window=1000, reply_tokens=256)
    assert cut == ["question"] and len(fitted["question"]) < len(LONG_QUESTION)
    assert prompt.fitted_fields({"question": "Who?"}, window=1000, reply_tokens=256) == ({"question": "Who?"}, [])


def test_every_query_prompt_fits_a_small_window_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A question within its bound but large for a small window: the entities conversion,
    the agent and generation prompts are cut to fit, and the result says so."""
    monkeypatch.setenv("UNIRAG_CHAT_CONTEXT_WINDOW", "700")
    monkeypatch.setenv("UNIRAG_CHAT_MAX_TOKENS", "64")
    chat = ScriptedChat()
    question = "Where does the quokka live and why? " * 60  # ~600 tokens
    with UniRAG(tmp_path / "ws", chat_backend=chat, embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path), graphs="kg", method="hipporag")
        chat.requests.clear()
        result = rag.query(question, "hipporag")
    from unirag.text.tokenizer import get_tokenizer

    tokenizer = get_tokenizer()
    assert chat.requests
    for request in chat.requests:
        used = sum(tokenizer.count(m["content"]) for m in request.messages)
        assert used + request.max_tokens <= 700 * 0.9, (request.stage, used)
    assert any("cut to fit chat.context_window" in w and "question" in w for w in result.warnings)
    assert result.to_json()["warnings"] == result.warnings


def test_empty_answer_is_flagged_and_warned(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import unirag.cli as cli
    from unirag.llm.factory import build_stack

    def silent_stack(settings: Any, ws: Any) -> Any:
        return build_stack(settings, ws.cache(), chat=ScriptedChat(answers={"zeroshot": lambda user: "  "}),
                           embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", silent_stack)
    result = ok("query", "What is the capital of France?", "-w", workspace, "-m", "zeroshot", "--json")
    data = json.loads(result.stdout)
    assert data["empty_answer"] is True and any("empty answer" in w for w in data["warnings"])
    assert "warning: the model returned an empty answer" in result.stderr
    retrieved = json.loads(ok("query", "What is the capital of France?", "-w", workspace, "-m", "vanilla",
                              "--retrieve-only", "--json").stdout)
    assert retrieved["empty_answer"] is False and retrieved["warnings"] == []
