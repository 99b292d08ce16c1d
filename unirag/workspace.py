"""The workspace: one directory holding every artifact of a corpus.

Layout::

    unirag.yaml          settings (written by ``unirag init``)
    store.sqlite         documents, chunks, manifest, usage (transactions)
    cache/llm.sqlite     model responses and embedding vectors
    artifacts/           vector and BM25 indices (written atomically)
    .lock                held while a process writes

That is the embedded store (the default). With ``store: postgresql://...`` the tables,
the model cache and the artifact files live in the server (:mod:`unirag.store`), and the
directory keeps the settings, the logs and a local copy of the artifact files.

A :class:`Workspace` opens all that (settings, paths, the writer lock, the store, the
model cache) and hands out its three parts, each over the same connection, the way
:class:`~unirag.graph.graph_store.GraphStore` and
:class:`~unirag.hierarchy.community_store.CommunityStore` keep theirs:
:attr:`Workspace.corpus` (documents, chunks, origins: :mod:`unirag.corpus`),
:attr:`Workspace.manifest` (built artifacts, staleness, fingerprints, the pending delete:
:mod:`unirag.manifest`) and :attr:`Workspace.usage` (:mod:`unirag.usage_book`). Which
store it is never shows above :mod:`unirag.store`: the workspace asks its
:class:`~unirag.store.backend.Backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from unirag.config import DEFAULT_SETTINGS_YAML, SETTINGS_FILE, configured_store
from unirag.corpus import Corpus
from unirag.errors import WorkspaceError
from unirag.llm.cache import ResponseCache
from unirag.llm.shared_cache import DatabaseResponseCache
from unirag.manifest import Manifest
from unirag.store.backend import Backend, Store
from unirag.store.connect import backend_for, connect
from unirag.store.database import Database, WriterLock
from unirag.store.files import atomic_directory, atomic_path, atomic_write_bytes
from unirag.store.location import STORE_FILE, StoreLocation, parse_store
from unirag.store.schema import ensure_schema
from unirag.usage_book import UsageBook
from unirag.workspace_tables import MIGRATIONS

__all__ = ["STORE_FILE", "Workspace", "atomic_directory", "atomic_path", "atomic_write_bytes"]


class Workspace:
    """A workspace directory and its store, opened. Open one per process and reuse it.

    ``store``: where the tables live (``sqlite`` or ``postgresql://...``, see
    :mod:`unirag.store.location`); None reads the workspace's ``store`` setting."""

    def __init__(self, root: Path, store: str | None = None) -> None:
        self.root = Path(root)
        self.location: StoreLocation = parse_store(configured_store(self.root) if store is None else store,
                                                   self.root)
        self.backend: Backend = backend_for(self.location, self.root)
        self._store: Store | None = None
        self._corpus: Corpus | None = None
        self._manifest: Manifest | None = None
        self.usage = UsageBook(lambda: self.db, self.backend)
        self._cache: Any = None
        self._lock: WriterLock | None = None

    # -- lifecycle -------------------------------------------------------
    @classmethod
    def init(cls, root: Path, settings_yaml: str = DEFAULT_SETTINGS_YAML, store: str | None = None) -> Workspace:
        """Create the directory, a settings file (an existing file is kept) and the store's tables."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"{root} exists and is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        settings_path = root / SETTINGS_FILE
        if not settings_path.exists():
            atomic_write_bytes(settings_path, settings_yaml.encode("utf-8"))
        workspace = cls(root, store)
        workspace.db
        return workspace

    @classmethod
    def open(cls, root: Path, store: str | None = None) -> Workspace:
        """Open an existing workspace; a clear error if there is none."""
        root = Path(root)
        workspace = cls(root, store)
        if not workspace.backend.exists():
            where = f" ({workspace.where})" if workspace.backend.elsewhere else ""
            raise WorkspaceError(f"no unirag workspace at {root}{where}: run 'unirag index SOURCE -w {root}' first")
        return workspace

    @classmethod
    def exists(cls, root: Path, store: str | None = None) -> bool:
        """Whether a workspace's tables are at ``root`` (or in its store), creating nothing."""
        return cls(root, store).backend.exists()

    @property
    def where(self) -> str:
        """The store in words (the file, or the server and schema without a password)."""
        return self.backend.where

    @property
    def store(self) -> Store:
        """The open store: its database and where the artifact files are kept (opened once)."""
        if self._store is None:
            store = connect(self.backend)
            try:
                ensure_schema(store.db, "workspace", MIGRATIONS)
            except BaseException:
                store.close()
                raise
            self._store = store
        return self._store

    @property
    def db(self) -> Database:
        return self.store.db

    @property
    def manifest(self) -> Manifest:
        """Built artifacts, their staleness and fingerprints, the pending delete (:mod:`unirag.manifest`)."""
        if self._manifest is None:
            self._manifest = Manifest(self.db, self.root, self.store.files)
        return self._manifest

    @property
    def corpus(self) -> Corpus:
        """Documents, chunks and origins (:mod:`unirag.corpus`)."""
        if self._corpus is None:
            self._corpus = Corpus(self.db, self.manifest)
        return self._corpus

    def cache(self, warn: Callable[[str], None] | None = None) -> Any:
        """The persistent model-response cache of this workspace (opened once). ``warn``
        says when a damaged cache file is replaced (the CLI passes its warning line).
        Where the store keeps no cache file it is tables of its database, shared by every process."""
        if self._cache is None:
            cache_file = self.backend.cache_file
            if cache_file is None:
                self._cache = DatabaseResponseCache(self.backend.connect(), warn, self.manifest.embedding_dim)
            else:
                self._cache = ResponseCache(cache_file, warn, self.manifest.embedding_dim)
        elif warn is not None:
            self._cache.warn = warn
        return self._cache

    def close(self) -> None:
        self.usage.close()
        if self._store is not None:
            self._store.close()
            self._store = None
            self._corpus = None
            self._manifest = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def _writer_lock(self) -> WriterLock:
        if self._lock is None:
            self._lock = self.backend.writer_lock()
        return self._lock

    def being_written(self) -> bool:
        """Whether a writer (another process, or another ``Workspace`` object of this one)
        holds the write lock now: a probe that takes the lock and gives it back at once.
        A server answers queries from the artifacts as they are while a writer updates them."""
        return self._writer_lock().held_elsewhere()

    @contextmanager
    def writing(self, wait: float = 0.0, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the workspace's write lock (one writer at a time, on any store).

        ``wait``: seconds to wait for another writer to finish (said once through
        ``on_wait``) instead of failing at once: a query that needs what another process
        is building waits for it rather than failing."""
        with self._writer_lock().hold(wait, on_wait):
            yield

    def artifact_path(self, name: str) -> Path:
        return self.root / "artifacts" / name
