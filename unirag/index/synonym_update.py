"""Synonym edges after a corpus change: search again only the entities whose lists can differ.

A whole build searches every entity name (36k on 2Wiki's 6k passages, a minute of CPU).
After a change most neighbour lists are provably the same, so an update keeps them and
searches only:

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

from dataclasses import dataclass

import numpy as np

from unirag.index.synonyms import (
    Hits,
    NeighbourLists,
    Search,
    StoredSynonyms,
    SynonymConfig,
    query_neighbours,
    search_k,
    usable_names,
)


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
    for fresh, hits in fresh_hits.items():
        pairs = [(j, s) for j, s in hits if j != fresh and kept[j] and usable[j]]

        if len(hits) >= k:  # a full list: more rows may be as similar, found exactly
            sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(vectors[fresh], dtype=np.float32)
            close = np.flatnonzero((sims >= threshold - SCORE_SLACK) & kept & usable)
            pairs = [(int(j), float(sims[j])) for j in close if j != fresh]
        for j, score in pairs:
            joined[j] = max(joined.get(j, score), score)
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
