"""Opening a store where its :class:`~unirag.store.location.StoreLocation` says: the one
place that picks the SQLite or the PostgreSQL implementation (imported only when used:
psycopg is an optional extra)."""

from __future__ import annotations

from pathlib import Path

from unirag.store.database import Database, WriterLock
from unirag.store.location import STORE_FILE, StoreLocation


def connect(location: StoreLocation, root: Path, busy_timeout: float | None = None) -> Database:
    """A new connection (SQLite: ``root/store.sqlite``, created when missing; ``busy_timeout``:
    seconds a SQLite write waits for another writer's transaction)."""
    if location.is_postgres:
        from unirag.store.postgres import PostgresDatabase

        return PostgresDatabase.connect(location, location.describe(root))
    from unirag.store.sqlite import connect_sqlite

    return connect_sqlite(root / STORE_FILE, busy_timeout=busy_timeout)


def store_exists(location: StoreLocation, root: Path) -> bool:
    """Whether a workspace's tables are there (never creates them)."""
    if location.is_postgres:
        from unirag.store.postgres import schema_exists

        return schema_exists(location, location.describe(root))
    return (root / STORE_FILE).is_file()


def writer_lock(location: StoreLocation, root: Path) -> WriterLock:
    """The lock that lets one writer at a time change the workspace at ``root``."""
    if location.is_postgres:
        from unirag.store.postgres import AdvisoryWriterLock

        return AdvisoryWriterLock(location, str(root))
    from unirag.store.locks import FileWriterLock

    return FileWriterLock(root / ".lock", str(root))
