"""What every community hierarchy builder takes and returns.

Four index builders group entities into layers of communities (survey §5):
GraphRAG's hierarchical Leiden with reports, ArchRAG's attributed communities,
HyGRAG's LSH buckets and LeanRAG's aggregated entities. They read one input,
:class:`EntityGraph` (the merged KG as arrays), and return one output,
:class:`HierarchyResult`, so storage, vector indices, ``unirag stats`` and the
community operators treat them alike.

Levels. ``Community.level`` follows each paper's own numbering, recorded as
``HierarchyResult.level_order``:

* ``"top_down"`` (GraphRAG): level 0 is the root communities (C0), higher
  numbers are finer (C1, C2, ...).
* ``"bottom_up"`` (ArchRAG, HyGRAG, LeanRAG): level 1 is the first layer of
  communities above the entities (layer 0), higher numbers are coarser.

Ids are derived from content (the hierarchy, the level and the sorted member
ids), so a rebuild that finds the same communities gives the same ids.

The three bottom-up builders run the shared layered loop
(:func:`unirag.hierarchy.layered.build_levels`) and turn each level's groups into
communities with :func:`level_communities`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from unirag.hierarchy.layered import Layer, Levels, Summary

LevelOrder = Literal["top_down", "bottom_up"]


def community_id(hierarchy: str, level: int, member_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\x00".join(sorted(member_ids)).encode("utf-8")).hexdigest()
    return f"{hierarchy}-{level}-{digest[:12]}"


@dataclass
class EntityGraph:
    """The merged entity graph as arrays: what the hierarchy builders read.

    Rows of ``vectors`` (L2-normalised embeddings of ``name: description``)
    follow ``ids``. ``edges`` holds row-index pairs ``(i, j)`` with ``i < j``,
    one per relationship, and ``weights`` their weights; ``relation_texts``
    holds each edge's description (same order). ``chunk_ids`` lists, per
    entity, the chunks it was extracted from.
    """

    ids: list[str]
    names: list[str]
    types: list[str]
    descriptions: list[str]
    chunk_ids: list[list[str]]
    edges: np.ndarray  # (m, 2) int64
    weights: np.ndarray  # (m,) float64
    relation_texts: list[str]
    vectors: np.ndarray | None = None  # (n, d) float32, L2-normalised

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name in ("names", "types", "descriptions", "chunk_ids"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"EntityGraph.{name} has {len(getattr(self, name))} rows for {n} entities")
        self.edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        self.weights = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if len(self.weights) != len(self.edges) or len(self.relation_texts) != len(self.edges):
            raise ValueError("EntityGraph edges, weights and relation_texts differ in length")
        if len(self.edges) and (self.edges.min() < 0 or self.edges.max() >= n):
            raise ValueError("EntityGraph edge index out of range")
        if self.vectors is not None and self.vectors.shape[0] != n:
            raise ValueError(f"EntityGraph has {self.vectors.shape[0]} vectors for {n} entities")

    def __len__(self) -> int:
        return len(self.ids)

    def text(self, row: int) -> str:
        """``name: description`` — what the entity vectors embed and summaries quote."""
        description = self.descriptions[row].strip()
        return f"{self.names[row]}: {description}" if description else self.names[row]

    def adjacency(self, symmetric: bool = True) -> Any:
        """Weighted adjacency as a scipy CSR matrix (duplicate edges summed)."""
        from scipy.sparse import coo_matrix

        n = len(self.ids)
        rows, cols, data = self.edges[:, 0], self.edges[:, 1], self.weights
        if symmetric:
            rows, cols, data = np.concatenate([rows, cols]), np.concatenate([cols, rows]), np.concatenate([data, data])
        return coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()

    def to_igraph(self, weights: np.ndarray | None = None) -> Any:
        """Undirected igraph with ``weight`` on edges and ``name`` (entity id) on vertices."""
        import igraph as ig

        graph = ig.Graph(n=len(self.ids), edges=self.edges.tolist(), directed=False)
        graph.vs["name"] = list(self.ids)
        graph.es["weight"] = list(self.weights if weights is None else weights)
        return graph


@dataclass
class Community:
    """One community (or bucket, or aggregated entity) of a hierarchy.

    ``children``: the members one level down (entity ids at the lowest
    community level, community ids above). ``entities``: every entity id under
    it. ``chunks``: chunk ids under it, where the method keeps them (HyGRAG).
    ``summary`` is the text that is embedded and retrieved; ``title`` a short
    name (LeanRAG: the aggregated entity's name). ``rating`` is GraphRAG's
    0-10 impact rating (None elsewhere). ``payload`` keeps method-specific
    fields (report findings, rating explanation, quality figures).
    """

    id: str
    hierarchy: str
    level: int
    children: list[str]
    entities: list[str]
    title: str = ""
    summary: str = ""
    chunks: list[str] = field(default_factory=list)
    parent: str | None = None
    rating: float | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommunityLink:
    """An edge between two communities of one level (ArchRAG's graph of
    communities; LeanRAG's aggregated inter-cluster relations). ``digest``
    identifies the relations it aggregates (LeanRAG), so an incremental update
    keeps the description of a link whose relations did not change."""

    hierarchy: str
    level: int
    source: str
    target: str
    weight: float = 1.0
    description: str = ""
    digest: str = ""


@dataclass
class HierarchyResult:
    """What a builder returns: communities of every level, links, counters."""

    hierarchy: str
    level_order: LevelOrder
    communities: list[Community]
    links: list[CommunityLink] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def levels(self) -> dict[int, int]:
        """Communities per level, sorted by level."""
        counts: dict[int, int] = {}
        for community in self.communities:
            counts[community.level] = counts.get(community.level, 0) + 1
        return dict(sorted(counts.items()))


def level_communities(
    hierarchy: str, level: int, layer: Layer, groups: Sequence[Sequence[int]], summaries: Sequence[Summary],
    below: Sequence[Community], sort_entities: bool = False,
) -> list[Community]:
    """One community per group of ``layer``'s rows: its children are the group's nodes,
    its entities those beneath them (in row order, or sorted), its title and summary
    the group's :class:`Summary`. Each community of ``below`` (the communities that
    are the layer's nodes; empty at level 1) gets the one holding it as its parent."""
    built = []
    for group, summary in zip(groups, summaries):
        children = [layer.ids[row] for row in group]
        entities = [entity for row in group for entity in layer.entities[row]]
        built.append(Community(
            id=community_id(hierarchy, level, children), hierarchy=hierarchy, level=level, children=children,
            entities=sorted(set(entities)) if sort_entities else entities, title=summary.title, summary=summary.text,
        ))
    if below:
        for group, community in zip(groups, built):
            for row in group:
                below[row].parent = community.id
    return built


def bottom_up_result(hierarchy: str, levels: Levels[Community]) -> HierarchyResult:
    """The :class:`HierarchyResult` of a bottom-up build, its stats as stored."""
    return HierarchyResult(hierarchy, "bottom_up", levels.records, levels.links, levels.stats.to_dict())
