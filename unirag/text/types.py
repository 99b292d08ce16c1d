"""Documents and chunks: the corpus as every later stage sees it."""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field
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
