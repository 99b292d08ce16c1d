"""Vector indices of a PostgreSQL store: a pgvector table per artifact with an HNSW index.

Table ``vectors_<artifact file stem>`` (``label`` bigint, ``embedding vector(d)``), HNSW over
inner product (``vector_ip_ops``, m=16, ef_construction=200 as :class:`HnswIndex`): the
rows are L2-normalised, so the inner product is the cosine, and it is the space hnswlib
searches (``ip``), so scores agree and a zero vector scores 0 on both (cosine distance
would make it NaN). A search asks for a few rows past k (``ef_search`` at least 64, twice
what it fetches) and orders equal scores by id, as :class:`HnswIndex` does: both stores
answer the same. The row -> id and label -> row maps are the ``.ids.json`` file beside the
``.npy`` vectors (a blob of the store, :mod:`unirag.store.artifact_files`), so loading an index
reads no rows. Labels decouple table rows from ids as in :class:`HnswIndex`: an update keeps
the rows whose vector is unchanged, renamed ones included (:class:`LabelPlan`), and inserts
into the HNSW index only new vectors. A table from before labels (an ``id`` column, no
``labels`` in its ``.ids.json``) is still searched by id, and rebuilt at its next write.

Rewriting a table happens in one transaction with ``DELETE`` (never ``TRUNCATE``): a
process that searches meanwhile sees the old rows until the new ones are committed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from unirag.index.vectors import LabelPlan, RowMatch, read_ids_file, search_plan, ties_by_id
from unirag.store.database import Database

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
MAX_EF_SEARCH = 1000  # pgvector's limit
MAX_DELETED_SHARE = 0.25  # past it, a write rebuilds the table: the label -> row map stays compact


def table_name(file_stem: str) -> str:
    """``vectors_`` + the artifact's file stem in identifier characters."""
    return "vectors_" + re.sub(r"[^a-z0-9_]", "_", file_stem.lower())


class PgVectorIndex:
    """A vector index in a pgvector table: the :class:`~unirag.index.vectors.VectorIndex` interface."""

    def __init__(self, db: Database, table: str, ids: list[str], dim: int, label: str = "vectors",
                 label_rows: list[int] | None = None) -> None:
        self.db = db
        self.table = table
        self.ids = ids
        self.dim = dim
        self.label = label
        # label -> row (-1: deleted); None: a table from before labels, keyed by id
        self.label_rows = label_rows
        self._label_ids = None if label_rows is None else [ids[row] if row >= 0 else "" for row in label_rows]
        self.update_counts: dict[str, int] | None = None  # what an in-place update did (None: built whole)

    @classmethod
    def write(cls, db: Database, table: str, ids: list[str], vectors: np.ndarray,
              previous: tuple[list[str], np.ndarray] | None, match: RowMatch | None = None,
              previous_labels: list[int] | None = None) -> PgVectorIndex:
        """Bring the table to ``ids``/``vectors``: in place from ``previous`` (the ids and vectors
        the table holds now, ``previous_labels`` its label -> row map as its ``.ids.json`` holds
        it; ``match``: what the caller knows of the rows already) when the table has labels,
        the dimension is the same and few labels would be deleted, else rebuilt whole (table,
        rows, then the HNSW index: faster than row by row)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 1
        with db:
            if previous is not None and previous[1].ndim == 2 and previous[1].shape[1] == dim \
                    and _labels_fit(previous_labels, len(previous[0])) and "label" in db.table_columns(table):
                plan = LabelPlan.of(previous_labels, previous[1], vectors, match or RowMatch.of(previous[0], ids), None)
                if not plan.too_many_deleted(MAX_DELETED_SHARE):
                    cls._update(db, table, vectors, plan)
                    index = cls(db, table, list(ids), dim, label_rows=plan.labels.tolist())
                    index.update_counts = plan.counts
                    return index
            cls._rebuild(db, table, vectors, dim)
        return cls(db, table, list(ids), dim, label_rows=list(range(len(ids))))

    @staticmethod
    def _rebuild(db: Database, table: str, vectors: np.ndarray, dim: int) -> None:
        db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute(f"CREATE TABLE {table} (label BIGINT PRIMARY KEY, embedding vector({dim}))")
        _copy_rows(db, table, np.arange(vectors.shape[0]), vectors)
        db.execute(f"CREATE INDEX ON {table} USING hnsw (embedding vector_ip_ops) "
                   f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")

    @staticmethod
    def _update(db: Database, table: str, vectors: np.ndarray, plan: LabelPlan) -> None:
        """Delete the dropped labels, insert the added rows under their fresh labels (the plan
        is exact: no moved rows); kept and renamed rows are not touched."""
        dropped = plan.dropped.tolist()
        for start in range(0, len(dropped), 500):
            part = dropped[start:start + 500]
            db.execute(f"DELETE FROM {table} WHERE label IN ({','.join('?' * len(part))})", part)
        _copy_rows(db, table, plan.fresh, vectors[plan.added])

    def labelled(self, label: str) -> PgVectorIndex:
        """This index, named ``label`` (its artifact) in messages."""
        self.label = label
        return self

    @classmethod
    def load(cls, db: Database, table: str, ids_path: Path) -> PgVectorIndex:
        meta = read_ids_file(ids_path)
        return cls(db, table, list(meta["ids"]), int(meta["dim"]), ids_path.name.removesuffix(".ids.json"),
                   meta.get("labels"))

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-k (id, cosine) per query row, best first; equal scores by id."""
        query, k, fetch = search_plan(self, query, k)
        if k <= 0:
            return [[] for _ in range(query.shape[0])]
        self.db.execute(f"SET hnsw.ef_search = {min(MAX_EF_SEARCH, max(64, 2 * fetch))}")
        key = "id" if self._label_ids is None else "label"
        out = []
        for row in query:
            hits = self.db.execute(f"SELECT {key}, -(embedding <#> ?) FROM {self.table} "
                                   "ORDER BY embedding <#> ? LIMIT ?", (row, row, fetch)).fetchall()
            if self._label_ids is not None:
                hits = [(self._label_ids[int(label)], score) for label, score in hits]
            out.append(ties_by_id(((item, float(score)) for item, score in hits), k))
        return out


def _labels_fit(labels: list[int] | None, rows: int) -> bool:
    """A label -> row map that names each of ``rows`` rows once (anything else: rebuild whole)."""
    if labels is None:
        return False
    live = sorted(row for row in labels if row >= 0)
    return live == list(range(rows))


def _copy_rows(db: Any, table: str, labels: np.ndarray, vectors: np.ndarray) -> None:
    """Append rows with ``COPY`` (binary): the fast way in, for a whole build of a million rows."""
    if not len(labels):
        return
    with db.conn.cursor().copy(f"COPY {table} (label, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for label, vector in zip(labels.tolist(), vectors, strict=True):
            copy.write_row((label, vector))
