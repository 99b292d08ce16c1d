"""HNSW indices updated in place after a corpus change: rows added, removed rows marked deleted."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unirag.index.vectors import HnswIndex


def _unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _saved(tmp_path: Path, ids: list[str], vectors: np.ndarray) -> Path:
    path = tmp_path / "v.hnsw"
    HnswIndex.build(vectors, ids).save(path)
    return path


def test_an_update_keeps_unchanged_rows_removes_gone_ones_and_adds_new_ones(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    old_ids = [f"o{i}" for i in range(100)]
    old = _unit(rng, 100)
    path = _saved(tmp_path, old_ids, old)
    # Drop o0-o9, change o10-o14, add n0-n9; the artifact's row order is the new id order.
    ids = old_ids[10:] + [f"n{i}" for i in range(10)]
    vectors = np.concatenate([old[10:], _unit(rng, 10)])
    vectors[:5] = _unit(rng, 5)
    index = HnswIndex.updated(path, old_ids, old, ids, vectors)
    assert index is not None and len(index) == len(ids)
    assert sum(label < 0 for label in index.label_rows) == 15  # 10 gone + 5 changed
    index.save(path)
    loaded = HnswIndex.load(path)
    top = [hits[0][0] for hits in loaded.search(vectors, 1)]
    assert top == ids  # every live row finds itself; no deleted or stale row comes back
    found = {item for hits in loaded.search(vectors, 5) for item, _ in hits}
    assert not found & {f"o{i}" for i in range(10)}


def test_an_update_of_an_updated_index_follows_its_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    ids, vectors = [f"a{i}" for i in range(50)], _unit(rng, 50)
    path = _saved(tmp_path, ids, vectors)
    for step in range(3):
        new_ids = ids[2:] + [f"s{step}-{i}" for i in range(2)]
        new_vectors = np.concatenate([vectors[2:], _unit(rng, 2)])
        index = HnswIndex.updated(path, ids, vectors, new_ids, new_vectors)
        assert index is not None
        index.save(path)
        ids, vectors = new_ids, new_vectors
    loaded = HnswIndex.load(path)
    assert [hits[0][0] for hits in loaded.search(vectors, 1)] == ids


def test_too_many_deleted_rows_mean_a_whole_build(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    ids, vectors = [f"a{i}" for i in range(20)], _unit(rng, 20)
    path = _saved(tmp_path, ids, vectors)
    assert HnswIndex.updated(path, ids, vectors, ids[10:], vectors[10:]) is None
    assert HnswIndex.updated(path, ids, vectors, ids, _unit(rng, 20)[:, :8]) is None  # another dimension


def test_rows_that_moved_a_little_keep_their_label_and_get_the_new_vector(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    ids, vectors = [f"a{i}" for i in range(200)], _unit(rng, 200)
    path = _saved(tmp_path, ids, vectors)
    nudged = vectors + 0.002 * _unit(rng, 200)  # every row moves, each by far less than RELINK_TOLERANCE
    nudged[:3] = _unit(rng, 3)  # three rows move far: relinked
    nudged /= np.linalg.norm(nudged, axis=1, keepdims=True)
    index = HnswIndex.updated(path, ids, vectors, ids, nudged)
    assert index is not None and index.update_counts == {"kept": 0, "moved": 197, "added": 3, "deleted": 3}
    assert sum(label < 0 for label in index.label_rows) == 3
    index.save(path)
    loaded = HnswIndex.load(path)
    for row, hits in enumerate(loaded.search(nudged, 5)):
        exact = sorted(((ids[j], float(s)) for j, s in enumerate(nudged @ nudged[row])), key=lambda h: (-h[1], h[0]))
        assert [item for item, _ in hits] == [item for item, _ in exact[:5]]
        assert np.allclose([score for _, score in hits], [score for _, score in exact[:5]], atol=1e-5)
