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

Why a database for the corpus: documents and chunks are appended in transactions
(never a whole-file rewrite per document), a killed run leaves either a whole
batch or none of it, and a query fetches its k chunks by id instead of parsing
the corpus. The manifest records which config built which artifact and from
which inputs, so an unchanged corpus re-indexes as a no-op.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from unirag.config import DEFAULT_SETTINGS_YAML, SETTINGS_FILE, configured_store
from unirag.errors import WorkspaceError
from unirag.llm.base import StageUsage, UsageLedger
from unirag.store.database import Database, WriterLock
from unirag.store.files import atomic_directory, atomic_path, atomic_write_bytes
from unirag.store.connect import connect, store_exists, writer_lock
from unirag.store.location import STORE_FILE, StoreLocation, parse_store
from unirag.store.schema import Migration, ensure_schema, tables_migration
from unirag.text.types import Chunk, Document

__all__ = ["STORE_FILE", "Workspace", "atomic_directory", "atomic_path", "atomic_write_bytes"]

_ADD_SOURCE = "INSERT INTO document_sources VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY, title TEXT, source TEXT, n_chars INTEGER, presplit INTEGER, added REAL
);
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE, doc_id TEXT, idx INTEGER,
    title TEXT, text TEXT, n_tokens INTEGER, source TEXT
);
CREATE TABLE IF NOT EXISTS manifest (name TEXT PRIMARY KEY, entry TEXT);
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT, command TEXT, stage TEXT, usage TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS document_sources (
    doc_id TEXT, origin TEXT, record_key TEXT, added REAL, PRIMARY KEY (doc_id, origin, record_key)
);
CREATE INDEX IF NOT EXISTS document_sources_origin ON document_sources (origin);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (doc_id);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
"""


def _adopt_legacy_sources(db: Database) -> None:
    """A workspace from before document identity: each document's stored source
    becomes its origin, so ``delete``, ``documents`` and ``--sync`` see it."""
    if db.execute("SELECT 1 FROM document_sources LIMIT 1").fetchone():
        return
    if not db.execute("SELECT 1 FROM documents LIMIT 1").fetchone():
        return
    db.execute("INSERT INTO document_sources SELECT id, COALESCE(source, ''), '', added FROM documents WHERE true "
               "ON CONFLICT DO NOTHING")


#: the corpus tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "documents, chunks, manifest, usage, document_sources, meta", _SCHEMA),
    Migration(2, "document origins of workspaces from before document identity", _adopt_legacy_sources),
)


PENDING_DELETE = "pending_delete"
CHUNK_MARK = "chunk_mark"  # a manifest entry's record of the chunks it was built on (Workspace.chunk_mark)


def delete_target_keys(target: str) -> set[str]:
    """The names a delete target is remembered by: as given, and with its path made absolute
    (as :meth:`Workspace.find_documents` reads it), so a rerun from another directory
    names the same file."""
    path, sep, key = target.partition("#")
    return {target, str(Path(path).resolve()) + (f"#{key}" if sep else "")} if path else {target}


class Workspace:
    """Facade over a workspace directory and its store. Open one per process and reuse it.

    ``store``: where the tables live (``sqlite`` or ``postgresql://...``, see
    :mod:`unirag.store.location`); None reads the workspace's ``store`` setting."""

    def __init__(self, root: Path, store: str | None = None) -> None:
        self.root = Path(root)
        self.location: StoreLocation = parse_store(configured_store(self.root) if store is None else store,
                                                   self.root)
        self._db: Database | None = None
        self._usage_db: Database | None = None  # its own connection: written from model-call threads
        self._usage_lock = threading.Lock()
        self._pending_usage: list[tuple[str, str, str, float]] = []  # rows a busy store refused, written next
        self._cache: Any = None
        self._lock: WriterLock | None = None
        self._files: Any = None  # ArtifactFiles of a PostgreSQL store

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
        if not store_exists(workspace.location, root):
            where = f" ({workspace.where})" if workspace.location.is_postgres else ""
            raise WorkspaceError(f"no unirag workspace at {root}{where}: run 'unirag index SOURCE -w {root}' first")
        return workspace

    @classmethod
    def exists(cls, root: Path, store: str | None = None) -> bool:
        """Whether a workspace's tables are at ``root`` (or in its store), creating nothing."""
        return store_exists(cls(root, store).location, Path(root))

    @property
    def where(self) -> str:
        """The store in words (the file, or the server and schema without a password)."""
        return self.location.describe(self.root)

    @property
    def db(self) -> Database:
        if self._db is None:
            db = connect(self.location, self.root)
            try:
                ensure_schema(db, "workspace", MIGRATIONS)
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def cache(self, warn: Callable[[str], None] | None = None) -> Any:
        """The persistent model-response cache of this workspace (opened once). ``warn``
        says when a damaged cache file is replaced (the CLI passes its warning line).
        On PostgreSQL it is two tables of the workspace's schema, shared by every process."""
        if self._cache is None:
            if self.location.is_postgres:
                from unirag.llm.shared_cache import DatabaseResponseCache

                self._cache = DatabaseResponseCache(connect(self.location, self.root), warn, self.embedding_dim)
            else:
                from unirag.llm.cache import ResponseCache

                self._cache = ResponseCache(self.root / "cache" / "llm.sqlite", warn, self.embedding_dim)
        elif warn is not None:
            self._cache.warn = warn
        return self._cache

    def close(self) -> None:
        with self._usage_lock:
            if self._pending_usage and not self._write_usage_rows(self._pending_usage):
                logging.getLogger("unirag").warning(
                    "the workspace store stayed busy: %d rows of usage were not recorded", len(self._pending_usage))
            self._pending_usage = []
            if self._usage_db is not None:
                self._usage_db.close()
                self._usage_db = None
        if self._db is not None:
            self._db.close()
            self._db = None
            self._files = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def _writer_lock(self) -> WriterLock:
        if self._lock is None:
            self._lock = writer_lock(self.location, self.root)
        return self._lock

    def being_written(self) -> bool:
        """Whether a writer (another process, or another ``Workspace`` object of this one)
        holds the write lock now: a probe that takes the lock and gives it back at once.
        A server answers queries from the artifacts as they are while a writer updates them."""
        return self._writer_lock().held_elsewhere()

    @contextmanager
    def writing(self, wait: float = 0.0, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the workspace's write lock (one writer at a time; an advisory lock on PostgreSQL).

        ``wait``: seconds to wait for another writer to finish (said once through
        ``on_wait``) instead of failing at once: a query that needs what another process
        is building waits for it rather than failing."""
        with self._writer_lock().hold(wait, on_wait):
            yield

    def artifact_path(self, name: str) -> Path:
        return self.root / "artifacts" / name

    # -- corpus ----------------------------------------------------------
    def document_ids(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT id FROM documents")}

    def document_titles(self) -> set[str]:
        """The distinct non-empty titles of stored documents (gold evidence given by title)."""
        return {row[0] for row in self.db.execute("SELECT DISTINCT title FROM documents") if row[0]}

    def add_documents(self, items: Iterable[tuple[Document, Iterable[Chunk]]]) -> tuple[int, int]:
        """Append documents with their chunks and origins in one transaction; returns
        counts added. Adding anything moves the corpus to a new version. Chunks may
        come lazily: they are written as they come, never all held at once."""
        now = time.time()
        docs = chunks = 0
        with self.db:
            for doc, doc_chunks in items:
                cur = self.db.execute(
                    "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (doc.id, doc.title, doc.source, len(doc.text), int(doc.presplit), now),
                )
                docs += cur.rowcount
                cur = self.db.executemany(
                    "INSERT INTO chunks (id, doc_id, idx, title, text, n_tokens, source) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    ((c.id, c.doc_id, c.index, c.title, c.text, c.n_tokens, c.source) for c in doc_chunks),
                )
                chunks += max(cur.rowcount, 0)
                self.db.execute(_ADD_SOURCE, (doc.id, doc.origin, doc.record_key, now))
            if docs or chunks:
                self._bump_corpus_version()
        return docs, chunks

    def add_sources(self, docs: Iterable[Document]) -> None:
        """Record another origin of documents already stored (the same text in a second file)."""
        now = time.time()
        with self.db:
            self.db.executemany(_ADD_SOURCE, [(doc.id, doc.origin, doc.record_key, now) for doc in docs])

    def clear_corpus(self) -> None:
        """Forget documents, chunks and manifest (caches stay: rebuilding is then cheap)."""
        with self.db:
            self.db.execute("DELETE FROM chunks")
            self.db.execute("DELETE FROM documents")
            self.db.execute("DELETE FROM document_sources")
            self.db.execute("DELETE FROM manifest")
            self._artifact_files_forget(None)
            self._bump_corpus_version()

    # -- document identity -------------------------------------------------
    def documents(self) -> list[dict[str, Any]]:
        """Every document: id, title, origins (``path`` or ``path#record``), chunks, added."""
        origins: dict[str, list[str]] = {}
        for doc_id, origin, key in self.db.execute(
                "SELECT doc_id, origin, record_key FROM document_sources ORDER BY origin, record_key"):
            origins.setdefault(doc_id, []).append(f"{origin}#{key}" if key else origin)
        rows = self.db.execute(
            "SELECT d.id, d.title, d.n_chars, d.added, COUNT(c.id) FROM documents d "
            "LEFT JOIN chunks c ON c.doc_id = d.id GROUP BY d.id ORDER BY d.added, d.id")
        return [{"id": doc_id, "title": title, "sources": origins.get(doc_id, []), "chars": n_chars,
                 "chunks": n_chunks, "added": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(added))}
                for doc_id, title, n_chars, added, n_chunks in rows]

    def documents_of_origin(self, origin: str) -> set[str]:
        """Ids of the documents stored from ``origin`` (a resolved path)."""
        return {row[0] for row in self.db.execute("SELECT doc_id FROM document_sources WHERE origin = ?", (origin,))}

    def origins(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT DISTINCT origin FROM document_sources")}

    def find_documents(self, target: str) -> set[str]:
        """The documents ``target`` names: a document id, an origin (a file, or every file
        under a directory), or ``origin#record`` for one record of a JSON/JSONL file."""
        db = self.db
        if db.execute("SELECT 1 FROM documents WHERE id = ?", (target,)).fetchone():
            return {target}
        path, _, key = target.partition("#")
        origin = str(Path(path).resolve()) if path else ""
        if key:
            rows = db.execute("SELECT doc_id FROM document_sources WHERE origin = ? AND record_key = ?", (origin, key))
        else:
            prefix = origin.rstrip("/") + "/"
            rows = db.execute(
                "SELECT doc_id FROM document_sources WHERE origin = ? OR origin = ? "
                "OR substr(origin, 1, ?) = ?", (origin, target, len(prefix), prefix))
        return {row[0] for row in rows}

    def detach_origin(self, origin: str, keep: set[str] = frozenset()) -> set[str]:
        """Forget that the documents of ``origin`` (except ``keep``) came from it; returns
        the documents left with no origin at all, which the caller deletes."""
        with self.db:
            gone = self.documents_of_origin(origin) - keep
            self.db.executemany("DELETE FROM document_sources WHERE doc_id = ? AND origin = ?",
                                [(doc_id, origin) for doc_id in gone])
        return {doc_id for doc_id in gone
                if not self.db.execute("SELECT 1 FROM document_sources WHERE doc_id = ?", (doc_id,)).fetchone()}

    def delete_documents(self, doc_ids: Iterable[str], targets: Iterable[str] = ()) -> list[str]:
        """Delete documents with their chunks and origins in one transaction; returns the
        deleted chunk ids (what every derived artifact must forget).

        The same transaction records the deletion as pending (:meth:`pending_delete`, with
        ``targets``, what the user named): a run killed before every artifact forgot the
        documents is finished by the next one, and a rerun of the same delete knows its
        targets are gone because of it."""
        ids = sorted(set(doc_ids))
        if not ids:
            return []
        chunk_ids: list[str] = []
        pending = self.pending_delete() or {"targets": [], "doc_ids": [], "chunk_ids": []}
        with self.db:
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                marks = ",".join("?" * len(part))
                chunk_ids += [row[0] for row in self.db.execute(
                    f"SELECT id FROM chunks WHERE doc_id IN ({marks}) ORDER BY seq", part)]
                self.db.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", part)
                self.db.execute(f"DELETE FROM documents WHERE id IN ({marks})", part)
                self.db.execute(f"DELETE FROM document_sources WHERE doc_id IN ({marks})", part)
            named = {name for target in targets for name in delete_target_keys(target)}
            self._set_meta(PENDING_DELETE, json.dumps({
                "targets": sorted({*pending["targets"], *named}),
                "doc_ids": sorted({*pending["doc_ids"], *ids}),
                "chunk_ids": sorted({*pending["chunk_ids"], *chunk_ids}),
            }))
            self._bump_corpus_version()
        return chunk_ids

    def pending_delete(self) -> dict[str, list[str]] | None:
        """The deletions whose artifacts are not refreshed yet (``targets``, ``doc_ids``,
        ``chunk_ids``), or None: each delete records one until a run finishes refreshing."""
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (PENDING_DELETE,)).fetchone()
        return json.loads(row[0]) if row else None

    def finish_delete(self) -> None:
        """Every built artifact forgot the pending deletions: forget the record."""
        with self.db:
            self.db.execute("DELETE FROM meta WHERE name = ?", (PENDING_DELETE,))

    # -- corpus version ----------------------------------------------------
    def corpus_version(self) -> int:
        """Moves on every change of the corpus; each artifact records the version it was
        built on, so an artifact behind it is stale and never served silently."""
        row = self.db.execute("SELECT value FROM meta WHERE name = 'corpus_version'").fetchone()
        return int(row[0]) if row else 0

    def _bump_corpus_version(self) -> None:
        """Inside the caller's transaction: the change and the new version land together."""
        self._set_meta("corpus_version", str(self.corpus_version() + 1))

    def _set_meta(self, name: str, value: str) -> None:
        self.db.execute(self.db.dialect.replace_into("meta", ("name", "value"), ("name",)), (name, value))

    def record_index_cost(self, record: dict[str, Any]) -> None:
        """Keep the last paid indexing run's estimate beside what it used (``unirag stats``)."""
        with self.db:
            self._set_meta("last_index_cost", json.dumps(record))

    def last_index_cost(self) -> dict[str, Any] | None:
        row = self.db.execute("SELECT value FROM meta WHERE name = 'last_index_cost'").fetchone()
        return json.loads(row[0]) if row else None

    def stamp_artifact(self, name: str) -> None:
        """Record that artifact ``name`` is up to date with the current corpus."""
        entry = self.manifest_entry(name)
        version = self.corpus_version()
        if entry is not None and entry.get("corpus_version") != version:
            stamped = {**entry, "corpus_version": version, CHUNK_MARK: self.chunk_mark()}
            with self.db:
                self.db.execute("UPDATE manifest SET entry = ? WHERE name = ?", (json.dumps(stamped), name))

    def drop_artifacts(self) -> None:
        """Forget every built artifact but the chunk record (files and manifest entries):
        what a corpus emptied by ``delete`` leaves, a valid empty workspace."""
        import shutil

        with self.db:
            self.db.execute("DELETE FROM manifest WHERE name != 'chunks'")
            self._artifact_files_forget("chunks")
        shutil.rmtree(self.root / "artifacts", ignore_errors=True)

    def stale_artifacts(self) -> dict[str, str]:
        """Built artifacts that cannot be served as they are: name -> why (built on an
        older corpus, or damaged: a file of theirs is missing or cut)."""
        version = self.corpus_version()
        return {name: why for name, entry in self.manifest().items()
                if name != "chunks" and (why := self._problem(name, entry, version))}

    def artifact_problem(self, name: str) -> str | None:
        """Why artifact ``name`` cannot be served as it is, or None when it can:
        ``missing``, ``built on corpus version N, now M``, or ``damaged (FILE ...)``."""
        entry = self.manifest_entry(name)
        return "missing" if entry is None else self._problem(name, entry, self.corpus_version())

    def _problem(self, name: str, entry: dict[str, Any], version: int) -> str | None:
        damage = self._damage(name, entry)
        if damage:
            return f"damaged ({damage})"
        built_on = entry.get("corpus_version", 0)
        return f"built on corpus version {built_on}, now {version}" if built_on < version else None

    def _damage(self, name: str, entry: dict[str, Any]) -> str | None:
        """The first recorded file of ``entry`` that is missing or has another size, said in
        words; None when all are whole. Sizes, not hashes: a stat per file stays cheap on
        gigabyte indices, and a cut or lost file (a killed copy, a cleanup) changes its size.
        On PostgreSQL the files checked are the stored blobs (the local copy is refetched)."""
        if self.location.is_postgres:
            return self.artifact_files.damage(name, entry.get("files", {}))
        for relative, size in entry.get("files", {}).items():
            path = self.root / relative
            if not path.is_file():
                return f"{relative} is missing"
            found = path.stat().st_size
            if found != size:
                return f"{relative} has {found} bytes, not {size}"
        return None

    def counts(self) -> dict[str, int]:
        docs = self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        chunks, tokens = self.db.execute("SELECT COUNT(*), COALESCE(SUM(n_tokens), 0) FROM chunks").fetchone()
        return {"documents": docs, "chunks": chunks, "chunk_tokens": int(tokens)}  # PostgreSQL sums as numeric

    def chunk_ids(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT id FROM chunks ORDER BY seq")]

    def chunk_sizes(self) -> list[tuple[str, int]]:
        """(id, tokens) of every chunk, in order, without their text (what a cost estimate needs)."""
        return [(row[0], row[1]) for row in self.db.execute("SELECT id, n_tokens FROM chunks ORDER BY seq")]

    def iter_chunks(self) -> Iterator[Chunk]:
        for row in self.db.execute("SELECT id, doc_id, idx, text, title, n_tokens, source FROM chunks ORDER BY seq"):
            yield Chunk(*row)

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT id, doc_id, idx, text, title, n_tokens, source FROM chunks WHERE id IN ({marks})", ids
        )
        return {row[0]: Chunk(*row) for row in rows}

    # -- manifest --------------------------------------------------------
    def manifest(self) -> dict[str, dict[str, Any]]:
        rows = self.db.execute(f"SELECT name, entry FROM manifest ORDER BY {self.db.dialect.insertion_order}")
        return {name: json.loads(entry) for name, entry in rows}

    def embedding_dim(self, model: str) -> tuple[str, int] | None:
        """(artifact, dimension) of the vectors this workspace holds from embedding model
        ``model`` (``chunk_vectors`` first), or None while it holds none. The model cache
        serves and stores only vectors of this dimension: an endpoint that answers another
        one (a wrong URL behind the same model name) never poisons it."""
        entries = self.manifest()
        names = sorted(entries, key=lambda name: name != "chunk_vectors")
        for name in names:
            entry = entries[name]
            if entry.get("config", {}).get("model") == model and int(entry.get("dim") or 0) > 0:
                return name, int(entry["dim"])
        return None

    def manifest_entry(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT entry FROM manifest WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_manifest_entry(self, name: str, entry: dict[str, Any], files: Iterable[Path] = ()) -> None:
        """Record that artifact ``name`` was built (``entry["inputs"]``: its fingerprint).

        ``files``: the artifact's files and directories, written before this call; the
        size of each file (every file under a directory) is recorded, so that
        :meth:`is_current` and :meth:`stale_artifacts` see a lost or cut one."""
        entry = {**entry, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "corpus_version": self.corpus_version(),
                 CHUNK_MARK: self.chunk_mark()}
        self.record_manifest_entry(name, entry, files)

    def chunk_mark(self) -> dict[str, int]:
        """Where the chunks stand now: the last chunk's ``seq`` and how many there are. Kept in
        every manifest entry, so that :meth:`chunks_changed_since` can say how far a stale
        artifact is behind (a killed run's estimate counts the work its resume will do)."""
        last, count = self.db.execute("SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM chunks").fetchone()
        return {"last_seq": int(last), "count": int(count)}

    def chunks_changed_since(self, entry: dict[str, Any]) -> int | None:
        """Chunks added or removed since the artifact of ``entry`` was built (``seq`` only
        grows); None for an entry from before the mark was kept."""
        mark = entry.get(CHUNK_MARK)
        if not mark:
            return None
        added, kept = self.db.execute(
            "SELECT COALESCE(SUM(CASE WHEN seq > ? THEN 1 ELSE 0 END), 0), "
            "COALESCE(SUM(CASE WHEN seq <= ? THEN 1 ELSE 0 END), 0) FROM chunks",
            (mark["last_seq"], mark["last_seq"])).fetchone()
        return int(added) + max(0, mark["count"] - int(kept))

    def record_manifest_entry(self, name: str, entry: dict[str, Any], files: Iterable[Path] = ()) -> None:
        """Write ``entry`` as given (a copied one keeps its build time and corpus version) with the
        sizes of ``files``; on PostgreSQL their bytes go to the store in the same transaction."""
        entry = {key: value for key, value in entry.items() if key not in ("files", "digest")}
        sizes = self._file_sizes(files)
        if sizes:
            entry["files"] = sizes
        with self.db:
            if self.location.is_postgres:
                self.artifact_files.drop(name)
                if sizes:
                    entry["digest"] = self.artifact_files.upload(name, sizes)
            self.db.execute(self.db.dialect.replace_into("manifest", ("name", "entry"), ("name",)),
                            (name, json.dumps(entry)))
        if self.location.is_postgres and sizes:
            self.artifact_files.mark_checked_out(name, entry["digest"])

    def _file_sizes(self, paths: Iterable[Path]) -> dict[str, int]:
        """Workspace-relative path -> size of every file in ``paths`` (directories walked)."""
        sizes: dict[str, int] = {}
        for path in paths:
            found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in found:
                if file.is_file():
                    sizes[file.relative_to(self.root).as_posix()] = file.stat().st_size
        return sizes

    def is_current(self, name: str, fingerprint: str, files: Iterable[Path] = ()) -> bool:
        """Whether artifact ``name`` is built from inputs with ``fingerprint`` and whole:
        each of ``files`` exists (entries from before file records have only this check)
        and every recorded file has its recorded size. A builder skips its work when True."""
        entry = self.manifest_entry(name)
        if entry is None or entry.get("inputs") != fingerprint:
            return False
        if self.location.is_postgres:  # whole blobs in the store, then their local copy
            if self._damage(name, entry) is not None:
                return False
            self.artifact_files.checkout(name, entry)
            return all(path.exists() for path in files)
        return all(path.exists() for path in files) and self._damage(name, entry) is None

    # -- artifact files on a PostgreSQL store --------------------------------
    @property
    def artifact_files(self) -> Any:
        """The artifact files' blobs of a PostgreSQL store (:class:`unirag.store.artifact_files.ArtifactFiles`)."""
        if self._files is None:
            from unirag.store.artifact_files import ArtifactFiles

            self._files = ArtifactFiles(self.db, self.root)
        return self._files

    def checkout(self, name: str) -> None:
        """Bring the local copy of artifact ``name``'s files up to date with the store before
        they are read: nothing to do on SQLite (the files are the artifact), a fetch of the
        blobs on PostgreSQL when another process or machine built them."""
        if not self.location.is_postgres:
            return
        entry = self.manifest_entry(name)
        if entry is not None:
            self.artifact_files.checkout(name, entry)

    def _artifact_files_forget(self, keep: str | None) -> None:
        """Inside the caller's transaction: drop every artifact's blobs (but ``keep``'s)."""
        if self.location.is_postgres:
            self.artifact_files.forget(keep)

    def drop_manifest_entry(self, name: str) -> None:
        """Forget that artifact ``name`` was built: the next ensure rebuilds it."""
        with self.db:
            self.db.execute("DELETE FROM manifest WHERE name = ?", (name,))
            if self.location.is_postgres:
                self.artifact_files.drop(name)

    # -- usage -----------------------------------------------------------
    #: Seconds a usage write waits for another connection's write transaction (an upload job's).
    usage_busy_timeout = 2.0

    def record_usage(self, command: str, ledger: UsageLedger) -> None:
        """Record a finished run's usage. Bookkeeping never turns a computed answer into an
        error: when the store stays locked past :attr:`usage_busy_timeout` (a long write of
        another connection), the rows are kept, written ahead of the next usage write (or at
        :meth:`close`), and one warning line says so."""
        if not self._store_usage(command, ledger.stages):
            logging.getLogger("unirag").warning(
                "the workspace store is busy: the usage of '%s' is kept and recorded with the next write", command)

    def usage_ledger(self, command: str) -> UsageLedger:
        """A ledger whose usage reaches the usage table as calls finish (see :class:`UsageLedger`);
        call its ``flush()`` when the run ends, killed or not."""
        return UsageLedger(sink=lambda delta: self._store_usage(command, delta, keep=False))

    def _store_usage(self, command: str, stages: dict[str, StageUsage], keep: bool = True) -> bool:
        """Insert one delta of usage, and the rows kept from refused writes before it, through
        the usage connection (its own, with no read open: a write never has to upgrade a stale
        snapshot). False when the store stays busy: ``keep`` keeps the rows here for the next
        write; without it the caller (a ledger) hands the same usage over again later."""
        now = time.time()
        rows = [(command, stage, json.dumps(usage.to_json()), now) for stage, usage in stages.items()]
        with self._usage_lock:
            if self._write_usage_rows(self._pending_usage + rows):
                self._pending_usage = []
                return True
            if keep:
                self._pending_usage += rows
            return False

    def _write_usage_rows(self, rows: list[tuple[str, str, str, float]]) -> bool:
        """Under ``_usage_lock``: one transaction of ``rows``; False when the store is locked."""
        if not rows:
            return True
        if self._usage_db is None:
            self.db  # the tables exist before the first delta
            self._usage_db = connect(self.location, self.root, busy_timeout=self.usage_busy_timeout)
        try:
            with self._usage_db:
                self._usage_db.executemany(
                    "INSERT INTO usage (command, stage, usage, created) VALUES (?, ?, ?, ?)", rows)
        except sqlite3.OperationalError:  # "database is locked" past the busy timeout
            return False
        return True

    def usage_by_stage(self) -> dict[str, StageUsage]:
        """Cumulative usage of every recorded run, per stage."""
        totals: dict[str, StageUsage] = {}
        for stage, blob in self.db.execute("SELECT stage, usage FROM usage ORDER BY id"):
            totals.setdefault(stage, StageUsage()).add(StageUsage(**json.loads(blob)))
        return totals
