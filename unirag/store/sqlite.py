"""The embedded store: one SQLite file (WAL), the default of every workspace.

Why SQLite for the corpus: documents and chunks are appended in transactions (never
a whole-file rewrite per document), a killed run leaves either a whole batch or none
of it, and a query fetches its k chunks by id instead of parsing the corpus.

The connection *is* the :class:`~unirag.store.database.Database`: a
:class:`sqlite3.Connection` subclass, so the store classes' statements cost what
they cost before there was an interface. Every read and write reports a damaged
file as one :class:`~unirag.errors.StoreDamagedError` line.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from unirag.errors import StoreDamagedError, damaged_database
from unirag.store.database import SQLITE, Dialect
from unirag.store.local_files import LocalArtifactFiles
from unirag.store.location import STORE_FILE
from unirag.store.locks import FileWriterLock

C = TypeVar("C", bound=sqlite3.Connection)


def prepare_wal(db: C, schema: str) -> C:
    """WAL journal, NORMAL sync and ``schema`` on a fresh connection (closed if that fails):
    the setup the model cache and the workspace store share."""
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(schema)
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def store_damaged(path: Path, why: str) -> StoreDamagedError:
    """One line naming the damaged store and the two ways out; never stored content."""
    return StoreDamagedError(
        f"{path} is damaged ({why}): restore it from a backup, or index the sources again into a new "
        f"workspace ('unirag index SOURCES -w NEW_WORKSPACE')"
    )


def _raise_if_damaged(path: Path, exc: sqlite3.DatabaseError) -> None:
    """Raise :func:`store_damaged` when ``exc`` says the file is damaged; other errors
    (a lock, a full disk) are left to the caller's ``raise``."""
    why = damaged_database(exc)
    if why is not None:
        raise store_damaged(path, why) from None


class SqliteCursor(sqlite3.Cursor):
    """A cursor whose every read and write reports a damaged page as :class:`StoreDamagedError`:
    damage shows wherever a damaged page is read, which may be any query of any module.
    A try per call, no context manager: iterating a million chunks must stay cheap."""

    connection: SqliteDatabase

    def execute(self, sql: str, parameters: Any = ()) -> SqliteCursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def executemany(self, sql: str, seq_of_parameters: Any) -> SqliteCursor:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def executescript(self, sql_script: str) -> SqliteCursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def fetchmany(self, size: int = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.connection.path, exc)
            raise


class SqliteDatabase(sqlite3.Connection):
    """The store's connection: statements run on :class:`SqliteCursor`, and commits
    report damage the same way. ``path`` names the file in the message."""

    path: Path
    dialect: Dialect = SQLITE
    known_versions: dict[str, int]

    @property
    def where(self) -> str:
        return str(self.path)

    def execute(self, sql: str, parameters: Any = ()) -> SqliteCursor:
        return self.cursor(SqliteCursor).execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any) -> SqliteCursor:
        return self.cursor(SqliteCursor).executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str) -> SqliteCursor:
        return self.cursor(SqliteCursor).executescript(sql_script)

    def commit(self) -> None:
        try:
            super().commit()
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.path, exc)
            raise

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return super().__exit__(*exc_info)
        except sqlite3.DatabaseError as exc:
            _raise_if_damaged(self.path, exc)
            raise

    def table_columns(self, table: str) -> list[str]:
        return [row[1] for row in self.execute(f"PRAGMA table_info({table})")]

    def continue_identities(self, table: str) -> None:
        """Nothing to do: SQLite's AUTOINCREMENT follows ids inserted explicitly."""

    def tables(self) -> list[str]:
        return [row[0] for row in self.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]


def connect_sqlite(path: Path, schema: str = "", busy_timeout: float | None = None) -> SqliteDatabase:
    """Open (or create) the store at ``path``; a damaged file is one :class:`StoreDamagedError`.
    ``busy_timeout``: seconds a write waits for another writer's transaction (default 30)."""
    try:
        db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, factory=SqliteDatabase)
    except sqlite3.DatabaseError as exc:
        _raise_if_damaged(path, exc)
        raise
    db.path = path
    db.known_versions = {}
    prepared = prepare_wal(db, schema)
    if busy_timeout is not None:
        prepared.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    return prepared


CACHE_FILE = Path("cache") / "llm.sqlite"


@dataclass(frozen=True)
class SqliteBackend:
    """The embedded store of the workspace at ``root`` (:class:`unirag.store.backend.Backend`):
    ``root/store.sqlite``, a file lock, the artifact files in the directory itself and the
    model cache in its own file."""

    root: Path
    vector_tables: ClassVar[bool] = False
    busy_errors: ClassVar[tuple[type[BaseException], ...]] = (sqlite3.OperationalError,)

    @property
    def path(self) -> Path:
        return self.root / STORE_FILE

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def elsewhere(self) -> bool:
        return False

    @property
    def cache_file(self) -> Path:
        return self.root / CACHE_FILE

    def connect(self, busy_timeout: float | None = None) -> SqliteDatabase:
        return connect_sqlite(self.path, busy_timeout=busy_timeout)

    def exists(self) -> bool:
        return self.path.is_file()

    def writer_lock(self) -> FileWriterLock:
        return FileWriterLock(self.root / ".lock", str(self.root))

    def artifact_files(self, db: Any) -> LocalArtifactFiles:
        return LocalArtifactFiles(self.root)

    def cache_database(self) -> SqliteDatabase:
        return connect_sqlite(self.cache_file)

    def empty(self) -> None:
        """Move the store's file (and its WAL) aside, named with the time: never deleted."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            old = self.root / f"{STORE_FILE}{suffix}"
            if old.exists():
                old.rename(old.with_name(f"{STORE_FILE}.replaced-{stamp}{suffix}"))
