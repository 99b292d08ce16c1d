"""Artifact files as blobs in the store (PostgreSQL), with a local copy to read.

The builders write their files (BM25 and TF-IDF directories, ``.npy`` vectors, C-HNSW,
Tri-Graph arrays, leaf lists) under ``WS/artifacts/`` as on SQLite; the libraries that
read them (bm25s, scipy, numpy memory maps) want paths. On a PostgreSQL store the
manifest entry is written in the same transaction as the files' bytes (table
``artifact_files``, 32 MiB parts: bytea's 1 GB limit never binds), with a digest of them.
A process that reads an artifact first checks its local copy out: the local copy is
current when its marker (``artifacts/.checkout/<name>``) holds the entry's digest and
every file has its recorded size; else the parts are fetched and written atomically.
So several processes or machines with their own workspace directory serve one store,
each with its own copy of the files, and a lost or cut local file is fetched again
rather than rebuilt. (Vector indices are pgvector tables, not files: see
:mod:`unirag.index.pgvector_index`.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from unirag.store.database import Database
from unirag.store.files import atomic_path, atomic_write_bytes
from unirag.store.schema import ensure_schema, tables_migration

PART_BYTES = 32 << 20
CHECKOUT_DIR = ".checkout"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifact_files (
    artifact TEXT, path TEXT, part INTEGER, size INTEGER, data BLOB, PRIMARY KEY (artifact, path, part)
);
"""
MIGRATIONS = (tables_migration(1, "artifact_files", _SCHEMA),)


def files_digest(digests: dict[str, str]) -> str:
    """One digest of an artifact's files: sha256 over each path and its content's sha256, by path."""
    whole = hashlib.sha256()
    for relative in sorted(digests):
        whole.update(f"{relative}\0{digests[relative]}\n".encode())
    return whole.hexdigest()


def local_digest(root: Path, relatives: Iterable[str]) -> str:
    """:func:`files_digest` of files under ``root``."""
    digests = {}
    for relative in relatives:
        digest = hashlib.sha256()
        with open(root / relative, "rb") as handle:
            for data in iter(lambda: handle.read(PART_BYTES), b""):
                digest.update(data)
        digests[relative] = digest.hexdigest()
    return files_digest(digests)


class BlobArtifactFiles:
    """The blobs of every artifact's files in ``db``, and their local copy under ``root``
    (:class:`unirag.store.backend.ArtifactFiles` of a store whose files live in its database)."""

    def __init__(self, db: Database, root: Path) -> None:
        ensure_schema(db, "artifact_files", MIGRATIONS)
        self.db = db
        self.root = root

    # -- writing (inside the caller's transaction) ---------------------------------
    def record(self, artifact: str, sizes: dict[str, int]) -> str | None:
        """Replace ``artifact``'s blobs with the files ``sizes`` names; their digest (None: no files)."""
        self.drop(artifact)
        return self.upload(artifact, sizes) if sizes else None

    def recorded(self, artifact: str, digest: str | None) -> None:
        """The local files just uploaded are the current copy: no fetch before they are read."""
        if digest is not None:
            self.mark_checked_out(artifact, digest)

    def upload(self, artifact: str, sizes: dict[str, int]) -> str:
        """Store the files ``sizes`` names (workspace-relative paths) as ``artifact``'s (the caller
        dropped what it had); returns their digest (:func:`files_digest`)."""
        digests = {}
        for relative in sorted(sizes):
            digest = hashlib.sha256()
            with open(self.root / relative, "rb") as handle:
                part = 0
                while True:  # an empty file is one empty part
                    data = handle.read(PART_BYTES)
                    digest.update(data)
                    self.db.execute("INSERT INTO artifact_files VALUES (?, ?, ?, ?, ?)",
                                    (artifact, relative, part, len(data), data))
                    part += 1
                    if len(data) < PART_BYTES:
                        break
            digests[relative] = digest.hexdigest()
        return files_digest(digests)

    def stored_digest(self, artifact: str, relatives: Iterable[str]) -> str:
        """:func:`files_digest` of ``artifact``'s blobs of ``relatives`` as stored (read back: what a
        migration verifies)."""
        digests = {}
        for relative in relatives:
            digest = hashlib.sha256()
            parts = [row[0] for row in self.db.execute(
                "SELECT part FROM artifact_files WHERE artifact = ? AND path = ? ORDER BY part", (artifact, relative))]
            for part in parts:
                digest.update(self._part(artifact, relative, part))
            digests[relative] = digest.hexdigest()
        return files_digest(digests)

    def drop(self, artifact: str) -> None:
        self.db.execute("DELETE FROM artifact_files WHERE artifact = ?", (artifact,))

    def forget(self, keep: str | None) -> None:
        """Drop the blobs of every artifact (but ``keep``'s)."""
        if keep is None:
            self.db.execute("DELETE FROM artifact_files")
        else:
            self.db.execute("DELETE FROM artifact_files WHERE artifact <> ?", (keep,))

    # -- reading ---------------------------------------------------------------------
    def stored_sizes(self, artifact: str) -> dict[str, int]:
        """Path -> stored bytes of ``artifact``'s files."""
        rows = self.db.execute("SELECT path, SUM(size) FROM artifact_files WHERE artifact = ? GROUP BY path",
                               (artifact,))
        return {path: int(size) for path, size in rows}

    def damage(self, artifact: str, recorded: dict[str, int]) -> str | None:
        """The first recorded file whose blob is missing or has another size, in words (as
        :class:`unirag.store.local_files.LocalArtifactFiles` says it of a local file)."""
        if not recorded:
            return None
        stored = self.stored_sizes(artifact)
        for relative, size in recorded.items():
            found = stored.get(relative)
            if found is None:
                return f"{relative} is missing"
            if found != size:
                return f"{relative} has {found} bytes, not {size}"
        return None

    def checkout(self, artifact: str, entry: dict[str, Any]) -> None:
        """Make the local copy of ``artifact``'s files the one ``entry`` records (module doc)."""
        recorded: dict[str, int] = entry.get("files", {})
        digest = str(entry.get("digest", ""))
        if not recorded or self._current(artifact, recorded, digest):
            return
        for relative in sorted(recorded):
            parts = [row[0] for row in self.db.execute(
                "SELECT part FROM artifact_files WHERE artifact = ? AND path = ? ORDER BY part", (artifact, relative))]
            if not parts:
                continue  # a missing blob is damage: the builder's check rebuilds the artifact
            with atomic_path(self.root / relative) as tmp, open(tmp, "wb") as handle:
                for part in parts:  # one part in memory at a time
                    handle.write(self._part(artifact, relative, part))
        self.mark_checked_out(artifact, digest)

    def _part(self, artifact: str, relative: str, part: int) -> bytes:
        row = self.db.execute("SELECT data FROM artifact_files WHERE artifact = ? AND path = ? AND part = ?",
                              (artifact, relative, part)).fetchone()
        return bytes(row[0])

    def _marker(self, artifact: str) -> Path:
        return self.root / "artifacts" / CHECKOUT_DIR / artifact.replace(":", ".").replace("/", "_")

    def _current(self, artifact: str, recorded: dict[str, int], digest: str) -> bool:
        marker = self._marker(artifact)
        try:
            if marker.read_text(encoding="utf-8") != digest:
                return False
        except OSError:
            return False
        for relative, size in recorded.items():
            path = self.root / relative
            if not path.is_file() or path.stat().st_size != size:
                return False
        return True

    def mark_checked_out(self, artifact: str, digest: str) -> None:
        """Record that the local files of ``artifact`` are the ones with ``digest``."""
        marker = self._marker(artifact)
        marker.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(marker, digest.encode("utf-8"))
