"""The registry of hierarchies, assembled on demand from each module's ``SPEC``.

Nothing registers itself at import time: this tuple names the modules, and
:func:`hierarchy_registry` reads their specs (as :mod:`unirag.operators.registry`
does for operators). Order is the artifact listing's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from unirag.hierarchy.spec import HierarchySpec

HIERARCHY_MODULES = ("graphrag", "archrag", "hygrag", "leanrag")


@lru_cache(maxsize=1)
def hierarchy_registry() -> dict[str, HierarchySpec]:
    """Every hierarchy by name."""
    from importlib import import_module

    registry: dict[str, HierarchySpec] = {}
    for module in HIERARCHY_MODULES:
        spec = import_module(f"unirag.hierarchy.{module}").SPEC
        if spec.name in registry:
            raise ValueError(f"hierarchy {spec.name} is registered twice")
        registry[spec.name] = spec
    return registry


def hierarchy_variants() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every variant of every hierarchy: name -> (its hierarchy, the config keys it fixes)."""
    return {variant: (spec.name, dict(preset))
            for spec in hierarchy_registry().values() for variant, preset in spec.variants.items()}


def hierarchy_base(name: str) -> str:
    """The hierarchy a variant (or hierarchy) name builds with: ``archrag-spectral`` -> ``archrag``."""
    return hierarchy_variants().get(name, (name, {}))[0]


def spec_of(name: str) -> HierarchySpec:
    """The spec of a hierarchy or of one of its variants."""
    return hierarchy_registry()[hierarchy_base(name)]
