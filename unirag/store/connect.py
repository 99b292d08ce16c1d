"""Opening a store where its :class:`~unirag.store.location.StoreLocation` says: the one
place that picks the backend (:mod:`unirag.store.sqlite` or :mod:`unirag.store.postgres`;
psycopg, an optional extra, is imported only when a PostgreSQL store connects)."""

from __future__ import annotations

import sys
from pathlib import Path

from unirag.errors import WorkspaceError
from unirag.store import postgres
from unirag.store.backend import Backend, Store
from unirag.store.location import StoreLocation
from unirag.store.sqlite import SqliteBackend


def backend_for(location: StoreLocation, root: Path) -> Backend:
    """The backend of the workspace at ``root`` whose store is at ``location``."""
    if location.is_postgres:
        return postgres.PostgresBackend(location, root)
    return SqliteBackend(root)


def connect(backend: Backend) -> Store:
    """A new connection to ``backend``'s database with its artifact-files strategy."""
    db = backend.connect()
    try:
        files = backend.artifact_files(db)
    except BaseException:
        db.close()
        raise
    return Store(backend, db, files)


def store_failure(exc: BaseException) -> WorkspaceError | None:
    """A store server that stopped answering mid-job (wherever its client said so: a worker
    thread, a lock, a bulk copy) as the store's one line; None for anything else. A client
    library never imported cannot have raised: a SQLite workspace never pays for the check."""
    if "psycopg" not in sys.modules:
        return None
    return postgres.store_failure(exc)
