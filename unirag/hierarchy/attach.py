"""Keep a community hierarchy's membership when the corpus changes: attach, detach, split.

Why not re-cluster: Leiden, Gaussian mixtures and LSH merges are not stable
under small changes. On 500 2Wiki passages, re-clustering after adding 1 %
more passages changed the member set of most communities, so 63 % of a full
build's summary calls were asked again (``bench/living_corpus.py``). HyGRAG
(Zhong et al. 2025, §3.4) updates its hierarchy by *attachment* instead: new content
joins the existing community whose summary embedding is most similar when
that similarity exceeds ``tau_attach`` (0.65), and only the communities along
its path are re-summarised (Eq. 28-31). This module applies that rule, one
level at a time, to every bottom-up hierarchy (ArchRAG, HyGRAG, LeanRAG) and
to RAPTOR's tree; each hierarchy says how it compares a member with a
community (:class:`AttachPolicy`) and how unattached members are grouped.

The output is a *grouping* of the current layer, which the hierarchy's own
builder then summarises and embeds as in a full build, except that a community whose
member set did not change keeps its summary (:meth:`LevelCarrier.kept`):
only communities that gained, lost or split members are summarised anew,
and their ancestors where that changed a member (HyGRAG Eq. 30). A
re-summarised community whose prompt is one the model saw before (insert,
then delete) is answered by the model cache. Ids are derived from members,
so a community that gets its old members back gets its old id back.

Levels: an update applies a full build's stop rules to the layers it carries
(:func:`unirag.hierarchy.layered.build_levels` asks the hierarchy's own
``stop_before`` of every layer and clusters a level the last build lacked
afresh, as a full build would: ArchRAG's second level appears once a layer
holds ``min_nodes`` communities). One rule needs help: where the last build's
top was a root (one community over the whole layer), groups of new members
join the root (:func:`_join_root`) rather than stand beside it, which made the
loop stack a new root one level up, a level no full build makes. GraphRAG's
top-down Leiden hierarchy has a rule of its own
(:func:`unirag.hierarchy.graphrag.updated_leiden`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Groups = list[np.ndarray]
GroupNew = Callable[[np.ndarray], Groups]


@dataclass(frozen=True)
class AttachPolicy:
    """How a hierarchy places members that are new since its last build.

    ``by_neighbours``: a new member first joins the community holding most of
    its graph neighbours (ArchRAG and GraphRAG cluster the graph, so that is
    where a re-clustering would most likely put it). Otherwise, or without
    neighbours in any community, it joins the community whose vector is most
    similar, if the cosine is at least ``threshold`` (None: always the
    nearest). Groups above ``max_size`` are split; groups under ``min_size``
    are dissolved (ArchRAG keeps no single-member communities).
    """

    by_neighbours: bool = False
    by_similarity: bool = True  # False: a member without graph neighbours in any group is not attached
    threshold: float | None = None
    min_size: int = 1
    max_size: int | None = None
    # A size rule other than a count (RAPTOR: the members' tokens); such groups are halved until it holds.
    oversized: Callable[[np.ndarray], bool] | None = None
    # True: a group the last build already left too big is split only once it grows past the
    # size it had (LeanRAG: its mixture puts no cap on a cluster, so a full build leaves some
    # past ``max_size``; splitting them all on the first update re-asked every link at their
    # ends, ~5x a later update's relation calls, for clusters the change did not touch).
    keep_built_size: bool = False

    def too_big(self, group: np.ndarray, built_size: int = 0) -> bool:
        """Whether ``group`` must be split; ``built_size``: the members the community it
        continues had (0 for a new group), which ``keep_built_size`` lets it keep."""
        if self.oversized is not None:
            return len(group) > 2 and self.oversized(group)
        if self.keep_built_size and len(group) <= built_size:
            return False
        return self.max_size is not None and len(group) > self.max_size

    def split(self, group: np.ndarray, vectors: np.ndarray) -> Groups:
        """``group`` cut into parts that are not too big (balanced parts for a count limit)."""
        if self.oversized is None:
            return bisect(group, vectors, balanced_sizes(len(group), self.max_size or len(group)))
        out: Groups = []
        for part in bisect(group, vectors, balanced_sizes(len(group), -(-len(group) // 2))):
            out.extend(self.split(part, vectors) if self.too_big(part) else [part])
        return out


@dataclass
class Grouping:
    """One level's groups over the current layer's rows, and where each came from.

    ``origin[i]`` is the index (into the previous level's community list) of
    the community group ``i`` continues, or None for a group made of new
    members only. ``stats`` counts what the update did at this level.
    """

    groups: Groups
    origin: list[int | None]
    stats: dict[str, int] = field(default_factory=dict)
    # True where the group has exactly the members of the community it continues (none gone,
    # none attached, not split): such a community keeps its summary (see LevelCarrier.kept).
    unchanged: list[bool] = field(default_factory=list)
    # True where the group continues a community with the same members, some of which are
    # themselves communities that changed (renamed): kept within a drift share, see LevelCarrier.
    continued: list[bool] = field(default_factory=list)


def labels_of(groups: Groups, n: int) -> np.ndarray:
    """A label per row: its group's index, or a label of its own (>= len(groups)) when ungrouped,
    for algorithms whose later steps read labels rather than groups."""
    labels = np.full(n, -1, dtype=np.int64)
    for index, group in enumerate(groups):
        labels[group] = index
    alone = np.flatnonzero(labels < 0)
    labels[alone] = len(groups) + np.arange(len(alone))
    return labels


def principal_direction(x: np.ndarray, iterations: int = 20) -> np.ndarray:
    """First principal direction of rows ``x`` by power iteration from the longest centred row (deterministic)."""
    y = x - x.mean(axis=0)
    norms = np.linalg.norm(y, axis=1)
    if not len(y) or norms.max() == 0:
        return np.zeros(x.shape[1], dtype=x.dtype)
    v = y[int(np.argmax(norms))] / norms.max()
    for _ in range(iterations):
        w = y.T @ (y @ v)
        length = np.linalg.norm(w)
        if length == 0:
            break
        v = w / length
    return v if v[int(np.argmax(np.abs(v)))] >= 0 else -v


def balanced_sizes(total: int, limit: int) -> list[int]:
    """``ceil(total / limit)`` part sizes that differ by at most one and sum to ``total``."""
    parts = max(1, -(-total // max(1, limit)))
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


def bisect(members: np.ndarray, x: np.ndarray, sizes: Sequence[int]) -> Groups:
    """Cut ``members`` into parts of exactly ``sizes`` by recursive principal-direction bisection
    (balanced, deterministic, keeps neighbours together)."""
    if len(sizes) == 1:
        return [np.sort(members)]
    half = len(sizes) // 2
    cut = sum(sizes[:half])
    points = x[members]
    order = np.argsort(points @ principal_direction(points), kind="stable")
    return bisect(members[order[:cut]], x, sizes[:half]) + bisect(members[order[cut:]], x, sizes[half:])


def _membership(groups: Groups, n: int) -> Any:
    """Rows x groups indicator (CSR)."""
    from scipy.sparse import csr_matrix

    if not groups:
        return csr_matrix((n, 0))
    rows = np.concatenate(groups)
    cols = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    return csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(groups)))


def _centroids(vectors: np.ndarray, membership: Any) -> np.ndarray:
    sums = np.asarray(membership.T @ vectors, dtype=np.float32)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return sums / np.where(norms == 0, 1.0, norms)


def attach_targets(
    new_rows: np.ndarray, groups: Groups, vectors: np.ndarray, adjacency: Any | None, policy: AttachPolicy,
    group_vectors: np.ndarray | None = None,
) -> np.ndarray:
    """The group each new row joins (-1: none qualifies), in one sparse/dense product, no per-row loop.

    ``group_vectors`` (one L2-normalised row per group) are what a member is
    compared with (HyGRAG: the communities' summary embeddings); by default
    the normalised mean of the groups' member vectors.
    """
    target = np.full(len(new_rows), -1, dtype=np.int64)
    if not len(new_rows) or not groups:
        return target
    membership = _membership(groups, len(vectors))
    if policy.by_neighbours and adjacency is not None:
        target = _attach_by_neighbours(new_rows, groups, adjacency, policy.max_size)
    rest = np.flatnonzero(target < 0)
    if len(rest) and policy.by_similarity:
        compare = group_vectors if group_vectors is not None else _centroids(vectors, membership)
        sims = np.asarray(vectors[new_rows[rest]], dtype=np.float32) @ np.asarray(compare, dtype=np.float32).T
        best = sims.argmax(axis=1)
        ok = np.ones(len(rest), dtype=bool) if policy.threshold is None else (
            sims[np.arange(len(rest)), best] >= policy.threshold)
        target[rest[ok]] = best[ok]
    return target


def _attach_by_neighbours(new_rows: np.ndarray, groups: Groups, adjacency: Any,
                          max_unit: int | None = None) -> np.ndarray:
    """The group each new row joins (-1: none), one *unit* at a time.

    A unit is a connected set of new rows (the new entities of one passage,
    linked to each other); a unit past ``max_unit`` rows is taken row by row.
    A unit joins the group with the largest modularity gain
    ``e(S, C) - vol(S) vol(C) / 2m`` when that gain is positive: one
    local-moving step of Louvain/Leiden with the unit as one node, which keeps
    a passage's new entities together as re-clustering would, and touches one
    community per passage instead of one per entity. In rounds, so a unit
    linked only to other new units joins once they have; a unit with no
    positive gain, or no placed neighbour, stays unattached (-1).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n, k = adjacency.shape[0], len(new_rows)
    target = np.full(k, -1, dtype=np.int64)
    degree = np.asarray(adjacency.sum(axis=1), dtype=np.float64).reshape(-1)
    two_m = float(degree.sum())
    if not k or not groups or two_m == 0:
        return target
    owner = np.full(n, -1, dtype=np.int64)
    for index, group in enumerate(groups):
        owner[group] = index
    _, unit = connected_components(adjacency[new_rows][:, new_rows], directed=False)
    if max_unit is not None:
        alone = np.bincount(unit)[unit] > max_unit
        unit[alone] = unit.max() + 1 + np.arange(int(alone.sum()))
    _, unit = np.unique(unit, return_inverse=True)
    n_units = int(unit.max()) + 1
    vol_unit = np.bincount(unit, weights=degree[new_rows], minlength=n_units)
    placed = owner >= 0
    vol_group = np.bincount(owner[placed], weights=degree[placed], minlength=len(groups)).astype(np.float64)
    unit_links = (csr_matrix((np.ones(k), (unit, np.arange(k))), shape=(n_units, k)) @ adjacency[new_rows]).tocsr()
    unit_target = np.full(n_units, -1, dtype=np.int64)
    pending = np.arange(n_units)
    while len(pending):
        placed_rows = np.flatnonzero(owner >= 0)
        onehot = csr_matrix((np.ones(len(placed_rows)), (placed_rows, owner[placed_rows])), shape=(n, len(groups)))
        counts = (unit_links[pending] @ onehot).tocoo()
        if counts.nnz == 0:
            break
        gain = counts.data - vol_unit[pending[counts.row]] * vol_group[counts.col] / two_m
        order = np.lexsort((counts.col, -gain, counts.row))  # per unit: best gain first, ties by group
        first = order[np.concatenate([[True], np.diff(counts.row[order]) != 0])]
        linked, best, best_gain = pending[counts.row[first]], counts.col[first], gain[first]
        joins = best_gain > 0
        unit_target[linked[joins]] = best[joins]
        joined_rows = np.flatnonzero(np.isin(unit, linked[joins]))
        owner[new_rows[joined_rows]] = unit_target[unit[joined_rows]]
        np.add.at(vol_group, best[joins], vol_unit[linked[joins]])
        pending = np.setdiff1d(pending, linked)  # linked units are placed or refused; the rest wait
        if not joins.any():
            break
    return unit_target[unit]


def components_group_new(adjacency: Any, vectors: np.ndarray, max_size: int | None) -> GroupNew:
    """Unattached new members grouped by their links to each other (one group per connected
    set, bisected to ``max_size``): what graph clustering would keep together."""
    def group(rows: np.ndarray) -> Groups:
        if not len(rows):
            return []
        from scipy.sparse.csgraph import connected_components

        rows = np.sort(rows)
        _, labels = connected_components(adjacency[rows][:, rows], directed=False)
        out: Groups = []
        for label in range(int(labels.max()) + 1):
            part = rows[labels == label]
            out.extend(bisect(part, vectors, balanced_sizes(len(part), max_size or len(part))))
        return out

    return group


def default_group_new(vectors: np.ndarray, max_size: int | None) -> GroupNew:
    """Unattached new members grouped among themselves: one group, bisected to ``max_size``."""
    def group(rows: np.ndarray) -> Groups:
        if not len(rows):
            return []
        return bisect(np.sort(rows), vectors, balanced_sizes(len(rows), max_size or len(rows)))

    return group


def carry_groups(
    previous: Sequence[Sequence[str]],
    layer_ids: Sequence[str],
    known: set[str],
    vectors: np.ndarray,
    adjacency: Any | None,
    policy: AttachPolicy,
    group_new: GroupNew | None = None,
    group_vectors: np.ndarray | None = None,
    changed: set[str] | frozenset[str] = frozenset(),
) -> Grouping:
    """One level's grouping after a corpus change.

    ``previous`` holds the member ids (children) of each community this level
    had; ``layer_ids`` are the current layer's node ids; ``known`` the ids the
    last build already placed or left out on purpose (a member it left
    without a community stays so). Members gone from the layer are dropped
    from their groups; members that are neither grouped nor known are
    attached by ``policy`` or grouped by ``group_new``. ``changed`` names
    members that are themselves records whose members changed: a group
    holding one is not unchanged (its summary quotes theirs: Eq. 30).
    """
    n = len(layer_ids)
    row = {node: i for i, node in enumerate(layer_ids)}
    groups: Groups = []
    origin: list[int | None] = []
    whole: list[bool] = []
    same_members: list[bool] = []
    detached = 0
    for index, children in enumerate(previous):
        rows = [row[c] for c in children if c in row]
        detached += len(children) - len(rows)
        if rows:
            groups.append(np.array(sorted(set(rows)), dtype=np.int64))
            origin.append(index)
            same_members.append(len(rows) == len(children))
            whole.append(same_members[-1] and not any(c in changed for c in children))
    grouped = np.zeros(n, dtype=bool)
    for g in groups:
        grouped[g] = True
    was_known = np.fromiter((node in known for node in layer_ids), dtype=bool, count=n)
    new_rows = np.flatnonzero(~grouped & ~was_known)
    vectors = np.asarray(vectors, dtype=np.float32)
    if group_vectors is not None:
        group_vectors = np.asarray(group_vectors, dtype=np.float32)[[o for o in origin if o is not None]]
    target = attach_targets(new_rows, groups, vectors, adjacency, policy, group_vectors)
    for g in np.unique(target[target >= 0]).tolist():
        groups[g] = np.sort(np.concatenate([groups[g], new_rows[target == g]]))
        whole[g] = same_members[g] = False
    stats = {"detached": detached, "attached": int((target >= 0).sum()), "new_members": len(new_rows)}
    if group_new is None:
        group_new = (components_group_new(adjacency, vectors, policy.max_size)
                     if policy.by_neighbours and adjacency is not None else default_group_new(vectors, policy.max_size))
    fresh = group_new(new_rows[target < 0])
    stats["new_groups"] = len(fresh)
    groups.extend(fresh)
    origin.extend([None] * len(fresh))
    whole.extend([False] * len(fresh))
    same_members.extend([False] * len(fresh))
    out: Groups = []
    out_origin: list[int | None] = []
    out_whole: list[bool] = []
    out_same: list[bool] = []
    splits = dissolved = 0
    for g, o, w, m in zip(groups, origin, whole, same_members):
        if policy.too_big(g, 0 if o is None else len(previous[o])):
            parts = policy.split(g, vectors)
            splits += 1
            out.extend(parts)
            out_origin.extend([o] + [None] * (len(parts) - 1))
            out_whole.extend([False] * len(parts))
            out_same.extend([False] * len(parts))
        elif len(g) < policy.min_size:
            dissolved += 1
        else:
            out.append(g)
            out_origin.append(o)
            out_whole.append(w)
            out_same.append(m)
    stats.update(splits=splits, dissolved=dissolved, unchanged=sum(out_whole))
    return Grouping(out, out_origin, stats, out_whole, out_same)


def _join_root(grouping: Grouping, policy: AttachPolicy, built_size: int) -> None:
    """New groups at the level where the last build had its root join the root's group.

    Why: a full build stops at a level whose one group holds every node (its root).
    Carried, that root is the one group that continues, and the members that did not
    attach to it (a similarity threshold, no graph neighbour) form groups of their
    own; left so, the level has several records, the loop goes on and clusters them
    into a root one level up, a level no full build of the same corpus makes (and the
    top then depends on the order documents arrived). So the update keeps the full
    build's stop: groups of new members only (``origin`` None) join the root's group,
    which is summarised anew as any group that gained members is. Unless the grown
    root breaks the hierarchy's size rule (:meth:`AttachPolicy.too_big`; ``built_size``:
    the members the root had), which a full build obeys too and then goes on: so a
    root that was split for its size is never merged back (parts split off it also
    have no origin, and with them the merge is bigger still).
    """
    if len(grouping.groups) < 2 or 0 not in grouping.origin:
        return
    root = grouping.origin.index(0)
    fresh = [g for g, o in enumerate(grouping.origin) if o is None]
    if not fresh:
        return
    merged = np.sort(np.concatenate([grouping.groups[root]] + [grouping.groups[g] for g in fresh]))
    if policy.too_big(merged, built_size):
        return
    keep = [g for g in range(len(grouping.groups)) if g not in set(fresh)]
    grouping.groups[root] = merged
    grouping.unchanged[root] = grouping.continued[root] = False
    grouping.groups = [grouping.groups[g] for g in keep]
    grouping.origin = [grouping.origin[g] for g in keep]
    grouping.unchanged = [grouping.unchanged[g] for g in keep]
    grouping.continued = [grouping.continued[g] for g in keep]
    grouping.stats["joined_root"] = len(fresh)


@dataclass(frozen=True)
class PreviousNode:
    """A record of the previous build as the update needs it: its id, its members one
    level down, and the text a hierarchy compares new members with (HyGRAG: the summary)."""

    id: str
    children: tuple[str, ...]
    text: str = ""
    record: Any = None  # the record itself (Community, tree node): what an unchanged group keeps
    # The units beneath the record that upper-level drift is measured in, where the record does not
    # list them as ``entities`` (the RAPTOR tree: the leaf chunks beneath a summary node).
    beneath: tuple[str, ...] | None = None


class LevelCarrier:
    """Carries a previous hierarchy through a rebuild, one level at a time (levels count up
    from the leaves: 1 is the first level of records above them).

    A layered builder asks :meth:`grouping` for each level's groups instead of
    clustering (None: that level did not exist before, so it clusters as a full
    build does), builds its records from them in order, and reports their ids
    with :meth:`built`, so that the next level follows renamed children.
    """

    def __init__(self, previous: dict[int, list[PreviousNode]], known_leaves: set[str],
                 resummarize_share: float = 0.0) -> None:
        self.previous = previous
        self.known = set(known_leaves)
        self.renamed: dict[str, str] = {}
        self.stats: dict[str, int] = {}
        self.resummarize_share = resummarize_share
        self._leaves = frozenset(known_leaves)  # the last build's leaves (``known`` moves up the levels)
        self._last: tuple[int, Grouping] | None = None
        # per group of the last grouping kept within the drift share: the entities its summary
        # was written from (carried into the new record's payload as ``written_from``)
        self._written: dict[int, list[str]] = {}

    def nodes(self, level: int) -> list[PreviousNode]:
        """The previous build's records of ``level`` (empty when it had none)."""
        return self.previous.get(level, [])

    def grouping(
        self, level: int, layer_ids: Sequence[str], vectors: np.ndarray, policy: AttachPolicy,
        adjacency: Any | None = None, group_new: GroupNew | None = None,
        group_vectors: np.ndarray | None = None, entities: Sequence[Sequence[str]] | None = None,
    ) -> Grouping | None:
        """This level's groups over ``layer_ids`` rows, or None to cluster afresh.

        ``group_vectors``: one row per previous record of this level (see
        :func:`carry_groups`). ``entities`` (the entities beneath each row; the RAPTOR
        tree: the leaf chunks), given by hierarchies whose upper summaries may drift
        (ArchRAG, LeanRAG, the tree; not HyGRAG, whose paper propagates every change
        up, Eq. 30): a group with the
        same member communities as before, some of them changed, keeps its
        summary while at most ``resummarize_share`` of the entities beneath it
        differ from those that summary was written from."""
        old = self.nodes(level)
        self._written = {}
        if not old:
            self._last = None
            return None
        previous = [[self.renamed.get(child, child) for child in node.children] for node in old]
        changed = {new for before, new in self.renamed.items() if new != before}
        result = carry_groups(previous, layer_ids, self.known, vectors, adjacency, policy, group_new, group_vectors,
                              changed)
        if self._is_root(level):
            _join_root(result, policy, len(self.nodes(level)[0].children))
        if entities is not None and self.resummarize_share > 0:
            self._keep_within_drift(result, old, entities)
        for key, value in result.stats.items():
            self.stats[key] = self.stats.get(key, 0) + value
        self._last = (level, result)
        return result

    def _is_root(self, level: int) -> bool:
        """Whether ``level`` was the last build's top and its one record held the whole layer
        (the loop stopped there with ``root``: every record of the level below, or every leaf)."""
        if level != max(self.previous, default=0) or len(self.nodes(level)) != 1:
            return False
        below = {node.id for node in self.nodes(level - 1)} if level > 1 else self._leaves
        return set(self.nodes(level)[0].children) == below

    def _keep_within_drift(self, grouping: Grouping, old: list[PreviousNode],
                           entities: Sequence[Sequence[str]]) -> None:
        kept = 0
        for g, (group, origin) in enumerate(zip(grouping.groups, grouping.origin)):
            if origin is None or grouping.unchanged[g] or not grouping.continued[g]:
                continue
            node = old[origin]
            payload = getattr(node.record, "payload", None) or {}
            beneath = node.beneath if node.beneath is not None else getattr(node.record, "entities", ())
            written = set(payload.get("written_from") or beneath)
            now = {e for row in group.tolist() for e in entities[row]}
            union = len(now | written)
            if union and 1.0 - len(now & written) / union <= self.resummarize_share:
                grouping.unchanged[g] = True
                self._written[g] = sorted(written)
                kept += 1
        grouping.stats["kept_within_drift"] = kept

    def written_from(self, level: int) -> dict[int, list[str]]:
        """Groups of the last :meth:`grouping` of ``level`` kept within the drift share, and the
        entities their summaries were written from (what the next update measures drift against)."""
        return dict(self._written) if self._last is not None and self._last[0] == level else {}

    def kept(self, level: int) -> list[Any]:
        """Per group of the last :meth:`grouping` of ``level``: the previous record it continues
        unchanged (same members), whose summary it keeps, else None (it is summarised anew)."""
        if self._last is None or self._last[0] != level:
            return []
        old, grouping = self.nodes(level), self._last[1]
        return [old[o].record if o is not None and same else None
                for o, same in zip(grouping.origin, grouping.unchanged)]

    def annotate(self, level: int, records: Sequence[Any]) -> None:
        """Give each record of ``level`` that keeps an earlier summary the entities that summary
        was written from (``payload["written_from"]``), so drift is measured against the text,
        never against the last update."""
        written = self.written_from(level)
        for index, (record, old) in enumerate(zip(records, self.kept(level))):
            payload = getattr(record, "payload", None)
            if payload is None or old is None:
                continue
            basis = written.get(index) or (getattr(old, "payload", None) or {}).get("written_from")
            if basis:
                payload["written_from"] = basis

    def built(self, level: int, ids: Sequence[str]) -> None:
        """The ids the builder gave this level's records, in the order of its groups."""
        if self._last is None or self._last[0] != level:
            self.renamed, self.known = {}, set()
            return
        old, origin = self.nodes(level), self._last[1].origin
        self.renamed = {old[o].id: ids[i] for i, o in enumerate(origin) if o is not None}
        self.known = set(self.renamed.values())
        self._last = None
