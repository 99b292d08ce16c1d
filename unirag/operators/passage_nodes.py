"""Graphs whose walk reaches passages themselves: HippoRAG 2 and LinearRAG.

HippoRAG ranks passages by the PPR mass of their entities (``chunk.aggregator``);
HippoRAG 2 and LinearRAG put the **passages in the PPR graph** as nodes, seeded with
their dense similarity to the question, so the walk mixes "which passages look like
the question" with "which passages the question's entities lead to".

* ``relationship.recognition`` (HippoRAG 2 §3, online retrieval, recognition memory): the chat model
  keeps the candidate facts that help answer the question.
* ``chunk.ppr`` (HippoRAG 2 §3, online retrieval): PPR over entities + passages from the surviving facts.
* ``node.activate`` (LinearRAG retrieval stage (i): relevant entity activation via semantic bridging).
* ``chunk.importance`` (LinearRAG stage (ii): passage retrieval via global importance aggregation).

Dense passage scores are over every passage (the ``chunk_vectors`` matrix), min-max
normalised as both papers' code does; the walks are sparse power iterations
(:func:`~unirag.operators.graph_index.pagerank_power`) on a transition matrix built
once per process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

from unirag.errors import MethodError
from unirag.operators.chunk import top_positive
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.graph_index import pagerank_power, pagerank_transposed, transition_matrix
from unirag.operators.node import agent_select, mark_items
from unirag.operators.question import real_chat
from unirag.operators.spec import Count, OperatorSpec
from unirag.operators.tri_graph_walk import PassageOccurrences, entity_bonus, spread_activation

if TYPE_CHECKING:
    from unirag.index.synonyms import SynonymEdges
    from unirag.index.tri_graph import TriGraph
    from unirag.operators.graph_index import GraphIndex
    from unirag.workspace import Workspace

Damping = Annotated[float, Field(ge=0.0, lt=1.0)]
Weight = Annotated[float, Field(ge=0.0)]
Share = Annotated[float, Field(ge=0.0, le=1.0)]


# -- shared ------------------------------------------------------------------------


def min_max(values: np.ndarray) -> np.ndarray:
    """Scores scaled to [0, 1] (all 0 when they are all equal)."""
    values = np.asarray(values, dtype=np.float64)
    if not values.size:
        return values
    low, span = values.min(), values.max() - values.min()
    return (values - low) / span if span > 0 else np.zeros_like(values)


def dense_passage_scores(state: QueryState, chunk_ids: list[str], origin: str) -> np.ndarray:
    """The question's cosine to every passage of ``chunk_ids`` (min-max normalised; a chunk
    without a vector scores 0), from the ``chunk_vectors`` matrix."""
    if state.query_vector is None:
        raise MethodError(f"{origin} needs the 'embedding' question conversion")
    ids, matrix = state.resources.vector_matrix("chunk_vectors", state.models.embedder.name)

    def rows() -> np.ndarray:
        row = {chunk_id: i for i, chunk_id in enumerate(ids)}
        return np.array([row.get(chunk_id, -1) for chunk_id in chunk_ids], dtype=np.int64)

    order = state.resources.derived(f"chunk_vector_rows:{origin}", rows)
    similarities = np.asarray(matrix @ np.asarray(state.query_vector, dtype=np.float32), dtype=np.float64)
    scores = np.zeros(len(chunk_ids))
    present = order >= 0
    scores[present] = min_max(similarities[order[present]])
    return scores


def ranked_passages(state: QueryState, chunk_ids: list[str], scores: np.ndarray, top_k: int,
                    operator: str, how: str) -> list[ContextItem]:
    """The top-k passages by ``scores`` as chunk items (``provenance["ranking"]`` = ``how``)."""
    hits = top_positive(scores, chunk_ids, top_k)
    state.chunks = dict(hits)
    return mark_items(state.resources.chunk_items(hits, operator), "ranking", how)


def entities_and_passages(entity_block: Any, incidence: Any) -> Any:
    """The transition matrix of the graph ``[[entity_block, incidence], [incidence.T, 0]]``:
    entities first, then passages (undirected)."""
    from scipy.sparse import bmat

    return transition_matrix(bmat([[entity_block, incidence], [incidence.T, None]], format="csr"))


# -- HippoRAG 2 --------------------------------------------------------------------------


def relationship_recognition(
    state: QueryState, top_k: Count = 5, mode: Literal["auto", "llm", "none"] = "auto",
) -> list[ContextItem]:
    """HippoRAG 2's recognition memory (§3, online retrieval): the chat model keeps, among the candidate
    facts ``state.relationships`` (the top ``relationship.vdb`` hits), those relevant to the
    question; the kept ones keep their scores. Writes ``state.relationships``.

    ``mode: auto`` asks the model only when a real chat endpoint is configured: the
    embedded SmolLM2-135M cannot judge facts, so offline the candidates pass unfiltered
    (the paper's "w/o filter" ablation) and items say ``recognition: skipped``. The
    selection prompt is the pool's ``agent_select``; a reply naming no fact keeps the
    top-k (HippoRAG 2 would fall back to dense retrieval).
    """
    graph = state.resources.graph()
    candidates = [(r, s) for r, s in state.relationships.items() if r in graph.rel_row][:max(top_k, 0)]
    ask = mode == "llm" or (mode == "auto" and real_chat(state.resources.settings))
    how = "skipped"
    if ask and candidates:
        rows = [graph.rel_row[r] for r, _ in candidates]
        texts = [graph.rel_text(row) for row in rows]
        aliases = [[rel_id, text] for (rel_id, _), text in zip(candidates, texts, strict=True)]
        candidates, by_llm = agent_select(state, candidates, texts, aliases, "facts", top_k,
                                          "relationship.recognition")
        how = "llm" if by_llm else "fallback"
    state.relationships = dict(candidates)
    return mark_items(state.resources.relationship_items(candidates, "relationship.recognition"), "recognition",
                      how)


def phrase_weights(graph: GraphIndex, facts: dict[str, float], link_top_k: int) -> np.ndarray:
    """Seed weights of the facts' subject and object phrases (HippoRAG 2 §3, online retrieval): each end gets
    the fact's score divided by the number of passages it occurs in (a phrase found
    everywhere says little), averaged over the facts naming it; only the ``link_top_k``
    best phrases are kept."""
    weights = np.zeros(graph.n_entities)
    occurs = np.zeros(graph.n_entities)
    passages = np.diff(graph.entity_chunks.indptr)
    for rel_id, score in facts.items():
        row = graph.rel_row.get(rel_id)
        if row is None:
            continue
        for end in (int(graph.rel_src[row]), int(graph.rel_dst[row])):
            weights[end] += score / passages[end] if passages[end] else score
            occurs[end] += 1
    weights = np.divide(weights, occurs, out=np.zeros_like(weights), where=occurs > 0)
    if np.count_nonzero(weights) > link_top_k:
        cut = np.sort(weights)[-link_top_k]
        keep = np.flatnonzero(weights >= cut)
        keep = keep[np.lexsort((keep, -weights[keep]))][:link_top_k]  # ties by row: deterministic
        kept = np.zeros_like(weights)
        kept[keep] = weights[keep]
        weights = kept
    return weights


def hipporag2_transition(graph: GraphIndex, synonyms: SynonymEdges | None) -> Any:
    """HippoRAG 2's graph (§3, offline indexing): phrase nodes joined by fact (relation) edges, weighted by
    the passages stating the fact, and synonym edges, weighted by similarity; passage nodes
    joined to the phrases they contain (context edges, weight 1)."""
    from scipy.sparse import coo_matrix

    n = graph.n_entities
    # A fact edge weighs the number of passages stating the fact (HippoRAG counts triples),
    # not the extractor's strength (1-10 for the LLM extractor): the walk must not prefer
    # phrase edges to context edges because a model rated a relation strongly.
    mentions = np.maximum(np.diff(graph.rel_chunks.indptr), 1).astype(np.float64)
    entity_block = coo_matrix((np.concatenate([mentions, mentions]),
                               (np.concatenate([graph.rel_src, graph.rel_dst]),
                                np.concatenate([graph.rel_dst, graph.rel_src]))), shape=(n, n)).tocsr()
    if synonyms is not None and synonyms.source.size:
        rows = np.array([graph.entity_row.get(e, -1) for e in synonyms.entity_ids], dtype=np.int64)
        a, b = rows[synonyms.source], rows[synonyms.target]
        keep = (a >= 0) & (b >= 0)
        a, b, w = a[keep], b[keep], synonyms.similarity[keep]
        entity_block = entity_block + coo_matrix((np.concatenate([w, w]), (np.concatenate([a, b]),
                                                                           np.concatenate([b, a]))), shape=(n, n))
    return entities_and_passages(entity_block.tocsr(), graph.entity_chunks.astype(np.float64))


def chunk_ppr(
    state: QueryState, top_k: Count = 4, link_top_k: Count = 5, passage_node_weight: Weight = 0.05,
    damping: Damping = 0.5, synonyms: bool = True,
) -> list[ContextItem]:
    """Top-k passages by personalised PageRank over phrases and passages (HippoRAG 2 §3, online retrieval).

    Restart vector: the facts' phrases (:func:`phrase_weights` of ``state.relationships``)
    and every passage at its min-max normalised dense score x ``passage_node_weight``
    (0.05: the paper's balance of the two). ``damping`` 0.5 as HippoRAG. With no fact
    left (none retrieved, or the recognition step kept none) the passages are ranked by
    dense score alone, as HippoRAG 2 does. ``synonyms`` adds the ``synonym_edges``.
    Writes ``state.entity_scores`` (the phrases' PPR) and ``state.chunks``.
    """
    graph = state.resources.graph()
    dense = dense_passage_scores(state, graph.chunk_ids, "chunk.ppr")
    phrases = phrase_weights(graph, state.relationships, link_top_k)
    if not phrases.any():
        return ranked_passages(state, graph.chunk_ids, dense, top_k, "chunk.ppr", "dense")
    transition = state.resources.derived(
        f"hipporag2_transition:{synonyms}",
        lambda: hipporag2_transition(graph, state.resources.synonym_edges() if synonyms else None))
    scores = pagerank_power(transition, np.concatenate([phrases, dense * passage_node_weight]), damping)
    state.entity_scores = scores[:graph.n_entities]
    return ranked_passages(state, graph.chunk_ids, scores[graph.n_entities:], top_k, "chunk.ppr", "ppr")


# -- LinearRAG ---------------------------------------------------------------------------


def node_activate(
    state: QueryState, max_iterations: Count = 3, top_sentences: Count = 1, threshold: Share = 0.5,
) -> list[ContextItem]:
    """Relevant entity activation by semantic bridging over the Tri-Graph (LinearRAG stage (i)).

    Each question entity (``entities_nlp``, lower-cased as LinearRAG's query NER) is linked
    to its most similar Tri-Graph entity, which is activated at that similarity. Then, for
    up to ``max_iterations - 1`` steps, every entity activated in the last step with a
    score of at least ``threshold`` takes its ``top_sentences`` unused sentences most similar
    to the question and activates the sentence's entities (itself included, as the authors'
    code) at (its score x the sentence's similarity) when that is still at least
    ``threshold``: a sentence bridges the question to an entity it does not name
    (:func:`~unirag.operators.tri_graph_walk.spread_activation`, which says where it departs
    from the authors' code and why).
    Writes ``state.entities`` (Tri-Graph entity -> summed activation, the PPR seeds) and
    ``state.activated`` (entity -> (last activation, step); every linked seed, even one
    whose similarity is not positive). Emits nothing.
    """
    tri = state.resources.tri_graph()
    names = [name.lower() for name in dict.fromkeys(n.strip() for n in state.question_entities) if name]
    state.entities, state.activated = {}, {}
    if not names or not tri.entity_names:
        return []
    if state.query_vector is None:
        raise MethodError("node.activate needs the 'embedding' question conversion")
    question_vectors = state.models.embedder.embed(names, stage="query.embed").vectors
    linked = tri.entity_vectors @ np.ascontiguousarray(question_vectors.T)  # a contiguous operand: 6x faster gemm
    rows = np.argmax(linked, axis=0)
    entity_sentence = state.resources.derived("tri_graph_entity_sentence", lambda: tri.entity_sentence)
    sentence_similarity = tri.sentence_vectors @ np.asarray(state.query_vector, dtype=np.float32)
    activation = spread_activation(rows, linked[rows, np.arange(linked.shape[1])], sentence_similarity,
                                   entity_sentence, tri.sentence_entity, max_iterations, top_sentences, threshold)
    ids = tri.entity_ids
    state.entities = {ids[row]: float(activation.weights[row]) for row in np.flatnonzero(activation.weights > 0).tolist()}
    state.activated = {ids[row]: value for row, value in activation.last.items()}
    return []


def linearrag_transition(tri: TriGraph, workspace: Workspace, adjacent_passages: bool) -> Any:
    """The transition matrix of LinearRAG's PPR graph: entities, then passages.

    Passage -- entity edges weigh the entity's share of the passage's mentions
    (``add_entity_to_passage_edges``). ``adjacent_passages`` adds the authors'
    ``add_adjacent_passage_edges`` (weight 1) in the form that carries its meaning here:
    between consecutive chunks of one document. The authors' ``run.py`` prefixes every
    passage with its position in the dataset's chunk file (``"12:..."``) and joins
    positions i and i+1, which for a chunked document are neighbouring chunks and for
    a file of independent passages (2Wiki, HotpotQA, MuSiQue) only file order; a corpus
    of one passage per document therefore gets no such edge, as no chunk of ours has a
    position prefix."""
    from scipy.sparse import bmat, coo_matrix

    incidence = tri.passage_weights()
    passages = None
    if adjacent_passages and tri.chunk_ids:
        chunks = workspace.corpus.get_chunks(tri.chunk_ids)
        row = {chunk_id: i for i, chunk_id in enumerate(tri.chunk_ids)}
        place = {(c.doc_id, c.index): row[c.id] for c in chunks.values()}
        pairs = [(place[key], place[(key[0], key[1] + 1)]) for key in sorted(place) if (key[0], key[1] + 1) in place]
        if pairs:
            a, b = np.array(pairs, dtype=np.int64).T
            n = len(tri.chunk_ids)
            passages = coo_matrix((np.ones(2 * a.size), (np.concatenate([a, b]), np.concatenate([b, a]))),
                                  shape=(n, n)).tocsr()
    if passages is None:
        return entities_and_passages(None, incidence)
    return transition_matrix(bmat([[None, incidence], [incidence.T, passages]], format="csr"))


def chunk_importance(
    state: QueryState, top_k: Count = 4, passage_ratio: Weight = 1.5, passage_node_weight: Weight = 0.05,
    damping: Damping = 0.5, adjacent_passages: bool = True,
) -> list[ContextItem]:
    """Top-k passages by global importance aggregation over the Tri-Graph (LinearRAG stage (ii)).

    Restart vector: the activated entities at their summed activation (``node.activate``),
    and every passage at ``(passage_ratio x dense + log(1 + bonus)) x passage_node_weight``,
    where ``dense`` is its min-max normalised similarity to the question and ``bonus``
    sums, over the activated entities, activation x log(1 + occurrences) / step, the
    occurrences being those of the entity's name in the passage's text, counted in every
    passage as the authors' code does (a case-insensitive substring count:
    :class:`~unirag.operators.tri_graph_walk.PassageOccurrences`). A negative or NaN restart
    weight counts 0 (the authors' ``run_ppr``). PPR (``damping`` 0.5) runs over entities
    and passages joined by the Tri-Graph's passage -- entity edges (each entity's share of
    the passage's mentions) and, with ``adjacent_passages``, between consecutive chunks of a
    document (:func:`linearrag_transition`). Without a question entity linked (no ``state.activated``),
    passages are ranked by dense score (LinearRAG's fallback).
    Defaults from the authors' code (1.5, 0.05, 0.5). Writes ``state.chunks``.
    """
    tri = state.resources.tri_graph()
    dense = dense_passage_scores(state, tri.chunk_ids, "chunk.importance")
    row_of = state.resources.derived("tri_graph_entity_row", lambda: {e: i for i, e in enumerate(tri.entity_ids)})
    seeds = np.zeros(len(tri.entity_ids))
    for entity, weight in state.entities.items():
        if entity in row_of:
            seeds[row_of[entity]] = weight
    last = {row_of[e]: value for e, value in state.activated.items() if e in row_of}
    if not last and not seeds.any():
        return ranked_passages(state, tri.chunk_ids, dense, top_k, "chunk.importance", "dense")
    occurrences = state.resources.derived("linearrag_passage_occurrences", lambda: PassageOccurrences.of(
        [chunk.indexed_text if chunk else "" for chunk in map(
            state.resources.workspace.corpus.get_chunks(tri.chunk_ids).get, tri.chunk_ids)]))
    bonus = entity_bonus(last, tri.entity_names, occurrences, len(tri.chunk_ids))
    with np.errstate(invalid="ignore"):
        passages = (passage_ratio * dense + np.log1p(bonus)) * passage_node_weight
    restart = np.concatenate([seeds, passages])
    restart = np.where(np.isnan(restart) | (restart < 0), 0.0, restart)
    transposed = state.resources.derived(
        f"linearrag_transition_transposed:{adjacent_passages}",
        lambda: linearrag_transition(tri, state.resources.workspace, adjacent_passages).T.tocsr())
    scores = pagerank_transposed(transposed, restart, damping)
    return ranked_passages(state, tri.chunk_ids, scores[len(tri.entity_ids):], top_k, "chunk.importance", "ppr")


OPERATORS = (
    OperatorSpec(
        "relationship.recognition", "relationship", relationship_recognition,
        "HippoRAG 2's recognition memory: the chat model keeps the relevant candidate facts (offline: all)",
        requires=("graph",),
    ),
    OperatorSpec(
        "chunk.ppr", "chunk", chunk_ppr,
        "HippoRAG 2: PPR over phrases and passages, seeded by the facts' phrases and dense passage scores",
        requires=("graph", "chunk_vectors"), needs=("embedding",),
        requires_fn=lambda params: ("synonym_edges",) if params.get("synonyms", True) else (),
    ),
    OperatorSpec(
        "node.activate", "node", node_activate,
        "LinearRAG: question entities linked to the Tri-Graph, activated further through their sentences",
        requires=("tri_graph",), needs=("entities", "embedding"),
    ),
    OperatorSpec(
        "chunk.importance", "chunk", chunk_importance,
        "LinearRAG: PPR over Tri-Graph entities and passages, seeded by activations and dense scores",
        requires=("tri_graph", "chunk_vectors"), needs=("embedding",),
    ),
)
