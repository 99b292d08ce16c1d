"""Persistent cache of model responses and embedding vectors (SQLite, WAL).

Why SQLite: each finished call is committed on its own, so a killed job loses
at most the calls in flight and a rerun repeats none of the finished ones;
lookups are by primary key, never by loading a whole file. Keys are sha256
hashes of a canonical JSON request (see :meth:`ChatRequest.cache_key`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat (
    key TEXT PRIMARY KEY, model TEXT, stage TEXT, response TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS embedding (
    key TEXT PRIMARY KEY, model TEXT, dim INTEGER, vector BLOB, created REAL
);
"""


class ResponseCache:
    """Chat responses and embedding vectors keyed by request hash."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get_chat(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM chat WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_chat(self, key: str, model: str, stage: str, response: dict[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO chat VALUES (?, ?, ?, ?, ?)", (key, model, stage, blob, time.time())
            )
            self._db.commit()

    def get_vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                for key, blob in self._db.execute(
                    f"SELECT key, vector FROM embedding WHERE key IN ({marks})", part
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        now = time.time()
        rows = [
            (key, model, int(vec.shape[0]), np.asarray(vec, dtype=np.float32).tobytes(), now) for key, vec in items
        ]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?, ?, ?)", rows)
            self._db.commit()

    def counts(self) -> dict[str, int]:
        with self._lock:
            chat = self._db.execute("SELECT COUNT(*) FROM chat").fetchone()[0]
            emb = self._db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0]
        return {"chat_responses": chat, "embeddings": emb}
