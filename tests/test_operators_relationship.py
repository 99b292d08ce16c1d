"""Relationship operators (survey §6.1) on the hand-built Curie graph, each with a known answer."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from tests.test_operators_node import state_for_graph, weighted_graph
from unirag.errors import MethodError
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import MethodSpec
from unirag.operators.node import node_ppr
from unirag.operators.registry import operator_registry
from unirag.operators.relationship import (
    relationship_agent,
    relationship_aggregator,
    relationship_onehop,
    relationship_vdb,
)


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    return build_hand_graph(tmp_path_factory.mktemp("relationship") / "ws")


def state_for(hand, question: str = "Where was Marie Curie born?", chat=None):
    ws, settings, embedder = hand
    return query_state(ws, settings, question, embedder, chat)


def scored(items) -> list[tuple[str, float]]:
    return [(item.id, round(item.score, 6)) for item in items]


# -- relationship.vdb ----------------------------------------------------------


def test_vdb_finds_relationships_by_their_text(hand) -> None:
    state = state_for(hand, "married")
    items = relationship_vdb(state, top_k=1)
    assert [i.id for i in items] == ["marie curie|pierre curie"]
    item = items[0]
    assert item.kind == "relationship" and item.operator == "relationship.vdb"
    assert item.provenance["source"] == "marie curie" and item.provenance["target"] == "pierre curie"
    assert item.provenance["chunk_ids"] == [chunk_id_of(hand[0], "Marie Curie")]
    assert item.text == "Marie Curie married Pierre Curie: Marie Curie married Pierre Curie."
    assert list(state.relationships) == ["marie curie|pierre curie"]
    # two relationships say "capital of" equally: ties by id
    assert [i.id for i in relationship_vdb(state_for(hand, "capital"), top_k=2)] == ["france|paris", "poland|warsaw"]


def test_vdb_high_level_keywords(hand) -> None:
    state = state_for(hand, "Which discoveries were made?")
    state.query_vector = None
    state.keywords_high = ["discovered"]
    items = relationship_vdb(state, top_k=2, query="keywords_high")
    assert [i.id for i in items] == ["marie curie|radium", "pierre curie|radium"]
    assert items[0].score == pytest.approx(items[1].score)
    with pytest.raises(MethodError, match="'keywords' question conversion"):
        relationship_vdb(state, query="keywords_low")
    with pytest.raises(MethodError, match="'embedding' question conversion"):
        relationship_vdb(state)


# -- relationship.onehop -------------------------------------------------------


def test_onehop_sums_the_seed_scores_at_both_ends(hand) -> None:
    state = state_for(hand)
    state.entities = {"marie curie": 2.0, "pierre curie": 1.0}
    items = relationship_onehop(state, top_k=0)
    assert scored(items) == [
        ("marie curie|pierre curie", 3.0),  # both ends are seeds
        ("marie curie|radium", 2.0), ("marie curie|warsaw", 2.0),
        ("paris|pierre curie", 1.0), ("pierre curie|radium", 1.0),
    ]
    assert list(state.relationships) == [i.id for i in items]
    state.entities = {"marie curie": 2.0, "pierre curie": 1.0}
    assert [i.id for i in relationship_onehop(state, top_k=2)] == ["marie curie|pierre curie", "marie curie|radium"]
    state.entities = {"lone island": 1.0}
    assert relationship_onehop(state) == [] and state.relationships == {}


def test_onehop_new_only_skips_relationships_already_in_the_context(hand) -> None:
    state = state_for(hand)
    state.entities = {"marie curie": 2.0, "pierre curie": 1.0}
    state.items = relationship_onehop(state, top_k=1)  # marie curie|pierre curie is on the path now
    items = relationship_onehop(state, top_k=0, new_only=True)
    assert scored(items) == [("marie curie|radium", 2.0), ("marie curie|warsaw", 2.0),
                             ("paris|pierre curie", 1.0), ("pierre curie|radium", 1.0)]
    assert list(state.relationships) == [i.id for i in items]
    assert len(relationship_onehop(state, top_k=0, new_only=False)) == 5


def test_onehop_breaks_ties_by_weight() -> None:
    graph = weighted_graph()  # a-b weight 3, a-c weight 1, b-d weight 1
    state = state_for_graph(graph)
    state.entities = {"a": 1.0}
    assert scored(relationship_onehop(state, top_k=0)) == [("a|b", 1.0), ("a|c", 1.0)]
    state.entities = {"c": 1.0, "d": 1.0}  # a|c and b|d tie on score and weight: by id
    assert scored(relationship_onehop(state, top_k=0)) == [("a|c", 1.0), ("b|d", 1.0)]


# -- relationship.aggregator ---------------------------------------------------


def test_aggregator_sums_the_entity_scores_of_both_ends(hand) -> None:
    state = state_for(hand)
    graph = state.resources.graph()
    scores = np.zeros(graph.n_entities)
    for entity, value in {"marie curie": 0.5, "warsaw": 0.3, "poland": 0.2}.items():
        scores[graph.entity_row[entity]] = value
    state.entity_scores = scores
    items = relationship_aggregator(state, top_k=3)
    assert scored(items) == [("marie curie|warsaw", 0.8), ("marie curie|pierre curie", 0.5),
                             ("marie curie|radium", 0.5)]
    assert len(relationship_aggregator(state, top_k=0)) == 4  # the other four touch no scored entity
    state.entity_scores = None
    assert relationship_aggregator(state) == [] and state.relationships == {}


def test_aggregator_after_ppr(hand) -> None:
    state = state_for(hand)
    graph = state.resources.graph()
    state.entities = {"radium": 1.0}
    node_ppr(state, top_k=3)
    items = relationship_aggregator(state, top_k=2)
    ppr = state.entity_scores
    expected = sorted(
        ((graph.rel_ids[r], ppr[graph.rel_src[r]] + ppr[graph.rel_dst[r]]) for r in range(len(graph.rel_ids))),
        key=lambda pair: (-pair[1], pair[0]),
    )[:2]
    assert [i.id for i in items] == [rel for rel, _ in expected]
    assert {i.id for i in items} == {"marie curie|radium", "pierre curie|radium"}


# -- relationship.agent --------------------------------------------------------


def test_agent_keeps_the_relationships_the_model_picks(hand) -> None:
    chat = ScriptedChat(answers={"agent_select": lambda user: '{"selected": ["poland|warsaw", 1]}'})
    state = state_for(hand, "Which country is Warsaw the capital of?", chat)
    state.relationships = {"marie curie|warsaw": 0.7, "poland|warsaw": 0.6, "france|paris": 0.4}
    items = relationship_agent(state, top_k=3)
    assert scored(items) == [("marie curie|warsaw", 0.7), ("poland|warsaw", 0.6)]
    assert all(i.provenance["agent"] == "llm" for i in items)
    user = ScriptedChat.user_message(chat.requests[-1])
    assert "Candidate relationships:" in user
    assert "2. Warsaw capital of Poland: Warsaw capital of Poland." in user
    assert chat.requests[-1].stage == "query.relationship.agent"


def test_agent_reads_relationship_names_and_falls_back(hand) -> None:
    chat = ScriptedChat(answers={"agent_select": lambda user: '{"selected": ["Paris capital of France"]}'})
    state = state_for(hand, "What is the capital of France?", chat)
    state.relationships = {"marie curie|warsaw": 0.7, "france|paris": 0.4}
    assert [i.id for i in relationship_agent(state, top_k=1)] == ["france|paris"]
    chat = ScriptedChat(answers={"agent_select": lambda user: "{}"})
    state = state_for(hand, "Nothing chosen here?", chat)
    state.relationships = {"marie curie|warsaw": 0.7, "france|paris": 0.4, "poland|warsaw": 0.1}
    items = relationship_agent(state, top_k=2)
    assert scored(items) == [("marie curie|warsaw", 0.7), ("france|paris", 0.4)]
    assert all(i.provenance["agent"] == "fallback" for i in items)


# -- a method made of these operators -----------------------------------------


def test_hipporag_like_chain_through_the_runner(hand) -> None:
    """Link + PPR + Aggregator (survey Table 3, HippoRAG) run by the one runner, question
    entities by the (scripted) chat model: retrieval.question_path llm."""
    ws, settings, _ = hand
    settings = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"question_path": "llm"})})

    chat = ScriptedChat(answers={"question_entities": lambda user: '{"entities": ["Radium"]}'})
    spec = MethodSpec(
        name="hippo-test", title="t", description="t", source="test", question=["entities"],
        operators=[{"op": "node.link"}, {"op": "node.ppr", "params": {"top_k": 2, "emit": False}},
                   {"op": "relationship.aggregator", "params": {"top_k": 2}}],
    ).check("test")
    runner = MethodRunner(ws, settings, fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()))
    result = runner.run(spec, "Who discovered radium?", generate=False)
    assert [(i.kind, i.id) for i in result.context] == [
        ("entity", "radium"), ("relationship", "marie curie|radium"), ("relationship", "pierre curie|radium")]
    assert "query.entities" in result.ledger.to_json()


# -- registry ------------------------------------------------------------------


def test_relationship_specs_match_their_functions() -> None:
    registry = operator_registry()
    for name in ("relationship.vdb", "relationship.onehop", "relationship.aggregator", "relationship.agent"):
        spec = registry[name]
        assert spec.kind == "relationship" and spec.fn.__doc__
        parameters = list(inspect.signature(spec.fn).parameters.values())
        assert parameters[0].name == "state"
        assert dict(spec.params) == {p.name: p.default for p in parameters[1:]}, name
    assert registry["relationship.vdb"].requires == ("graph", "relation_vectors")
