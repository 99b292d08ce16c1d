"""The workspace's own tables, and the few values its parts share through ``meta``.

Documents, chunks and their origins (:mod:`unirag.corpus`), the manifest of built
artifacts (:mod:`unirag.manifest`) and the usage rows (:mod:`unirag.usage_book`) live in
one schema component, ``workspace``, created and migrated here
(:mod:`unirag.store.schema`). The corpus version and the chunk mark are read by the
corpus and the manifest alike (an artifact records the version and mark it was built
on), so they sit below both.
"""

from __future__ import annotations

from unirag.store.database import Database
from unirag.store.schema import Migration, tables_migration

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


#: the workspace tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "documents, chunks, manifest, usage, document_sources, meta", _SCHEMA),
    Migration(2, "document origins of workspaces from before document identity", _adopt_legacy_sources),
)


def read_meta(db: Database, name: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return str(row[0]) if row else None


def write_meta(db: Database, name: str, value: str) -> None:
    """Inside the caller's transaction (or a statement of its own)."""
    db.execute(db.dialect.replace_into("meta", ("name", "value"), ("name",)), (name, value))


def drop_meta(db: Database, name: str) -> None:
    db.execute("DELETE FROM meta WHERE name = ?", (name,))


def corpus_version(db: Database) -> int:
    """Moves on every change of the corpus; each artifact records the version it was
    built on, so an artifact behind it is stale and never served silently."""
    value = read_meta(db, "corpus_version")
    return int(value) if value is not None else 0


def bump_corpus_version(db: Database) -> None:
    """Inside the caller's transaction: the change and the new version land together."""
    write_meta(db, "corpus_version", str(corpus_version(db) + 1))


def chunk_mark(db: Database) -> dict[str, int]:
    """Where the chunks stand now: the last chunk's ``seq`` and how many there are. Kept in
    every manifest entry, so that the manifest can say how far a stale artifact is behind
    (a killed run's estimate counts the work its resume will do)."""
    last, count = db.execute("SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM chunks").fetchone()
    return {"last_seq": int(last), "count": int(count)}
