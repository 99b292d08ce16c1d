"""The zero-LLM question path: entities_nlp / keywords_nlp, and when they replace the LLM conversions."""

from __future__ import annotations

import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from tests.test_extract_nlp import extractor  # noqa: F401  (the shared spaCy fixture)
from unirag.errors import MethodError
from unirag.graph.extract_nlp import NlpExtractor
from unirag.llm.base import UsageLedger
from unirag.methods.spec import MethodSpec, builtin_methods
from unirag.operators.context import QueryState, Resources
from unirag.operators.question import conversions_to_run, question_path
from unirag.operators.registry import conversion_registry
from unirag.workspace import Workspace

pytest.importorskip("spacy")


@pytest.fixture
def make_state(tmp_path, extractor):
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root)
    resources = Resources(ws, settings)

    def make(question: str) -> tuple[QueryState, ScriptedChat]:
        chat = ScriptedChat()
        models = fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()).accounted(UsageLedger())
        return QueryState(question=question, resources=resources, models=models), chat

    yield make
    ws.close()


def test_question_terms_use_the_extractors_names(extractor: NlpExtractor) -> None:
    terms = extractor.read_question("Who was the first president of the association which published "
                                    "Journal of Psychotherapy Integration?")
    assert terms.entities == ["Journal of Psychotherapy Integration"]
    assert terms.phrases == ["first president", "association"]
    # Articles and possessives go as they go from passages: "the Eiffel Tower's" -> "Eiffel Tower".
    assert extractor.read_question("Who designed the Eiffel Tower's elevators?").entities == ["Eiffel Tower"]
    assert extractor.read_question("   ").entities == []


def test_entities_nlp_asks_no_model(make_state) -> None:
    state, chat = make_state("Which film came out first, The Love Route or Chandi Sona?")
    conversion_registry()["entities_nlp"].fn(state)
    assert state.question_entities == ["Love Route", "Chandi Sona"]
    assert not chat.requests
    assert state.models.ledger.total().llm_calls == 0


def test_entities_nlp_falls_back_to_phrases_then_the_question(make_state) -> None:
    state, _ = make_state("what kind of spirit haunts old houses?")
    conversion_registry()["entities_nlp"].fn(state)
    assert "spirit" in state.question_entities and "old houses" in state.question_entities
    state, _ = make_state("why?")
    conversion_registry()["entities_nlp"].fn(state)
    assert state.question_entities == ["why?"]


def test_keywords_nlp_levels(make_state) -> None:
    state, chat = make_state("Who was the first president of the association which published "
                             "Journal of Psychotherapy Integration?")
    conversion_registry()["keywords_nlp"].fn(state)
    assert state.keywords_low == ["Journal of Psychotherapy Integration"]
    assert state.keywords_high == ["first president", "association"]
    assert not chat.requests


def test_keywords_nlp_without_names_uses_phrases_for_both(make_state) -> None:
    state, _ = make_state("How does international trade affect global economic stability?")
    conversion_registry()["keywords_nlp"].fn(state)
    assert "international trade" in state.keywords_high
    assert state.keywords_low == state.keywords_high


@pytest.mark.parametrize(("path", "provider", "expected"), [
    ("auto", "embedded", "nlp"), ("auto", "openai", "llm"), ("llm", "embedded", "llm"), ("nlp", "openai", "nlp"),
])
def test_question_path(path: str, provider: str, expected: str) -> None:
    settings = make_settings(retrieval__question_path=path, chat__provider=provider,
                             chat__base_url="http://localhost:9/v1" if provider == "openai" else None)
    assert question_path(settings) == expected


def test_conversions_to_run_swaps_only_llm_conversions() -> None:
    offline = make_settings()  # no chat endpoint: the embedded SmolLM2 is no real chat model
    online = make_settings(retrieval__question_path="llm")
    assert conversions_to_run(["entities", "embedding"], offline) == ["entities_nlp", "embedding"]
    assert conversions_to_run(["keywords"], offline) == ["keywords_nlp"]
    assert conversions_to_run(["entities", "embedding"], online) == ["entities", "embedding"]
    assert conversions_to_run(["entities_nlp"], online) == ["entities_nlp"]  # a spec's explicit choice stays


def test_a_spec_may_name_the_nlp_conversion() -> None:
    data = builtin_methods()["hipporag"].model_dump()
    data["question"] = ["entities_nlp"]
    MethodSpec.model_validate({**data, "name": "hippo-nlp"}).check("hippo-nlp.yaml")
    data["question"] = ["embedding"]
    with pytest.raises(MethodError, match="needs question conversion entities"):
        MethodSpec.model_validate({**data, "name": "hippo-none"}).check("hippo-none.yaml")
