"""Artifact files kept in the workspace directory itself (the embedded store's way).

The files under ``WS/artifacts/`` *are* the artifact: nothing to upload, fetch or drop
beside the manifest entry; a damaged artifact is one whose recorded file is missing or
has another size (sizes, not hashes: a stat per file stays cheap on gigabyte indices,
and a cut or lost file -- a killed copy, a cleanup -- changes its size).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from unirag.store.artifact_files import local_digest


class LocalArtifactFiles:
    """:class:`unirag.store.backend.ArtifactFiles` of a workspace directory ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def record(self, artifact: str, sizes: dict[str, int]) -> str | None:
        return None

    def recorded(self, artifact: str, digest: str | None) -> None:
        """Nothing to mark: the files read are the files recorded."""

    def drop(self, artifact: str) -> None:
        """Nothing beside the entry: the builder's files are replaced by its next build."""

    def forget(self, keep: str | None) -> None:
        """Nothing beside the entries (the caller removes the directory where it must)."""

    def damage(self, artifact: str, recorded: dict[str, int]) -> str | None:
        for relative, size in recorded.items():
            path = self.root / relative
            if not path.is_file():
                return f"{relative} is missing"
            found = path.stat().st_size
            if found != size:
                return f"{relative} has {found} bytes, not {size}"
        return None

    def checkout(self, artifact: str, entry: dict[str, Any]) -> None:
        """Nothing to fetch: the local files are the artifact."""

    def stored_digest(self, artifact: str, relatives: Iterable[str]) -> str:
        return local_digest(self.root, relatives)
