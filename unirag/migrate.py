"""``unirag migrate``: copy a workspace from one store to another, verified.

Everything moves: the tables (documents, chunks, graph, communities, manifest, usage,
meta), the model cache, the artifact files and the vector indices, each rebuilt in the
target's form (an hnswlib file on SQLite, a pgvector table on PostgreSQL; both from the
same ``.npy`` vectors and ``.ids.json`` map). Rows keep their order (read in insertion
order, written in it), so a scan reads them as before. Manifest entries are copied as
they are (build times and corpus versions included): nothing is rebuilt on the target.

Verified before the settings file is switched to the target: every table's row count,
every manifest entry's ``inputs`` fingerprint, the digest of every artifact's files as the
target holds them (PostgreSQL: read back from the blobs), and every vector index's ids.
The source is left as it was; both stores are locked for writing meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from unirag.artifacts.settings_template import with_store
from unirag.config import SETTINGS_FILE
from unirag.errors import WorkspaceError
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.community_store import CommunityStore
from unirag.index.pgvector_index import PgVectorIndex, table_name
from unirag.index.vector_artifacts import load_vectors, open_vector_index, vector_files, vector_paths
from unirag.index.vectors import HnswIndex, write_ids_file
from unirag.store.artifact_files import local_digest
from unirag.store.database import Database
from unirag.store.files import atomic_write_bytes
from unirag.workspace import Workspace

#: store-internal tables (written by the target's own code) and the manifest (copied with its files)
INTERNAL = ("schema_versions", "artifact_files", "manifest")
VECTOR_TABLE_PREFIX = "vectors_"
CACHE_TABLES = ("chat", "embedding")
BATCH = 1000


@dataclass
class MigrationReport:
    """One line per table and per kind of artifact, said as the copy is verified."""

    lines: list[str] = field(default_factory=list)
    target: str = ""


def migrate_workspace(root: Path, target: str, source: str | None = None, replace: bool = False,
                      say: Callable[[str], None] = lambda line: None) -> MigrationReport:
    """Copy the workspace at ``root`` from its store (``source``, else its ``store`` setting) to
    ``target`` (``sqlite`` or a ``postgresql://`` URL), verify it, and switch the settings file's
    ``store`` to it. ``replace``: a target that already holds a workspace is emptied first
    (a SQLite file is moved aside, a PostgreSQL schema dropped); without it that is refused."""
    src = Workspace.open(root, source)
    dst = Workspace(root, target)
    report = MigrationReport(target=dst.where)
    try:
        if src.where == dst.where:
            raise WorkspaceError(f"{root} is already in {dst.where}: nothing to migrate")
        with ExitStack() as locks:
            locks.enter_context(src.writing())
            _empty_target(dst, replace)
            locks.enter_context(dst.writing())
            _ensure_tables(src)
            _ensure_tables(dst)
            for table in _tables(src.db):
                report.lines.append(_copy_table(src.db, dst.db, table))
                say(report.lines[-1])
            report.lines.append(_copy_cache(src, dst))
            say(report.lines[-1])
            report.lines.append(_copy_manifest(src, dst))
            say(report.lines[-1])
        _switch_settings(root, target)
    finally:
        src.close()
        dst.close()
    return report


# -- target ------------------------------------------------------------------------
def _empty_target(dst: Workspace, replace: bool) -> None:
    """Refuse (or with ``replace``, clear) a target that already holds a workspace."""
    if not dst.backend.exists():
        return
    documents = dst.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    dst.close()
    if not replace:
        raise WorkspaceError(f"{dst.where} already holds a workspace ({documents} documents): migrate into an "
                             "empty store, or add --replace to empty it first")
    dst.backend.empty()


def _ensure_tables(workspace: Workspace) -> None:
    """Every component's tables, so a table one store lacks (never built) exists on both."""
    GraphStore(workspace)
    CommunityStore(workspace)


def _tables(db: Database) -> list[str]:
    return [table for table in db.tables()
            if table not in INTERNAL and table not in CACHE_TABLES and not table.startswith(VECTOR_TABLE_PREFIX)]


# -- rows ----------------------------------------------------------------------------
def _rows(db: Database, table: str, columns: list[str]) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``table`` in insertion order, ``BATCH`` at a time (keyset paging: a million
    rows are never held at once)."""
    order = db.dialect.insertion_order
    names = ", ".join(columns)
    last = -1
    while True:
        batch = db.execute(f"SELECT {order}, {names} FROM {table} WHERE {order} > ? ORDER BY {order} LIMIT ?",
                           (last, BATCH)).fetchall()
        if not batch:
            return
        last = batch[-1][0]
        yield [tuple(row[1:]) for row in batch]


def _copy_table(source: Database, target: Database, table: str, merge: bool = False) -> str:
    """Copy every row of ``table`` (the columns both have); its line once the counts agree.
    ``merge``: rows the target has already are kept (a cache), else the target must be empty."""
    columns = [column for column in source.table_columns(table) if column in set(target.table_columns(table))]
    if not columns:
        return f"{table}: skipped (the target has no such table)"
    insert = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
              + (" ON CONFLICT DO NOTHING" if merge else ""))
    with target:
        for batch in _rows(source, table, columns):
            target.executemany(insert, batch)
        target.continue_identities(table)
    count = _count(source, table)
    found = _count(target, table)
    if (found < count) if merge else (found != count):
        raise WorkspaceError(f"{table}: {count} rows in the source but {found} in the target after the copy")
    return f"{table}: {count} rows copied, verified"


def _count(db: Database, table: str) -> int:
    return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _cache_db(workspace: Workspace) -> Database:
    """A connection to the model cache's tables (its own file, or the store's database)."""
    workspace.cache()
    return workspace.backend.cache_database()


def _copy_cache(src: Workspace, dst: Workspace) -> str:
    """The model cache, merged into what the target holds (a cache entry is the same everywhere)."""
    source, target = _cache_db(src), _cache_db(dst)
    try:
        counts = []
        for table in CACHE_TABLES:
            _copy_table(source, target, table, merge=True)
            counts.append(f"{_count(source, table)} {table}")
    finally:
        source.close()
        target.close()
    return f"model cache: {', '.join(counts)} entries copied, verified"


# -- artifacts -------------------------------------------------------------------------
def _copy_manifest(src: Workspace, dst: Workspace) -> str:
    """Every manifest entry with its files (and its vector index in the target's form), verified."""
    entries = src.manifest.entries()
    files = vectors = 0
    for name, entry in entries.items():
        src.manifest.checkout(name)
        recorded = list(entry.get("files", {}))
        stem = _vector_stem(entry)
        if stem is not None:
            entry = _copy_vector_index(src, dst, name, stem, entry)
            vectors += 1
        else:
            dst.manifest.record_entry(name, entry, [dst.root / relative for relative in recorded])
        files += len(dst.manifest.entry(name).get("files", {}))  # type: ignore[union-attr]
        _verify_entry(src, dst, name)
    copied = dst.manifest.entries()
    if list(copied) != list(entries):
        raise WorkspaceError(f"manifest: {len(entries)} entries in the source but {len(copied)} in the target")
    return (f"artifacts: {len(entries)} manifest entries, {files} files, {vectors} vector indices copied; "
            "fingerprints verified")


def _vector_stem(entry: dict[str, Any]) -> str | None:
    """The file stem of a vector artifact (its ``.npy``), None for any other artifact."""
    if entry.get("config", {}).get("index") not in ("hnsw", "pgvector"):
        return None
    npy = next((relative for relative in entry.get("files", {}) if relative.endswith(".npy")), None)
    return Path(npy).name.removesuffix(".npy") if npy else None


def _copy_vector_index(src: Workspace, dst: Workspace, name: str, stem: str, entry: dict[str, Any]
                       ) -> dict[str, Any]:
    """Build the target's index of a vector artifact from its vectors and ids, then its entry."""
    ids, vectors = load_vectors(src, name, stem)
    vectors = np.asarray(vectors, dtype=np.float32)
    hnsw_path = vector_paths(dst, stem)[1]
    kind = "pgvector" if dst.backend.vector_tables else "hnsw"
    entry = {**entry, "config": {**entry.get("config", {}), "index": kind}}
    if dst.backend.vector_tables:
        with dst.db:
            index = PgVectorIndex.write(dst.db, table_name(stem), list(ids), vectors, None)
            write_ids_file(HnswIndex.ids_path(hnsw_path), index.ids, index.dim, index.label_rows)
            dst.manifest.record_entry(name, entry, vector_files(dst, stem))
    else:
        HnswIndex.build(vectors, list(ids)).save(hnsw_path)
        dst.manifest.record_entry(name, entry, vector_files(dst, stem))
    return entry


def _verify_entry(src: Workspace, dst: Workspace, name: str) -> None:
    """The target's entry has the source's fingerprint, whole files with the same bytes (but an
    index rebuilt in the target's form: same ids and count)."""
    before, after = src.manifest.entry(name) or {}, dst.manifest.entry(name) or {}
    if before.get("inputs") != after.get("inputs"):
        raise WorkspaceError(f"{name}: the fingerprint differs after the copy")
    problem = dst.manifest.artifact_problem(name)
    if problem is not None and problem.startswith("damaged"):
        raise WorkspaceError(f"{name}: {problem} after the copy")
    shared = sorted(set(before.get("files", {})) & set(after.get("files", {})) - {_ids_file(after)})
    if shared:
        expected = local_digest(src.root, shared)
        found = dst.manifest.files.stored_digest(name, shared)
        if found != expected:
            raise WorkspaceError(f"{name}: its files differ after the copy")
    stem = _vector_stem(after)
    if stem is not None:
        index = open_vector_index(dst, name, stem)
        if len(index) != int(after.get("count", len(index))):
            raise WorkspaceError(f"{name}: {len(index)} vectors indexed, not {after.get('count')}")


def _ids_file(entry: dict[str, Any]) -> str:
    """A vector artifact's ``.ids.json`` is rewritten for the target's index (labels of an updated
    hnswlib graph go): its ids are checked through the index instead."""
    return next((relative for relative in entry.get("files", {}) if relative.endswith(".ids.json")), "")


# -- settings ------------------------------------------------------------------------
def _switch_settings(root: Path, target: str) -> None:
    """Point the workspace's settings file at the target (other lines untouched)."""
    path = root / SETTINGS_FILE
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    atomic_write_bytes(path, with_store(text, target).encode("utf-8"))
