"""The corpus: documents, their chunks, and the origins each document came from.

Documents and chunks are appended in transactions (never a whole-file rewrite per
document), so a killed run leaves either a whole batch or none of it, and a query fetches
its k chunks by id instead of parsing the corpus. Every change moves the corpus version
(:func:`unirag.workspace_tables.corpus_version`) in the same transaction, so an artifact
built on an older corpus is stale and never served silently; a delete also records itself
in the manifest's pending-delete record (:meth:`unirag.manifest.Manifest.note_delete`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from unirag.manifest import Manifest
from unirag.store.database import Database
from unirag.text.types import Chunk, Document, is_logical_source
from unirag.workspace_tables import bump_corpus_version, corpus_version

_ADD_SOURCE = "INSERT INTO document_sources VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_CHUNK_COLUMNS = "id, doc_id, idx, text, title, n_tokens, source"


def target_origin(path: str) -> str:
    """The origin a delete target's path part names: an upload's logical name as given (it is
    no file, and is never resolved on disk), else the path made absolute."""
    return path if is_logical_source(path) else str(Path(path).resolve())


def delete_target_keys(target: str) -> set[str]:
    """The names a delete target is remembered by: as given, and with its path made absolute
    (as :meth:`Corpus.find_documents` reads it), so a rerun from another directory
    names the same file."""
    path, sep, key = target.partition("#")
    return {target, target_origin(path) + (f"#{key}" if sep else "")} if path else {target}


class Corpus:
    """Reads and writes the documents, chunks and origins of one workspace; ``manifest``
    is told, in the same transaction, what a delete or a clear takes away."""

    def __init__(self, db: Database, manifest: Manifest) -> None:
        self.db = db
        self.manifest = manifest

    def version(self) -> int:
        """The corpus version (see :func:`unirag.workspace_tables.corpus_version`)."""
        return corpus_version(self.db)

    # -- writing -----------------------------------------------------------------
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
                bump_corpus_version(self.db)
        return docs, chunks

    def add_sources(self, docs: Iterable[Document]) -> None:
        """Record another origin of documents already stored (the same text in a second file)."""
        now = time.time()
        with self.db:
            self.db.executemany(_ADD_SOURCE, [(doc.id, doc.origin, doc.record_key, now) for doc in docs])

    def clear(self) -> None:
        """Forget documents, chunks and the manifest (caches stay: rebuilding is then cheap)."""
        with self.db:
            self.db.execute("DELETE FROM chunks")
            self.db.execute("DELETE FROM documents")
            self.db.execute("DELETE FROM document_sources")
            self.manifest.forget_all()
            bump_corpus_version(self.db)

    def detach_origin(self, origin: str, keep: set[str] = frozenset()) -> set[str]:
        """Forget that the documents of ``origin`` (except ``keep``) came from it; returns
        the documents left with no origin at all, which the caller deletes."""
        with self.db:
            gone = self.documents_of_origin(origin) - keep
            self.db.executemany("DELETE FROM document_sources WHERE doc_id = ? AND origin = ?",
                                [(doc_id, origin) for doc_id in gone])
        return {doc_id for doc_id in gone
                if not self.db.execute("SELECT 1 FROM document_sources WHERE doc_id = ?", (doc_id,)).fetchone()}

    def detach_record(self, key: str, keep: set[str] = frozenset()) -> set[str]:
        """As :meth:`detach_origin` for the record ``key`` of documents given in memory (no
        file): the earlier versions of that record lose it; returns those left with no origin."""
        with self.db:
            gone = {row[0] for row in self.db.execute(
                "SELECT doc_id FROM document_sources WHERE origin = '' AND record_key = ?", (key,))} - keep
            self.db.executemany("DELETE FROM document_sources WHERE doc_id = ? AND origin = '' AND record_key = ?",
                                [(doc_id, key) for doc_id in gone])
        return {doc_id for doc_id in gone
                if not self.db.execute("SELECT 1 FROM document_sources WHERE doc_id = ?", (doc_id,)).fetchone()}

    def delete_documents(self, doc_ids: Iterable[str], targets: Iterable[str] = ()) -> list[str]:
        """Delete documents with their chunks and origins in one transaction; returns the
        deleted chunk ids (what every derived artifact must forget).

        The same transaction records the deletion as pending
        (:meth:`unirag.manifest.Manifest.pending_delete`, with ``targets``, what the user
        named): a run killed before every artifact forgot the documents is finished by the
        next one, and a rerun of the same delete knows its targets are gone because of it."""
        ids = sorted(set(doc_ids))
        if not ids:
            return []
        chunk_ids: list[str] = []
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
            self.manifest.note_delete(named, ids, chunk_ids)
            bump_corpus_version(self.db)
        return chunk_ids

    # -- documents and origins -------------------------------------------------------
    def document_ids(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT id FROM documents")}

    def document_titles(self) -> set[str]:
        """The distinct non-empty titles of stored documents (gold evidence given by title)."""
        return {row[0] for row in self.db.execute("SELECT DISTINCT title FROM documents") if row[0]}

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
        under a directory; an upload's ``upload:NAME``, or every upload under ``upload:COLLECTION``),
        or ``origin#record`` for one record of a JSON/JSONL file."""
        db = self.db
        if db.execute("SELECT 1 FROM documents WHERE id = ?", (target,)).fetchone():
            return {target}
        path, _, key = target.partition("#")
        origin = target_origin(path) if path else ""
        if key:
            rows = db.execute("SELECT doc_id FROM document_sources WHERE origin = ? AND record_key = ?", (origin, key))
        else:
            prefix = origin.rstrip("/") + "/"
            rows = db.execute(
                "SELECT doc_id FROM document_sources WHERE origin = ? OR origin = ? "
                "OR substr(origin, 1, ?) = ?", (origin, target, len(prefix), prefix))
        return {row[0] for row in rows}

    # -- chunks ------------------------------------------------------------------------
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
        for row in self.db.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY seq"):
            yield Chunk(*row)

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE id IN ({marks})", ids)
        return {row[0]: Chunk(*row) for row in rows}
