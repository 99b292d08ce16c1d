"""Chunk operators (survey §6.1, chunk type)."""

from __future__ import annotations

from unirag.errors import WorkspaceError
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.registry import OperatorSpec


def chunk_vdb(state: QueryState, top_k: int = 4) -> list[ContextItem]:
    """Top-k chunks by cosine similarity to the question (VanillaRAG, survey §7.1)."""
    if state.query_vector is None:
        raise WorkspaceError("chunk.vdb needs the 'embedding' question conversion")
    index = state.resources.chunk_hnsw(state.models.embedder.name)
    hits = index.search(state.query_vector, top_k)[0]
    return state.resources.chunk_items(hits, "chunk.vdb")


def chunk_bm25(state: QueryState, top_k: int = 4) -> list[ContextItem]:
    """Top-k chunks by BM25 over the question's terms."""
    hits = state.resources.chunk_bm25.search(state.question, top_k)
    return state.resources.chunk_items(hits, "chunk.bm25")


OPERATORS = (
    OperatorSpec(
        "chunk.vdb", "chunk", chunk_vdb, "top-k chunks by vector similarity",
        requires=("chunk_vectors",), needs=("embedding",), params=(("top_k", 4),),
    ),
    OperatorSpec(
        "chunk.bm25", "chunk", chunk_bm25, "top-k chunks by BM25 score",
        requires=("chunk_bm25",), params=(("top_k", 4),),
    ),
)
