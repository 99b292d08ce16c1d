"""Node operators (survey §6.1) on the hand-built Curie graph, each with a known answer."""

from __future__ import annotations

import inspect
import json

import networkx as nx
import numpy as np
import pytest

from tests.fakes import ScriptedChat
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from unirag.graph.merge import merge_extractions
from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.errors import MethodError
from unirag.operators.context import Resources
from unirag.operators.graph_index import GraphIndex
from unirag.operators.node import (
    node_agent,
    node_link,
    node_onehop,
    node_ppr,
    node_relnode,
    node_tfidf,
    node_vdb,
    parse_selection,
    rank,
)
from unirag.operators.registry import operator_registry


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    return build_hand_graph(tmp_path_factory.mktemp("node") / "ws")


def state_for(hand, question: str = "Where was Marie Curie born?", chat=None):
    ws, settings, embedder = hand
    return query_state(ws, settings, question, embedder, chat)


def ids(items) -> list[str]:
    return [item.id for item in items]


class GraphOnly(Resources):
    """Resources over an in-memory GraphIndex (graphs the workspace fixture lacks)."""

    def __init__(self, graph: GraphIndex) -> None:
        self._graph = graph

    def graph(self) -> GraphIndex:
        return self._graph


def weighted_graph() -> GraphIndex:
    """a-b mentioned in three chunks (weight 3), a-c in one, b-d in one, e alone."""
    def rel(x: str, y: str) -> RelationMention:
        return RelationMention(x, y, "links", f"{x} links {y}", [], 5)

    extractions = [
        ChunkExtraction("c1", [EntityMention("A", "thing", "first")], [rel("A", "B"), rel("A", "C")]),
        ChunkExtraction("c2", [], [rel("A", "B"), rel("B", "D")]),
        ChunkExtraction("c3", [EntityMention("E", "thing", "alone")], [rel("A", "B")]),
    ]
    return GraphIndex.from_graph(merge_extractions(extractions), ["c1", "c2", "c3"])


class EmbedSpy:
    """Records what an operator asks the embedder for."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.calls = inner, inner.name, []

    def embed(self, texts, stage="embed"):
        self.calls.append((list(texts), stage))
        return self.inner.embed(texts, stage)


# -- helpers -------------------------------------------------------------------


def test_rank_orders_by_score_then_tiebreak_then_id() -> None:
    names = ["d", "c", "b", "a"]
    rows = np.arange(4)
    assert rank(rows, np.array([1.0, 2.0, 1.0, 1.0]), names, 2) == [("c", 2.0), ("a", 1.0)]
    assert rank(rows, np.array([1.0, 2.0, 1.0, 1.0]), names, 0) == [("c", 2.0), ("a", 1.0), ("b", 1.0), ("d", 1.0)]
    assert rank(rows, np.array([1.0, 1.0, 1.0, 0.0]), names, 2, tiebreak=np.array([0, 0, 5, 9])) == [
        ("b", 1.0), ("c", 1.0)]
    assert rank(rows, np.array([0.0, 0.5, 0.0, -1.0]), names, 3, positive_only=True) == [("c", 0.5)]
    assert rank(np.array([], dtype=np.int64), np.array([]), names, 3) == []


def test_parse_selection_reads_numbers_names_and_prose() -> None:
    aliases = [["marie curie", "Marie Curie"], ["warsaw", "Warsaw"], ["poland", "Poland"]]
    assert parse_selection('{"selected": [2, 3]}', aliases, 5) == [1, 2]
    assert parse_selection('```json\n{"selected": ["3", "[1] Marie Curie"]}\n```', aliases, 5) == [2, 0]
    assert parse_selection('{"selected": ["WARSAW", {"name": "Poland"}, 2, 9, true]}', aliases, 5) == [1, 2]
    assert parse_selection('[1, 2, 3]', aliases, 2) == [0, 1]
    assert parse_selection('{"selected": [3, "Warsaw"', aliases, 5) == [2, 1]  # cut off: repaired
    assert parse_selection("I would pick Poland, then Marie Curie.", aliases, 5) == [2, 0]
    assert parse_selection("nothing useful here", aliases, 5) == []
    assert parse_selection('{"selected": []}', aliases, 5) == []


# -- node.vdb ------------------------------------------------------------------


def test_vdb_name_index_finds_the_named_entity(hand) -> None:
    state = state_for(hand, "Radium")
    items = node_vdb(state, top_k=1, index="entity_name_vectors")
    assert ids(items) == ["radium"]
    assert items[0].score == pytest.approx(1.0)
    assert items[0].kind == "entity" and items[0].operator == "node.vdb"
    assert items[0].provenance["chunk_ids"] == [chunk_id_of(hand[0], "Pierre Curie")]
    assert state.entities == {"radium": pytest.approx(1.0)}


def test_vdb_default_index_uses_descriptions(hand) -> None:
    state = state_for(hand, "A chemical element")  # only radium's description says so
    assert ids(node_vdb(state, top_k=1)) == ["radium"]
    state = state_for(hand, "university")  # the Sorbonne's description, not its name
    assert ids(node_vdb(state, top_k=1)) == ["sorbonne"]


def test_vdb_low_level_keywords_are_joined_and_embedded(hand) -> None:
    state = state_for(hand, "Where is the capital?")
    spy = EmbedSpy(state.models.embedder)
    state.models.embedder = spy
    state.query_vector = None  # LightRAG embeds the keywords, not the question
    state.keywords_low = ["Warsaw", "Poland"]
    items = node_vdb(state, top_k=2, index="entity_name_vectors", query="keywords_low")
    assert ids(items) == ["poland", "warsaw"]  # equal similarity: ties by id
    assert items[0].score == pytest.approx(2 ** -0.5, abs=1e-6)
    assert spy.calls == [(["Warsaw, Poland"], "query.embed")]


def test_vdb_reports_missing_conversions_and_bad_params(hand) -> None:
    state = state_for(hand)
    state.query_vector = None
    with pytest.raises(MethodError, match="'embedding' question conversion"):
        node_vdb(state)
    with pytest.raises(MethodError, match="'keywords' question conversion"):
        node_vdb(state, query="keywords_high")
    with pytest.raises(MethodError, match="query must be one of"):
        node_vdb(state, query="title")
    with pytest.raises(MethodError, match="index must be one of"):
        node_vdb(state, index="relation_vectors")


# -- node.relnode --------------------------------------------------------------


def test_relnode_scores_endpoints_by_their_relationships(hand) -> None:
    state = state_for(hand)
    state.relationships = {"marie curie|warsaw": 0.9, "poland|warsaw": 0.5, "not a relationship": 9.0}
    items = node_relnode(state, top_k=0)
    assert [(i.id, round(i.score, 6)) for i in items] == [("marie curie", 0.9), ("warsaw", 0.9), ("poland", 0.5)]
    assert list(state.entities) == ["marie curie", "warsaw", "poland"]
    state.relationships = {"marie curie|warsaw": 0.9, "poland|warsaw": 0.5}
    items = node_relnode(state, top_k=2, combine="sum")
    assert [(i.id, round(i.score, 6)) for i in items] == [("warsaw", 1.4), ("marie curie", 0.9)]
    state.relationships = {}
    assert node_relnode(state) == [] and state.entities == {}
    with pytest.raises(MethodError, match="combine"):
        node_relnode(state, combine="mean")


# -- node.ppr ------------------------------------------------------------------


def networkx_ppr(graph: GraphIndex, personalization: dict[str, float], damping: float) -> dict[str, float]:
    g = nx.Graph()
    g.add_nodes_from(graph.entity_ids)
    for row in range(len(graph.rel_ids)):
        g.add_edge(graph.entity_ids[graph.rel_src[row]], graph.entity_ids[graph.rel_dst[row]],
                   weight=float(graph.rel_weight[row]))
    return nx.pagerank(g, alpha=damping, personalization=personalization, weight="weight", tol=1e-12, max_iter=500)


def test_ppr_restarts_at_the_seeds_weighted_by_their_scores(hand) -> None:
    state = state_for(hand)
    graph = state.resources.graph()
    state.entities = {"warsaw": 0.75, "paris": 0.25}
    items = node_ppr(state, top_k=3)
    expected = networkx_ppr(graph, {"warsaw": 0.75, "paris": 0.25}, 0.5)
    best = sorted(expected, key=lambda e: (-expected[e], e))[:3]
    assert ids(items) == best
    assert [i.score for i in items] == pytest.approx([expected[e] for e in best], abs=1e-6)
    assert ids(items)[0] == "warsaw"
    assert state.entity_scores is not None and state.entity_scores.sum() == pytest.approx(1.0)
    full = {e: state.entity_scores[graph.entity_row[e]] for e in graph.entity_ids}
    assert full == pytest.approx(expected, abs=1e-6)
    assert full["lone island"] == 0.0
    assert list(state.entities) == best


def test_ppr_damping_and_unscored_seeds(hand) -> None:
    state = state_for(hand)
    graph = state.resources.graph()
    state.entities = {"marie curie": 0.0, "unknown": 1.0}  # zero scores: each seed weighs 1
    items = node_ppr(state, top_k=0, damping=0.85)
    expected = networkx_ppr(graph, {"marie curie": 1.0}, 0.85)
    assert {i.id: i.score for i in items} == pytest.approx({e: s for e, s in expected.items() if s > 0}, abs=1e-6)
    assert "lone island" not in state.entities  # unreachable: score 0, dropped
    state.entities = {}
    assert node_ppr(state) == []
    with pytest.raises(MethodError, match="damping"):
        node_ppr(state, damping=1.0)


# -- node.onehop ---------------------------------------------------------------


def test_onehop_scores_neighbours_by_seed_scores(hand) -> None:
    state = state_for(hand)
    state.entities = {"marie curie": 2.0, "paris": 1.0}
    items = node_onehop(state, top_k=0)
    assert [(i.id, i.score) for i in items] == [
        ("pierre curie", 3.0), ("radium", 2.0), ("warsaw", 2.0), ("france", 1.0), ("sorbonne", 1.0)]
    state.entities = {"marie curie": 2.0, "paris": 1.0}
    items = node_onehop(state, top_k=3, include_seeds=True)
    assert [(i.id, i.score) for i in items] == [("pierre curie", 3.0), ("marie curie", 2.0), ("radium", 2.0)]
    state.entities = {"lone island": 1.0}
    assert node_onehop(state) == [] and state.entities == {}


def test_onehop_multiplies_edge_weight() -> None:
    graph = weighted_graph()
    assert graph.adjacency[graph.entity_row["a"], graph.entity_row["b"]] == 3.0
    state = state_for_graph(graph)
    state.entities = {"a": 0.5, "d": 1.0}
    items = node_onehop(state, top_k=0)
    # b: 3 x 0.5 (from a) + 1 x 1.0 (from d); c: 1 x 0.5
    assert [(i.id, i.score) for i in items] == [("b", 2.5), ("c", 0.5)]


def state_for_graph(graph: GraphIndex, chat=None):
    from tests.fakes import HashEmbedder
    from unirag.llm.base import UsageLedger
    from unirag.llm.factory import ModelStack
    from unirag.operators.context import QueryState

    models = ModelStack(chat or ScriptedChat(), HashEmbedder()).accounted(UsageLedger())
    return QueryState(question="q", resources=GraphOnly(graph), models=models)


# -- node.link -----------------------------------------------------------------


def test_link_takes_the_top1_entity_per_question_entity(hand) -> None:
    state = state_for(hand)
    spy = EmbedSpy(state.models.embedder)
    state.models.embedder = spy
    state.question_entities = ["Warsaw", "Pierre Curie", "warsaw city", "Warsaw"]
    items = node_link(state)
    assert [(i.id, round(i.score, 6)) for i in items] == [("pierre curie", 1.0), ("warsaw", 1.0)]
    assert spy.calls == [(["Warsaw", "Pierre Curie", "warsaw city"], "query.embed")]  # one batch, no duplicates
    assert state.entities == {"pierre curie": pytest.approx(1.0), "warsaw": pytest.approx(1.0)}
    state.question_entities = ["A chemical element"]
    assert ids(node_link(state, index="entity_vectors")) == ["radium"]
    state.question_entities = []
    assert node_link(state) == [] and state.entities == {}


# -- node.agent ----------------------------------------------------------------


def test_agent_keeps_the_entities_the_model_picks(hand) -> None:
    chat = ScriptedChat(answers={"agent_select": lambda user: '{"selected": [3, 2]}'})
    state = state_for(hand, "Which country is Warsaw in?", chat)
    state.entities = {"marie curie": 0.9, "warsaw": 0.5, "poland": 0.2}
    items = node_agent(state, top_k=2)
    assert [(i.id, i.score) for i in items] == [("warsaw", 0.5), ("poland", 0.2)]  # by candidate score
    assert all(i.provenance["agent"] == "llm" and i.operator == "node.agent" for i in items)
    assert state.entities == {"warsaw": 0.5, "poland": 0.2}
    request = chat.requests[-1]
    assert request.stage == "query.node.agent" and request.json_mode
    user = ScriptedChat.user_message(request)
    assert "Which country is Warsaw in?" in user
    assert "1. Marie Curie: Physicist and chemist." in user and "3. Poland: A country." in user
    assert "at most 2" in user


def test_agent_limits_candidates_and_choices(hand) -> None:
    chat = ScriptedChat(answers={"agent_select": lambda user: json.dumps({"selected": ["Poland", "Warsaw", 1]})})
    state = state_for(hand, "Pick two places.", chat)
    state.entities = {"marie curie": 0.9, "warsaw": 0.5, "poland": 0.2, "paris": 0.1}
    items = node_agent(state, top_k=2, max_candidates=3)
    assert ids(items) == ["warsaw", "poland"]
    assert "4." not in ScriptedChat.user_message(chat.requests[-1])


def test_agent_falls_back_to_the_top_candidates(hand) -> None:
    chat = ScriptedChat(answers={"agent_select": lambda user: "I cannot tell."})
    state = state_for(hand, "Which one is unclear?", chat)  # a new prompt: not answered from the cache
    state.entities = {"marie curie": 0.9, "warsaw": 0.5, "poland": 0.2}
    items = node_agent(state, top_k=2)
    assert ids(items) == ["marie curie", "warsaw"]
    assert all(i.provenance["agent"] == "fallback" for i in items)
    state.entities = {}
    calls = chat.calls
    assert node_agent(state) == [] and chat.calls == calls  # no candidates: no model call


# -- node.tfidf ----------------------------------------------------------------


def test_tfidf_ranks_passage_nodes(hand) -> None:
    ws = hand[0]
    state = state_for(hand, "capital of Poland")
    items = node_tfidf(state, top_k=5)
    assert ids(items) == [chunk_id_of(ws, "Warsaw"), chunk_id_of(ws, "Paris")]  # only chunks sharing a term
    assert items[0].kind == "chunk" and items[0].operator == "node.tfidf"
    assert items[0].score > items[1].score > 0
    assert list(state.chunks) == ids(items)
    assert node_tfidf(state_for(hand, "zebra"), top_k=3) == []


# -- registry ------------------------------------------------------------------


def test_node_specs_match_their_functions() -> None:
    registry = operator_registry()
    names = ["node.vdb", "node.relnode", "node.ppr", "node.agent", "node.onehop", "node.link", "node.tfidf"]
    for name in names:
        spec = registry[name]
        assert spec.kind == "node" and spec.fn.__doc__
        parameters = list(inspect.signature(spec.fn).parameters.values())
        assert parameters[0].name == "state"
        assert dict(spec.params) == {p.name: p.default for p in parameters[1:]}, name
    assert registry["node.vdb"].requires_for({}) == ("graph", "entity_vectors")
    assert registry["node.vdb"].requires_for({"index": "entity_name_vectors"}) == ("graph", "entity_name_vectors")
    assert registry["node.link"].requires_for({}) == ("graph", "entity_name_vectors")
    assert registry["node.vdb"].needs == ("embedding",)
    assert registry["node.link"].needs == ("entities",)
    assert registry["node.tfidf"].requires == ("chunk_tfidf",)
