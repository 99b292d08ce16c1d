"""One registry of operators and question conversions.

Each operator module declares an immutable ``OPERATORS`` tuple; the registry
is assembled on demand (no import-time registration side effects). An
operator is ``fn(state, **params) -> list[ContextItem]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from unirag.operators.context import ContextItem, QueryState


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    kind: str  # node | relationship | chunk | subgraph | community
    fn: Callable[..., list[ContextItem]]
    summary: str
    requires: tuple[str, ...] = ()  # workspace artifacts; "{param}" is filled from the call's params
    needs: tuple[str, ...] = ()  # question conversions
    params: tuple[tuple[str, Any], ...] = ()  # documented defaults
    # Artifact names that are not a plain "{param}" fill (a variant's C-HNSW or tree):
    # a function of the call's params, added to ``requires``.
    requires_fn: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    # Question conversions that depend on the call's params (a VDB operator searching with
    # LightRAG's keywords needs 'keywords', not 'embedding'); replaces ``needs`` when set.
    needs_fn: Callable[[dict[str, Any]], tuple[str, ...]] | None = None

    def requires_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The artifacts a call with ``params`` needs: ``"community_vectors:{hierarchy}"``
        with ``hierarchy: archrag`` is ``community_vectors:archrag``."""
        values = {**dict(self.params), **params}
        filled = tuple(artifact.format(**values) for artifact in self.requires)
        return filled + (self.requires_fn(values) if self.requires_fn else ())

    def needs_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The question conversions a call with ``params`` needs."""
        return self.needs_fn({**dict(self.params), **params}) if self.needs_fn else self.needs


@dataclass(frozen=True)
class ConversionSpec:
    name: str
    fn: Callable[[QueryState], None]
    summary: str


OPERATOR_MODULES = ("node", "relationship", "chunk", "subgraph", "community", "hierarchy", "passage")


@lru_cache(maxsize=1)
def operator_registry() -> dict[str, OperatorSpec]:
    """Every operator of the pool (survey §6.1), by name (``<kind>.<operator>``)."""
    from importlib import import_module

    registry: dict[str, OperatorSpec] = {}
    for module in OPERATOR_MODULES:
        for spec in import_module(f"unirag.operators.{module}").OPERATORS:
            if spec.name in registry:
                raise ValueError(f"operator {spec.name} is registered twice")
            registry[spec.name] = spec
    return registry


@lru_cache(maxsize=1)
def conversion_registry() -> dict[str, ConversionSpec]:
    from unirag.operators import question

    return {spec.name: spec for spec in question.CONVERSIONS}
