"""Vector indices of a PostgreSQL store: a pgvector table per artifact with an HNSW index.

Table ``vectors_<artifact file stem>`` (``id`` text, ``embedding vector(d)``), HNSW over
inner product (``vector_ip_ops``, m=16, ef_construction=200 as :class:`HnswIndex`): the
rows are L2-normalised, so the inner product is the cosine, and it is the space hnswlib
searches (``ip``), so scores agree and a zero vector scores 0 on both (cosine distance
would make it NaN). A search asks for a few rows past k (``ef_search`` at least 64, twice
what it fetches) and orders equal scores by id, as :class:`HnswIndex` does: both stores
answer the same. The row -> id map is the ``.ids.json`` file beside the ``.npy`` vectors
(a blob of the store, :mod:`unirag.store.artifact_files`), so loading an index reads no rows.

Rewriting a table happens in one transaction with ``DELETE`` (never ``TRUNCATE``): a
process that searches meanwhile sees the old rows until the new ones are committed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from unirag.index.vectors import RowMatch, read_ids_file, search_plan, ties_by_id
from unirag.store.database import Database

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
MAX_EF_SEARCH = 1000  # pgvector's limit


def table_name(file_stem: str) -> str:
    """``vectors_`` + the artifact's file stem in identifier characters."""
    return "vectors_" + re.sub(r"[^a-z0-9_]", "_", file_stem.lower())


class PgVectorIndex:
    """A vector index in a pgvector table: the :class:`~unirag.index.vectors.VectorIndex` interface."""

    def __init__(self, db: Database, table: str, ids: list[str], dim: int, label: str = "vectors") -> None:
        self.db = db
        self.table = table
        self.ids = ids
        self.dim = dim
        self.label = label

    @classmethod
    def write(cls, db: Database, table: str, ids: list[str], vectors: np.ndarray,
              previous: tuple[list[str], np.ndarray] | None, match: RowMatch | None = None) -> PgVectorIndex:
        """Bring the table to ``ids``/``vectors``: in place from ``previous`` (the ids and vectors
        the table holds now; rows whose id and vector are unchanged stay; ``match``: what the
        caller knows of them already) when the dimension is the same, else rebuilt whole (table,
        rows, then the HNSW index: faster than row by row)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 1
        with db:
            if previous is not None and previous[1].ndim == 2 and previous[1].shape[1] == dim and cls._exists(db, table):
                cls._update(db, table, ids, vectors, previous, match or RowMatch.of(previous[0], ids))
            else:
                cls._rebuild(db, table, ids, vectors, dim)
        return cls(db, table, list(ids), dim)

    @staticmethod
    def _exists(db: Database, table: str) -> bool:
        return bool(db.table_columns(table))

    @staticmethod
    def _rebuild(db: Database, table: str, ids: list[str], vectors: np.ndarray, dim: int) -> None:
        db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute(f'CREATE TABLE {table} (id TEXT COLLATE "C" PRIMARY KEY, embedding vector({dim}))')
        _copy_rows(db, table, ids, vectors)
        db.execute(f"CREATE INDEX ON {table} USING hnsw (embedding vector_ip_ops) "
                   f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")

    @staticmethod
    def _update(db: Database, table: str, ids: list[str], vectors: np.ndarray,
                previous: tuple[list[str], np.ndarray], match: RowMatch) -> None:
        same, _ = match.compared(np.asarray(previous[1]), vectors)
        kept = np.zeros(len(previous[0]), dtype=bool)
        kept[match.old_rows[same]] = True
        gone = [previous[0][row] for row in np.flatnonzero(~kept).tolist()]
        for start in range(0, len(gone), 500):
            part = gone[start:start + 500]
            db.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' * len(part))})", part)
        added = np.flatnonzero(~same)
        _copy_rows(db, table, [ids[row] for row in added.tolist()], vectors[added])

    def labelled(self, label: str) -> PgVectorIndex:
        """This index, named ``label`` (its artifact) in messages."""
        self.label = label
        return self

    @classmethod
    def load(cls, db: Database, table: str, ids_path: Path) -> PgVectorIndex:
        meta = read_ids_file(ids_path)
        return cls(db, table, list(meta["ids"]), int(meta["dim"]), ids_path.name.removesuffix(".ids.json"))

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-k (id, cosine) per query row, best first; equal scores by id."""
        query, k, fetch = search_plan(self, query, k)
        if k <= 0:
            return [[] for _ in range(query.shape[0])]
        self.db.execute(f"SET hnsw.ef_search = {min(MAX_EF_SEARCH, max(64, 2 * fetch))}")
        out = []
        for row in query:
            hits = self.db.execute(f"SELECT id, -(embedding <#> ?) FROM {self.table} ORDER BY embedding <#> ? LIMIT ?",
                                   (row, row, fetch)).fetchall()
            out.append(ties_by_id(((item, float(score)) for item, score in hits), k))
        return out


def _copy_rows(db: Any, table: str, ids: list[str], vectors: np.ndarray) -> None:
    """Append rows with ``COPY`` (binary): the fast way in, for a whole build of a million rows."""
    if not ids:
        return
    with db.conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "vector"])
        for item, vector in zip(ids, vectors, strict=True):
            copy.write_row((item, vector))
