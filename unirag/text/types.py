"""Documents and chunks: the corpus as every later stage sees it."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any


#: Texts longer than this are hashed block by block (see :func:`normalised_words`).
STREAM_BLOCK_CHARS = 1 << 18


def content_id(*parts: str, prefix: str = "") -> str:
    """A stable id from content: sha256 over NFC-normalised parts, 16 hex chars.

    Stable across runs and machines, so re-indexing finds what exists.
    """
    return streamed_content_id(*([part] for part in parts), prefix=prefix)


def streamed_content_id(*parts: Iterable[str], prefix: str = "") -> str:
    """:func:`content_id` of parts each given as pieces, so a long text is hashed without
    another copy of it. Pieces must be cut where NFC cannot join them (before a space):
    the id is then the one of the joined part."""
    digest = hashlib.sha256()
    for pieces in parts:
        for piece in pieces:
            digest.update(unicodedata.normalize("NFC", piece).encode("utf-8"))
        digest.update(b"\x00")
    return prefix + digest.hexdigest()[:16]


def normalised_words(text: str, block: int = STREAM_BLOCK_CHARS) -> Iterator[str]:
    """``" ".join(text.split())`` in pieces of about ``block`` characters.

    The joined string of a 50 MB text and its list of millions of words would cost many
    times the text; the pieces cost a block. Blocks end at whitespace, so no word is
    cut, and every piece after the first starts with the joining space."""
    start, said = 0, False
    while start < len(text):
        end = _whitespace_at_or_after(text, start + block)
        words = text[start:end].split()
        if words:
            yield (" " if said else "") + " ".join(words)
            said = True
        start = end


def _whitespace_at_or_after(text: str, position: int) -> int:
    """The first whitespace index at or after ``position`` (``len(text)`` if none)."""
    if position >= len(text):
        return len(text)
    for index in range(position, min(len(text), position + 4096)):
        if text[index].isspace():
            return index
    for match in _WHITESPACE.finditer(text, position):
        if text[match.start()].isspace():  # what str.split() splits on
            return match.start()
    return len(text)


_WHITESPACE = re.compile(r"\s")


#: ``Document.meta`` key set by the loaders when the title is only the file's name.
TITLE_IS_FILE_NAME = "title_is_file_name"
#: ``Document.meta`` key of a document whose source is a *logical* name (an uploaded file's
#: name within its collection), never a path: its origin is the name as given, never resolved.
LOGICAL_SOURCE = "logical_source"
#: What every logical source starts with. A file's origin is an absolute path, so the two can
#: never be confused, and a delete target with this prefix names an upload, never a file.
UPLOAD_SCHEME = "upload:"


def is_logical_source(source: str) -> bool:
    """Whether a recorded origin (or a delete target) is an upload's logical name, not a path."""
    return source.startswith(UPLOAD_SCHEME)


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
        """Content hash of title + text: the same passage twice is one document.

        A title that is only the file's name (a text file, a PDF without a title) is no
        content: the same text saved as ``a.txt`` and ``copy of a.txt`` is one document
        with two origins, not two documents retrieved twice."""
        title = "" if self.meta.get(TITLE_IS_FILE_NAME) else self.title.strip()
        if len(self.text) <= STREAM_BLOCK_CHARS:
            return content_id(title, " ".join(self.text.split()), prefix="doc-")
        return streamed_content_id([title], normalised_words(self.text), prefix="doc-")

    @property
    def origin(self) -> str:
        """Where the document lives, as the workspace identifies it: the resolved path of
        its file ('' for a document given in memory without one). Re-indexing an origin
        replaces the documents it held before; ``--sync`` drops origins that are gone. An
        upload's logical source (:data:`LOGICAL_SOURCE`) is its origin as given: it names no file."""
        if self.meta.get(LOGICAL_SOURCE) and is_logical_source(self.source):
            return self.source
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

    @property
    def titled_by_file_name(self) -> bool:
        """Whether the title is only the name of the file the chunk came from (``notes_v2``
        of ``notes_v2.txt``), not a title someone wrote."""
        return bool(self.title) and bool(self.source) and PurePath(self.source).stem == self.title

    def for_extraction(self) -> Chunk:
        """The chunk as entity extractors see it: a title that is only a file name is left
        out, or it would become an entity of every chunk of that file. Retrieval keeps it."""
        return replace(self, title="") if self.titled_by_file_name else self
