"""Uploaded files and JSON records -> Documents, before an index job takes them.

No part of a request names a path: each file is checked by extension and
content (UTF-8 text, no NUL bytes), written under a fresh temporary directory
inside the workspace with a generated name, read with the usual loaders, and the
directory is removed again. The documents keep no origin (they were given in
memory), so later uploads never replace them by path; a text file's name becomes
its title, as with ``unirag index``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unirag.api import as_document
from unirag.config import Settings
from unirag.errors import SourceError
from unirag.server.errors import ApiError
from unirag.text.loaders import load_documents
from unirag.text.types import Document

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
RECORD_SUFFIXES = (".json", ".jsonl")
UPLOAD_SUFFIXES = TEXT_SUFFIXES + RECORD_SUFFIXES
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Upload:
    """One uploaded file, checked: its suffix, a display title and its bytes."""

    name: str
    suffix: str
    data: bytes


def check_upload(filename: str | None, data: bytes) -> Upload:
    """Refuse (415) a file whose extension or content is not text the loaders read."""
    name = _UNPRINTABLE.sub("", Path(filename or "upload").name)[:200] or "upload"
    suffix = Path(name).suffix.lower()
    if suffix not in UPLOAD_SUFFIXES:
        raise ApiError(415, f"{name}: unsupported file type (accepted: {', '.join(UPLOAD_SUFFIXES)})",
                       code="unsupported_file_type")
    if b"\x00" in data:
        raise ApiError(415, f"{name}: binary content, expected UTF-8 text", code="unsupported_file_type")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(415, f"{name}: not UTF-8 text (byte at offset {exc.start})", code="unsupported_file_type") from None
    return Upload(name, suffix, data)


def load_uploads(root: Path, uploads: Sequence[Upload], settings: Settings) -> tuple[list[Document], list[str]]:
    """The documents of the uploaded files and the loaders' warnings (file names, not temp paths)."""
    folder = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
    try:
        paths = []
        for number, upload in enumerate(uploads):
            path = folder / f"{number}{upload.suffix}"
            path.write_bytes(upload.data)
            paths.append(path)
        names = {str(path): upload.name for path, upload in zip(paths, uploads, strict=True)}

        def shown(message: str) -> str:
            for path, name in names.items():
                message = message.replace(path, name)
            return message

        warnings: list[str] = []
        docs: list[Document] = []
        try:
            for doc in load_documents(paths, "auto", settings.loader, presplit=settings.chunking.presplit,
                                      warn=lambda line: warnings.append(shown(line))):
                is_text = doc.meta.get("format") == "text"
                title = Path(names.get(doc.source, doc.title)).stem if is_text else doc.title
                docs.append(Document(title, doc.text, "", presplit=doc.presplit, meta=doc.meta))
        except SourceError as exc:
            raise SourceError(shown(str(exc))) from None
        return docs, warnings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def record_documents(payload: Any) -> list[Document]:
    """``[{"text", "title"?, "id"?}, ...]`` or ``{"documents": [...]}`` -> Documents (400 if malformed)."""
    records = payload.get("documents") if isinstance(payload, Mapping) else payload
    if not isinstance(records, list) or not records:
        raise ApiError(400, "expected a JSON list of records {\"text\", \"title\"?, \"id\"?} or {\"documents\": [...]}")
    # a record's "source" would become a path the workspace resolves: the server takes none
    return [as_document({key: value for key, value in record.items() if key != "source"}
                        if isinstance(record, Mapping) else record) for record in records]
