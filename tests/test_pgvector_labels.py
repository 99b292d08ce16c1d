"""A pgvector table updated in place keeps the rows whose vector is unchanged, renamed ones
included (their label is taken over), and answers as a fresh build; a table from before labels
is still searched, and rebuilt at its next write."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.fakes import HashEmbedder
from unirag.index.pgvector_index import PgVectorIndex
from unirag.index.vector_artifacts import build_text_vectors, load_vectors, open_vector_index
from unirag.index.vectors import HnswIndex, write_ids_file
from unirag.progress import Progress
from unirag.workspace import Workspace


def _unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _labels(ws: Workspace, table: str) -> list[int]:
    return [row[0] for row in ws.db.execute(f"SELECT label FROM {table} ORDER BY label")]


def test_renamed_rows_keep_their_table_rows_and_search_as_a_fresh_build(tmp_path: Path, postgres_store: str) -> None:
    ws = Workspace.init(tmp_path / "ws", store=postgres_store)
    rng = np.random.default_rng(7)
    ids, vectors = [f"c{i:03d}" for i in range(100)], _unit(rng, 100)
    built = PgVectorIndex.write(ws.db, "vectors_probe", ids, vectors, None)
    assert built.label_rows == list(range(100))
    # c000-c014 renamed (same vector), c015-c019 gone, c020-c022 changed, two new rows
    new_ids = [f"r{i:03d}" for i in range(15)] + ids[20:] + ["n0", "n1"]
    new_vectors = np.concatenate([vectors[:15], vectors[20:], _unit(rng, 2)])
    new_vectors[15:18] = _unit(rng, 3)
    order = np.argsort(new_ids, kind="stable")
    new_ids, new_vectors = [new_ids[i] for i in order], new_vectors[order]
    updated = PgVectorIndex.write(ws.db, "vectors_probe", new_ids, new_vectors, (ids, vectors), None, built.label_rows)
    assert updated.update_counts == {"kept": 77, "moved": 0, "relabelled": 15, "added": 5, "deleted": 8}
    live = [label for label, row in enumerate(updated.label_rows) if row >= 0]
    assert _labels(ws, "vectors_probe") == live == list(range(15)) + list(range(23, 105))
    queries = np.concatenate([new_vectors, _unit(rng, 20)])
    fresh = HnswIndex.build(new_vectors, new_ids)
    assert [[hit[0] for hit in row] for row in updated.search(queries, 5)] == \
        [[hit[0] for hit in row] for row in fresh.search(queries, 5)]
    ws.close()


def test_a_table_from_before_labels_is_searched_by_id_and_rebuilt_at_its_next_write(
        tmp_path: Path, postgres_store: str) -> None:
    ws = Workspace.init(tmp_path / "ws", store=postgres_store)
    rng = np.random.default_rng(8)
    ids, vectors = [f"a{i:02d}" for i in range(40)], _unit(rng, 40)
    with ws.db:
        ws.db.execute('CREATE TABLE vectors_old (id TEXT COLLATE "C" PRIMARY KEY, embedding vector(16))')
        for item, vector in zip(ids, vectors, strict=True):
            ws.db.execute("INSERT INTO vectors_old (id, embedding) VALUES (?, ?)", (item, vector))
    ids_path = tmp_path / "old.ids.json"
    write_ids_file(ids_path, ids, 16)  # no labels: the layout before them
    old = PgVectorIndex.load(ws.db, "vectors_old", ids_path)
    assert [row[0][0] for row in old.search(vectors[:5], 1)] == ids[:5]
    again = PgVectorIndex.write(ws.db, "vectors_old", ids[1:], vectors[1:], (ids, vectors))
    assert again.update_counts is None and "label" in ws.db.table_columns("vectors_old")
    assert [row[0][0] for row in again.search(vectors[1:6], 1)] == ids[1:6]
    ws.close()


def test_a_text_artifact_on_postgresql_updates_in_place_with_renamed_rows(tmp_path: Path, postgres_store: str) -> None:
    """Through the artifact code: the ``.ids.json`` carries the labels the next update continues."""
    ws = Workspace.init(tmp_path / "ws", store=postgres_store)
    words = [f"w{i}" for i in range(200)]
    rng = np.random.default_rng(10)
    texts = {f"c{i:02d}": " ".join(rng.choice(words, 4, replace=False)) for i in range(30)}  # few equal scores

    def build(items: dict[str, str]) -> None:
        build_text_vectors(ws, HashEmbedder(), "v", "v", list(items), list(items.values()), 4, Progress(), "t", "e")

    build(texts)
    renamed = {**{f"r{i:02d}": texts[f"c{i:02d}"] for i in range(5)}, **{k: v for k, v in texts.items()
                                                                         if k not in {f"c{i:02d}" for i in range(5)}}}
    renamed["new"] = "a new community"
    renamed = dict(sorted(renamed.items()))
    build(renamed)
    assert ws.db.execute("SELECT COUNT(*) FROM vectors_v").fetchone()[0] == len(renamed)
    assert ws.db.execute("SELECT MAX(label) FROM vectors_v").fetchone()[0] == 30  # only "new" got a fresh label
    ids, vectors = load_vectors(ws, "v", "v")
    assert ids == list(renamed)
    assert [row[0][0] for row in open_vector_index(ws, "v", "v").search(np.asarray(vectors), 1)] == ids
    ws.close()
