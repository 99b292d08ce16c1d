"""Question conversion (survey §6.2): turn the question into what operators use."""

from __future__ import annotations

from unirag.operators.context import QueryState
from unirag.operators.registry import ConversionSpec


def embed_question(state: QueryState) -> None:
    """The question's embedding, for every VDB operator."""
    state.query_vector = state.models.embedder.embed([state.question], stage="query.embed").vectors[0]


CONVERSIONS = (ConversionSpec("embedding", embed_question, "embed the question with the index's embedding model"),)
