"""Documents and chunks: the corpus as every later stage sees it."""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def content_id(*parts: str, prefix: str = "") -> str:
    """A stable id from content: sha256 over NFC-normalised parts, 16 hex chars.

    Stable across runs and machines, so re-indexing finds what exists.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(unicodedata.normalize("NFC", part).encode("utf-8"))
        digest.update(b"\x00")
    return prefix + digest.hexdigest()[:16]


@dataclass(frozen=True)
class Document:
    """One document or one pre-split passage.

    ``presplit`` marks a passage an expert already cut (dataset formats): it
    becomes exactly one chunk. ``source`` is the file it came from.
    """

    title: str
    text: str
    source: str
    presplit: bool = False
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def id(self) -> str:
        """Content hash of title + text: the same passage twice is one document."""
        return content_id(self.title.strip(), " ".join(self.text.split()), prefix="doc-")

    @property
    def origin(self) -> str:
        """Where the document lives, as the workspace identifies it: the resolved path of
        its file ('' for a document given in memory without one). Re-indexing an origin
        replaces the documents it held before; ``--sync`` drops origins that are gone."""
        return str(Path(self.source).resolve()) if self.source else ""

    @property
    def record_key(self) -> str:
        """The record's own id inside its file (JSON/JSONL ``id`` field), else ''."""
        return str(self.meta.get("key", ""))


@dataclass(frozen=True)
class Chunk:
    """A retrieval unit: a token window of a document, or a whole passage."""

    id: str
    doc_id: str
    index: int
    text: str
    title: str
    n_tokens: int
    source: str

    @property
    def indexed_text(self) -> str:
        """What embeddings and BM25 see: the title line, then the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text
