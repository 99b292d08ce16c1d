"""kNN lists continued by an update equal the lists a full computation finds.

"Equal" up to the order of near-ties, on every BLAS kernel: an update scores a kept row
against the fresh rows in a product of another shape than a full build's blocks, and
OpenBLAS (its kernel picked by CPU and shape) may then round a cosine differently in the
last float32 bit. So neighbours are compared by :func:`tests.ranking.assert_same_ranking`:
the same ids in the same places except among cosines within 1e-5 of each other. Where both
sides come from the same product (the merge shortcut against ranking every row) the
comparison stays exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.ranking import assert_same_ranking
from unirag.hierarchy.archrag import _full_lists, knn_neighbours
from unirag.index.knn_update import (
    _merge_fresh,
    _ranked,
    exact_lists,
    list_width,
    load_neighbour_lists,
    nearest_lists,
    save_neighbour_lists,
)

pytestmark = pytest.mark.numeric  # kNN lists from BLAS products of other shapes compared with a full build's


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def assert_same_top(got: np.ndarray, full: np.ndarray, x: np.ndarray, k: int) -> None:
    """Each row's top ``k`` of ``got`` ranks as ``full``'s (a longer exact list: its next entry
    says whether the k-th place is a near-tie), the cosines recomputed in float64 for both."""
    x64 = x.astype(np.float64)
    for row in range(len(x)):
        def ranked(ids: np.ndarray, row: int = row) -> list[tuple[int, float]]:
            return [(int(j), float(x64[row] @ x64[j])) for j in ids]
        after = full[row, k] if full.shape[1] > k else -1
        past = float(x64[row] @ x64[after]) if after >= 0 else None
        assert_same_ranking(ranked(got[row, :k]), ranked(full[row, :k]), past=past, label=row)


def test_exact_lists_known_answer_and_knn_neighbours_agree() -> None:
    x = unit(np.array([[1, 0], [0.9, 0.1], [0.5, 0.5], [0, 1], [-1, 0.1]], dtype=np.float64))
    neighbours, sims = exact_lists(x, np.arange(5), 2)
    assert neighbours.tolist() == [[1, 2], [0, 2], [1, 0], [2, 1], [3, 2]]  # row 2: 0 and 3 tie, lower row first
    assert sims[0, 0] == pytest.approx(float(x[0] @ x[1]))
    rng = np.random.default_rng(1)
    y = unit(rng.normal(size=(300, 16)))
    assert_same_top(knn_neighbours(y, 5), exact_lists(y, np.arange(300), list_width(5))[0], y, 5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_update_gives_the_full_lists(seed: int) -> None:
    """Insert 20 rows, delete 15, change 10 of 400: every row's top k is what a full
    computation gives, and only a fraction of the rows was recomputed in full."""
    rng = np.random.default_rng(seed)
    k = 6
    x = unit(rng.normal(size=(400, 24)))
    ids = [f"n{i}" for i in range(400)]
    first, done = nearest_lists(ids, x, k, None, _full_lists)
    assert done["mode"] == "full"

    keep = np.ones(400, dtype=bool)
    keep[rng.choice(400, 15, replace=False)] = False
    y = x[keep].copy()
    new_ids = [i for i, kept in zip(ids, keep) if kept]
    changed = rng.choice(len(y), 10, replace=False)
    y[changed] = unit(rng.normal(size=(10, 24)))
    y = np.vstack([y, unit(rng.normal(size=(20, 24)))])
    new_ids += [f"new{i}" for i in range(20)]
    # shuffle the row order: lists are by id, not by position
    order = rng.permutation(len(y))
    y, new_ids = y[order], [new_ids[i] for i in order]

    updated, done = nearest_lists(new_ids, y, k, first, _full_lists)
    assert done["mode"] == "update" and done["fresh"] == 30 and done["recomputed"] < len(y) // 2
    full, _ = nearest_lists(new_ids, y, k, None, _full_lists)
    assert_same_top(updated.top(k), full.neighbours, y, k)
    np.testing.assert_allclose(updated.sims[:, :k], full.sims[:, :k], atol=1e-5)  # last-bit differences only
    assert_same_top(knn_neighbours(y, k), full.neighbours, y, k)

    # and again from the updated lists (what was kept shorter stays exact)
    again, done = nearest_lists(new_ids[5:], y[5:], k, updated, _full_lists)
    assert done["mode"] == "update"
    assert_same_top(again.top(k), nearest_lists(new_ids[5:], y[5:], k, None, _full_lists)[0].neighbours, y[5:], k)


def test_too_much_change_or_a_larger_k_computes_afresh() -> None:
    rng = np.random.default_rng(3)
    x = unit(rng.normal(size=(100, 8)))
    ids = [str(i) for i in range(100)]
    first, _ = nearest_lists(ids, x, 3, None, _full_lists)
    y = x.copy()
    y[:40] = unit(rng.normal(size=(40, 8)))
    assert nearest_lists(ids, y, 3, first, _full_lists)[1]["mode"] == "full"
    assert nearest_lists(ids, x, list_width(3) + 1, first, _full_lists)[1]["mode"] == "full"
    same, done = nearest_lists(ids, x, 3, first, _full_lists)
    assert done == {"mode": "update", "fresh": 0, "recomputed": 0} and np.array_equal(same.top(3), first.top(3))


def test_lists_round_trip_and_damage_means_none(tmp_path) -> None:
    rng = np.random.default_rng(4)
    x = unit(rng.normal(size=(30, 8)))
    lists, _ = nearest_lists([str(i) for i in range(30)], x, 2, None, _full_lists)
    path = tmp_path / "knn.npz"
    save_neighbour_lists(path, {1: lists})
    loaded = load_neighbour_lists(path)
    assert loaded[1].ids == lists.ids and np.array_equal(loaded[1].neighbours, lists.neighbours)
    path.write_bytes(b"garbage")
    assert load_neighbour_lists(path) == {}
    assert load_neighbour_lists(tmp_path / "none.npz") == {}


def test_merging_only_outranked_rows_equals_ranking_every_row() -> None:
    """The shortcut of ``_merge_fresh`` (re-rank only rows some fresh row outranks, in large
    blocks) writes exactly what ranking every kept row over its stored and fresh columns writes,
    equal similarities included (duplicated rows make ties)."""
    rng = np.random.default_rng(5)
    x = unit(rng.normal(size=(600, 12)))
    x[300:340] = x[:40]  # exact duplicates: equal similarities
    width = 10
    fresh = np.sort(rng.choice(600, 40, replace=False))
    kept = np.setdiff1d(np.arange(600), fresh)
    stored, stored_sims = exact_lists(x[kept], np.arange(len(kept)), width)
    stored = np.where(stored >= 0, kept[np.clip(stored, 0, None)], -1)
    stored[:, -3:], stored_sims[:, -3:] = -1, -np.inf  # some rows lost entries
    last = stored_sims[:, width - 4]
    got_n = np.full((600, width), -1, np.int64)
    got_s = np.full((600, width), -np.inf, np.float32)
    _merge_fresh(x, kept, fresh, stored, stored_sims, last, got_n, got_s)
    s = x[kept] @ x[fresh].T  # the very product _merge_fresh computes (one block): exact on any kernel
    s = np.where(s > last[:, None], s, -np.inf).astype(np.float32)
    want_n, want_s = _ranked(np.concatenate([stored_sims, s], axis=1),
                             np.concatenate([stored, np.broadcast_to(fresh, s.shape)], axis=1), width)
    assert np.array_equal(got_n[kept], want_n) and np.array_equal(got_s[kept], want_s)
    assert (got_n[kept] != stored).any()  # some fresh rows were merged in
