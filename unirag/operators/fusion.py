"""Fusion: one ranking from the ranked lists of several retrieval steps.

* ``chunk.rrf``: reciprocal rank fusion (Cormack, Clarke & Büttcher 2009, "Reciprocal Rank
  Fusion outperforms Condorcet and individual Rank Learning Methods", SIGIR '09) of every
  chunk list the earlier operator calls of the query returned, the hybrid (dense + BM25)
  retriever's usual merge.

Why ranks and not scores: a cosine and a BM25 score live on different scales (BM25 is
unbounded and grows with the question's length), so any weighted sum needs tuning per corpus;
RRF reads only each list's order and needs none. The lists come from
``QueryState.ranked_lists``, which the runner fills with every call's result (``emit: false``
calls too: a hybrid spec keeps its two candidate lists out of the context and emits only the
fused one).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from unirag.operators.context import ContextItem, QueryState
from unirag.operators.spec import CountOrZero, OperatorSpec

RRF_K = 60
"""Cormack et al.'s constant: it damps the weight of the very first ranks, so one list's top
hit does not outvote agreement between lists; 60 is their value and every library's default."""

RrfK = Annotated[int, Field(ge=0)]


def reciprocal_rank_fusion(lists: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """``(id, score)`` best first, ``score(d) = sum over lists of 1 / (k + rank of d)`` (ranks from 1;
    a list that misses ``d`` adds nothing). Ties go to the better best rank, then to the id, so the
    order never depends on which list came first. An id twice in one list counts at its first rank."""
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranked in lists:
        seen: set[str] = set()
        for rank, key in enumerate(ranked, start=1):
            if key in seen:
                continue
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            best_rank[key] = min(best_rank.get(key, rank), rank)
    order = sorted(scores, key=lambda key: (-scores[key], best_rank[key], key))
    return [(key, scores[key]) for key in order]


def chunk_rrf(state: QueryState, top_k: CountOrZero = 4, k: RrfK = RRF_K) -> list[ContextItem]:
    """Top-k chunks by reciprocal rank fusion of the chunk lists of every earlier operator call
    (hybrid: ``chunk.vdb`` and ``chunk.bm25``, each ``emit: false``). ``top_k: 0``: every fused
    chunk. Provenance keeps each chunk's rank in each list (``ranks``: operator -> rank).
    Writes ``state.chunks``."""
    lists: list[list[str]] = []
    ranks: dict[str, dict[str, int]] = {}
    for operator, found in state.ranked_lists:
        chunk_ids = [item.id for item in found if item.kind == "chunk"]
        if not chunk_ids:
            continue
        lists.append(chunk_ids)
        for rank, chunk_id in enumerate(chunk_ids, start=1):
            ranks.setdefault(chunk_id, {}).setdefault(operator, rank)
    fused = reciprocal_rank_fusion(lists, k)
    if top_k:
        fused = fused[:top_k]
    state.chunks = dict(fused)
    items = state.resources.chunk_items(fused, "chunk.rrf")
    for item in items:
        item.provenance["ranks"] = ranks.get(item.id, {})
    return items


OPERATORS = (
    OperatorSpec(
        "chunk.rrf", "chunk", chunk_rrf,
        "top-k chunks by reciprocal rank fusion (k = 60) of the earlier calls' chunk lists",
    ),
)
