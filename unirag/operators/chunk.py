"""Chunk operators (survey §6.1, chunk type; appendix B.1 for VDB).

* ``chunk.vdb`` / ``chunk.bm25``: chunks straight from the question.
* ``chunk.aggregator`` (HippoRAG, FastGraphRAG): chunk scores aggregated from
  entity (PPR) or relationship scores through the incidence matrices.
* ``chunk.fromrel`` (LightRAG global/hybrid): the chunks the candidate
  relationships were extracted from.
* ``chunk.occurrence`` (GraphRAG local, LightRAG local/hybrid): the candidate
  entities' chunks, ranked by how many candidate relationships they contain
  whole (both endpoints).

Every graph operator writes ``state.chunks`` (chunk id -> score, best first)
and returns chunk items; ties are broken by chunk id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from unirag.errors import MethodError
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.spec import Count, OperatorSpec

if TYPE_CHECKING:
    from unirag.operators.graph_index import GraphIndex


def chunk_vdb(state: QueryState, top_k: Count = 4) -> list[ContextItem]:
    """Top-k chunks by cosine similarity to the question (VanillaRAG, survey §7.1)."""
    if state.query_vector is None:
        raise MethodError("chunk.vdb needs the 'embedding' question conversion")
    index = state.resources.chunk_hnsw(state.models.embedder.name)
    hits = index.search(state.query_vector, top_k)[0]
    return state.resources.chunk_items(hits, "chunk.vdb")


def chunk_bm25(state: QueryState, top_k: Count = 4) -> list[ContextItem]:
    """Top-k chunks by BM25 over the question's terms."""
    hits = state.resources.chunk_bm25.search(state.question, top_k)
    return state.resources.chunk_items(hits, "chunk.bm25")


# -- helpers -------------------------------------------------------------------


def top_positive(scores: np.ndarray, ids: list[str], k: int) -> list[tuple[str, float]]:
    """The k best ``(id, score)`` with a positive score, best first, ties by id.

    ``argpartition`` first, so a PPR vector over 100k chunks sorts only the
    few at or above the k-th score (ties at the cut-off all enter the sort).
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    positive = np.flatnonzero(scores > 0)
    if k <= 0 or not len(positive):
        return []
    if len(positive) > k:
        cut = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
        positive = positive[scores[positive] >= cut]
    ranked = sorted(positive.tolist(), key=lambda i: (-scores[i], ids[i]))[:k]
    return [(ids[i], float(scores[i])) for i in ranked]


def _score_vector(row_of: dict[str, int], scored: dict[str, float], size: int) -> np.ndarray:
    """A dense score vector over graph rows from an id -> score map (unknown ids skipped)."""
    vector = np.zeros(size, dtype=np.float64)
    for key, score in scored.items():
        row = row_of.get(key)
        if row is not None:
            vector[row] = float(score)
    return vector


def _emit(state: QueryState, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
    state.chunks = dict(scored)
    return state.resources.chunk_items(scored, operator)


# -- aggregator ----------------------------------------------------------------


def chunk_aggregator(
    state: QueryState, top_k: Count = 4, by: Literal["entities", "relationships"] = "entities",
) -> list[ContextItem]:
    """Top-k chunks by aggregated graph scores (HippoRAG; survey §6.1 chunk ① Aggregator).

    ``by: entities`` (HippoRAG's own passage scoring): a chunk's score is the
    sum of ``state.entity_scores`` (the PPR vector of ``node.ppr``) over the
    entities extracted from it, ``entity_chunks.T @ ppr``. Without a PPR
    vector, the scores of ``state.entities`` are summed instead.

    ``by: relationships`` (the survey's wording): the sum of the scores of the
    relationships of ``state.relationships`` (e.g. from
    ``relationship.aggregator``) extracted from it, ``rel_chunks.T @ r``.

    Reads the state, writes ``state.chunks``; chunks with score 0 are not returned.
    """
    graph = state.resources.graph()
    if by == "entities":
        scores = state.entity_scores
        if scores is None:
            if not state.entities:
                return []
            scores = _score_vector(graph.entity_row, state.entities, graph.n_entities)
        scores = np.asarray(scores, dtype=np.float64).ravel()
        if scores.shape[0] != graph.n_entities:
            raise MethodError(
                f"chunk.aggregator: entity_scores has {scores.shape[0]} entries for {graph.n_entities} entities"
            )
        chunk_scores = graph.entity_chunks.T @ scores
    elif by == "relationships":
        if not state.relationships:
            return []
        chunk_scores = graph.rel_chunks.T @ _score_vector(graph.rel_row, state.relationships, len(graph.rel_ids))
    else:
        raise MethodError(f"chunk.aggregator: 'by' must be 'entities' or 'relationships', not {by!r}")
    return _emit(state, top_positive(chunk_scores, graph.chunk_ids, top_k), "chunk.aggregator")


# -- from relationships ------------------------------------------------------------


def chunk_fromrel(state: QueryState, top_k: Count = 4) -> list[ContextItem]:
    """The chunks that "contain" the candidate relationships (LightRAG global; survey §6.1 chunk ② FromRel).

    A chunk contains a relationship when the relationship was extracted from
    it (``rel_chunks``). Chunks are ranked by the best score among the
    ``state.relationships`` they contain (LightRAG keeps the order of the
    relationships), then by how many of them they contain, then by id. The
    score is that best relationship score. Writes ``state.chunks``.
    """
    if not state.relationships:
        return []
    graph = state.resources.graph()
    best: dict[int, float] = {}
    count: dict[int, int] = {}
    for rel_id, score in state.relationships.items():  # the few candidates, not the graph
        row = graph.rel_row.get(rel_id)
        if row is None:
            continue
        for chunk in graph.rel_chunks[row].indices.tolist():
            best[chunk] = max(best.get(chunk, -np.inf), float(score))
            count[chunk] = count.get(chunk, 0) + 1
    ranked = sorted(best, key=lambda c: (-best[c], -count[c], graph.chunk_ids[c]))[: max(top_k, 0)]
    return _emit(state, [(graph.chunk_ids[c], best[c]) for c in ranked], "chunk.fromrel")


# -- occurrence -------------------------------------------------------------------


def occurrence_counts(graph: GraphIndex, rel_rows: np.ndarray) -> np.ndarray:
    """Per chunk, how many of the relationships ``rel_rows`` have both endpoints
    extracted from it: ``sum_r entity_chunks[src_r] * entity_chunks[dst_r]``."""
    if not len(rel_rows):
        return np.zeros(len(graph.chunk_ids))
    both = graph.entity_chunks[graph.rel_src[rel_rows]].multiply(graph.entity_chunks[graph.rel_dst[rel_rows]])
    return np.asarray(both.sum(axis=0)).ravel()


def chunk_occurrence(state: QueryState, top_k: Count = 4) -> list[ContextItem]:
    """Top-k chunks of the candidate entities by relationship occurrence
    (GraphRAG local, LightRAG local; survey §6.1 chunk ③ Occurrence).

    Candidates: the chunks of ``state.entities`` (``entity_chunks``; the
    endpoints of ``state.relationships`` when there are no entities). Score:
    the number of ``state.relationships`` whose two entities both occur in
    the chunk (the survey: "counting the number of times it contains both
    entities in a relationship"). Ties (including score 0) go to the chunk of
    the better-ranked entity (LightRAG's and GraphRAG's order), then by id.
    Writes ``state.chunks``.
    """
    graph = state.resources.graph()
    rel_rows = np.array([graph.rel_row[r] for r in state.relationships if r in graph.rel_row], dtype=np.int64)
    entity_rows = graph.rows_of(list(state.entities))
    if not len(entity_rows) and len(rel_rows):
        ends = np.stack([graph.rel_src[rel_rows], graph.rel_dst[rel_rows]], axis=1).ravel()
        entity_rows = ends[np.sort(np.unique(ends, return_index=True)[1])]  # first-seen order
    if not len(entity_rows):
        return []
    entity_rank: dict[int, int] = {}
    for rank, row in enumerate(entity_rows.tolist()):
        for chunk in graph.entity_chunks[row].indices.tolist():
            entity_rank.setdefault(chunk, rank)
    counts = occurrence_counts(graph, rel_rows)
    ranked = sorted(entity_rank, key=lambda c: (-counts[c], entity_rank[c], graph.chunk_ids[c]))[: max(top_k, 0)]
    return _emit(state, [(graph.chunk_ids[c], float(counts[c])) for c in ranked], "chunk.occurrence")


OPERATORS = (
    OperatorSpec(
        "chunk.vdb", "chunk", chunk_vdb, "top-k chunks by vector similarity",
        requires=("chunk_vectors",), needs=("embedding",),
    ),
    OperatorSpec(
        "chunk.bm25", "chunk", chunk_bm25, "top-k chunks by BM25 score",
        requires=("chunk_bm25",),
    ),
    OperatorSpec(
        "chunk.aggregator", "chunk", chunk_aggregator,
        "top-k chunks by summed entity (PPR) or relationship scores",
        requires=("graph",),
    ),
    OperatorSpec(
        "chunk.fromrel", "chunk", chunk_fromrel,
        "chunks the candidate relationships were extracted from, by relationship score then count",
        requires=("graph",),
    ),
    OperatorSpec(
        "chunk.occurrence", "chunk", chunk_occurrence,
        "the candidate entities' chunks, by how many candidate relationships they contain whole",
        requires=("graph",),
    ),
)
