"""Synonym edges updated after a corpus change equal a whole build (with an exact search).

The comparison is exact, bit for bit, on every machine, because the test's search scores each
pair the way the product's does. HnswIndex.search (hnswlib) computes one pair's similarity
with one function whatever else is queried with it, so a list kept from the previous build
and a list a whole build searches hold the same float for the same pair: that is the
product's promise, and an update keeps it by reusing stored scores, never recomputing them.
A BLAS product (``query @ vectors.T``) does not model this: OpenBLAS picks its kernel by CPU
and by the matrices' shapes, so a pair scored in a batch of 20 and in a batch of 400 may
differ in the last bit (under ``OPENBLAS_CORETYPE=Haswell`` or ``Zen``: 0.911847 against
0.911848 after rounding). :func:`_exact_search` therefore sums each pair's products in a
fixed order without BLAS, and no tolerance is needed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from unirag.index.synonym_search import update_neighbour_lists
from unirag.index.synonym_search import (
    StoredSynonyms,
    SynonymConfig,
    edges_from,
    entity_digests,
    full_neighbour_lists,
    usable_names,
)

pytestmark = pytest.mark.numeric  # an update's scores compared with a whole build's, exactly

CONFIG = SynonymConfig(threshold=0.8, max_neighbours=3)  # k = 4: full lists are common


def _exact_search(ids: list[str], vectors: np.ndarray) -> Callable[[np.ndarray, int], list[list[tuple[str, float]]]]:
    """What HnswIndex.search returns, computed exactly: best first, ties by id. Each score is
    the same float whichever batch its pair is queried in (no BLAS: see the module docstring):
    float64 products of float32 values are exact, and numpy sums the last axis in a fixed order."""
    base = np.asarray(vectors, dtype=np.float64)

    def search(query: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        scores = (np.asarray(query, dtype=np.float64)[:, None, :] * base[None, :, :]).sum(axis=2)
        return [sorted(zip(ids, row.tolist(), strict=True), key=lambda hit: (-hit[1], hit[0]))[:k] for row in scores]
    return search


def _corpus(seed: int, n: int, clusters: int = 12) -> tuple[list[str], list[str], np.ndarray]:
    """Entities in tight clusters (many pairs above 0.8, some lists full), with unique ids."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, 16))
    vectors = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    ids = [f"e{seed}-{i}" for i in range(n)]
    names = [f"name {i}" if i % 17 else "x" for i in range(n)]  # a few names too short for an edge
    return ids, names, vectors


def _whole(ids: list[str], names: list[str], vectors: np.ndarray) -> StoredSynonyms:
    lists = full_neighbour_lists(ids, names, vectors, _exact_search(ids, vectors), CONFIG)
    return StoredSynonyms(ids, entity_digests(names, vectors), lists)


def _updated(previous: StoredSynonyms, ids: list[str], names: list[str], vectors: np.ndarray) -> tuple[
        StoredSynonyms, dict[str, int]]:
    update = update_neighbour_lists(previous, ids, names, entity_digests(names, vectors), vectors,
                                    _exact_search(ids, vectors), CONFIG)
    assert update is not None
    return StoredSynonyms(ids, entity_digests(names, vectors), update.lists), update.counts


def _edges(stored: StoredSynonyms, names: list[str]) -> list[tuple[str, str, float]]:
    edges = edges_from(stored.entity_ids, usable_names(names), stored.lists)
    ids = stored.entity_ids
    return sorted((*sorted((ids[a], ids[b])), s)
                  for a, b, s in zip(edges.source.tolist(), edges.target.tolist(), edges.similarity.tolist(),
                                     strict=True))


def _lists(stored: StoredSynonyms) -> dict[str, list[tuple[str, float]]]:
    ids = stored.entity_ids
    return {ids[i]: [(ids[j], s) for j, s in zip(*stored.lists.of(i), strict=True)]
            for i in range(len(ids))}


def test_an_insert_equals_a_whole_build_and_searches_few_entities() -> None:
    ids, names, vectors = _corpus(0, 400)
    base = _whole(ids[:380], names[:380], vectors[:380])
    grown, counts = _updated(base, ids, names, vectors)
    whole = _whole(ids, names, vectors)
    assert _lists(grown) == _lists(whole)
    assert _edges(grown, names) == _edges(whole, names) and _edges(whole, names)
    assert counts["new"] == 20 and counts["gone"] == 0
    assert counts["queried"] < 200  # not every entity: the new ones and the lists they join


def test_insert_then_delete_equals_never_inserted() -> None:
    ids, names, vectors = _corpus(1, 300)
    base = _whole(ids[:290], names[:290], vectors[:290])
    grown, _ = _updated(base, ids, names, vectors)
    shrunk, counts = _updated(grown, ids[:290], names[:290], vectors[:290])
    assert counts["gone"] == 10
    assert _lists(shrunk) == _lists(base)
    assert _edges(shrunk, names[:290]) == _edges(base, names[:290])


def test_changed_and_removed_entities_are_searched_again() -> None:
    ids, names, vectors = _corpus(2, 300)
    base = _whole(ids, names, vectors)
    rng = np.random.default_rng(9)
    moved = vectors.copy()
    moved[:5] = vectors[rng.integers(100, 300, 5)]  # five names now sit in other clusters
    renamed = list(names)
    renamed[7] = "no"  # too short now: its edges go
    keep = np.r_[0:250, 260:300]  # ten entities gone
    new_ids, new_names, new_vectors = [ids[i] for i in keep], [renamed[i] for i in keep], moved[keep]
    updated, counts = _updated(base, new_ids, new_names, new_vectors)
    whole = _whole(new_ids, new_names, new_vectors)
    assert counts["changed"] == 6 and counts["gone"] == 10
    assert _lists(updated) == _lists(whole)
    assert _edges(updated, new_names) == _edges(whole, new_names)


def test_another_search_length_means_a_whole_build() -> None:
    ids, names, vectors = _corpus(3, 4)  # k = min(4, entities): one fewer entity changes k
    base = _whole(ids, names, vectors)
    assert update_neighbour_lists(base, ids[:3], names[:3], entity_digests(names[:3], vectors[:3]), vectors[:3],
                                  _exact_search(ids[:3], vectors[:3]), CONFIG) is None


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_random_changes_keep_the_update_exact(seed: int) -> None:
    ids, names, vectors = _corpus(seed, 250, clusters=6)
    rng = np.random.default_rng(seed)
    stored = _whole(ids, names, vectors)
    for step in range(3):
        keep = np.sort(rng.choice(len(ids), size=len(ids) - 8, replace=False))
        extra_ids, extra_names, extra_vectors = _corpus(100 * seed + step, 12, clusters=6)
        ids = [ids[i] for i in keep] + extra_ids
        names = [names[i] for i in keep] + extra_names
        vectors = np.concatenate([vectors[keep], extra_vectors])
        stored, _ = _updated(stored, ids, names, vectors)
        assert _lists(stored) == _lists(_whole(ids, names, vectors)), step
