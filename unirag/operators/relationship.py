"""Relationship operators (survey §6.1, relationship type): VDB, Onehop, Aggregator, Agent.

Each reads the state's candidate maps and writes ``state.relationships``,
best first, ties broken by id (the ranking and LLM-selection helpers are the
node operators'). Onehop and Aggregator keep every scored relationship when
``top_k <= 0``.
"""

from __future__ import annotations

import numpy as np

from unirag.operators.context import ContextItem, QueryState
from unirag.operators.node import (
    QuerySource,
    agent_select,
    mark_items,
    query_needs,
    query_vector,
    rank,
    seed_weights,
    sort_hits,
    sum_by_column,
)
from unirag.operators.spec import Count, CountOrZero, OperatorSpec


def relationship_vdb(state: QueryState, top_k: Count = 4, query: QuerySource = "question",
                     normalise: bool = False) -> list[ContextItem]:
    """Top-k relationships by vector similarity (survey §6.1 relationship VDB;
    G-retriever, LightRAG global retrieval; HippoRAG 2's query-to-triple step).

    Searches ``relation_vectors`` with the question's embedding (``query:
    question``, needs the ``embedding`` conversion) or LightRAG's high-level
    keywords joined and embedded (``query: keywords_high``, needs the
    ``keywords`` conversion). ``normalise`` rescales the scores min-max over
    every relationship's similarity (HippoRAG 2 weighs facts against dense
    passage scores on that scale). Writes ``state.relationships``.
    """
    vector = query_vector(state, query, "relationship.vdb")
    vectors = state.resources.vectors("relation_vectors", embedding_model=state.models.embedder.name)
    hits = sort_hits(vectors.search(vector, top_k)[0]) if top_k > 0 else []
    if normalise and hits:
        _, matrix = state.resources.vector_matrix("relation_vectors", state.models.embedder.name)
        similarities = np.asarray(matrix @ np.asarray(vector, dtype=np.float32), dtype=np.float64)
        low, span = float(similarities.min()), float(similarities.max() - similarities.min())
        hits = [(rel_id, (score - low) / span if span > 0 else 0.0) for rel_id, score in hits]
    state.relationships = dict(hits)
    return state.resources.relationship_items(hits, "relationship.vdb")


def relationship_onehop(state: QueryState, top_k: CountOrZero = 4, new_only: bool = False) -> list[ContextItem]:
    """Relationships incident to the candidate entities (survey §6.1 Onehop;
    LightRAG local retrieval, GraphRAG local search, ToG).

    A relationship scores the sum of the scores of its ends among
    ``state.entities`` (a relationship between two candidates counts both);
    ties go to the heavier relationship (more supporting mentions), then the
    id. ``new_only`` leaves out relationships already in the context (ToG's
    relation exploration in a later round looks past the paths it has).
    Writes ``state.relationships``.
    """
    graph = state.resources.graph()
    rows, weights = seed_weights(graph, state.entities)
    if rows.size == 0:
        state.relationships = {}
        return []
    rels, scores = sum_by_column(graph.entity_rel, rows, weights, use_data=False)
    if new_only:
        seen = [graph.rel_row[i.id] for i in state.items if i.kind == "relationship" and i.id in graph.rel_row]
        fresh = ~np.isin(rels, np.array(seen, dtype=rels.dtype))
        rels, scores = rels[fresh], scores[fresh]
    hits = rank(rels, scores, graph.rel_ids, top_k, tiebreak=graph.rel_weight[rels])
    state.relationships = dict(hits)
    return state.resources.relationship_items(hits, "relationship.onehop")


def relationship_aggregator(state: QueryState, top_k: CountOrZero = 4) -> list[ContextItem]:
    """Relationships scored by the PPR scores of their two ends (survey §6.1
    Aggregator; HippoRAG, FastGraphRAG).

    Reads ``state.entity_scores`` (the full vector written by ``node.ppr``);
    a relationship scores ``score[source] + score[target]``; those scoring 0
    are dropped. Writes ``state.relationships``.
    """
    if state.entity_scores is None:
        state.relationships = {}
        return []
    graph = state.resources.graph()
    scores = np.asarray(state.entity_scores, dtype=np.float64)
    if scores.shape != (graph.n_entities,) or not graph.rel_ids:
        state.relationships = {}
        return []
    totals = scores[graph.rel_src] + scores[graph.rel_dst]
    hits = rank(np.arange(len(graph.rel_ids)), totals, graph.rel_ids, top_k, positive_only=True)
    state.relationships = dict(hits)
    return state.resources.relationship_items(hits, "relationship.aggregator")


def relationship_agent(state: QueryState, top_k: Count = 4, max_candidates: Count = 30) -> list[ContextItem]:
    """The LLM picks up to ``top_k`` relationships useful for the question from
    the candidates ``state.relationships`` (survey §6.1 relationship Agent; ToG).

    The best ``max_candidates`` candidates are listed (``source relation
    target: description``); the reply is read leniently (numbers or ids).
    When it names none, the top-k candidates are kept. The chosen keep their
    candidate scores. Writes ``state.relationships``; items carry
    ``provenance["agent"]`` = ``llm`` or ``fallback``.
    """
    graph = state.resources.graph()
    candidates = [(r, s) for r, s in state.relationships.items() if r in graph.rel_row][: max(max_candidates, 0)]
    if not candidates or top_k <= 0:
        state.relationships = {}
        return []
    rows = [graph.rel_row[r] for r, _ in candidates]
    texts = [graph.rel_text(row) for row in rows]
    aliases = [
        [rel_id, f"{graph.names[graph.rel_src[row]]} {graph.rel_relation[row]} {graph.names[graph.rel_dst[row]]}"]
        for (rel_id, _), row in zip(candidates, rows, strict=True)
    ]
    hits, by_llm = agent_select(state, candidates, texts, aliases, "relationships", top_k, "relationship.agent")
    state.relationships = dict(hits)
    return mark_items(state.resources.relationship_items(hits, "relationship.agent"), "agent",
                 "llm" if by_llm else "fallback")


OPERATORS = (
    OperatorSpec(
        "relationship.vdb", "relationship", relationship_vdb,
        "top-k relationships by vector similarity to the question (or LightRAG's high-level keywords)",
        requires=("graph", "relation_vectors"), needs=("embedding",), needs_fn=query_needs,
    ),
    OperatorSpec(
        "relationship.onehop", "relationship", relationship_onehop,
        "relationships incident to the candidate entities, by the scores of their ends",
        requires=("graph",),
    ),
    OperatorSpec(
        "relationship.aggregator", "relationship", relationship_aggregator,
        "relationships by the sum of their ends' PPR scores",
        requires=("graph",),
    ),
    OperatorSpec(
        "relationship.agent", "relationship", relationship_agent,
        "the LLM picks the relevant relationships among the candidates",
        requires=("graph",),
    ),
)
