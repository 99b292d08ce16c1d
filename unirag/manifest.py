"""The manifest: which artifact was built, from which inputs, on which corpus, with which files.

One row per artifact (``manifest`` table): its config, its inputs' fingerprint, the corpus
version and chunk mark it was built on, and the size of each of its files. From these the
manifest says whether a builder may skip its work (:meth:`Manifest.is_current`), which
artifacts cannot be served as they are (:meth:`Manifest.stale_artifacts`), and how far a
stale one is behind. Where the files themselves are kept is the store's business
(:class:`unirag.store.backend.ArtifactFiles`): an entry and its files' record are written
in one transaction on every store.

It also keeps the pending-delete record: a delete's targets, documents and chunks until
every built artifact forgot them, so a killed delete is finished by the next run.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from unirag.store.backend import ArtifactFiles
from unirag.store.database import Database
from unirag.workspace_tables import chunk_mark, corpus_version, drop_meta, read_meta, write_meta

PENDING_DELETE = "pending_delete"
CHUNK_MARK = "chunk_mark"  # a manifest entry's record of the chunks it was built on (workspace_tables.chunk_mark)


class Manifest:
    """Reads and writes the manifest of one workspace (at ``root``, its files kept by ``files``)."""

    def __init__(self, db: Database, root: Path, files: ArtifactFiles) -> None:
        self.db = db
        self.root = root
        self.files = files

    # -- entries ---------------------------------------------------------------
    def entries(self) -> dict[str, dict[str, Any]]:
        """Every entry, in the order they were (last) written."""
        rows = self.db.execute(f"SELECT name, entry FROM manifest ORDER BY {self.db.dialect.insertion_order}")
        return {name: json.loads(entry) for name, entry in rows}

    def entry(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT entry FROM manifest WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_entry(self, name: str, entry: dict[str, Any], files: Iterable[Path] = ()) -> None:
        """Record that artifact ``name`` was built (``entry["inputs"]``: its fingerprint).

        ``files``: the artifact's files and directories, written before this call; the
        size of each file (every file under a directory) is recorded, so that
        :meth:`is_current` and :meth:`stale_artifacts` see a lost or cut one."""
        entry = {**entry, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "corpus_version": corpus_version(self.db),
                 CHUNK_MARK: chunk_mark(self.db)}
        self.record_entry(name, entry, files)

    def record_entry(self, name: str, entry: dict[str, Any], files: Iterable[Path] = ()) -> None:
        """Write ``entry`` as given (a copied one keeps its build time and corpus version) with the
        sizes of ``files``; the store keeps the files themselves in the same transaction."""
        entry = {key: value for key, value in entry.items() if key not in ("files", "digest")}
        sizes = self._file_sizes(files)
        if sizes:
            entry["files"] = sizes
        with self.db:
            digest = self.files.record(name, sizes)
            if digest is not None:
                entry["digest"] = digest
            self.db.execute(self.db.dialect.replace_into("manifest", ("name", "entry"), ("name",)),
                            (name, json.dumps(entry)))
        self.files.recorded(name, digest)

    def _file_sizes(self, paths: Iterable[Path]) -> dict[str, int]:
        """Workspace-relative path -> size of every file in ``paths`` (directories walked)."""
        sizes: dict[str, int] = {}
        for path in paths:
            found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in found:
                if file.is_file():
                    sizes[file.relative_to(self.root).as_posix()] = file.stat().st_size
        return sizes

    def drop_entry(self, name: str) -> None:
        """Forget that artifact ``name`` was built: the next ensure rebuilds it."""
        with self.db:
            self.db.execute("DELETE FROM manifest WHERE name = ?", (name,))
            self.files.drop(name)

    def stamp_artifact(self, name: str) -> None:
        """Record that artifact ``name`` is up to date with the current corpus."""
        entry = self.entry(name)
        version = corpus_version(self.db)
        if entry is not None and entry.get("corpus_version") != version:
            stamped = {**entry, "corpus_version": version, CHUNK_MARK: chunk_mark(self.db)}
            with self.db:
                self.db.execute("UPDATE manifest SET entry = ? WHERE name = ?", (json.dumps(stamped), name))

    def drop_artifacts(self) -> None:
        """Forget every built artifact but the chunk record (files and manifest entries):
        what a corpus emptied by ``delete`` leaves, a valid empty workspace."""
        with self.db:
            self.db.execute("DELETE FROM manifest WHERE name != 'chunks'")
            self.files.forget("chunks")
        shutil.rmtree(self.root / "artifacts", ignore_errors=True)

    def forget_all(self) -> None:
        """Inside the caller's transaction: every entry and its files (a corpus cleared anew)."""
        self.db.execute("DELETE FROM manifest")
        self.files.forget(None)

    # -- what can be served ------------------------------------------------------
    def stale_artifacts(self) -> dict[str, str]:
        """Built artifacts that cannot be served as they are: name -> why (built on an
        older corpus, or damaged: a file of theirs is missing or cut)."""
        version = corpus_version(self.db)
        return {name: why for name, entry in self.entries().items()
                if name != "chunks" and (why := self._problem(name, entry, version))}

    def artifact_problem(self, name: str) -> str | None:
        """Why artifact ``name`` cannot be served as it is, or None when it can:
        ``missing``, ``built on corpus version N, now M``, or ``damaged (FILE ...)``."""
        entry = self.entry(name)
        return "missing" if entry is None else self._problem(name, entry, corpus_version(self.db))

    def _problem(self, name: str, entry: dict[str, Any], version: int) -> str | None:
        damage = self.files.damage(name, entry.get("files", {}))
        if damage:
            return f"damaged ({damage})"
        built_on = entry.get("corpus_version", 0)
        return f"built on corpus version {built_on}, now {version}" if built_on < version else None

    def is_current(self, name: str, fingerprint: str, files: Iterable[Path] = ()) -> bool:
        """Whether artifact ``name`` is built from inputs with ``fingerprint`` and whole:
        every recorded file has its recorded size (as the store keeps it; its local copy is
        then brought up to date) and each of ``files`` exists (entries from before file
        records have only this check). A builder skips its work when True."""
        entry = self.entry(name)
        if entry is None or entry.get("inputs") != fingerprint:
            return False
        if self.files.damage(name, entry.get("files", {})) is not None:
            return False
        self.files.checkout(name, entry)
        return all(path.exists() for path in files)

    def checkout(self, name: str) -> None:
        """Bring the local copy of artifact ``name``'s files up to date with the store before
        they are read (nothing to do where the files are the artifact; a fetch where another
        process or machine built them)."""
        entry = self.entry(name)
        if entry is not None:
            self.files.checkout(name, entry)

    def embedding_dim(self, model: str) -> tuple[str, int] | None:
        """(artifact, dimension) of the vectors this workspace holds from embedding model
        ``model`` (``chunk_vectors`` first), or None while it holds none. The model cache
        serves and stores only vectors of this dimension: an endpoint that answers another
        one (a wrong URL behind the same model name) never poisons it."""
        entries = self.entries()
        for name in sorted(entries, key=lambda name: name != "chunk_vectors"):
            entry = entries[name]
            if entry.get("config", {}).get("model") == model and int(entry.get("dim") or 0) > 0:
                return name, int(entry["dim"])
        return None

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

    # -- the pending delete --------------------------------------------------------
    def pending_delete(self) -> dict[str, list[str]] | None:
        """The deletions whose artifacts are not refreshed yet (``targets``, ``doc_ids``,
        ``chunk_ids``), or None: each delete records one until a run finishes refreshing."""
        value = read_meta(self.db, PENDING_DELETE)
        return json.loads(value) if value is not None else None

    def note_delete(self, targets: Iterable[str], doc_ids: Iterable[str], chunk_ids: Iterable[str]) -> None:
        """Inside the caller's transaction (the one that deletes the documents): add a deletion
        to the pending record."""
        pending = self.pending_delete() or {"targets": [], "doc_ids": [], "chunk_ids": []}
        write_meta(self.db, PENDING_DELETE, json.dumps({
            "targets": sorted({*pending["targets"], *targets}),
            "doc_ids": sorted({*pending["doc_ids"], *doc_ids}),
            "chunk_ids": sorted({*pending["chunk_ids"], *chunk_ids}),
        }))

    def finish_delete(self) -> None:
        """Every built artifact forgot the pending deletions: forget the record."""
        with self.db:
            drop_meta(self.db, PENDING_DELETE)
