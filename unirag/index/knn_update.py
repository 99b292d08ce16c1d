"""Nearest-neighbour lists that an update continues instead of recomputing: ArchRAG's kNN augmentation.

ArchRAG augments each layer's graph with every node's k most similar nodes
(module :mod:`unirag.hierarchy.archrag`). Over the 36k entities of the 2Wiki corpus
that is a 36k x 36k product, the largest CPU cost of an insert of 1 % more
passages, for lists that change in a few hundred rows.

Each build stores, per layer, every node's nearest other nodes (``width``
of them, more than k, best first by ``(-cosine, row)``) with the similarities
and a digest of each node's vector. An update then

* computes full lists only for nodes that are new or whose vector changed
  (*fresh*);
* drops from every other node's list the nodes that are gone or changed; what
  is left is still the exact head of its ranking over the unchanged nodes;
* merges in the fresh nodes that rank above the last kept entry (one product
  of the kept rows with the fresh rows, in blocks); a fresh node below that
  entry could be outranked by an unchanged node past the list, so it is not
  added, and the list stays exact but shorter;
* recomputes in full any row whose exact list fell below k.

The lists are then the ones a full build computes (exact up to
``EXACT_MAX_NODES`` rows; beyond, a full build uses hnswlib and an update keeps
its lists, making exact only what changed), up to the order of near-ties: a kept
row's cosine to a fresh row comes from a product of another shape than a full build's
blocks, and BLAS kernels (picked by CPU and shape) may round it differently in the last
float32 bit, so two neighbours that close may come in either order. More than a
quarter of the rows fresh, a larger k than the stored width, or a missing or
unreadable file: computed afresh.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unirag.workspace import atomic_path

BLOCK_ROWS = 256  # rows per block of a product with all rows (256 x n float32)
FRESH_SHARE_MAX = 0.25  # past this share of fresh rows, recomputing everything is as cheap


@dataclass
class NeighbourLists:
    """Each row's nearest other rows, best first (``-1`` / ``-inf`` pad a shorter exact list)."""

    ids: list[str]
    digests: np.ndarray  # uint64 per row: its vector's hash
    neighbours: np.ndarray  # (n, width) int64 rows of ``ids``
    sims: np.ndarray  # (n, width) float32 cosines

    def top(self, k: int) -> np.ndarray:
        return self.neighbours[:, :k]


def list_width(k: int) -> int:
    """How many neighbours a build keeps for a k-NN graph: room for an update to drop some."""
    return max(2 * k, k + 8)


def vector_digests(x: np.ndarray) -> np.ndarray:
    """One uint64 per row of ``x`` (its float32 bytes): equal exactly when the vector is unchanged."""
    rows = np.ascontiguousarray(x, dtype=np.float32)
    return np.array([int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little")
                     for row in rows], dtype=np.uint64)


def _ranked(sims: np.ndarray, index: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``width`` best of (sims, index) by (-sim, index); -inf entries become -1."""
    width = min(width, sims.shape[1])
    if width == 0:
        return np.zeros((len(sims), 0), np.int64), np.zeros((len(sims), 0), np.float32)
    part = np.argpartition(-sims, width - 1, axis=1)[:, :width] if width < sims.shape[1] else \
        np.broadcast_to(np.arange(sims.shape[1]), sims.shape).copy()
    cand_index = np.take_along_axis(index, part, axis=1)
    cand_sims = np.take_along_axis(sims, part, axis=1)
    order = np.lexsort((cand_index, -cand_sims), axis=1) if cand_index.size else part
    out_index = np.take_along_axis(cand_index, order, axis=1)
    out_sims = np.take_along_axis(cand_sims, order, axis=1).astype(np.float32)
    out_index[~np.isfinite(out_sims)] = -1
    return out_index.astype(np.int64), out_sims


def exact_lists(x: np.ndarray, rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``width`` nearest other rows of each of ``rows`` over all of ``x`` (cosine; rows L2-normalised)."""
    n = len(x)
    width = min(width, n - 1)
    neighbours = np.full((len(rows), max(width, 0)), -1, dtype=np.int64)
    sims = np.full((len(rows), max(width, 0)), -np.inf, dtype=np.float32)
    if width <= 0:
        return neighbours, sims
    everyone = np.arange(n)
    for start in range(0, len(rows), BLOCK_ROWS):
        block = rows[start:start + BLOCK_ROWS]
        s = x[block] @ x.T
        s[np.arange(len(block)), block] = -np.inf  # never itself
        index = np.broadcast_to(everyone, s.shape)
        neighbours[start:start + len(block)], sims[start:start + len(block)] = _ranked(s, index, width)
    return neighbours, sims


def _carried(previous: NeighbourLists, ids: list[str], digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``now_of_old`` (each previous row's current row, -1: gone or changed) and ``fresh`` rows."""
    old_row = {node: r for r, node in enumerate(previous.ids)}
    now_of_old = np.full(len(previous.ids), -1, dtype=np.int64)
    fresh = []
    for row, node in enumerate(ids):
        r = old_row.get(node)
        if r is not None and previous.digests[r] == digests[row]:
            now_of_old[r] = row
        else:
            fresh.append(row)
    return now_of_old, np.array(fresh, dtype=np.int64)


def _merge_fresh(x: np.ndarray, kept_now: np.ndarray, fresh: np.ndarray, translated: np.ndarray,
                 stored_sims: np.ndarray, last: np.ndarray, neighbours: np.ndarray, sims: np.ndarray) -> None:
    """Write each kept row's list: its stored entries (``translated``/``stored_sims``, gone ones
    dropped) with the fresh rows that rank above its last stored entry merged in.

    Every kept row is compared with every fresh row, but only the few rows that
    some fresh row outranks are merged and ranked again over their stored and fresh columns; the
    others keep their stored list, only re-sorted so that equal similarities follow the new row
    numbers. Both give what ranking every row over all its columns gives (fresh entries below
    the last stored one are left out, as there), at a fraction of the sorting."""
    width = neighbours.shape[1]
    neighbours[kept_now], sims[kept_now] = _ranked(stored_sims, translated, width)
    if not len(fresh):
        return
    # Blocks as large as one of exact_lists' (BLOCK_ROWS x all rows): a few large products, as
    # BLAS threads cost more than they save on many small ones. Each entry is the same dot product
    # up to its last float32 bit (another shape may take another kernel path; see the module docstring).
    block_rows = max(BLOCK_ROWS, BLOCK_ROWS * len(x) // len(fresh))
    fresh_t = x[fresh].T
    for start in range(0, len(kept_now), block_rows):
        rows = kept_now[start:start + block_rows]
        s = x[rows] @ fresh_t
        above = s > last[start:start + len(rows), None]
        hit = np.flatnonzero(above.any(axis=1))
        if not len(hit):
            continue
        s = np.where(above[hit], s[hit], -np.inf).astype(np.float32)
        both_sims = np.concatenate([stored_sims[start + hit], s], axis=1)
        both_index = np.concatenate([translated[start + hit], np.broadcast_to(fresh, s.shape)], axis=1)
        neighbours[rows[hit]], sims[rows[hit]] = _ranked(both_sims, both_index, width)


def nearest_lists(ids: list[str], x: np.ndarray, k: int, previous: NeighbourLists | None,
                  full: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]) -> tuple[NeighbourLists, dict]:
    """Every row's nearest other rows (at least ``k`` exact ones), from ``previous`` where it
    applies (see the module docstring); ``full(x, width)`` computes all lists afresh. Also
    returns what was done: ``{"mode": "update"|"full", "fresh": .., "recomputed": ..}``."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, width = len(x), list_width(k)
    digests = vector_digests(x)
    usable = previous is not None and previous.neighbours.shape[1] >= k and len(previous.ids) > 0
    now_of_old, fresh = _carried(previous, ids, digests) if usable else (None, np.arange(n))
    if not usable or len(fresh) > FRESH_SHARE_MAX * n:
        neighbours, sims = full(x, width)
        return NeighbourLists(list(ids), digests, neighbours, sims), {"mode": "full", "fresh": len(fresh),
                                                                      "recomputed": n}
    assert previous is not None and now_of_old is not None
    width = previous.neighbours.shape[1]
    neighbours = np.full((n, width), -1, dtype=np.int64)
    sims = np.full((n, width), -np.inf, dtype=np.float32)
    kept_old = np.flatnonzero(now_of_old >= 0)
    kept_now = now_of_old[kept_old]
    stored = previous.neighbours[kept_old]
    translated = np.where(stored >= 0, now_of_old[np.clip(stored, 0, None)], -1)
    stored_sims = np.where(translated >= 0, previous.sims[kept_old], -np.inf).astype(np.float32)
    # Drop the gone/changed entries, keeping order: stable sort on "invalid".
    order = np.argsort(translated < 0, axis=1, kind="stable")
    translated = np.take_along_axis(translated, order, axis=1)
    stored_sims = np.take_along_axis(stored_sims, order, axis=1)
    valid = (translated >= 0).sum(axis=1)
    last = np.where(valid > 0, stored_sims[np.arange(len(kept_old)), np.maximum(valid - 1, 0)], np.inf)
    _merge_fresh(x, kept_now, fresh, translated, stored_sims, last, neighbours, sims)
    short = kept_now[(neighbours[kept_now] >= 0).sum(axis=1) < min(k, n - 1)]
    redo = np.union1d(fresh, short)
    if len(redo):
        neighbours[redo], sims[redo] = exact_lists(x, redo, width)
    return NeighbourLists(list(ids), digests, neighbours, sims), {"mode": "update", "fresh": len(fresh),
                                                                  "recomputed": len(redo)}


def save_neighbour_lists(path: Path, levels: dict[int, NeighbourLists]) -> None:
    """Every level's lists in one file (atomically)."""
    arrays: dict[str, np.ndarray] = {"levels": np.array(sorted(levels), dtype=np.int64)}
    for level, lists in levels.items():
        arrays[f"ids{level}"] = np.array(json.dumps(lists.ids))
        arrays[f"digests{level}"] = lists.digests
        arrays[f"neighbours{level}"] = lists.neighbours
        arrays[f"sims{level}"] = lists.sims
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


def load_neighbour_lists(path: Path) -> dict[int, NeighbourLists]:
    """The stored lists by level; empty when the file is missing, unreadable or inconsistent."""
    out: dict[int, NeighbourLists] = {}
    try:
        with np.load(path) as data:
            for level in data["levels"].tolist():
                lists = NeighbourLists(json.loads(str(data[f"ids{level}"])), data[f"digests{level}"],
                                       data[f"neighbours{level}"], data[f"sims{level}"])
                n = len(lists.ids)
                if len(lists.digests) != n or lists.neighbours.shape != lists.sims.shape or len(lists.neighbours) != n \
                        or (lists.neighbours.size and lists.neighbours.max() >= n):
                    return {}
                out[int(level)] = lists
    except (OSError, ValueError, KeyError):
        return {}
    return out
