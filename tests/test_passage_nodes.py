"""HippoRAG 2 and LinearRAG: their artifacts (synonym edges, Tri-Graph) and operators on the hand-built Curie graph."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import ScriptedChat, fake_stack
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from unirag.errors import UniragError
from unirag.artifacts.registry import BuildContext, artifact_registry
from unirag.index.synonyms import SynonymConfig, find_synonyms
from unirag.index.tri_graph import read_passages
from unirag.text.sentences import sentences_of
from unirag.llm.base import UsageLedger
from unirag.operators.passage_nodes import (
    chunk_importance,
    chunk_ppr,
    min_max,
    node_activate,
    phrase_weights,
    relationship_recognition,
)
from unirag.progress import Progress


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    ws, settings, embedder = build_hand_graph(tmp_path_factory.mktemp("passage-nodes") / "ws")
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    registry = artifact_registry()
    registry["synonym_edges"].build(ctx)
    try:
        registry["tri_graph"].build(ctx)
    except UniragError as exc:  # no spaCy model: the Tri-Graph tests skip
        pytest.skip(str(exc))
    assert ctx.models.ledger.total().llm_calls == 0  # LinearRAG's index: NER + embeddings only
    return ws, settings, embedder


def test_min_max() -> None:
    assert min_max(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]
    assert min_max(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]


def test_sentences_and_mentions_of_passages() -> None:
    assert sentences_of("Title\nOne is here. Two is there!  Three?") == ["Title", "One is here.", "Two is there!",
                                                                      "Three?"]
    display, counts, sentences = read_passages(
        [("c1", "Paris\nParis is in France. The Sorbonne is in Paris."), ("c2", "Lyon\nLyon is in FRANCE.")],
        [["Paris", "France", "Sorbonne"], ["Lyon", "France", "Rhône"]])
    assert display == {"paris": "Paris", "france": "France", "sorbonne": "Sorbonne", "lyon": "Lyon",
                       "rhône": "Rhône"}
    assert counts[0] == {"paris": 3, "france": 1, "sorbonne": 1}
    assert counts[1] == {"lyon": 2, "france": 1, "rhône": 1}  # a kept name counts once even unmatched
    assert sentences["The Sorbonne is in Paris."] == {"sorbonne", "paris"}
    assert sentences["Lyon is in FRANCE."] == {"lyon", "france"}


def test_find_synonyms_keeps_close_names_once() -> None:
    vectors = np.eye(3, dtype=np.float32)
    hits = {0: [("a", 1.0), ("b", 0.9), ("c", 0.5)], 1: [("b", 1.0), ("a", 0.9)], 2: [("c", 1.0)]}

    def search(rows: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        return [hits[int(np.argmax(row))] for row in rows]

    edges = find_synonyms(["a", "b", "c"], ["Alan Turing", "A. M. Turing", "Turing Award"], vectors, search,
                          SynonymConfig())
    assert (edges.source.tolist(), edges.target.tolist(), edges.similarity.tolist()) == ([0], [1], [0.9])
    short = find_synonyms(["a", "b", "c"], ["AT", "A. M. Turing", "x"], vectors, search, SynonymConfig())
    assert short.source.size == 0  # names of fewer than 3 letters or digits get no synonym


def test_phrase_weights_divide_by_passages_and_keep_the_best(hand) -> None:
    ws, settings, embedder = hand
    graph = query_state(ws, settings, "x", embedder).resources.graph()
    born = next(r for i, r in enumerate(graph.rel_ids) if graph.rel_relation[i] == "born in")
    weights = phrase_weights(graph, {born: 1.0}, link_top_k=5)
    row = graph.rel_row[born]
    curie, warsaw = int(graph.rel_src[row]), int(graph.rel_dst[row])
    assert weights[curie] == pytest.approx(0.5) and weights[warsaw] == pytest.approx(0.5)  # each in 2 passages
    assert np.count_nonzero(phrase_weights(graph, {born: 1.0}, link_top_k=1)) == 1


def test_hipporag2_walks_from_the_facts_phrases(hand) -> None:
    ws, settings, embedder = hand
    state = query_state(ws, settings, "Where was Marie Curie born?", embedder)
    graph = state.resources.graph()
    born = next(r for i, r in enumerate(graph.rel_ids) if graph.rel_relation[i] == "born in")
    state.relationships = {born: 1.0}
    items = chunk_ppr(state, top_k=5)
    assert items[0].id == chunk_id_of(ws, "Marie Curie")  # it holds both phrases of the fact
    assert {item.provenance["ranking"] for item in items} == {"ppr"}
    assert items[-1].id == chunk_id_of(ws, "Lone Island") or chunk_id_of(ws, "Lone Island") not in state.chunks
    assert state.entity_scores is not None and state.entity_scores.shape == (graph.n_entities,)


def test_hipporag2_without_facts_ranks_by_dense_score(hand) -> None:
    ws, settings, embedder = hand
    state = query_state(ws, settings, "Lone Island small island", embedder)
    items = chunk_ppr(state, top_k=2)
    assert items[0].id == chunk_id_of(ws, "Lone Island") and items[0].provenance["ranking"] == "dense"


def test_recognition_skipped_offline_and_asked_with_a_chat_model(hand) -> None:
    ws, settings, embedder = hand
    state = query_state(ws, settings, "Where was Marie Curie born?", embedder)
    graph = state.resources.graph()
    state.relationships = {r: 1.0 - i / 10 for i, r in enumerate(graph.rel_ids[:4])}
    items = relationship_recognition(state, top_k=3)
    assert [i.id for i in items] == graph.rel_ids[:3] and {i.provenance["recognition"] for i in items} == {"skipped"}
    chat = ScriptedChat(answers={"agent_select": lambda _: '{"selected": [2]}'})
    state = query_state(ws, settings, "Where was Marie Curie born?", embedder, chat)
    state.relationships = {r: 1.0 - i / 10 for i, r in enumerate(graph.rel_ids[:4])}
    items = relationship_recognition(state, top_k=3, mode="llm")
    assert [i.id for i in items] == [graph.rel_ids[1]] and items[0].provenance["recognition"] == "llm"
    assert chat.requests[-1].stage == "query.relationship.recognition"


def test_linearrag_activates_through_sentences_and_ranks_passages(hand) -> None:
    ws, settings, embedder = hand
    state = query_state(ws, settings, "Warsaw capital of Poland", embedder)
    state.question_entities = ["Warsaw"]
    assert node_activate(state) == []
    # Linked at similarity 1, then "Warsaw is the capital of Poland." (the question's best sentence)
    # bridges to Poland, and back to Warsaw itself, at 1 x its similarity (as LinearRAG's code does).
    assert state.activated["poland"] == (pytest.approx(state.entities["poland"]), 2)
    assert state.entities["warsaw"] == pytest.approx(1.0 + state.entities["poland"])
    items = chunk_importance(state, top_k=3)
    assert items[0].id == chunk_id_of(ws, "Warsaw") and items[0].provenance["ranking"] == "ppr"


def test_linearrag_without_question_entities_ranks_by_dense_score(hand) -> None:
    ws, settings, embedder = hand
    state = query_state(ws, settings, "Lone Island small island", embedder)
    node_activate(state)
    items = chunk_importance(state, top_k=1)
    assert items[0].id == chunk_id_of(ws, "Lone Island") and items[0].provenance["ranking"] == "dense"
