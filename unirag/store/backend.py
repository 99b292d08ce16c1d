"""What a store backend implements: the whole seam between a workspace and where it is kept.

A workspace asks its backend (never "which backend is this?") for a connection, the
writer lock, whether its tables exist, where the artifact files are kept
(:class:`ArtifactFiles`) and the few facts that change what the code above builds (are
vector indices tables of the database? where does the model cache live?). A new backend
is one module with a :class:`Backend` and, if its files are not a local directory, an
:class:`ArtifactFiles`; :func:`unirag.store.connect.backend_for` is the one place that
picks it from the ``store`` setting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from unirag.store.database import Database, WriterLock


class ArtifactFiles(Protocol):
    """Where an artifact's files are kept beside its manifest entry: the local directory
    itself (:class:`unirag.store.local_files.LocalArtifactFiles`) or blobs in the database
    with a local copy to read (:class:`unirag.store.artifact_files.BlobArtifactFiles`).

    The manifest writes and drops entries through it, inside its own transaction, so an
    entry and its files' record always land together."""

    def record(self, artifact: str, sizes: dict[str, int]) -> str | None:
        """Inside the caller's transaction: keep the files ``sizes`` names (workspace-relative
        paths) as ``artifact``'s, replacing what it had; the digest to record in its entry,
        or None when the files stay where they are."""
        ...

    def recorded(self, artifact: str, digest: str | None) -> None:
        """After the transaction of :meth:`record` committed."""
        ...

    def drop(self, artifact: str) -> None:
        """Inside the caller's transaction: forget ``artifact``'s files."""
        ...

    def forget(self, keep: str | None) -> None:
        """Inside the caller's transaction: forget every artifact's files (but ``keep``'s)."""
        ...

    def damage(self, artifact: str, recorded: dict[str, int]) -> str | None:
        """The first recorded file that is missing or has another size, in words; None when whole."""
        ...

    def checkout(self, artifact: str, entry: dict[str, Any]) -> None:
        """Make the local files of ``artifact`` the ones ``entry`` records, before they are read."""
        ...

    def stored_digest(self, artifact: str, relatives: Iterable[str]) -> str:
        """The digest of ``artifact``'s files as this store keeps them (what a migration verifies)."""
        ...


class Backend(Protocol):
    """One kind of store, bound to one workspace directory (see the module doc)."""

    #: vector indices are tables of the database (pgvector), not index files beside the vectors
    vector_tables: bool
    #: what a write raises when another connection's transaction held the store past its busy timeout
    busy_errors: tuple[type[BaseException], ...]

    @property
    def where(self) -> str:
        """The store in words for messages (never a password)."""
        ...

    @property
    def elsewhere(self) -> bool:
        """Whether the tables live outside the workspace directory (messages name them then)."""
        ...

    @property
    def cache_file(self) -> Path | None:
        """The model cache's own file, or None when it is tables of this database."""
        ...

    def connect(self, busy_timeout: float | None = None) -> Database:
        """A new connection (``busy_timeout``: seconds a write waits for another writer's transaction)."""
        ...

    def exists(self) -> bool:
        """Whether a workspace's tables are there (never creates them)."""
        ...

    def writer_lock(self) -> WriterLock:
        """The lock that lets one writer at a time change the workspace."""
        ...

    def artifact_files(self, db: Database) -> ArtifactFiles:
        """Where the artifact files are kept, through ``db``."""
        ...

    def cache_database(self) -> Database:
        """A new connection to the model cache's tables (the caller closes it)."""
        ...

    def empty(self) -> None:
        """Remove the workspace this store holds (``unirag migrate --replace``)."""
        ...


@dataclass
class Store:
    """An open store: its database, the artifact-files strategy, and the backend for more
    connections and facts (what :func:`unirag.store.connect.connect` returns)."""

    backend: Backend
    db: Database
    files: ArtifactFiles

    def close(self) -> None:
        self.db.close()
