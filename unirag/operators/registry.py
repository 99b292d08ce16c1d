"""The registries of operators and question conversions, assembled on demand.

Each operator module declares an immutable ``OPERATORS`` tuple of
:class:`~unirag.operators.spec.OperatorSpec` (the contract lives in
:mod:`unirag.operators.spec`); nothing registers itself at import time.
"""

from __future__ import annotations

from functools import lru_cache

from unirag.operators import question
from unirag.operators.spec import ConversionSpec, OperatorSpec

OPERATOR_MODULES = ("node", "relationship", "chunk", "subgraph", "community", "hierarchy", "passage",
                    "passage_nodes", "fusion", "rerank")


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
    """Every question conversion, by name (``embedding``, ``entities``, ``keywords``)."""
    return {spec.name: spec for spec in question.CONVERSIONS}
