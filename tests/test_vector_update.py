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
    assert index is not None and index.update_counts == {"kept": 0, "moved": 197, "relabelled": 0, "added": 3,
                                                     "deleted": 3}
    assert sum(label < 0 for label in index.label_rows) == 3
    index.save(path)
    loaded = HnswIndex.load(path)
    for row, hits in enumerate(loaded.search(nudged, 5)):
        exact = sorted(((ids[j], float(s)) for j, s in enumerate(nudged @ nudged[row])), key=lambda h: (-h[1], h[0]))
        assert [item for item, _ in hits] == [item for item, _ in exact[:5]]
        assert np.allclose([score for _, score in hits], [score for _, score in exact[:5]], atol=1e-5)


def _copied(path: Path, directory: Path) -> Path:
    """A saved index and its ids file copied into ``directory``."""
    directory.mkdir(exist_ok=True)
    copy = directory / path.name
    copy.write_bytes(path.read_bytes())
    HnswIndex.ids_path(copy).write_bytes(HnswIndex.ids_path(path).read_bytes())
    return copy


def _renamed_update(tmp_path: Path, copy_of: Path | None = None) -> tuple[Path, list[str], np.ndarray, HnswIndex]:
    """An index of 120 rows updated to: 20 rows renamed (new id, same vector; two dropped rows
    share a vector, and three new rows carry it), 10 dropped, 5 new, the rest unchanged. From a
    copy of the saved index at ``copy_of`` when given (a threaded whole build differs run to run)."""
    rng = np.random.default_rng(4)
    old_ids, old = [f"c{i:03d}" for i in range(120)], _unit(rng, 120)
    old[7] = old[3]  # two old rows with one vector: a pairing must stay deterministic
    if copy_of is None:
        path = _saved(tmp_path, old_ids, old)
    else:
        path = _copied(copy_of, tmp_path)
    renamed = {i: f"r{i:03d}" for i in range(20)}
    keep = list(range(30, 120))
    ids = [renamed[i] for i in renamed] + [old_ids[i] for i in keep] + ["x0", "x1"] + [f"n{i}" for i in range(5)]
    vectors = np.concatenate([old[:20], old[keep], old[[3, 3]], _unit(rng, 5)])
    order = np.argsort(ids, kind="stable")  # the artifact's rows in id order
    ids, vectors = [ids[i] for i in order], vectors[order]
    index = HnswIndex.updated(path, old_ids, old, ids, vectors)
    assert index is not None
    return path, ids, vectors, index


def test_a_renamed_row_takes_over_its_old_label_and_answers_as_a_fresh_build(tmp_path: Path) -> None:
    path, ids, vectors, index = _renamed_update(tmp_path)
    # 20 renames (r003 and r007 take c003's and c007's labels), x0/x1 find no free identical row
    assert index.update_counts == {"kept": 90, "moved": 0, "relabelled": 20, "added": 7, "deleted": 10}
    assert sum(label < 0 for label in index.label_rows) == 10
    index.save(path)
    loaded = HnswIndex.load(path)
    fresh = HnswIndex.build(vectors, ids)
    queries = np.concatenate([vectors, _unit(np.random.default_rng(5), 30)])
    assert loaded.search(queries, 10) == fresh.search(queries, 10)
    assert [ids[loaded.label_rows[label]] for label in range(20)] == [f"r{i:03d}" for i in range(20)]


def test_a_renaming_update_writes_the_same_files_every_time(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    base = _renamed_update(tmp_path / "base")[0]
    written = []
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        path, _, _, index = _renamed_update(tmp_path / run, copy_of=base)
        index.save(path)
        written.append((path.read_bytes(), HnswIndex.ids_path(path).read_bytes()))
    assert written[0] == written[1]


def test_a_known_unchanged_hint_gives_what_comparing_every_row_gives(tmp_path: Path) -> None:
    from unirag.index.vectors import RowMatch

    rng = np.random.default_rng(6)
    old_ids, old = [f"a{i:02d}" for i in range(60)], _unit(rng, 60)
    ids, vectors = old_ids[5:] + ["b0"], np.concatenate([old[5:], _unit(rng, 1)])
    vectors[:3] = _unit(rng, 3)  # changed text: not known, compared
    known = np.zeros(len(ids), dtype=bool)
    known[3:-1] = True
    outcomes = []
    base = _saved(tmp_path, old_ids, old)
    for run, match in (("plain", None), ("hinted", RowMatch.of(old_ids, ids, known))):
        path = _copied(base, tmp_path / run)
        index = HnswIndex.updated(path, old_ids, old, ids, vectors, match=match)
        assert index is not None
        index.save(path)
        outcomes.append((index.update_counts, path.read_bytes(), HnswIndex.ids_path(path).read_bytes()))
    assert outcomes[0] == outcomes[1]


def test_a_whole_build_is_the_same_index_every_time(tmp_path: Path) -> None:
    """Two builds of the same vectors write the same bytes (parallel insertion linked the graph in
    thread order, so rebuilt workspaces answered a few questions differently)."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((3000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"row-{i}" for i in range(len(vectors))]
    for name in ("a.hnsw", "b.hnsw"):
        HnswIndex.build(vectors, ids).save(tmp_path / name)
    assert (tmp_path / "a.hnsw").read_bytes() == (tmp_path / "b.hnsw").read_bytes()


def test_an_update_loads_the_index_with_room_for_every_label_and_a_damaged_map_builds_whole(
        tmp_path: Path) -> None:
    """The saved graph is loaded once at its final size (no resize copying it after), and an
    ids map that is not a JSON object is no saved index (the caller builds whole)."""
    rng = np.random.default_rng(3)
    old_ids = [f"o{i}" for i in range(50)]
    old = _unit(rng, 50)
    path = _saved(tmp_path, old_ids, old)
    assert HnswIndex.load(path, capacity=80)._index.get_max_elements() == 80
    assert HnswIndex.load(path)._index.get_max_elements() == 50
    ids = old_ids + [f"n{i}" for i in range(30)]
    index = HnswIndex.updated(path, old_ids, old, ids, np.concatenate([old, _unit(rng, 30)]))
    assert index is not None and index._index.get_max_elements() == len(index.label_rows) == 80
    HnswIndex.ids_path(path).write_text("[1, 2]")
    assert HnswIndex.updated(path, old_ids, old, ids, np.concatenate([old, _unit(rng, 30)])) is None
