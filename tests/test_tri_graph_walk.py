"""LinearRAG's array code against a plain loop transcription of the authors' algorithm.

The reference functions below are the loop version (the authors' BFS ``calculate_entity_scores``
and ``calculate_passage_scores`` of DEEP-PolyU/LinearRAG, as node.activate / chunk.importance
ran them before they were vectorised), kept here as the oracle: the array code must give the
same activations and the same passage rankings, on a hand-built Tri-Graph and on the Tri-Graph
of the HotpotQA sample in tests/data.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, fake_stack, make_settings
from tests.graph_fixture import query_state
from tests.ranking import assert_same_ranking
from unirag.artifacts.registry import BuildContext, ensure_artifacts
from unirag.errors import UniragError
from unirag.llm.base import UsageLedger
from unirag.operators.graph_index import pagerank_power
from unirag.operators.passage_nodes import chunk_importance, dense_passage_scores, entities_and_passages, node_activate
from unirag.operators.question import extract_entities_nlp
from unirag.operators.tri_graph_walk import PassageOccurrences, entity_bonus, spread_activation
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

pytestmark = pytest.mark.numeric  # the vectorised walk's floats compared with the loop's, within 1e-12 / near-ties

HOTPOT = SAMPLE_DATASETS / "hotpotqa"


# -- the reference: loops, one entity and one sentence at a time ----------------------------------


def reference_activation(seed_rows, seed_scores, similarity, sentence_entity, max_iterations=3, top_sentences=1,
                         threshold=0.5):
    entity_sentence = sentence_entity.T.tocsr()
    weights = np.zeros(sentence_entity.shape[1])
    current: dict[int, tuple[float, int]] = {}
    for row, score in zip(seed_rows, seed_scores):
        row, score = int(row), float(score)
        weights[row] = max(weights[row], score)
        current[row] = (max(score, current.get(row, (score, 1))[0]), 1)
    activated = dict(current)
    used: set[int] = set()
    step = 1
    while current and step < max_iterations:
        reached: dict[int, tuple[float, int]] = {}
        for row, (score, _) in current.items():
            if score < threshold:
                continue
            sentences = [s for s in entity_sentence[row].indices.tolist() if s not in used]
            for sentence in sorted(sentences, key=lambda s: (-similarity[s], s))[:top_sentences]:
                used.add(sentence)
                bridged = score * float(similarity[sentence])
                if bridged < threshold:
                    continue
                for other in sentence_entity[sentence].indices.tolist():
                    weights[other] += bridged
                    reached[other] = (bridged, step + 1)
        activated.update(reached)
        current = reached
        step += 1
    return weights, activated


def reference_bonus(activated, names, texts):
    bonus = np.zeros(len(texts))
    for p, text in enumerate(texts):
        lowered = text.lower()
        for row, (score, step) in activated.items():
            occurrences = lowered.count(names[row].lower())
            if occurrences > 0:
                bonus[p] += score * np.log1p(occurrences) / max(step, 1)
    return bonus


# -- a hand-built Tri-Graph -------------------------------------------------------------------------


def _random_tri_graph(seed: int, entities: int = 40, sentences: int = 90):
    rng = np.random.default_rng(seed)
    links = rng.random((sentences, entities)) < 0.06
    links[np.arange(sentences), rng.integers(0, entities, sentences)] = True  # each sentence names one at least
    similarity = rng.uniform(0.45, 1.0, sentences).astype(np.float32)
    similarity[rng.integers(0, sentences, 10)] = similarity[0]  # ties between sentences
    return csr_matrix(links.astype(np.float64)), similarity, rng


@pytest.mark.parametrize("seed", range(12))
def test_spread_activation_equals_the_loop(seed: int) -> None:
    sentence_entity, similarity, rng = _random_tri_graph(seed)
    seed_rows = rng.integers(0, sentence_entity.shape[1], 4)
    seed_rows[1] = seed_rows[0]  # one entity linked by two question entities
    seed_scores = rng.uniform(0.75, 1.0, 4).astype(np.float32)
    for top_sentences, iterations in ((1, 3), (2, 4)):
        want_weights, want_last = reference_activation(seed_rows, seed_scores, similarity, sentence_entity,
                                                       iterations, top_sentences)
        got = spread_activation(seed_rows, seed_scores, similarity, sentence_entity.T.tocsr(), sentence_entity,
                                iterations, top_sentences, 0.5)
        np.testing.assert_allclose(got.weights, want_weights, rtol=1e-12, atol=0)
        assert got.last.keys() == want_last.keys()
        for row, (score, step) in want_last.items():
            assert got.last[row][1] == step and got.last[row][0] == pytest.approx(score, rel=1e-12)
        assert len(want_last) > len(set(seed_rows.tolist()))  # the walk did reach further entities


def test_passage_bonus_counts_names_in_every_passage_like_str_count() -> None:
    texts = ["Apollo 11 landed. APOLLO 11 again; apollo 11!", "Apollonia is not Apollo 11", "nothing here",
             "Neil Armstrong flew Apollo 11", ""]
    names = ["Apollo 11", "apollo", "Neil Armstrong", "absent"]
    last = {0: (0.9, 1), 1: (0.6, 2), 2: (0.7, 2), 3: (0.8, 1)}
    got = entity_bonus(last, names, PassageOccurrences.of(texts), len(texts))
    np.testing.assert_allclose(got, reference_bonus(last, names, texts), rtol=1e-12)
    assert got[1] > 0  # "apollo" is counted inside "Apollonia", as the authors' substring count does
    assert got[2] == 0 and got[4] == 0


# -- the Tri-Graph of tests/data ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):
    ws = Workspace.init(tmp_path_factory.mktemp("tri-walk") / "ws")
    settings = make_settings(ws.root, graph__extractor="nlp")
    embedder = HashEmbedder()
    stack = fake_stack(settings, ws, embedder=embedder)
    run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, stack, graphs=[])
    try:
        ensure_artifacts(BuildContext(ws, settings, stack.accounted(UsageLedger()), Progress()),
                         ["tri_graph", "chunk_vectors"])
    except UniragError as exc:  # no spaCy model
        pytest.skip(str(exc))
    questions = [q["question"] for q in json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))]
    titles = sorted({chunk.title for chunk in ws.corpus.iter_chunks() if chunk.title})
    yield ws, settings, embedder, questions + [f"Who or what is {title}?" for title in titles[:16]]
    ws.close()


def _reference_ranking(state, top_k: int) -> list[tuple[str, float]]:
    """chunk.importance's ranking computed by the loops above."""
    tri = state.resources.tri_graph()
    names = [n.lower() for n in dict.fromkeys(n.strip() for n in state.question_entities) if n]
    linked = tri.entity_vectors @ state.models.embedder.embed(names).vectors.T
    rows = np.argmax(linked, axis=0)
    similarity = tri.sentence_vectors @ np.asarray(state.query_vector, dtype=np.float32)
    weights, activated = reference_activation(rows, linked[rows, np.arange(len(names))], similarity,
                                              tri.sentence_entity)
    chunks = state.resources.workspace.corpus.get_chunks(tri.chunk_ids)
    bonus = reference_bonus(activated, tri.entity_names, [chunks[c].indexed_text for c in tri.chunk_ids])
    dense = dense_passage_scores(state, tri.chunk_ids, "reference")
    restart = np.concatenate([np.maximum(weights, 0), (1.5 * dense + np.log1p(bonus)) * 0.05])
    scores = pagerank_power(entities_and_passages(None, tri.passage_weights()), restart, 0.5)[len(tri.entity_ids):]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [(tri.chunk_ids[i], float(scores[i])) for i in order[:top_k] if scores[i] > 0]


def test_linearrag_ranks_the_sample_as_the_loop_version(sample) -> None:
    ws, settings, embedder, questions = sample
    walked = 0
    for question in questions:
        state = query_state(ws, settings, question, embedder)
        extract_entities_nlp(state)
        node_activate(state)
        items = chunk_importance(state, top_k=8)
        if items[0].provenance["ranking"] != "ppr":
            continue
        walked += 1
        ranking = _reference_ranking(state, 9)
        want, past = ranking[:8], (ranking[8][1] if len(ranking) > 8 else None)
        got = [(item.id, item.score) for item in items]
        assert_same_ranking(got, want, tol=1e-9 * want[0][1], past=past, label=question)
    assert walked >= len(questions) // 2


def test_adjacent_passages_join_consecutive_chunks_of_one_document() -> None:
    from types import SimpleNamespace

    from unirag.index.tri_graph import TriGraph
    from unirag.operators.passage_nodes import linearrag_transition

    # Entities e0, e1; chunks c0, c1 (document a, in order), c2 (document b).
    entity_passage = csr_matrix(np.array([[2.0, 1.0, 0.0], [2.0, 0.0, 1.0]]))
    tri = TriGraph(["e0", "e1"], ["E0", "E1"], ["c0", "c1", "c2"], entity_passage, csr_matrix((0, 2)),
                   np.zeros((2, 4), dtype=np.float32), np.zeros((0, 4), dtype=np.float32))
    chunks = {"c0": SimpleNamespace(id="c0", doc_id="a", index=0), "c1": SimpleNamespace(id="c1", doc_id="a", index=1),
              "c2": SimpleNamespace(id="c2", doc_id="b", index=0)}
    workspace = SimpleNamespace(corpus=SimpleNamespace(get_chunks=lambda ids: {i: chunks[i] for i in ids}))
    walk = linearrag_transition(tri, workspace, True).toarray()
    # c0 (row 2): e0 and e1 at their shares 1/2 each, and c1 at weight 1 (the authors' 1.0).
    np.testing.assert_allclose(walk[2], [0.25, 0.25, 0.0, 0.5, 0.0])
    np.testing.assert_allclose(walk[3], [0.5, 0.0, 0.5, 0.0, 0.0])  # c1: e0 (its only entity), c0
    assert walk[4, 2] == walk[4, 3] == 0  # c2 is another document's: no edge
    plain = linearrag_transition(tri, workspace, False).toarray()
    np.testing.assert_allclose(plain, entities_and_passages(None, tri.passage_weights()).toarray())
    assert plain[2, 3] == 0
