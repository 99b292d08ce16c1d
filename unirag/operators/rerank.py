"""Reranking: a cross-encoder reorders (and cuts) the context gathered so far.

* ``context.rerank``: the context's items of one kind (chunks, entities or relationships),
  scored against the question by the configured reranker (``rerank.*``: a TEI, vLLM, Jina or
  Cohere endpoint), best first, the top-k kept.

Why an operator on the context and not on one retriever: the first stage of a method
(dense, BM25, PPR, fusion) ranks by what it can compute cheaply over the whole corpus; a
cross-encoder reads question and passage together and ranks far better, but costs a model
pass per candidate, so it reorders the few candidates the first stage found (Nogueira & Cho
2019, "Passage Re-ranking with BERT"). A ``*-rerank`` spec therefore lets its first stage
return more candidates (``top_k: 20``) and this operator cut them to ``retrieval.top_k``.

Unlike the other operators it returns nothing new: it rewrites ``state.items`` in place
(the reranked kind's items take their new order in the positions that kind held; the rest
stay where they are) and, for chunks, ``state.chunks``.
"""

from __future__ import annotations

import math
from typing import Literal

from unirag.errors import ConfigError
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.spec import CountOrZero, OperatorSpec

RerankKind = Literal["chunk", "entity", "relationship"]


def context_rerank(state: QueryState, top_k: CountOrZero = 4, kind: RerankKind = "chunk") -> list[ContextItem]:
    """The context's ``kind`` items reordered by the reranker's relevance score (ties keep their
    earlier order), the best ``top_k`` kept (0: all). Each kept item's score becomes the
    reranker's; its provenance records ``rerank``: the score and rank it had before."""
    reranker = state.models.reranker
    if reranker is None:
        raise ConfigError("context.rerank needs a reranker: set rerank.base_url (UNIRAG_RERANK_BASE_URL)")
    candidates = [item for item in state.items if item.kind == kind]
    if not candidates:
        return []
    keep = min(top_k, len(candidates)) if top_k else len(candidates)
    scored = reranker.rerank(state.question, [item.text for item in candidates], keep)
    # A document the server gave no score (below its top_n) or a non-number is not kept.
    scores = scored.scores
    order = sorted((i for i in range(len(candidates)) if math.isfinite(scores[i])), key=lambda i: (-scores[i], i))
    order = order[:keep]
    reranked: list[ContextItem] = []
    for position in order:
        item = candidates[position]
        item.provenance["rerank"] = {"score_before": round(item.score, 6), "rank_before": position + 1}
        item.score = float(scores[position])
        reranked.append(item)
    # The reranked items fill the slots their kind held, in their new order; surplus slots go.
    queue = iter(reranked)
    context: list[ContextItem] = []
    for item in state.items:
        slot = next(queue, None) if item.kind == kind else item
        if slot is not None:
            context.append(slot)
    state.items = context
    if kind == "chunk":
        state.chunks = {item.id: item.score for item in reranked}
    return []


OPERATORS = (
    OperatorSpec(
        "context.rerank", "context", context_rerank,
        "the context's chunks, entities or relationships reordered by a cross-encoder, top-k kept",
        needs_reranker=True,
    ),
)
