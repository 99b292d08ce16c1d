"""GraphRAG's community hierarchy with reports (Edge et al. 2024, §3.1.4-3.1.5; survey §5 ③).

Three steps, each a separate function so that each can be tested alone:

1. :func:`hierarchical_leiden` partitions the entity graph with Leiden
   (``leidenalg``, ``RBConfigurationVertexPartition`` = modularity at
   resolution 1, edge weights from ``EntityGraph.weights``), then runs Leiden
   again on the induced subgraph of every community larger than
   ``max_cluster_size``. Level 0 is the root communities (C0), level 1 their
   sub-communities (C1), and so on; a community that Leiden leaves whole (a
   clique cannot be split by modularity) or that sits at the last level is a
   leaf, even when it is larger than ``max_cluster_size``.
2. :func:`build_report_context` selects what the model sees for one community
   (§3.1.5): the community's internal edges in decreasing order of combined
   source + target degree, each added with the descriptions of its two
   endpoints and its own description, until ``max_context_tokens`` is reached.
   For a community with sub-communities whose elements do not all fit, the
   sub-communities are ranked by the tokens of their elements (descending) and
   their reports are substituted, one at a time, until the context fits. It is a
   pure function of :class:`ReportElements` (lines rendered and counted on
   first use), so any token counter (words, in tests) gives an exactly known answer.
3. :func:`build_graphrag_communities` asks the model once per community
   (prompt ``community_report``, stage ``index.graphrag.report``), leaves
   first, so every parent can quote its children's reports.

Decisions worth knowing:

* **Every connected component is clustered.** Microsoft's implementation keeps
  only the largest connected component by default (``use_lcc``); the paper
  says each level covers the nodes "in a mutually exclusive, collectively
  exhaustive way", so we cluster the whole graph (Leiden never joins
  disconnected nodes, so small components become their own communities).
* **Isolated entities are singleton C0 communities.** They keep the partition
  exhaustive, but their report costs no model call: it is the entity itself
  (title = name, summary = description), with ``payload["singleton"] = True``
  and ``rating = None`` so that a global search may skip them. The same holds
  for any one-entity community.
* **A leaf is not repeated at finer levels.** As in graspologic's
  ``hierarchical_leiden`` (which GraphRAG uses), a community that is not split
  exists only at its own level; the partition "at level L" is the communities
  of level L plus the leaves of levels < L (:func:`level_partition`). Repeating
  it would pay for the same report twice.
* **Community edges are internal edges** (both endpoints inside). A parent's
  elements are thus its children's elements plus the edges between children.
  Relationship texts are ``EntityGraph.relation_texts``; claims are not used.
* **Degree** is the number of distinct neighbours in the whole graph (as
  GraphRAG's ``combined_degree``), ties broken by edge order.
* **Stop, do not skip.** Like GraphRAG, filling stops at the first edge group
  (or report) that would pass the limit; the count of contexts cut this way
  is ``stats["truncated"]``. A sub-community whose report is not shorter than
  its elements is never substituted (that would only make the context longer).
* **Token accounting.** Each context line costs ``count(line + "\\n")`` and the
  section headers are always present, so the total is exact for a word counter
  and within a token or two of the rendered text for tiktoken.
* **Weights.** Duplicate edges are summed; a weight that is not a positive
  finite number counts as 1.0 (the relationship exists, so it must link).
* **Reports.** Parsed with ``json_repair`` (code fences, text around the
  object, a reply cut at ``report_max_tokens``); key spellings are normalised
  (``"rating explanation"`` as in the paper's own prompt); the rating is
  clamped to [0, 10]. A reply with neither a summary nor findings becomes a
  fallback report (top-degree entity names as title, first descriptions as
  summary), counted in ``stats["fallback_summaries"]``.
* **Batches by height.** Communities are reported in rounds of equal height
  (leaf = 0, parent = 1 + its highest child), each round concurrent via
  :func:`~unirag.llm.batch.complete_all`: children always before parents, and
  leaves of every level share the first round.
* **Leiden passes.** ``leiden_iterations=2`` (leidenalg's default) per run;
  ``-1`` iterates until stable: ~0.2% more modularity for ~6x the time on a
  20k-node graph. Every run uses the same seed.
* **Context size.** ``max_context_tokens`` defaults to 4000 (GraphRAG used an
  8k window with gpt-4-turbo; smaller local models fare better with less).

Everything is deterministic (fixed Leiden seed, sorted members, stable orders),
so a rebuild sends identical requests and is served from the response cache.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from unirag.hierarchy.attach import AttachPolicy, attach_targets
from unirag.hierarchy.communities import Community, EntityGraph, HierarchyResult, community_id
from unirag.hierarchy.layered import Ask, BuildModels, HierarchyStats, LevelStats, Summary, ask_all
from unirag.hierarchy.spec import BuildInputs, CostShape, HierarchySpec, MakeCarrier
from unirag.index.line_tokens import LineTokens, load_line_tokens, save_line_tokens

HIERARCHY = "graphrag"
STAGE = "index.graphrag.report"
PROMPT = "community_report"
DEFAULT_SEED = 0xDEECE66D & 0xFFFF

ENTITY_HEADER = "Entities:"
RELATION_HEADER = "Relationships:"
REPORT_HEADER = "Sub-community reports:"


@dataclass(frozen=True)
class GraphragCommunityConfig:
    """How the hierarchy is cut and reported. GraphRAG: max cluster size 10, 8k-token contexts."""

    max_cluster_size: int = 10
    max_levels: int = 4  # C0..C3, as in the paper's evaluation
    max_context_tokens: int = 4000
    report_max_tokens: int = 800
    seed: int = DEFAULT_SEED
    resolution: float = 1.0
    leiden_iterations: int = 2  # leidenalg's default; -1 = until stable
    title_entities: int = 3  # names in a fallback report's title

    def validate(self) -> None:
        """Fail before any model call rather than half-way up the hierarchy."""
        for name in ("max_cluster_size", "max_levels", "max_context_tokens", "report_max_tokens", "title_entities"):
            if getattr(self, name) < 1:
                raise ValueError(f"graphrag {name} must be at least 1, not {getattr(self, name)}")
        if self.leiden_iterations == 0 or self.leiden_iterations < -1:
            raise ValueError(f"graphrag leiden_iterations must be -1 or at least 1, not {self.leiden_iterations}")
        if not self.resolution > 0:
            raise ValueError(f"graphrag resolution must be positive, not {self.resolution}")


# -- 1. hierarchical Leiden ----------------------------------------------------------


@dataclass(frozen=True)
class LeidenCommunity:
    """One community of :func:`hierarchical_leiden`: sorted entity ``rows``;
    ``parent`` indexes the previous level's list, ``children`` the next one's."""

    level: int
    index: int
    rows: tuple[int, ...]
    parent: int | None
    children: tuple[int, ...] = ()


def _leiden_edges(graph: EntityGraph) -> tuple[np.ndarray, np.ndarray]:
    """Distinct undirected edges ``(i < j)`` with summed, positive weights, sorted."""
    from scipy.sparse import coo_matrix

    n = len(graph)
    if not len(graph.edges):
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float64)
    weights = np.where(np.isfinite(graph.weights) & (graph.weights > 0), graph.weights, 1.0)
    lo = np.minimum(graph.edges[:, 0], graph.edges[:, 1])
    hi = np.maximum(graph.edges[:, 0], graph.edges[:, 1])
    keep = lo != hi
    matrix = coo_matrix((weights[keep], (lo[keep], hi[keep])), shape=(n, n)).tocsr()  # sums duplicates
    matrix.sort_indices()
    coo = matrix.tocoo()
    return np.stack([coo.row, coo.col], axis=1).astype(np.int64), coo.data.astype(np.float64)


def _split(
    rows: np.ndarray, edges: np.ndarray, weights: np.ndarray, seed: int, resolution: float, iterations: int
) -> list[np.ndarray]:
    """Leiden on the subgraph of ``rows`` (sorted) given its edges in global rows.

    Groups come back sorted by size (descending), then smallest row.
    """
    import igraph as ig
    import leidenalg

    local = np.searchsorted(rows, edges).reshape(-1, 2)
    sub = ig.Graph(n=len(rows), edges=local.tolist(), directed=False)
    partition = leidenalg.find_partition(
        sub,
        leidenalg.RBConfigurationVertexPartition,
        weights=weights.tolist(),
        resolution_parameter=resolution,
        n_iterations=iterations,
        seed=seed,
    )
    labels = np.asarray(partition.membership, dtype=np.int64)
    order = np.argsort(labels, kind="stable")  # rows stay sorted inside each group
    groups = np.split(rows[order], np.cumsum(np.bincount(labels))[:-1])
    groups.sort(key=lambda group: (-len(group), int(group[0])))
    return groups


def _edges_by_group(groups: Sequence[np.ndarray], n: int, edges: np.ndarray) -> list[np.ndarray]:
    """Ids (into ``edges``) of the internal edges of each of disjoint row ``groups``, in one pass."""
    label = np.full(n, -1, dtype=np.int64)
    for index, group in enumerate(groups):
        label[group] = index
    if not len(edges):
        return [np.zeros(0, dtype=np.int64) for _ in groups]
    src, dst = label[edges[:, 0]], label[edges[:, 1]]
    inside = np.flatnonzero((src == dst) & (src >= 0))
    inside = inside[np.argsort(src[inside], kind="stable")]
    bounds = np.searchsorted(src[inside], np.arange(len(groups) + 1))
    return [inside[a:b] for a, b in itertools.pairwise(bounds)]


def hierarchical_leiden(
    graph: EntityGraph,
    max_cluster_size: int = 10,
    seed: int = DEFAULT_SEED,
    resolution: float = 1.0,
    max_levels: int = 4,
    iterations: int = 2,
) -> list[list[LeidenCommunity]]:
    """Communities per level (level 0 = roots); each finer level partitions its parents.

    Only communities larger than ``max_cluster_size`` are split; a split that
    Leiden returns as one group ends the recursion there. At most
    ``max_levels`` levels. ``iterations``: Leiden passes per run (leidenalg's
    default 2; -1 runs until the partition is stable, some 0.2% more
    modularity for ~6x the time on a 20k-node graph).
    """
    n = len(graph)
    if n == 0:
        return []
    edges, weights = _leiden_edges(graph)
    rows_per_level: list[list[np.ndarray]] = [_split(np.arange(n), edges, weights, seed, resolution, iterations)]
    parent_of: list[list[int]] = [[]]  # per level, each community's parent index (none at level 0)
    while len(rows_per_level) < max_levels:
        current = rows_per_level[-1]
        big = [i for i, rows in enumerate(current) if len(rows) > max_cluster_size]
        found_rows: list[np.ndarray] = []
        found_parents: list[int] = []
        for i, ids in zip(big, _edges_by_group([current[i] for i in big], n, edges)):
            parts = _split(current[i], edges[ids], weights[ids], seed, resolution, iterations)
            if len(parts) > 1:
                found_rows += parts
                found_parents += [i] * len(parts)
        if not found_rows:
            break
        rows_per_level.append(found_rows)
        parent_of.append(found_parents)
    out: list[list[LeidenCommunity]] = []
    for depth, level_rows in enumerate(rows_per_level):
        children: dict[int, list[int]] = {}
        for child, parent in enumerate(parent_of[depth + 1] if depth + 1 < len(parent_of) else []):
            children.setdefault(parent, []).append(child)
        out.append([
            LeidenCommunity(
                level=depth,
                index=i,
                rows=tuple(int(r) for r in rows),
                parent=parent_of[depth][i] if depth else None,
                children=tuple(children.get(i, ())),
            )
            for i, rows in enumerate(level_rows)
        ])
    return out


def carried_leiden(
    graph: EntityGraph, previous: Sequence[Community], max_cluster_size: int = 10, seed: int = DEFAULT_SEED,
    resolution: float = 1.0, iterations: int = 2, max_levels: int | None = None,
) -> tuple[list[list[LeidenCommunity]], dict[str, int]]:
    """The previous hierarchy over the current ``graph``, new entities attached (incremental update).

    Why: Leiden is not stable under small changes; re-clustering after a 1 %
    insert re-asked about a fifth of GraphRAG's reports on 500 2Wiki passages.
    Here gone entities leave their communities; a new entity joins, level by
    level, the community (among the children of the one it joined above)
    holding most of its relationship neighbours, else the largest; new
    entities with no neighbour in any root community form roots of their own
    (one per connected component among them). A community that is split no
    more but now exceeds ``max_cluster_size`` is split by Leiden, as a full
    build would. With ``max_levels`` (the hierarchy's limit) no level past it
    is made: a full build's deepest leaves are often oversized, and splitting
    each by Leiden only to cut the parts off with the levels past the limit
    cost most of an update's carrying (``splits`` counts the splits kept).
    Reports follow as usual: unchanged communities hit the cache.
    """
    from scipy.sparse import coo_matrix

    n = len(graph)
    row = {entity: i for i, entity in enumerate(graph.ids)}
    edges, weights = _leiden_edges(graph)
    adjacency = coo_matrix((np.concatenate([weights, weights]), (np.concatenate([edges[:, 0], edges[:, 1]]),
                                                                   np.concatenate([edges[:, 1], edges[:, 0]]))),
                           shape=(n, n)).tocsr()
    by_id = {c.id: c for c in previous}
    placed = np.zeros(n, dtype=bool)
    stats = {"detached": 0, "attached": 0, "new_roots": 0, "splits": 0}

    def rows_of(community: Community) -> np.ndarray:
        rows = [row[e] for e in community.entities if e in row]
        stats["detached"] += len(community.entities) - len(rows)
        return np.array(sorted(rows), dtype=np.int64)

    # Level 0: the previous roots, then new entities by neighbours, then new roots.
    roots = [c for c in previous if c.level == 0 and c.parent is None]
    groups = [rows_of(c) for c in roots]
    origin: list[Community | None] = list(roots)
    for g in groups:
        placed[g] = True
    new_rows = np.flatnonzero(~placed)
    target = attach_targets(new_rows, groups, np.zeros((n, 1), np.float32), adjacency,
                            AttachPolicy(by_neighbours=True, by_similarity=False))
    stats["attached"] += int((target >= 0).sum())
    for g in np.unique(target[target >= 0]).tolist():
        groups[g] = np.sort(np.concatenate([groups[g], new_rows[target == g]]))
    alone = new_rows[target < 0]
    if len(alone):
        from scipy.sparse.csgraph import connected_components

        _, labels = connected_components(adjacency[alone][:, alone], directed=False)
        for label in range(int(labels.max()) + 1):
            groups.append(alone[labels == label])
            origin.append(None)
            stats["new_roots"] += 1
    levels: list[list[tuple[np.ndarray, Community | None, int | None]]] = [
        [(g, o, None) for g, o in zip(groups, origin) if len(g)]]
    while levels[-1] and (max_levels is None or len(levels) < max_levels):
        below: list[tuple[np.ndarray, Community | None, int | None]] = []
        for parent_index, (rows, community, _) in enumerate(levels[-1]):
            kids = [by_id[c] for c in (community.children if community else []) if c in by_id]
            if kids:
                parts = [rows_of(kid) for kid in kids]
                inside = np.zeros(n, dtype=bool)
                for part in parts:
                    inside[part] = True
                extra = rows[~inside[rows]]  # members new to this community
                if len(extra):
                    target = attach_targets(extra, parts, np.zeros((n, 1), np.float32), adjacency,
                                            AttachPolicy(by_neighbours=True, by_similarity=False))
                    target[target < 0] = int(np.argmax([len(part) for part in parts]))
                    for g in np.unique(target).tolist():
                        parts[g] = np.sort(np.concatenate([parts[g], extra[target == g]]))
                kept = [(part, kid) for part, kid in zip(parts, kids) if len(part)]
                if len(kept) > 1:
                    below += [(part, kid, parent_index) for part, kid in kept]
                continue
            if len(rows) > max_cluster_size and len(levels) < 64:
                ids = _edges_by_group([rows], n, edges)[0]
                parts = _split(rows, edges[ids], weights[ids], seed, resolution, iterations)
                if len(parts) > 1:
                    stats["splits"] += 1
                    below += [(part, None, parent_index) for part in parts]
        if not below:
            break
        levels.append(below)
    out: list[list[LeidenCommunity]] = []
    for depth, level in enumerate(levels):
        children: dict[int, list[int]] = {}
        if depth + 1 < len(levels):
            for child, (_, _, parent) in enumerate(levels[depth + 1]):
                children.setdefault(int(parent), []).append(child)  # type: ignore[arg-type]
        out.append([LeidenCommunity(level=depth, index=i, rows=tuple(int(r) for r in rows), parent=parent,
                                    children=tuple(children.get(i, ()))) for i, (rows, _, parent) in enumerate(level)])
    return out, stats


def updated_leiden(
    graph: EntityGraph, previous: Sequence[Community], config: GraphragCommunityConfig,
) -> tuple[list[list[LeidenCommunity]], dict[str, int]]:
    """The levels of an incremental update: the carried hierarchy with the depth a full build makes.

    Why: the depth of a hierarchical Leiden run is emergent (a level exists while
    Leiden splits some community of the level above that is past
    ``max_cluster_size``), and carrying changes which communities those are. Left
    alone, a carried leaf that grew past the cap was split into a level no full
    build of the same corpus had (300 passages + 3: C0-C3 where a full build makes
    C0-C2), so the levels, and what ``ggraphrag-c3`` reads, depended on the order
    documents arrived. The rule: the depth is the full build's, found by running
    :func:`hierarchical_leiden` on the current graph (the full build's clustering, not
    its reports: cheap next to one model call per changed community).
    The carried hierarchy is cut to that depth; where carrying cannot reach it
    (no carried leaf is big enough to split, so a full build's rule adds no level
    either), the update takes the full build's clustering instead, and reports of
    communities whose members did not change are still kept. That happens only
    when the depth itself changed, rarely under ``index.rebuild_share``.
    ``stats``: :func:`carried_leiden`'s, plus ``depth`` and ``reclustered`` (1
    when the full build's clustering was taken).
    """
    full = hierarchical_leiden(graph, config.max_cluster_size, config.seed, config.resolution, config.max_levels,
                               config.leiden_iterations)
    depth = len(full)
    levels, stats = carried_leiden(graph, previous, config.max_cluster_size, config.seed, config.resolution,
                                   config.leiden_iterations, depth)
    levels = levels[:depth]
    stats.update(depth=depth, reclustered=int(len(levels) < depth))
    if len(levels) < depth:
        return full, stats
    if levels:
        levels[-1] = [replace(c, children=()) for c in levels[-1]]
    return levels, stats


def level_partition(levels: Sequence[Sequence[LeidenCommunity]], level: int) -> list[LeidenCommunity]:
    """The partition of all entities at ``level``: its communities plus leaves of coarser levels."""
    out = [c for lower in levels[:level] for c in lower if not c.children]
    if level < len(levels):
        out += list(levels[level])
    return out


# -- 2. report contexts ---------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Lines(Sequence[str]):
    """Context lines rendered on first use: an update asks for the reports of the few
    communities that changed, so rendering a line for every element would cost as much as
    a full build."""

    def __init__(self, render: Callable[[int], str], n: int) -> None:
        self._render = render
        self._lines: list[str | None] = [None] * n

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        line = self._lines[index]
        if line is None:
            line = self._lines[index] = self._render(index)
        return line


class _Costs:
    """Token costs ``count(line + "\\n")`` of :class:`_Lines`, counted on first use and kept.

    Indexed like the array it stands for (an int, a list or an array of positions)."""

    def __init__(self, lines: _Lines, count_tokens: Callable[[str], int]) -> None:
        self._lines, self._count = lines, count_tokens
        self._costs = np.full(len(lines), -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._costs)

    def __getitem__(self, index: Any) -> Any:
        positions = np.asarray(index, dtype=np.int64)
        flat = positions.reshape(-1)
        missing = flat[self._costs[flat] < 0]
        if len(missing):
            for i in np.unique(missing).tolist():
                self._costs[i] = self._count(self._lines[i] + "\n")
        return self._costs[positions]

    def tolist(self) -> list[int]:
        return self[np.arange(len(self._costs))].tolist()


@dataclass(frozen=True)
class ReportElements:
    """Element summaries of the whole graph, each rendered and counted once, when first used.

    ``entity_lines[i]`` / ``edge_lines[j]`` are context lines; ``*_tokens``
    their costs (``count(line + "\\n")``); ``degrees`` distinct neighbours;
    ``edge_priority`` the combined degree of each edge's endpoints.
    """

    graph: EntityGraph
    count_tokens: Callable[[str], int]
    entity_lines: _Lines
    entity_tokens: _Costs
    edge_lines: _Lines
    edge_tokens: _Costs
    degrees: np.ndarray
    edge_priority: np.ndarray
    header_tokens: int
    report_header_tokens: int

    @classmethod
    def from_graph(cls, graph: EntityGraph, count_tokens: Callable[[str], int]) -> ReportElements:
        def entity_line(row: int) -> str:
            name, kind = _one_line(graph.names[row]), _one_line(graph.types[row])
            description = _one_line(graph.descriptions[row])
            head = f"- {name} ({kind})" if kind else f"- {name}"
            return f"{head}: {description}" if description else head

        def edge_line(edge: int) -> str:
            i, j = graph.edges[edge].tolist()
            text = _one_line(graph.relation_texts[edge]) or "related"
            return f"- {_one_line(graph.names[i])} -> {_one_line(graph.names[j])}: {text}"

        adjacency = graph.adjacency()
        degrees = np.diff(adjacency.indptr).astype(np.int64)  # distinct neighbours (duplicates summed)
        priority = degrees[graph.edges[:, 0]] + degrees[graph.edges[:, 1]]  # (0,) when there are no edges
        entity_lines, edge_lines = _Lines(entity_line, len(graph)), _Lines(edge_line, len(graph.edges))
        return cls(
            graph=graph,
            count_tokens=count_tokens,
            entity_lines=entity_lines,
            entity_tokens=_Costs(entity_lines, count_tokens),
            edge_lines=edge_lines,
            edge_tokens=_Costs(edge_lines, count_tokens),
            degrees=degrees,
            edge_priority=priority.astype(np.int64),
            header_tokens=sum(count_tokens(line + "\n") for line in (ENTITY_HEADER, RELATION_HEADER)),
            report_header_tokens=count_tokens(REPORT_HEADER + "\n"),
        )

    def internal_edges(self, rows: np.ndarray) -> np.ndarray:
        """Edge ids with both endpoints in ``rows`` (one O(m) pass; the builder precomputes these)."""
        inside = np.zeros(len(self.graph), dtype=bool)
        inside[rows] = True
        edges = self.graph.edges
        return np.flatnonzero(inside[edges[:, 0]] & inside[edges[:, 1]]) if len(edges) else np.zeros(0, np.int64)

    def by_priority(self, edge_ids: np.ndarray) -> np.ndarray:
        """Edges by combined degree, descending; ties by edge id."""
        edge_ids = np.asarray(edge_ids, dtype=np.int64)
        return edge_ids[np.lexsort((edge_ids, -self.edge_priority[edge_ids]))]

    def by_degree(self, rows: np.ndarray) -> np.ndarray:
        """Entity rows by degree, descending; ties by row."""
        rows = np.asarray(rows, dtype=np.int64)
        return rows[np.lexsort((rows, -self.degrees[rows]))]


@dataclass(frozen=True)
class SubReport:
    """A sub-community's rows and the report text that may stand in for its elements."""

    rows: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class ReportContext:
    """What one community's report request quotes, and how it was chosen.

    ``substituted``: indices (into the ``sub_reports`` given) whose report
    replaced their elements, in the order quoted. ``truncated``: the limit cut
    something off. ``tokens``: the accounted cost (<= the limit unless the
    headers alone pass it).
    """

    text: str
    tokens: int
    entities: tuple[int, ...]
    edges: tuple[int, ...]
    substituted: tuple[int, ...] = ()
    truncated: bool = False


def _fill(
    elements: ReportElements,
    pool_rows: np.ndarray,
    edge_ids: np.ndarray,
    reports: Sequence[tuple[int, str, int]],
    max_tokens: int,
) -> ReportContext:
    """Reports first, then edges by priority (endpoints, then the edge), then the
    pool's remaining entities by degree; stop at the first group that does not fit."""
    used = elements.header_tokens + (elements.report_header_tokens if reports else 0)
    report_lines: list[str] = []
    used_reports: list[int] = []
    entities: list[int] = []
    edges: list[int] = []
    truncated = False
    for index, line, cost in reports:
        if used + cost > max_tokens:
            truncated = True
            break
        used += cost
        report_lines.append(line)
        used_reports.append(index)
    added: set[int] = set()
    graph_edges = elements.graph.edges
    if not truncated:
        for edge in elements.by_priority(edge_ids).tolist():
            src, dst = int(graph_edges[edge, 0]), int(graph_edges[edge, 1])
            new = [row for row in dict.fromkeys((src, dst)) if row not in added]
            cost = int(elements.entity_tokens[new].sum()) + int(elements.edge_tokens[edge])
            if used + cost > max_tokens:
                truncated = True
                break
            used += cost
            entities += new
            added.update(new)
            edges.append(edge)
    if not truncated:
        for row in elements.by_degree(pool_rows).tolist():
            if row in added:
                continue
            cost = int(elements.entity_tokens[row])
            if used + cost > max_tokens:
                truncated = True
                break
            used += cost
            entities.append(row)
            added.add(row)
    lines = []
    if report_lines:
        lines += [REPORT_HEADER, *report_lines]
    lines += [ENTITY_HEADER, *(elements.entity_lines[r] for r in entities)]
    lines += [RELATION_HEADER, *(elements.edge_lines[e] for e in edges)]
    return ReportContext(
        text="\n".join(lines),
        tokens=used,
        entities=tuple(entities),
        edges=tuple(edges),
        substituted=tuple(used_reports),
        truncated=truncated,
    )


def build_report_context(
    elements: ReportElements,
    rows: Sequence[int] | np.ndarray,
    max_tokens: int,
    sub_reports: Sequence[SubReport] = (),
    edge_ids: np.ndarray | None = None,
) -> ReportContext:
    """The context for one community of entity ``rows`` (GraphRAG §3.1.5).

    ``sub_reports`` are its sub-communities (they partition ``rows``) with
    their reports; none for a leaf. ``edge_ids``: its internal edges, computed
    when not given.
    """
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    if edge_ids is None:
        edge_ids = elements.internal_edges(rows)
    edge_ids = np.asarray(edge_ids, dtype=np.int64)
    # Every line costs at least one token, so a community of more lines than the limit cannot
    # fit whole: then its lines need not all be counted (a leaf's context counts only what fits).
    fits = elements.header_tokens + len(rows) + len(edge_ids) <= max_tokens and (
        elements.header_tokens + int(elements.entity_tokens[rows].sum()) + int(elements.edge_tokens[edge_ids].sum())
        <= max_tokens)
    if fits or not sub_reports:
        return _fill(elements, rows, edge_ids, (), max_tokens)

    # Which sub-community each row, and each edge, belongs to (-1: an edge between two).
    child_of = np.full(len(rows), -1, dtype=np.int64)
    for index, sub in enumerate(sub_reports):
        child_of[np.searchsorted(rows, np.asarray(sub.rows, dtype=np.int64))] = index
    graph_edges = elements.graph.edges
    src_child = child_of[np.searchsorted(rows, graph_edges[edge_ids, 0])]
    dst_child = child_of[np.searchsorted(rows, graph_edges[edge_ids, 1])]
    edge_child = np.where(src_child == dst_child, src_child, -1)
    k = len(sub_reports)
    element_cost = np.bincount(child_of, weights=elements.entity_tokens[rows], minlength=k)
    inner = edge_child >= 0
    element_cost += np.bincount(edge_child[inner], weights=elements.edge_tokens[edge_ids[inner]], minlength=k)
    lines = ["- " + sub.text.strip() for sub in sub_reports]
    report_cost = np.array([elements.count_tokens(line + "\n") for line in lines], dtype=np.int64)
    order = [int(i) for i in np.lexsort((np.arange(k), -element_cost)) if report_cost[i] < element_cost[i]]

    def pool(substituted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kept_edges = edge_ids[~np.isin(edge_child, substituted)]
        ends = graph_edges[kept_edges].reshape(-1)
        return np.union1d(rows[~np.isin(child_of, substituted)], ends), kept_edges

    chosen: list[int] = []
    for index in order:
        chosen.append(index)
        pool_rows, kept_edges = pool(np.array(chosen))
        cost = (elements.header_tokens + elements.report_header_tokens + int(report_cost[chosen].sum())
                + int(elements.entity_tokens[pool_rows].sum()) + int(elements.edge_tokens[kept_edges].sum()))
        if cost <= max_tokens:
            break
    if not chosen:  # no report is shorter than what it would replace
        return _fill(elements, rows, edge_ids, (), max_tokens)
    pool_rows, kept_edges = pool(np.array(chosen))
    reports = [(i, lines[i], int(report_cost[i])) for i in chosen]
    return _fill(elements, pool_rows, kept_edges, reports, max_tokens)


# -- 3. reports -------------------------------------------------------------------------


@dataclass
class Report:
    """A parsed (or fallback) community report."""

    title: str
    summary: str
    rating: float | None = None
    rating_explanation: str = ""
    findings: list[dict[str, str]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    fallback: bool = False
    repaired: bool = False

    def text(self) -> str:
        """Summary and findings as one text: what is embedded and retrieved."""
        parts = [self.summary.strip()] if self.summary.strip() else []
        bullets = []
        for finding in self.findings:
            head, body = finding.get("summary", ""), finding.get("explanation", "")
            bullets.append(f"- {head}: {body}" if head and body else f"- {head or body}")
        if bullets:
            parts.append("\n".join(bullets))
        return "\n\n".join(parts)


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _key(name: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)):
        return " ".join(_string(v) for v in value).strip()
    return str(value).strip()


def _rating(value: Any) -> float | None:
    """A number in [0, 10], from ``7``, ``"7.5"``, ``"8/10"``; None when there is none."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        match = _NUMBER.search(str(value))
        if not match:
            return None
        number = float(match.group())
    return None if math.isnan(number) else min(10.0, max(0.0, number))


def _findings(value: Any) -> list[dict[str, str]]:
    items = value if isinstance(value, list) else [value] if value else []
    out = []
    for item in items:
        if isinstance(item, dict):
            item = {_key(k): v for k, v in item.items()}
            head = _string(item.get("summary") or item.get("title") or item.get("insight"))
            body = _string(item.get("explanation") or item.get("description") or item.get("details"))
        else:
            head, body = _string(item), ""
        if head or body:
            out.append({"summary": head, "explanation": body})
    return out


def parse_report(text: str) -> Report | None:
    """The report in a model reply, or None when there is none worth keeping.

    Strict JSON first; otherwise ``json_repair`` (fences, text around, a
    reply cut mid-object), marked ``repaired``. A list yields its first object
    that looks like a report. Without a summary and without findings, None.
    """
    import json_repair

    repaired = False
    try:
        data: Any = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        data = json_repair.loads(text or "")
        repaired = True
    if isinstance(data, list):
        data = next((d for d in data if isinstance(d, dict) and {"title", "summary"} & {_key(k) for k in d}), None)
    if not isinstance(data, dict):
        return None
    data = {_key(k): v for k, v in data.items()}
    findings = _findings(data.get("findings"))
    summary = _string(data.get("summary") or data.get("executive_summary"))
    if not summary and not findings:
        return None
    return Report(
        title=_string(data.get("title")),
        summary=summary,
        rating=_rating(data.get("rating", data.get("impact_severity_rating"))),
        rating_explanation=_string(data.get("rating_explanation")),
        findings=findings,
        raw=data,
        repaired=repaired,
    )


def _title_from(elements: ReportElements, rows: Sequence[int], count: int) -> str:
    top = elements.by_degree(np.asarray(rows, dtype=np.int64))[:count]
    return ", ".join(elements.graph.names[r] for r in top.tolist())


def fallback_report(elements: ReportElements, rows: Sequence[int], title_entities: int = 3) -> Report:
    """A report without the model: top-degree names as title, their first descriptions as summary."""
    top = elements.by_degree(np.asarray(rows, dtype=np.int64))
    descriptions = [_one_line(elements.graph.descriptions[r]) for r in top[:title_entities].tolist()]
    summary = " ".join(d for d in descriptions if d) or _title_from(elements, rows, title_entities)
    return Report(title=_title_from(elements, rows, title_entities), summary=summary, fallback=True)


# -- the builder ------------------------------------------------------------------------


@dataclass
class _Node:
    """Book-keeping for one community while the reports are written."""

    level: int
    rows: np.ndarray
    parent: int | None
    children: list[int]
    edge_ids: np.ndarray
    height: int = 0
    id: str = ""
    summary: Summary | None = None  # its report in ``detail``
    context: ReportContext | None = None
    previous: Community | None = None  # the last build's community whose report it keeps

    @property
    def report(self) -> Report:
        assert self.summary is not None, "children are reported before their parents"
        return self.summary.detail


def _nodes(graph: EntityGraph, levels: list[list[LeidenCommunity]]) -> list[_Node]:
    """Flatten the levels (coarse first) with global indices, internal edges and heights."""
    offsets = np.cumsum([0] + [len(level) for level in levels])
    nodes: list[_Node] = []
    for depth, level in enumerate(levels):
        groups = [np.asarray(c.rows, dtype=np.int64) for c in level]
        for c, rows, ids in zip(level, groups, _edges_by_group(groups, len(graph), graph.edges)):
            nodes.append(_Node(
                level=depth,
                rows=rows,
                parent=None if c.parent is None else int(offsets[depth - 1] + c.parent),
                children=[int(offsets[depth + 1] + child) for child in c.children],
                edge_ids=ids,
            ))
    for node in reversed(nodes):  # finer levels come later, so children are done first
        node.height = 1 + max((nodes[c].height for c in node.children), default=-1)
        node.id = community_id(HIERARCHY, node.level, [graph.ids[r] for r in node.rows.tolist()])
    return nodes


def _child_text(report: Report) -> str:
    """What stands in for a reported sub-community in its parent's context."""
    return f"{report.title}\n{report.text()}" if report.title else report.text()


def _read_report(elements: ReportElements, rows: list[int], title_entities: int, reply: str) -> Summary:
    """The report in ``reply``, or the fallback report (also the zero-LLM path's)."""
    report = parse_report(reply)
    if report is None:
        report = fallback_report(elements, rows, title_entities)
    else:
        report.title = report.title or _title_from(elements, rows, title_entities)
    return Summary(report.title, report.text(), "fallback" if report.fallback else "json", detail=report)


def _entity_report(report: Report, reply: str) -> Summary:
    """A one-entity community: the entity is its own report (no call)."""
    return Summary(report.title, report.text(), "given", detail=report)


def _reply_ignored(summary: Summary, reply: str) -> Summary:
    return summary


def _kept_report(community: Community) -> Summary:
    """The report of a community of the last build whose member set did not change."""
    payload = community.payload
    raw = payload.get("report") or {}
    report = Report(title=community.title, summary=payload.get("report_summary", ""), rating=community.rating,
                    rating_explanation=payload.get("rating_explanation", ""),
                    findings=list(payload.get("findings") or []), raw=raw if isinstance(raw, dict) else {},
                    fallback=bool(payload.get("fallback")))
    source = "given" if payload.get("singleton") else "fallback" if report.fallback else "json"
    return Summary(report.title, report.text(), source, detail=report, kept=True)


def _report_round(
    batch: list[_Node], nodes: list[_Node], elements: ReportElements, config: GraphragCommunityConfig,
    models: BuildModels, stats: Counter[str], label: str, kept: dict[tuple[int, frozenset[str]], Community],
) -> None:
    """Report every community of ``batch`` (their children are reported already), concurrently;
    a community in ``kept`` (same level, same members as in the last build) keeps its report."""
    graph = elements.graph
    prompt = models.prompts.load(PROMPT)
    asks: list[Ask] = []
    for node in batch:
        rows = node.rows.tolist()
        previous = kept.get((node.level, frozenset(map(graph.ids.__getitem__, rows)))) if kept else None
        if previous is not None:
            node.previous = previous
            asks.append(Ask(None, partial(_reply_ignored, _kept_report(previous))))
            continue
        if len(rows) == 1:
            summary = _one_line(graph.descriptions[rows[0]]) or graph.names[rows[0]]
            asks.append(Ask(None, partial(_entity_report, Report(title=graph.names[rows[0]], summary=summary))))
            continue
        subs = [SubReport(tuple(nodes[c].rows.tolist()), _child_text(nodes[c].report)) for c in node.children]
        context = build_report_context(elements, node.rows, config.max_context_tokens, subs, node.edge_ids)
        node.context = context
        stats["substituted"] += int(bool(context.substituted))
        stats["truncated"] += int(context.truncated)
        stats["max_context_tokens_used"] = max(stats["max_context_tokens_used"], context.tokens)
        request = prompt.request(STAGE, max_tokens=config.report_max_tokens, temperature=models.temperature,
                                 json_mode=True, context=context.text)
        asks.append(Ask(request, partial(_read_report, elements, rows, config.title_entities)))
    for node, summary in zip(batch, ask_all(asks, models, label)):
        node.summary = summary
        stats["repaired_reports"] += int(summary.source == "json" and node.report.repaired)


def build_graphrag_communities(
    graph: EntityGraph, models: BuildModels, config: GraphragCommunityConfig = GraphragCommunityConfig(),
    previous: Sequence[Community] | None = None, line_tokens: LineTokens | None = None,
) -> HierarchyResult:
    """GraphRAG's community hierarchy with one report per community; see the module docstring.

    ``line_tokens``: token counts of context lines kept from earlier builds (an update counts
    only lines it has not seen; :mod:`unirag.index.line_tokens`), filled in with this build's.

    The clustering is top-down and all at once, and reports go leaves first
    (by height, across levels), so this builder uses only the summary step and
    the counters of :mod:`unirag.hierarchy.layered`, not its bottom-up loop.
    ``models.chat=None`` is the zero-LLM path: every report is extractive
    (title from the most connected members, summary from their descriptions).

    ``stats``: the shared counters (``summaries`` = reports asked for,
    ``llm_summaries``, ``fallback_summaries``, ``singletons`` reported without
    the model, ``summary_cache_hits``, ``per_level``), plus ``leaves``,
    ``oversize_leaves`` (leaves above ``max_cluster_size``),
    ``repaired_reports``, ``substituted`` (contexts quoting sub-community
    reports), ``truncated`` (contexts cut at the limit),
    ``max_context_tokens_used``.
    """
    config.validate()
    update: dict[str, Any] | None = None
    if previous:  # an incremental update: carry the last build's communities (see updated_leiden)
        levels, update = updated_leiden(graph, previous, config)
    else:
        levels = hierarchical_leiden(
            graph, config.max_cluster_size, config.seed, config.resolution, config.max_levels,
            config.leiden_iterations,
        )
    nodes = _nodes(graph, levels)
    # On an incremental update a community keeps its report when its member set did not change.
    kept = {(c.level, frozenset(c.entities)): c for c in previous} if previous and update is not None else {}
    counts: Counter[str] = Counter(substituted=0, truncated=0, max_context_tokens_used=0, repaired_reports=0)
    if nodes:
        count = line_tokens.counter(models.tokenizer.count) if line_tokens is not None else models.tokenizer.count
        elements = ReportElements.from_graph(graph, count)
        for height in range(1 + max(node.height for node in nodes)):
            batch = [node for node in nodes if node.height == height]
            _report_round(batch, nodes, elements, config, models, counts, f"graphrag reports, round {height + 1}",
                          kept)
    communities = [_community(graph, nodes, node) for node in nodes]
    stats = HierarchyStats(
        stop_reason="empty" if not nodes else "max_levels" if len(levels) == config.max_levels else "no_split",
        extra={
            "leaves": sum(1 for node in nodes if not node.children),
            "oversize_leaves": sum(
                1 for node in nodes if not node.children and len(node.rows) > config.max_cluster_size
            ),
            **counts,
            **({"update": {"mode": "attach", **update}} if update is not None else {}),
        },
    )
    for depth in range(len(levels)):
        level_nodes = [node for node in nodes if node.level == depth]
        entry = LevelStats(depth, nodes=sum(len(node.rows) for node in level_nodes), communities=len(level_nodes))
        entry.count([node.summary for node in level_nodes if node.summary is not None])
        stats.per_level.append(entry)
    return HierarchyResult(hierarchy=HIERARCHY, level_order="top_down", communities=communities,
                           stats=stats.to_dict())


def _community(graph: EntityGraph, nodes: list[_Node], node: _Node) -> Community:
    report = node.report
    entity_ids = [graph.ids[r] for r in node.rows.tolist()]
    context = node.context
    payload: dict[str, Any] = {
        "report": report.raw or {"title": report.title, "summary": report.summary},
        "report_summary": report.summary,
        "rating_explanation": report.rating_explanation,
        "findings": report.findings,
        "context_tokens": context.tokens if context else 0,
        "substituted": len(context.substituted) if context else 0,
        "truncated": bool(context.truncated) if context else False,
        **({key: node.previous.payload.get(key) for key in ("context_tokens", "substituted", "truncated")}
           if node.previous is not None else {}),
        "fallback": report.fallback,
        "singleton": len(node.rows) == 1,
        "height": node.height,
    }
    return Community(
        id=node.id,
        hierarchy=HIERARCHY,
        level=node.level,
        children=[nodes[c].id for c in node.children] if node.children else entity_ids,
        entities=entity_ids,
        title=report.title,
        summary=report.text(),
        parent=None if node.parent is None else nodes[node.parent].id,
        rating=report.rating,
        payload=payload,
    )


# -- the spec ----------------------------------------------------------------------


def _build(inputs: BuildInputs, name: str, config: GraphragCommunityConfig,
           make_carrier: MakeCarrier) -> tuple[HierarchyResult, list[str]]:
    """Hierarchical Leiden with reports over the merged graph; an update re-reports only what changed."""
    graph = inputs.entity_graph(False)
    carrier = make_carrier(graph.ids)
    # the carrier holds the last build's communities (by level, in the store's order): not loaded twice
    previous = [node.record for nodes in carrier.previous.values() for node in nodes] \
        if carrier is not None else None
    # context lines' token counts: an update counts only lines the last builds did not (a full build afresh)
    tokens_file = inputs.workspace.artifact_path(f"communities.{name.replace(':', '.')}.line_tokens.npz")
    line_tokens = load_line_tokens(tokens_file, inputs.models.tokenizer.name) if carrier is not None \
        else LineTokens(inputs.models.tokenizer.name)
    result = build_graphrag_communities(graph, inputs.models, config, previous, line_tokens)
    save_line_tokens(tokens_file, line_tokens)
    return result, graph.ids


SPEC = HierarchySpec(
    name=HIERARCHY,
    settings=GraphragCommunityConfig,
    build=_build,
    prompts=(PROMPT,),
    needs=("graph",),
    cost=lambda config: CostShape(config.max_cluster_size, 2, config.max_levels, config.max_context_tokens),
    description="GraphRAG hierarchical Leiden communities C0..Cn with LLM reports",
    operators=("community.entity", "community.layer", "community.vdb"),
)
