"""What a hierarchy declares once: :class:`HierarchySpec`, and what its builder is handed.

A hierarchy's own module (``unirag/hierarchy/<name>.py``) exports one
``SPEC = HierarchySpec(...)``; :func:`unirag.hierarchy.registry.hierarchy_registry`
collects them, the way :mod:`unirag.operators.registry` collects operators. The
artifact registry (above this package) turns each spec into its
``communities:<name>`` and ``community_vectors:<name>`` artifacts, the cost
estimate reads its :class:`CostShape`, the settings template its config class.
So adding a hierarchy is one module with its config dataclass, builder and spec.

The builder never sees the artifact registry's build context: the registry
hands it a :class:`BuildInputs` (what the layers below provide), so this
package stays below the registry that builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from unirag.config import Settings
from unirag.errors import ConfigError
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.attach import LevelCarrier
from unirag.hierarchy.communities import EntityGraph, HierarchyResult
from unirag.hierarchy.layered import BuildModels
from unirag.progress import Progress
from unirag.workspace import Workspace


@dataclass(frozen=True)
class CostShape:
    """How a builder groups its leaves, for the cost estimate: the typical group size, when a
    layer is too small to group again, how many levels at most, the cap on a summary prompt's
    input, calls per group."""

    size: int
    min_nodes: int
    max_levels: int
    max_input: int
    calls_per_group: int = 1


@dataclass(frozen=True)
class BuildInputs:
    """What a hierarchy's builder reads, handed down by the artifact registry."""

    workspace: Workspace
    store: GraphStore
    settings: Settings
    #: the summary chat model (None on the zero-LLM path), the embedder, the run's settings
    models: BuildModels
    #: the embedding model's name (what vectors a builder writes were made with)
    embedder: str
    progress: Progress
    #: the merged graph as arrays, a copy per call; ``True`` adds the entity vectors
    entity_graph: Callable[[bool], EntityGraph]
    #: the manifest fingerprints of built artifacts, by name (a dependent's inputs)
    inputs_of: Callable[..., dict[str, Any]]


#: The current leaves -> a LevelCarrier (carry the last build), or None (cluster afresh).
MakeCarrier = Callable[[list[str]], "LevelCarrier | None"]
#: (inputs, the artifact's hierarchy name, the resolved config, make_carrier) -> (result, leaves).
Builder = Callable[[BuildInputs, str, Any, MakeCarrier], tuple[HierarchyResult, list[str]]]


@dataclass(frozen=True)
class HierarchySpec:
    """One hierarchy, declared once by its own module."""

    name: str  # the artifact ``communities:<name>`` and the settings ``index.<name>``
    settings: type  # the config dataclass whose fields ``index.<name>`` overrides
    build: Builder
    prompts: tuple[str, ...]  # the summary prompts it asks (a workspace may shadow them: a change rebuilds)
    needs: tuple[str, ...]  # the artifacts it reads
    cost: Callable[[Any], CostShape]  # its config -> how it groups (the cost estimate)
    description: str  # one line for ``unirag stats`` and the artifact list
    operators: tuple[str, ...]  # the retrieval operators that read it (beside the community.* ones)
    #: ablations built beside it on request: variant name -> the config keys it fixes
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    #: its leaves are the entities and the chunks (HyGRAG's hybrid graph), not the entities only
    chunk_leaves: bool = False
    #: what its community vectors embed: ``title_summary`` (``title: summary``), or ``summary`` for a
    #: hierarchy whose build embeds each summary alone (the next layer's vectors): the community
    #: vectors then embed that same text, which the embedding cache already holds (issue 34)
    vector_text: str = "title_summary"


def hierarchy_config(settings: Settings, name: str, config_cls: type, preset: Mapping[str, Any] | None = None) -> Any:
    """The builder's config dataclass with ``index.<name>`` overrides applied, then a
    variant's ``preset`` (which must win: an ablation that a setting could undo is none)."""
    overrides = {**getattr(settings.index, name), **(preset or {})}
    known = {f.name for f in fields(config_cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"index.{name}: unknown setting {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    try:
        config = config_cls(**overrides)
        validate = getattr(config, "validate", None)
        if callable(validate):
            validate()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"index.{name}: {exc}") from None
    return config


def config_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as the manifest records it."""
    return {f.name: getattr(config, f.name) for f in fields(config)}
