"""Membership maintenance of a hierarchy after a corpus change, on small hand-built layers."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, attach_targets, balanced_sizes, carry_groups


def _unit(*rows: list[float]) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _adjacency(n: int, edges: list[tuple[int, int]]) -> csr_matrix:
    rows = [a for a, b in edges] + [b for a, b in edges]
    cols = [b for a, b in edges] + [a for a, b in edges]
    return csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))


# Two clear topics along x and y; "n1" is new and near x, "n2" new and near y, "n3" new and neither.
IDS = ["a1", "a2", "a3", "b1", "b2", "n1", "n2", "n3"]
VECTORS = _unit([1, 0.1, 0], [1, 0, 0.1], [1, 0.05, 0], [0.1, 1, 0], [0, 1, 0.1], [1, 0.2, 0], [0.2, 1, 0],
                [0, 0, 1])
PREVIOUS = [["a1", "a2", "a3"], ["b1", "b2"]]
KNOWN = {"a1", "a2", "a3", "b1", "b2"}


def _members(grouping, ids=IDS) -> list[list[str]]:
    return [[ids[i] for i in g.tolist()] for g in grouping.groups]


def test_new_members_join_the_most_similar_group_above_the_threshold() -> None:
    grouping = carry_groups(PREVIOUS, IDS, KNOWN, VECTORS, None, AttachPolicy(threshold=0.65))
    assert _members(grouping) == [["a1", "a2", "a3", "n1"], ["b1", "b2", "n2"], ["n3"]]
    assert grouping.origin == [0, 1, None]
    assert grouping.stats["attached"] == 2 and grouping.stats["new_groups"] == 1


def test_without_a_threshold_every_new_member_joins_the_nearest_group() -> None:
    grouping = carry_groups(PREVIOUS, IDS, KNOWN, VECTORS, None, AttachPolicy())
    assert len(grouping.groups) == 2 and grouping.stats["new_groups"] == 0


def test_graph_neighbours_win_over_similarity() -> None:
    # n1 is similar to the a-group but linked twice into the b-group.
    adjacency = _adjacency(len(IDS), [(5, 3), (5, 4)])
    target = attach_targets(np.array([5]), [np.array([0, 1, 2]), np.array([3, 4])], VECTORS, adjacency,
                            AttachPolicy(by_neighbours=True))
    assert target.tolist() == [1]


def test_gone_members_leave_and_empty_groups_vanish() -> None:
    ids = ["a1", "a3", "b1"]
    grouping = carry_groups(PREVIOUS + [["c1"]], ids, KNOWN | {"c1"}, VECTORS[[0, 2, 3]], None, AttachPolicy())
    assert _members(grouping, ids) == [["a1", "a3"], ["b1"]]
    assert grouping.stats["detached"] == 3


def test_known_members_left_out_stay_out() -> None:
    # ArchRAG leaves singletons without a community: a known, ungrouped member is not re-attached.
    grouping = carry_groups(PREVIOUS, IDS[:6], KNOWN | {"n1"}, VECTORS[:6], None, AttachPolicy())
    assert _members(grouping, IDS[:6]) == [["a1", "a2", "a3"], ["b1", "b2"]]


def test_oversized_groups_split_and_undersized_dissolve() -> None:
    grouping = carry_groups([["a1", "a2", "a3", "n1", "n2"], ["b1"]], IDS, set(IDS), VECTORS, None,
                            AttachPolicy(min_size=2, max_size=3))
    sizes = sorted(len(g) for g in grouping.groups)
    assert sizes == [2, 3] and grouping.stats["splits"] == 1 and grouping.stats["dissolved"] == 1
    assert sorted(o for o in grouping.origin if o is not None) == [0]


def test_keep_built_size_splits_an_oversized_group_only_once_it_grows() -> None:
    # LeanRAG: a full build may leave a cluster past max_size; it stays whole until it grows.
    policy = AttachPolicy(max_size=2, keep_built_size=True)
    kept = carry_groups(PREVIOUS, IDS[:5], KNOWN, VECTORS[:5], None, policy)
    assert _members(kept, IDS[:5]) == [["a1", "a2", "a3"], ["b1", "b2"]] and kept.stats["splits"] == 0
    grown = carry_groups(PREVIOUS, IDS[:6], KNOWN, VECTORS[:6], None, policy)
    assert grown.stats["splits"] == 1 and sorted(len(g) for g in grown.groups) == [2, 2, 2]


def test_balanced_sizes() -> None:
    assert balanced_sizes(10, 4) == [4, 3, 3]
    assert balanced_sizes(3, 50) == [3]


def test_a_carrier_follows_renamed_children_up_the_levels() -> None:
    from unirag.hierarchy.attach import PreviousNode

    previous = {
        1: [PreviousNode("L1-a", ("a1", "a2", "a3")), PreviousNode("L1-b", ("b1", "b2"))],
        2: [PreviousNode("L2-x", ("L1-a", "L1-b"))],
    }
    carrier = LevelCarrier(previous, KNOWN)
    policy = AttachPolicy(threshold=0.65)
    first = carrier.grouping(1, IDS, VECTORS, policy)
    assert first is not None and len(first.groups) == 3
    carrier.built(1, ["L1-a'", "L1-b'", "L1-new"])
    second = carrier.grouping(2, ["L1-a'", "L1-b'", "L1-new"], _unit([1, 0, 0], [0, 1, 0], [0.6, 0.6, 0.5]),
                              AttachPolicy())
    # The renamed communities stay in their parent; the new one is attached to it as well (nearest).
    assert second is not None and [g.tolist() for g in second.groups] == [[0, 1, 2]]
    carrier.built(2, ["L2-x'"])
    assert carrier.grouping(3, ["L2-x'"], _unit([1, 0, 0]), policy) is None
    assert carrier.stats["attached"] == 3 and carrier.stats["new_groups"] == 1


def test_a_parent_of_a_changed_child_is_not_unchanged() -> None:
    from unirag.hierarchy.attach import PreviousNode

    previous = {
        1: [PreviousNode("L1-a", ("a1", "a2", "a3")), PreviousNode("L1-b", ("b1", "b2"))],
        2: [PreviousNode("L2-x", ("L1-a", "L1-b"))],
    }
    carrier = LevelCarrier(previous, KNOWN)
    first = carrier.grouping(1, IDS[:6], VECTORS[:6], AttachPolicy())  # n1 joins the a-group
    assert first is not None and first.unchanged == [False, True]
    assert carrier.kept(1) == [None, None]  # no records were given; the b-group would keep its own
    carrier.built(1, ["L1-a'", "L1-b"])  # the a-group's members changed, so did its id
    second = carrier.grouping(2, ["L1-a'", "L1-b"], _unit([1, 0, 0], [0, 1, 0]), AttachPolicy())
    assert second is not None and second.unchanged == [False]  # its summary quotes the changed child


def _adjacency(n: int, edges: list[tuple[int, int]]):
    from scipy.sparse import coo_matrix

    a = np.array(edges, dtype=np.int64)
    return coo_matrix((np.ones(2 * len(a)), (np.concatenate([a[:, 0], a[:, 1]]), np.concatenate([a[:, 1], a[:, 0]]))),
                      shape=(n, n)).tocsr()


def _triangles(count: int) -> tuple[list[tuple[int, int]], list[np.ndarray]]:
    """``count`` separate triangles (rows 3i..3i+2), each a group: a graph big enough for
    modularity to welcome a node with a single link (its gain is 1 - deg * vol(C) / 2m)."""
    edges = [e for i in range(count) for e in ((3 * i, 3 * i + 1), (3 * i + 1, 3 * i + 2), (3 * i, 3 * i + 2))]
    return edges, [np.arange(3 * i, 3 * i + 3) for i in range(count)]


def test_new_rows_linked_to_each_other_join_one_group_together() -> None:
    """New rows 90-91 are linked to each other; 90 has one link to group 0 and one to group 1,
    91 two links to group 1: as a unit they join group 1, both of them (row by row, 90 could
    have gone either way)."""
    from unirag.hierarchy.attach import AttachPolicy, attach_targets

    edges, groups = _triangles(30)
    edges += [(90, 91), (90, 0), (90, 3), (91, 4), (91, 5)]
    target = attach_targets(np.array([90, 91]), groups, np.zeros((92, 1), np.float32), _adjacency(92, edges),
                            AttachPolicy(by_neighbours=True, by_similarity=False))
    assert target.tolist() == [1, 1]


def test_a_new_row_linked_only_to_new_rows_follows_them_and_a_loose_unit_stays_out() -> None:
    from unirag.hierarchy.attach import AttachPolicy, attach_targets

    policy = AttachPolicy(by_neighbours=True, by_similarity=False)
    # 90 -- 0 (one link into group 0); 91 -- 90 only: one unit, joins group 0
    edges, groups = _triangles(30)
    assert attach_targets(np.array([90, 91]), groups, np.zeros((92, 1), np.float32),
                          _adjacency(92, edges + [(90, 0), (91, 90)]), policy).tolist() == [0, 0]
    # a new triangle tied by one link to group 0: in a small graph the gain 1 - 7 * 7 / 2m is
    # negative, so it is a community of its own (among 30 triangles it would join: modularity's
    # resolution limit, as in a full Leiden run)
    edges, groups = _triangles(2)
    new = [(6, 7), (7, 8), (6, 8), (6, 0)]
    assert attach_targets(np.array([6, 7, 8]), groups, np.zeros((9, 1), np.float32),
                          _adjacency(9, edges + new), policy).tolist() == [-1, -1, -1]


def _community(cid: str, children: list[str], entities: list[str], payload: dict | None = None):
    from unirag.hierarchy.communities import Community

    return Community(cid, "h", 2, children, entities, summary=f"summary of {cid}", payload=dict(payload or {}))


def test_an_upper_community_whose_child_changed_keeps_its_summary_within_the_drift_share() -> None:
    """Level 2: P had children a, b (10 entities). Child a gained an entity and was renamed a2:
    P's members are the same communities, 1 of 11 entities beneath differs (0.09 <= 0.1): P keeps
    its summary and records the 10 it was written from; with a share of 0.05 it is re-asked."""
    from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, PreviousNode

    base = [f"e{i}" for i in range(10)]
    parent = _community("P", ["a", "b"], base)
    for share, kept in ((0.1, True), (0.05, False)):
        carrier = LevelCarrier({2: [PreviousNode("P", ("a", "b"), "", parent)]}, set(), share)
        carrier.renamed = {"a": "a2", "b": "b"}
        entities = [base[:5] + ["e10"], base[5:]]  # rows: a2, b
        grouping = carrier.grouping(2, ["a2", "b"], np.eye(2, dtype=np.float32), AttachPolicy(), entities=entities)
        assert grouping is not None and grouping.unchanged == [kept]
        records = [_community("P2", ["a2", "b"], base + ["e10"])]
        carrier.annotate(2, records)
        assert records[0].payload.get("written_from") == (base if kept else None)


def test_drift_is_measured_against_what_the_summary_was_written_from() -> None:
    """A parent kept once with written_from = 10 entities; a second change adds another: 2 of 12
    differ (0.17 > 0.1), so it is re-asked although each step alone was within the share."""
    from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, PreviousNode

    base = [f"e{i}" for i in range(10)]
    parent = _community("P2", ["a2", "b"], base + ["e10"], {"written_from": base})
    carrier = LevelCarrier({2: [PreviousNode("P2", ("a2", "b"), "", parent)]}, set(), 0.1)
    carrier.renamed = {"a2": "a3", "b": "b"}
    entities = [base[:5] + ["e10", "e11"], base[5:]]
    grouping = carrier.grouping(2, ["a3", "b"], np.eye(2, dtype=np.float32), AttachPolicy(), entities=entities)
    assert grouping is not None and grouping.unchanged == [False]
    # without entities (HyGRAG: every change propagates up, Eq. 30) nothing is kept on drift
    carrier = LevelCarrier({2: [PreviousNode("P2", ("a2", "b"), "", parent)]}, set(), 0.1)
    carrier.renamed = {"a2": "a3", "b": "b"}
    grouping = carrier.grouping(2, ["a3", "b"], np.eye(2, dtype=np.float32), AttachPolicy())
    assert grouping is not None and grouping.unchanged == [False]
