"""Question conversions (survey §6.3): embedding, entities (HippoRAG/ToG/DALK), keywords (LightRAG)."""

from __future__ import annotations

import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from unirag.llm.base import UsageLedger
from unirag.operators.context import QueryState, Resources
from unirag.operators.question import (
    capitalised_phrases,
    content_words,
    parse_entities,
    parse_keywords,
)
from unirag.operators.registry import conversion_registry
from unirag.workspace import Workspace


@pytest.fixture
def make_state(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root)

    def make(question: str, reply: str | None = None, prompt: str = "") -> tuple[QueryState, ScriptedChat]:
        chat = ScriptedChat(answers={prompt: lambda user: reply} if reply is not None else {})
        models = fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()).accounted(UsageLedger())
        return QueryState(question=question, resources=Resources(ws, settings), models=models), chat

    return make


def convert(name: str, state: QueryState) -> QueryState:
    conversion_registry()[name].fn(state)
    return state


def test_registry_has_the_conversions() -> None:
    assert set(conversion_registry()) == {"embedding", "entities", "keywords", "entities_nlp", "keywords_nlp"}
    assert all(spec.summary for spec in conversion_registry().values())


def test_embedding_conversion(make_state) -> None:
    state, _ = make_state("Where was Marie Curie born?")
    convert("embedding", state)
    assert state.query_vector is not None
    assert state.query_vector == pytest.approx(HashEmbedder().embed(["Where was Marie Curie born?"]).vectors[0])
    assert "query.embed" in state.models.ledger.to_json()


# -- entities --------------------------------------------------------------------


def test_entities_from_the_model(make_state) -> None:
    reply = 'Sure!\n```json\n{"entities": ["Marie Curie", "Warsaw", "marie curie", "", "  Poland. "]}\n```'
    state, chat = make_state("Was Marie Curie born in Warsaw, Poland?", reply, "question_entities")
    convert("entities", state)
    assert state.question_entities == ["Marie Curie", "Warsaw", "Poland"]
    request = chat.requests[-1]
    assert request.stage == "query.entities" and request.json_mode
    assert request.prompt_version.startswith("question_entities@")
    assert "Was Marie Curie born in Warsaw, Poland?" in ScriptedChat.user_message(request)
    assert state.models.ledger.to_json()["query.entities"]["llm_calls"] == 1


@pytest.mark.parametrize(("reply", "expected"), [
    ('["Radium", "Pierre Curie"]', ["Radium", "Pierre Curie"]),
    ('{"named_entities": [{"name": "Radium"}, 1903]}', ["Radium", "1903"]),
    ('{"entities": ["Radium", "Pierre Cu', ["Radium", "Pierre Cu"]),  # cut off, repaired
    ('{"entities": "Radium, Pierre Curie"}', ["Radium", "Pierre Curie"]),
    ("no JSON at all", []),
    ('{"entities": []}', []),
])
def test_parse_entities(reply: str, expected: list[str]) -> None:
    assert parse_entities(reply) == expected


def test_entities_fall_back_to_capitalised_phrases(make_state) -> None:
    state, _ = make_state("Did Marie Curie and Pierre Curie work in Paris?", "I don't know.", "question_entities")
    convert("entities", state)
    assert state.question_entities == ["Marie Curie", "Pierre Curie", "Paris"]
    state, _ = make_state("what is  radium?", '{"entities": []}', "question_entities")
    convert("entities", state)
    assert state.question_entities == ["what is radium?"]  # nothing capitalised: the question itself


def test_capitalised_phrases() -> None:
    assert capitalised_phrases("Where was Marie Curie born?") == ["Marie Curie"]
    assert capitalised_phrases("Who is the President of the United States of America?") == [
        "President of the United States of America"]
    assert capitalised_phrases("When was the University of Paris founded, and by Whom?") == ["University of Paris"]
    assert capitalised_phrases("how tall is it") == []


# -- keywords ------------------------------------------------------------------


def test_keywords_from_the_model(make_state) -> None:
    reply = '{"low_level": ["Marie Curie", "Warsaw"], "high_level": ["birthplace", "biography"]}'
    state, chat = make_state("Where was Marie Curie born?", reply, "question_keywords")
    convert("keywords", state)
    assert state.keywords_low == ["Marie Curie", "Warsaw"]
    assert state.keywords_high == ["birthplace", "biography"]
    request = chat.requests[-1]
    assert request.stage == "query.keywords" and request.json_mode
    assert "Where was Marie Curie born?" in ScriptedChat.user_message(request)


def test_parse_keywords_accepts_lightrag_names_and_partial_replies() -> None:
    assert parse_keywords('{"high_level_keywords": ["physics"], "low_level_keywords": ["Radium"]}') == (
        ["Radium"], ["physics"])
    assert parse_keywords('{"Low-level": ["Radium"]}') == (["Radium"], [])
    assert parse_keywords('["Radium"]') == ([], [])
    assert parse_keywords("none") == ([], [])


def test_keywords_fall_back_per_list(make_state) -> None:
    state, _ = make_state("Where was Marie Curie born?", '{"high_level": ["birthplace"]}', "question_keywords")
    convert("keywords", state)
    assert state.keywords_low == ["Marie", "Curie", "born"]  # content words
    assert state.keywords_high == ["birthplace"]
    state, _ = make_state("Where was Pierre Curie born?")  # the scripted default: no JSON
    convert("keywords", state)
    assert state.keywords_low == ["Pierre", "Curie", "born"]
    assert state.keywords_high == ["Where was Pierre Curie born?"]
    state, _ = make_state("What is it?", "nothing", "question_keywords")
    convert("keywords", state)
    assert state.keywords_low == state.keywords_high == ["What is it?"]  # only stop words


def test_content_words() -> None:
    assert content_words("Which river flows through Egypt's capital, and the river's delta?") == [
        "river", "flows", "Egypt", "capital", "delta"]
