"""HippoRAG 2's synonym search, whole or after a corpus change; no workspace here.

A whole build searches every usable entity name for its top ``k`` = 101 neighbours and
keeps the hits at or above the threshold (its *neighbour list*). Edges are the pairs where
one is in the other's list. After a change most lists are provably the same, so an update
(:func:`update_neighbour_lists`) keeps them and searches only:

* **new or changed entities** (a name or name vector whose digest differs);
* **kept entities whose list named a gone or changed entity** (a replacement may move up
  into the top k, and the score to a changed one is another);
* **kept entities a new or changed entity now belongs to**: the new entity is at least
  the threshold similar and either the list was not full (fewer than k hits: every entity
  that similar was in it) or it beats the list's last hit. Similarity is symmetric, so the
  new entity's own search names them; where that search is full (k hits, more may be as
  similar), its similarities to every entity are computed exactly instead.

With an exact search the result equals a whole build's. HNSW is approximate, so the one
difference is where it is: a kept list comes from the search over the previous index,
a whole build's from the current one, and either may miss a near-threshold neighbour.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

_ALNUM = re.compile(r"[^A-Za-z0-9]")
_QUERY_BATCH = 4096

Search = Callable[[np.ndarray, int], list[list[tuple[str, float]]]]
Hits = list[tuple[int, float]]  # (entity row, cosine), best first


@dataclass(frozen=True)
class SynonymConfig:
    """HippoRAG 2's defaults (``synonymy_edge_sim_threshold``, its 100-neighbour cap)."""

    threshold: float = 0.8
    max_neighbours: int = 100


@dataclass(frozen=True)
class SynonymEdges:
    """Undirected edges between entities: ``source[i]`` -- ``target[i]`` with ``similarity[i]``."""

    entity_ids: list[str]
    source: np.ndarray
    target: np.ndarray
    similarity: np.ndarray


@dataclass(frozen=True)
class NeighbourLists:
    """Each entity's search hits at or above the threshold, best first, as CSR over entity rows
    (the entity itself and names too short for an edge included: they hold places in the top k).
    A list of ``k`` hits is *full*: entities past it may be as similar."""

    k: int
    indptr: np.ndarray
    rows: np.ndarray
    scores: np.ndarray

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = int(self.indptr[row]), int(self.indptr[row + 1])
        return self.rows[start:end], self.scores[start:end]

    @classmethod
    def from_hits(cls, k: int, hits: Sequence[Hits]) -> NeighbourLists:
        lengths = np.array([len(h) for h in hits], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(k, indptr, np.array([j for h in hits for j, _ in h], dtype=np.int64),
                   np.array([s for h in hits for _, s in h], dtype=np.float64))


def usable_names(names: Sequence[str]) -> np.ndarray:
    """Which names may have synonym edges: at least 3 letters or digits (HippoRAG 2)."""
    return np.array([len(_ALNUM.sub("", name)) > 2 for name in names], dtype=bool)


def search_k(config: SynonymConfig, n_entities: int) -> int:
    """Hits per search: the entity itself plus ``max_neighbours``."""
    return min(config.max_neighbours + 1, n_entities)


def query_neighbours(rows: np.ndarray, vectors: np.ndarray, row_of: dict[str, int], search: Search, k: int,
                     threshold: float) -> dict[int, Hits]:
    """The neighbour list of each of ``rows``: its top-k hits cut at the first below ``threshold``."""
    lists: dict[int, Hits] = {}
    for start in range(0, len(rows), _QUERY_BATCH):
        batch = rows[start:start + _QUERY_BATCH]
        found = search(np.asarray(vectors[batch], dtype=np.float32), k)
        for i, hits in zip(batch.tolist(), found, strict=True):
            kept: Hits = []
            for other_id, score in hits:
                if score < threshold:
                    break
                j = row_of.get(other_id)
                if j is not None:
                    kept.append((j, float(score)))
            lists[i] = kept
    return lists


def edges_from(entity_ids: list[str], usable: np.ndarray, lists: NeighbourLists) -> SynonymEdges:
    """Each pair of usable entities where one is in the other's list, once, with the higher score."""
    owners = np.repeat(np.arange(len(entity_ids), dtype=np.int64), np.diff(lists.indptr))
    keep = (owners != lists.rows) & usable[owners] & usable[lists.rows] if owners.size else np.zeros(0, bool)
    a = np.minimum(owners[keep], lists.rows[keep])
    b = np.maximum(owners[keep], lists.rows[keep])
    scores = lists.scores[keep]
    if not a.size:
        empty = np.zeros(0, dtype=np.int64)
        return SynonymEdges(list(entity_ids), empty, empty.copy(), np.zeros(0, dtype=np.float64))
    order = np.lexsort((-scores, b, a))  # by pair, the best score first
    a, b, scores = a[order], b[order], scores[order]
    first = np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return SynonymEdges(list(entity_ids), a[first], b[first], scores[first])


def full_neighbour_lists(entity_ids: list[str], names: list[str], vectors: np.ndarray, search: Search,
                         config: SynonymConfig) -> NeighbourLists:
    """Every usable entity searched (a whole build)."""
    row_of = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    k = search_k(config, len(entity_ids))
    found = query_neighbours(np.flatnonzero(usable_names(names)), vectors, row_of, search, k, config.threshold)
    return NeighbourLists.from_hits(k, [found.get(i, []) for i in range(len(entity_ids))])


def find_synonyms(entity_ids: list[str], names: list[str], vectors: np.ndarray, search: Search,
                  config: SynonymConfig) -> SynonymEdges:
    """Pairs of entities at least ``config.threshold`` similar; ``search(vectors, k)`` is an
    HNSW search returning (id, cosine) lists per row, best first."""
    lists = full_neighbour_lists(entity_ids, names, vectors, search, config)
    return edges_from(list(entity_ids), usable_names(names), lists)


def entity_digests(names: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """A digest of each entity's name and name vector: what says it changed since the last build."""
    out = np.empty(len(names), dtype="S16")
    for i, name in enumerate(names):
        digest = hashlib.blake2b(name.encode("utf-8"), digest_size=16)
        digest.update(np.ascontiguousarray(vectors[i], dtype=np.float32).tobytes())
        out[i] = digest.digest()
    return out


@dataclass(frozen=True)
class StoredSynonyms:
    """What the last build left for the next: its entities, their digests and neighbour lists."""

    entity_ids: list[str]
    digests: np.ndarray
    lists: NeighbourLists


# Scores computed here and by the index may differ in the last float32 bits: a candidate
# that close to a list's last hit or to the threshold is searched again (it costs one search).
SCORE_SLACK = 1e-5


@dataclass(frozen=True)
class ListsUpdate:
    """The neighbour lists after the change and what it took (the manifest's ``update``)."""

    lists: NeighbourLists
    counts: dict[str, int]


def _joined_by_fresh(fresh_hits: dict[int, Hits], vectors: np.ndarray, kept: np.ndarray, usable: np.ndarray,
                     k: int, threshold: float) -> dict[int, float]:
    """Kept usable rows at least ``threshold`` similar to a fresh row, with the best such score."""
    joined: dict[int, float] = {}

    def join(j: int, score: float) -> None:
        joined[j] = max(joined.get(j, score), score)

    full = [fresh for fresh, hits in fresh_hits.items() if len(hits) >= k]  # more rows may be as similar
    for fresh, hits in fresh_hits.items():
        if len(hits) < k:
            for j, score in hits:
                if j != fresh and kept[j] and usable[j]:
                    join(j, score)
    matrix = np.asarray(vectors, dtype=np.float32) if full else None
    for start in range(0, len(full), 256):  # a full list's rows: similarities to every row, exactly
        rows = full[start:start + 256]
        sims = matrix[rows] @ matrix.T  # type: ignore[index]
        for fresh, row in zip(rows, sims, strict=True):
            for j in np.flatnonzero((row >= threshold - SCORE_SLACK) & kept & usable).tolist():
                if j != fresh:
                    join(j, float(row[j]))
    return joined


def update_neighbour_lists(previous: StoredSynonyms, entity_ids: list[str], names: list[str], digests: np.ndarray,
                           vectors: np.ndarray, search: Search, config: SynonymConfig) -> ListsUpdate | None:
    """The lists of ``entity_ids`` from ``previous``, searching only what may have changed;
    None when a whole build is due (the search length k changed with the entity count)."""
    k = search_k(config, len(entity_ids))
    if k != previous.lists.k:
        return None
    old_lists = previous.lists
    old_row = {entity_id: row for row, entity_id in enumerate(previous.entity_ids)}
    matched = np.array([old_row.get(entity_id, -1) for entity_id in entity_ids], dtype=np.int64)
    kept = matched >= 0
    kept[kept] = previous.digests[matched[kept]] == digests[kept]
    row_now = np.full(len(previous.entity_ids), -1, dtype=np.int64)  # old row -> current row, -1: gone or changed
    row_now[matched[kept]] = np.flatnonzero(kept)
    usable = usable_names(names)
    row_of = {entity_id: i for i, entity_id in enumerate(entity_ids)}

    # New and changed rows are searched even when too short for an edge: they still take
    # places in other lists' top k.
    fresh = np.flatnonzero(~kept)
    found = query_neighbours(fresh, vectors, row_of, search, k, config.threshold)
    owners = np.repeat(np.arange(len(previous.entity_ids), dtype=np.int64), np.diff(old_lists.indptr))
    touched = row_now[np.unique(owners[row_now[old_lists.rows] < 0])]
    again = {int(i) for i in touched if i >= 0 and usable[i]}
    for j, score in _joined_by_fresh(found, vectors, kept, usable, k, config.threshold).items():
        _, scores = old_lists.of(int(matched[j]))
        if len(scores) < k or score >= scores[-1] - SCORE_SLACK:
            again.add(j)
    requeried = np.array(sorted(again - set(found)), dtype=np.int64)
    found.update(query_neighbours(requeried, vectors, row_of, search, k, config.threshold))

    hits: list[Hits] = []
    for i in range(len(entity_ids)):
        if i in found and usable[i]:
            hits.append(found[i])
        elif kept[i] and usable[i]:  # an unchanged list, its rows renumbered
            rows, scores = old_lists.of(int(matched[i]))
            hits.append(list(zip(row_now[rows].tolist(), scores.tolist(), strict=True)))
        else:
            hits.append([])
    counts = {"new": int(np.count_nonzero(matched < 0)), "changed": int(np.count_nonzero((matched >= 0) & ~kept)),
              "gone": len(previous.entity_ids) - int(np.count_nonzero(matched >= 0)),
              "requeried": int(requeried.size), "queried": int(fresh.size + requeried.size)}
    return ListsUpdate(NeighbourLists.from_hits(k, hits), counts)
