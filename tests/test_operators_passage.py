"""kgp.traverse on the hand-built graph (tests/graph_fixture.py): known answers.

The passage graph (``chunk_links:pg``, chunks sharing at least one entity),
by passage title:

    Warsaw --warsaw-- Marie Curie --marie, pierre-- Pierre Curie --paris-- Paris        Lone Island (alone)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fakes import ScriptedChat, fake_stack
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from unirag.errors import MethodError, WorkspaceError
from unirag.artifacts.registry import BuildContext, artifact_registry
from unirag.llm.base import UsageLedger
from unirag.operators.passage import _evidence_text, kgp_traverse, passage_graph
from unirag.operators.registry import operator_registry
from unirag.progress import Progress

TITLES = ("Marie Curie", "Pierre Curie", "Warsaw", "Paris", "Lone Island")


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    root: Path = tmp_path_factory.mktemp("passage-ops") / "ws"
    ws, settings, embedder = build_hand_graph(root)
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    artifact_registry()["chunk_links:pg"].build(ctx)
    chunks = {title: chunk_id_of(ws, title) for title in TITLES}
    return ws, settings, embedder, chunks


def _state(hand, question: str, chat=None):
    ws, settings, embedder, _ = hand
    return query_state(ws, settings, question, embedder, chat)


def _titles(hand, items):
    by_id = {cid: title for title, cid in hand[3].items()}
    return [by_id[item.id] for item in items]


def test_passage_graph_is_the_shared_entity_graph(hand):
    chunks = hand[3]
    state = _state(hand, "anything")
    graph = passage_graph(state.resources)
    assert graph is passage_graph(state.resources)  # built once per process (per Resources)

    def neighbours(title):
        return sorted(graph.ids[n] for n in graph.adjacency[graph.row[chunks[title]]].indices)

    assert neighbours("Marie Curie") == sorted([chunks["Pierre Curie"], chunks["Warsaw"]])
    assert neighbours("Pierre Curie") == sorted([chunks["Marie Curie"], chunks["Paris"]])
    assert neighbours("Lone Island") == []
    assert graph.adjacency[graph.row[chunks["Marie Curie"]], graph.row[chunks["Pierre Curie"]]] == 2.0


def test_traversal_walks_the_chain_from_the_tfidf_seed(hand):
    # TF-IDF seed: Paris (the only passage naming France and the Sorbonne); then one
    # neighbour per round along the chain.
    state = _state(hand, "capital of France and the Sorbonne")
    items = kgp_traverse(state, top_k=4, seeds=1, neighbors=1, hops=3)
    assert _titles(hand, items) == ["Paris", "Pierre Curie", "Marie Curie", "Warsaw"]
    assert [item.provenance["hop"] for item in items] == [0, 1, 2, 3]
    chunks = hand[3]
    assert [item.provenance["via"] for item in items] == [None, chunks["Paris"], chunks["Pierre Curie"],
                                                          chunks["Marie Curie"]]
    assert items[0].provenance["guide"] == "tfidf" and items[1].provenance["guide"] == "question"
    assert items[0].operator == "kgp.traverse" and items[0].kind == "chunk"
    # The seed scores its TF-IDF cosine, a neighbour its embedding cosine to the question.
    index = state.resources.chunk_tfidf
    tfidf = (index.matrix @ index.query_vector(state.question).T).toarray().ravel()
    assert items[0].score == pytest.approx(float(tfidf[index.ids.index(chunks["Paris"])]), abs=1e-6)
    graph = passage_graph(state.resources)
    cosine = float(np.asarray(graph.vectors[graph.row[chunks["Pierre Curie"]]]) @ state.query_vector)
    assert items[1].score == pytest.approx(cosine, abs=1e-5)
    assert list(state.chunks) == [item.id for item in items]
    # hops bounds the rounds.
    assert _titles(hand, kgp_traverse(state, top_k=4, seeds=1, neighbors=1, hops=1)) == ["Paris", "Pierre Curie"]
    assert _titles(hand, kgp_traverse(state, top_k=4, seeds=1, neighbors=1, hops=0)) == ["Paris"]


def test_neighbours_ranked_by_similarity_to_the_question(hand):
    # Seed Marie Curie; of its neighbours, Pierre Curie shares "marie curie" with the question
    # (cosine 0.55) and Warsaw nothing (0.0).
    state = _state(hand, "Marie Curie born")
    items = kgp_traverse(state, top_k=2, seeds=1, neighbors=1, hops=1)
    assert _titles(hand, items) == ["Marie Curie", "Pierre Curie"]
    # Both neighbours when there is room, best first; the budget stops the second round.
    items = kgp_traverse(state, top_k=3, seeds=1, neighbors=3, hops=2)
    assert _titles(hand, items) == ["Marie Curie", "Pierre Curie", "Warsaw"]
    assert items[1].score > items[2].score
    # Default seeds: max(1, top_k // (neighbors + 1)) = 1 for top_k 4, neighbors 3.
    assert _titles(hand, kgp_traverse(state)) == ["Marie Curie", "Pierre Curie", "Warsaw", "Paris"]


def test_budget_and_isolated_seed(hand):
    state = _state(hand, "Lone Island people")
    items = kgp_traverse(state, top_k=4, seeds=1)
    assert _titles(hand, items) == ["Lone Island"]  # no passage-graph neighbour: under budget
    state = _state(hand, "Marie Curie born")
    assert len(kgp_traverse(state, top_k=2, seeds=2, neighbors=3)) == 2  # two seeds fill the budget
    assert _titles(hand, kgp_traverse(state, top_k=2, seeds=2)) == ["Marie Curie", "Pierre Curie"]
    assert kgp_traverse(state, top_k=0) == [] and state.chunks == {}
    state = _state(hand, "zzzz qqqq")  # no term in common with any passage: no seed
    assert kgp_traverse(state) == []


def test_agent_guides_the_walk_with_the_missing_evidence(hand):
    # Without the agent Pierre Curie wins (see above); the agent asks for the capital of
    # Poland, so Warsaw is the neighbour picked.
    seen = []

    def reply(user: str) -> str:
        seen.append(user)
        return "<think>hmm</think> We still need the capital of Poland, Warsaw."

    chat = ScriptedChat(answers={"kgp_next": reply})
    state = _state(hand, "Marie Curie born", chat)
    items = kgp_traverse(state, top_k=2, seeds=1, neighbors=1, hops=1, agent=True)
    assert _titles(hand, items) == ["Marie Curie", "Warsaw"]
    assert chat.calls == 1 and "Marie Curie was born in Warsaw" in seen[0] and "Question: Marie Curie born" in seen[0]
    assert items[1].provenance["guide"] == "evidence"
    assert items[1].provenance["evidence"] == "We still need the capital of Poland, Warsaw."
    assert chat.requests[0].stage == "query.kgp.traverse"


def test_agent_empty_reply_falls_back_to_the_question(hand):
    chat = ScriptedChat(answers={"kgp_next": lambda user: "   "})
    state = _state(hand, "Marie Curie born.", chat)  # not the question above: its reply is in the cache
    items = kgp_traverse(state, top_k=2, seeds=1, neighbors=1, hops=1, agent=True)
    assert _titles(hand, items) == ["Marie Curie", "Pierre Curie"]
    assert items[1].provenance["guide"] == "question" and chat.calls == 1
    # No call for a chunk without unvisited neighbours.
    chat = ScriptedChat(answers={"kgp_next": lambda user: "anything"})
    state = _state(hand, "Lone Island people", chat)
    assert _titles(hand, kgp_traverse(state, agent=True)) == ["Lone Island"] and chat.calls == 0


def test_evidence_text_is_read_leniently():
    assert _evidence_text('{"evidence": "the birth place"}') == "the birth place"
    assert _evidence_text("```\nWho married Pierre?\n```") == "Who married Pierre?"
    assert _evidence_text("<think>long\nthoughts</think>\n Need  the year. ") == "Need the year."
    # One <think> reader for every reply (unirag.text.replies.strip_think): reasoning cut by
    # max_tokens is kept, since it is all the reply says.
    assert _evidence_text("<think>never closed") == "never closed"
    assert _evidence_text("") == ""


def test_errors(hand, tmp_path):
    state = _state(hand, "Marie Curie")
    with pytest.raises(MethodError):
        kgp_traverse(state, neighbors=0)
    with pytest.raises(MethodError):
        kgp_traverse(state, hops=-1)
    with pytest.raises(MethodError):
        kgp_traverse(state, seeds=0)
    state.query_vector = None
    with pytest.raises(MethodError):
        kgp_traverse(state)
    ws, settings, embedder = build_hand_graph(tmp_path / "no-pg")  # no chunk_links:pg artifact
    with pytest.raises(WorkspaceError, match="chunk_links:pg"):
        kgp_traverse(query_state(ws, settings, "Marie Curie", embedder))


def test_registered():
    spec = operator_registry()["kgp.traverse"]
    assert set(spec.requires) == {"chunk_tfidf", "chunk_links:pg", "chunk_vectors"}
    assert spec.needs == ("embedding",)
    assert dict(spec.params) == {"top_k": 4, "seeds": None, "neighbors": 3, "hops": 2, "agent": False}
    assert set(spec.requires) <= set(artifact_registry())


def test_other_embedding_model_is_refused(hand):
    from tests.fakes import HashEmbedder

    ws, settings, _, _ = hand
    with pytest.raises(WorkspaceError, match="another-model"):
        kgp_traverse(query_state(ws, settings, "Marie Curie born", HashEmbedder(name="another-model")))
