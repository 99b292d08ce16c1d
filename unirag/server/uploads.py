"""Uploaded files and JSON records -> Documents, before an index job takes them.

An upload is ingested as ``unirag index`` ingests a file: every format the loaders
read (:data:`UPLOAD_SUFFIXES`, the loaders' own list), read by the same
:func:`~unirag.text.loaders.load_documents` with the same bounds (the DOCX zip
bounds, JSON nesting depth), within the server's ``max_upload_bytes``. Each file
is first checked by its content for the format its name claims (a ``.pdf`` starts
like a PDF, a ``.docx`` is a zip archive holding a Word document, text is UTF-8),
so a mislabelled or hostile file is one line (415, 413), never a reader's crash.

An upload's identity is its **logical source** ``upload:COLLECTION/NAME``: the
file name within an optional client-given collection (a JSON record's own
``source``). It is recorded as the CLI records a file's path, so uploading a
changed file again replaces its document as re-indexing a changed file does, and
``DELETE /documents/upload:...`` removes it; but it is a name, never a path: it is
checked (no ``..``, no absolute path, no control character, bounded length) and
never resolved on disk. The bytes are written under a fresh temporary directory
inside the workspace with generated names, read, and the directory removed again.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from unirag.api import as_document
from unirag.config import LoaderSettings, Settings
from unirag.errors import SourceError
from unirag.server.errors import ApiError
from unirag.text.document_formats import DOCUMENT_SUFFIXES, UnreadableFile, check_zip_bounds
from unirag.text.loaders import SUFFIXES, load_documents
from unirag.text.types import LOGICAL_SOURCE, TITLE_IS_FILE_NAME, UPLOAD_SCHEME, Document

#: Every suffix an upload may have: exactly what ``unirag index`` reads (one list, the loaders').
UPLOAD_SUFFIXES = tuple(sorted(SUFFIXES))
#: Formats read as bytes by their own reader; every other upload must be UTF-8 text.
_BINARY_FORMATS = ("pdf", "docx")
#: Where a PDF's header may start (readers allow a little junk before it, as pypdf does).
_PDF_HEADER_WITHIN = 1024
MAX_SOURCE_CHARS = 300
#: Control characters, line and paragraph separators (a message would break there), bidi controls
#: (a name would read otherwise than it is).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Upload:
    """One uploaded file, checked: its name, its logical source, its suffix and its bytes."""

    name: str
    source: str
    suffix: str
    data: bytes


def logical_source(name: str, collection: str = "", what: str = "source") -> str:
    """``upload:COLLECTION/NAME``, or a one-line 400 when ``name`` or ``collection`` could be
    read as a path that leaves its place: ``..``, an absolute path, a drive, a backslash, a
    control character, ``#`` (it separates a record's id), or longer than :data:`MAX_SOURCE_CHARS`."""
    parts = [*_logical_parts(collection, "collection"), *_logical_parts(name, what)]
    if not parts:
        raise ApiError(400, f"empty {what}: give a file name")
    source = UPLOAD_SCHEME + "/".join(parts)
    if len(source) > MAX_SOURCE_CHARS:
        raise ApiError(400, f"{what} is longer than {MAX_SOURCE_CHARS} characters", code="invalid_source")
    return source


def _logical_parts(value: str, what: str) -> list[str]:
    """The ``/``-separated parts of a relative logical name (trailing ``/`` allowed), checked."""
    shown = _UNPRINTABLE.sub("?", value)[:80]
    if _UNPRINTABLE.search(value):
        why = "a control character"
    elif value.startswith(("/", "\\")) or _DRIVE.match(value):
        why = "an absolute path"
    elif "\\" in value:
        why = "a backslash (use / between folders)"
    elif "#" in value:
        why = "'#' (it separates a record's id: FILE#RECORD)"
    elif any(part in (".", "..") for part in value.split("/")):
        why = "'.' or '..' (a logical name never leaves its collection)"
    elif "//" in value.rstrip("/"):
        why = "an empty folder name ('//')"
    else:
        return [part for part in value.split("/") if part]
    raise ApiError(400, f"{what} '{shown}' has {why}", code="invalid_source")


def check_upload(filename: str | None, data: bytes, collection: str = "") -> Upload:
    """Refuse (415) a file whose extension is not one the loaders read or whose content does not
    look like its format, (400) a name or collection that is no safe logical name."""
    source = logical_source(filename or "", collection, "file name")
    name = source.rsplit("/", 1)[-1].removeprefix(UPLOAD_SCHEME)
    suffix = Path(name).suffix.lower()
    if suffix not in UPLOAD_SUFFIXES:
        raise ApiError(415, f"{name}: unsupported file type (accepted: {', '.join(UPLOAD_SUFFIXES)})",
                       code="unsupported_file_type")
    fmt = DOCUMENT_SUFFIXES.get(suffix, "text")
    if fmt == "pdf" and b"%PDF-" not in data[:_PDF_HEADER_WITHIN]:
        raise ApiError(415, f"{name}: not a PDF (no %PDF- header)", code="unsupported_file_type")
    if fmt == "docx" and not data.startswith(b"PK"):
        raise ApiError(415, f"{name}: not a DOCX (not a zip archive)", code="unsupported_file_type")
    if fmt not in _BINARY_FORMATS:
        if b"\x00" in data:
            raise ApiError(415, f"{name}: binary content, expected UTF-8 text", code="unsupported_file_type")
        if fmt != "html":  # an HTML page may declare another encoding, which its reader follows
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ApiError(415, f"{name}: not UTF-8 text (byte at offset {exc.start})",
                               code="unsupported_file_type") from None
    return Upload(name, source, suffix, data)


def load_uploads(root: Path, uploads: Sequence[Upload], settings: Settings) -> tuple[list[Document], list[str]]:
    """The documents of the uploaded files, each with its logical source, and the loaders'
    warnings (naming the uploads, never the temporary paths)."""
    seen: set[str] = set()
    for upload in uploads:
        if upload.source in seen:
            raise ApiError(400, f"{upload.source} is twice in this upload", code="invalid_source")
        seen.add(upload.source)
    folder = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
    try:
        by_path: dict[str, Upload] = {}
        for number, upload in enumerate(uploads):
            path = folder / f"{number}{upload.suffix}"
            path.write_bytes(upload.data)
            by_path[str(path)] = upload
            if DOCUMENT_SUFFIXES.get(upload.suffix) == "docx":
                _check_docx(path, upload, settings.loader)

        def shown(message: str) -> str:
            for path, upload in by_path.items():
                message = message.replace(path, upload.source)
            return message

        warnings: list[str] = []
        docs: list[Document] = []
        try:
            for doc in load_documents(list(by_path), "auto", settings.loader, presplit=settings.chunking.presplit,
                                      warn=lambda line: warnings.append(shown(line))):
                upload = by_path[doc.source]
                title = Path(upload.name).stem if doc.meta.get(TITLE_IS_FILE_NAME) else doc.title
                docs.append(replace(doc, title=title, source=upload.source, meta={**doc.meta, LOGICAL_SOURCE: True}))
        except SourceError as exc:
            raise SourceError(shown(str(exc))) from None
        return docs, warnings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_docx(path: Path, upload: Upload, loader: LoaderSettings) -> None:
    """A DOCX must be a zip archive holding a Word document (415) within the loader's zip
    bounds (413: the check ``unirag index`` makes, from the archive's directory, before reading)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise ApiError(415, f"{upload.name}: not a DOCX (damaged zip archive: {exc})",
                       code="unsupported_file_type") from None
    if "word/document.xml" not in names:
        raise ApiError(415, f"{upload.name}: not a DOCX (no word/document.xml in the archive)",
                       code="unsupported_file_type")
    try:
        check_zip_bounds(path, "docx", loader)
    except UnreadableFile as refused:
        message = str(refused).replace(str(path), upload.name).removesuffix(" skipped")
        raise ApiError(413, message, code="upload_too_large") from None


def record_documents(payload: Any) -> list[Document]:
    """``[{"text", "title"?, "id"?, "source"?}, ...]`` or ``{"documents": [...]}`` -> Documents
    (400 if malformed). A record's ``source`` is a logical name (``notes.jsonl``, ``docs/a.md``):
    the records of one source are its whole content, replacing what it held before."""
    records = payload.get("documents") if isinstance(payload, Mapping) else payload
    if not isinstance(records, list) or not records:
        raise ApiError(400, "expected a JSON list of records {\"text\", \"title\"?, \"id\"?, \"source\"?} "
                            "or {\"documents\": [...]}")
    docs = []
    for number, record in enumerate(records):
        source = record.get("source") if isinstance(record, Mapping) else None
        if source is not None and not isinstance(source, str):
            raise ApiError(400, f"record {number}: 'source' must be a string", code="invalid_source")
        doc = as_document({key: value for key, value in record.items() if key != "source"}
                          if isinstance(record, Mapping) else record)
        if source:
            doc = replace(doc, source=logical_source(source, what=f"record {number}: source"),
                          meta={**doc.meta, LOGICAL_SOURCE: True})
        docs.append(doc)
    return docs
