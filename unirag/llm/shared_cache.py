"""The model cache as two tables of a server's database (the PostgreSQL store).

The same entries as :class:`unirag.llm.cache.ResponseCache` (chat responses and
embedding vectors by request hash), in the workspace's schema: every process and
machine serving the workspace shares one cache, and each finished call is committed
on its own, so a killed job loses at most the calls in flight. There is no file to
damage: a server's tables are the server's to keep whole.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from unirag.llm.cache import ExpectedDim, chat_response, vector_rows, vectors_of
from unirag.store.database import Database
from unirag.store.schema import ensure_schema, tables_migration

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat (
    key TEXT PRIMARY KEY, model TEXT, stage TEXT, response TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS embedding (
    key TEXT PRIMARY KEY, model TEXT, dim INTEGER, vector BLOB, created REAL
);
"""
MIGRATIONS = (
    tables_migration(1, "chat, embedding", _SCHEMA),
    tables_migration(2, "served_dim", "CREATE TABLE IF NOT EXISTS served_dim (model TEXT PRIMARY KEY, dim INTEGER, "
                                      "created REAL)"),
)


class DatabaseResponseCache:
    """:class:`~unirag.llm.cache.ResponseCache`'s methods over tables of ``db`` (a connection
    of its own: model calls finish on many threads). ``warn`` is kept for the same interface;
    ``expected_dim`` as there: vectors of another dimension are neither stored nor served."""

    def __init__(self, db: Database, warn: Callable[[str], None] | None = None,
                 expected_dim: ExpectedDim | None = None) -> None:
        ensure_schema(db, "model_cache", MIGRATIONS)
        self.db = db
        self.warn = warn
        self.expected_dim = expected_dim
        self._lock = threading.Lock()
        self._put_chat = db.dialect.replace_into("chat", ("key", "model", "stage", "response", "created"), ("key",))
        self._put_vector = db.dialect.replace_into("embedding", ("key", "model", "dim", "vector", "created"),
                                                   ("key",))
        self._put_served = db.dialect.replace_into("served_dim", ("model", "dim", "created"), ("model",))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def get_chat(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self.db.execute("SELECT response FROM chat WHERE key = ?", (key,)).fetchone()
        return chat_response(row)

    def put_chat(self, key: str, model: str, stage: str, response: dict[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self.db.execute(self._put_chat, (key, model, stage, blob, time.time()))

    def embedding_dim(self, model: str) -> tuple[str, int] | None:
        """(artifact, dimension) of the workspace's vectors of ``model``; None when unknown."""
        return self.expected_dim(model) if self.expected_dim is not None else None

    def served_dim(self, model: str) -> int | None:
        with self._lock:
            row = self.db.execute("SELECT dim FROM served_dim WHERE model = ?", (model,)).fetchone()
        return int(row[0]) if row else None

    def put_served_dim(self, model: str, dim: int) -> None:
        with self._lock:
            self.db.execute(self._put_served, (model, dim, time.time()))

    def get_vectors(self, keys: list[str], dim: int | None = None) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self.db.execute(f"SELECT key, dim, vector FROM embedding WHERE key IN ({marks})", part)
                found.update(vectors_of(((key, stored, bytes(blob)) for key, stored, blob in rows), dim))
        return found

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]], dim: int | None = None) -> None:
        rows = vector_rows(model, items, dim)
        if rows:
            with self._lock, self.db:
                self.db.executemany(self._put_vector, rows)

    def counts(self) -> dict[str, int]:
        with self._lock:
            chat = self.db.execute("SELECT COUNT(*) FROM chat").fetchone()[0]
            emb = self.db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0]
        return {"chat_responses": chat, "embeddings": emb}
