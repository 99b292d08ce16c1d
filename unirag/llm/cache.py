"""Persistent cache of model responses and embedding vectors (SQLite, WAL).

Why SQLite: each finished call is committed on its own, so a killed job loses
at most the calls in flight and a rerun repeats none of the finished ones;
lookups are by primary key, never by loading a whole file. Keys are sha256
hashes of a canonical JSON request (see :meth:`ChatRequest.cache_key`).

Embedding vectors are served only at the dimension the workspace expects (the
``dim`` column is part of every lookup, see :class:`ExpectedDim`), else at the one
the endpoint answered last (``served_dim``: a rebuild for an endpoint of another
dimension is not served the old vectors), and vectors of another dimension are
never stored: one query against an endpoint serving another dimension must not
poison the cache for the right endpoint.

The cache is disposable: a damaged file (a truncated copy, a bad disk page) is
moved aside to ``llm.sqlite.corrupt-<time>`` with one warning, and an empty
cache takes its place; the calls it held are made again when needed.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from unirag.errors import damaged_database
from unirag.store.sqlite import prepare_wal

T = TypeVar("T")
Warn = Callable[[str], None]
#: model name -> (artifact, dimension) of the vectors a workspace holds for that model, or
#: None while it holds none (a new or rebuilt workspace: the first vectors set the dimension).
ExpectedDim = Callable[[str], "tuple[str, int] | None"]
#: ``PRAGMA quick_check`` reads every page: at open it costs milliseconds on caches up
#: to this size; larger ones are checked by their reads and writes alone.
QUICK_CHECK_MAX_BYTES = 256 << 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat (
    key TEXT PRIMARY KEY, model TEXT, stage TEXT, response TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS embedding (
    key TEXT PRIMARY KEY, model TEXT, dim INTEGER, vector BLOB, created REAL
);
CREATE TABLE IF NOT EXISTS served_dim (model TEXT PRIMARY KEY, dim INTEGER, created REAL);
"""


def _python_warning(message: str) -> None:
    """The default ``warn`` outside the CLI: a :class:`RuntimeWarning` a library user sees."""
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def vectors_of(rows: Iterable[tuple[str, int, bytes]], dim: int | None) -> dict[str, np.ndarray]:
    """key -> vector of the ``(key, dim, blob)`` rows that are whole and of dimension ``dim``
    (any dimension when None): a row of another shape is a miss, never served."""
    found: dict[str, np.ndarray] = {}
    for key, stored_dim, blob in rows:
        if len(blob) == 4 * stored_dim and (dim is None or stored_dim == dim):
            found[key] = np.frombuffer(blob, dtype=np.float32)
    return found


def vector_rows(model: str, items: Iterable[tuple[str, np.ndarray]], dim: int | None) -> list[tuple[Any, ...]]:
    """The ``embedding`` rows to store of ``items``: only vectors of dimension ``dim`` (any
    when None), so that a wrong endpoint's answer is never kept."""
    now = time.time()
    rows = []
    for key, vec in items:
        vec = np.asarray(vec, dtype=np.float32).reshape(-1)
        if dim is None or vec.shape[0] == dim:
            rows.append((key, model, int(vec.shape[0]), vec.tobytes(), now))
    return rows


def chat_response(row: tuple[str] | None) -> dict[str, Any] | None:
    """The stored response of a ``chat`` row; None (a miss) for no row or a damaged entry,
    which the next put replaces."""
    if not row:
        return None
    try:
        return json.loads(row[0])
    except json.JSONDecodeError:
        return None


class ResponseCache:
    """Chat responses and embedding vectors keyed by request hash.

    ``warn`` says when a damaged cache file was replaced (the CLI's warning line);
    ``expected_dim`` says what dimension the workspace's vectors have (none: any)."""

    def __init__(self, path: Path, warn: Warn | None = None, expected_dim: ExpectedDim | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.warn = warn or _python_warning
        self.expected_dim = expected_dim
        self._lock = threading.Lock()
        self._inode = -1
        self._db = self._open()

    # -- damage ----------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._inode = os.stat(self.path).st_ino
        return prepare_wal(db, _SCHEMA)

    def _open(self) -> sqlite3.Connection:
        """Connect, checking a small enough file page by page; a damaged one is set aside."""
        try:
            db = self._connect()
        except sqlite3.DatabaseError as exc:
            why = damaged_database(exc)
            if why is None:
                raise
            return self._replace_damaged(None, why)
        if self.path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
            verdict = self._quick_check(db)
            if verdict is not None:
                return self._replace_damaged(db, verdict)
        return db

    @staticmethod
    def _quick_check(db: sqlite3.Connection) -> str | None:
        """None when the file is whole, else why not (in fixed words)."""
        try:
            rows = db.execute("PRAGMA quick_check(1)").fetchall()
        except sqlite3.DatabaseError as exc:
            why = damaged_database(exc)
            if why is None:
                raise
            return why
        return None if rows == [("ok",)] else "database disk image is malformed"

    def _replace_damaged(self, db: sqlite3.Connection | None, why: str) -> sqlite3.Connection:
        """Move the damaged file (with its -wal and -shm) aside and open an empty cache.

        Under a lock on the cache's directory, and only if the file is still the one found
        damaged: another process may have replaced it already, and its fresh cache must stay."""
        if db is not None:
            db.close()
        lock = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                still_damaged = self.path.exists() and os.stat(self.path).st_ino == self._inode
                if still_damaged:
                    aside = self._aside_name()
                    for suffix in ("-wal", "-shm"):
                        extra = self.path.with_name(self.path.name + suffix)
                        if extra.exists():
                            extra.rename(aside.with_name(aside.name + suffix))
                    self.path.rename(aside)
                    self.warn(f"the model cache {self.path} was damaged ({why}): moved it aside to {aside.name} "
                              "and started an empty cache; calls it held will be made again")
                return self._connect()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        finally:
            os.close(lock)

    def _aside_name(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        return aside if not aside.exists() else aside.with_name(f"{aside.name}-{os.getpid()}")

    def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` on the database (caller holds ``_lock``); when it finds the file
        damaged, the cache is replaced and the operation runs again on the empty one (a
        read is then a miss, a write lands in the new file)."""
        try:
            return operation(self._db)
        except sqlite3.DatabaseError as exc:
            why = damaged_database(exc)
            if why is None:
                raise
            self._db = self._replace_damaged(self._db, why)
        return operation(self._db)

    # -- lifecycle and entries ----------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get_chat(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._run(lambda db: db.execute("SELECT response FROM chat WHERE key = ?", (key,)).fetchone())
        return chat_response(row)

    def put_chat(self, key: str, model: str, stage: str, response: dict[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)

        def put(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO chat VALUES (?, ?, ?, ?, ?)", (key, model, stage, blob, time.time()))
            db.commit()

        with self._lock:
            self._run(put)

    def embedding_dim(self, model: str) -> tuple[str, int] | None:
        """(artifact, dimension) of the workspace's vectors of ``model``; None when unknown."""
        return self.expected_dim(model) if self.expected_dim is not None else None

    def served_dim(self, model: str) -> int | None:
        """The dimension ``model``'s endpoint answered last (None: not seen yet)."""
        with self._lock:
            row = self._run(lambda db: db.execute("SELECT dim FROM served_dim WHERE model = ?", (model,)).fetchone())
        return int(row[0]) if row else None

    def put_served_dim(self, model: str, dim: int) -> None:
        def put(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO served_dim VALUES (?, ?, ?)", (model, dim, time.time()))
            db.commit()

        with self._lock:
            self._run(put)

    def get_vectors(self, keys: list[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """The cached vectors of ``keys`` of dimension ``dim`` (any when None)."""
        def get(db: sqlite3.Connection) -> dict[str, np.ndarray]:
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = db.execute(f"SELECT key, dim, vector FROM embedding WHERE key IN ({marks})", part)
                found.update(vectors_of(rows, dim))
            return found

        with self._lock:
            return self._run(get)

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]], dim: int | None = None) -> None:
        """Store ``items``, those of dimension ``dim`` only (any when None)."""
        rows = vector_rows(model, items, dim)

        def put(db: sqlite3.Connection) -> None:
            db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?, ?, ?)", rows)
            db.commit()

        if rows:
            with self._lock:
                self._run(put)

    def counts(self) -> dict[str, int]:
        def count(db: sqlite3.Connection) -> dict[str, int]:
            chat = db.execute("SELECT COUNT(*) FROM chat").fetchone()[0]
            emb = db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0]
            return {"chat_responses": chat, "embeddings": emb}

        with self._lock:
            return self._run(count)
