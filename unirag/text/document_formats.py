"""PDF, HTML, DOCX and CSV files as documents, with well-kept PyPI readers.

Why a module of its own: each reader is a third-party library imported only
when a file of its kind is read (``unirag --help`` stays fast), and each
failure of a library on a damaged or encrypted file becomes one
:class:`UnreadableFile` the loader turns into a "skipped" warning, never a crash
of a long indexing run. A file's title is its own (PDF/DOCX metadata, HTML
``<title>``), else the file's name, which extraction leaves out
(:meth:`unirag.text.types.Chunk.for_extraction`).
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unirag.config import LoaderSettings
from unirag.text.types import TITLE_IS_FILE_NAME, Document

#: Suffix -> format name (the ``--format`` value that forces it).
DOCUMENT_SUFFIXES = {".pdf": "pdf", ".html": "html", ".htm": "html", ".docx": "docx", ".csv": "csv"}
DOCUMENT_FORMATS = ("pdf", "html", "docx", "csv")
_PACKAGES = {"pdf": "pypdf", "html": "beautifulsoup4", "docx": "python-docx"}
#: Below this many inflated bytes the compression ratio is not checked: a small file's
#: parts (an empty style sheet) may compress well, and cannot cost much to read anyway.
RATIO_FLOOR_BYTES = 1 << 20
# HTML elements whose text is no content.
_NON_CONTENT = ("script", "style", "noscript", "template", "svg", "head")


class UnreadableFile(Exception):
    """A file of a known format its reader cannot read: skipped with ``reason`` counted."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def read_document_file(path: Path, fmt: str, loader: LoaderSettings) -> Iterator[Document]:
    """The documents of one PDF, HTML or DOCX file (one each) or CSV file (one per row)."""
    reader = {"pdf": _read_pdf, "html": _read_html, "docx": _read_docx, "csv": _read_csv}[fmt]
    try:
        found = False
        for document in reader(path, loader):
            found = True
            yield document
        if not found:
            raise UnreadableFile(f"{path}: empty, skipped", "empty")
    except UnreadableFile:
        raise
    except ImportError:
        raise UnreadableFile(f"{path}: reading {fmt.upper()} needs the '{_PACKAGES[fmt]}' package "
                             f"(pip install {_PACKAGES[fmt]}), skipped", f"{fmt} reader missing") from None
    except Exception as exc:  # noqa: BLE001
        # Each library has its own error tree (pypdf's PdfReadError, python-docx's
        # PackageNotFoundError, zipfile.BadZipFile, csv.Error, OSError...): a damaged file of
        # any kind is skipped with its reason named, never the end of a long indexing run.
        raise _unreadable(path, fmt, exc) from None


def _unreadable(path: Path, fmt: str, exc: BaseException) -> UnreadableFile:
    detail = " ".join(str(exc).split())[:120]
    return UnreadableFile(f"{path}: unreadable {fmt.upper()} ({type(exc).__name__}: {detail}), skipped",
                          f"unreadable {fmt.upper()}")


def _document(path: Path, title: str | None, text: str, fmt: str, **meta: Any) -> Document:
    own = (title or "").strip()
    if not own:
        meta[TITLE_IS_FILE_NAME] = True  # the file's name is no content (see Document.id)
    return Document(title=own or path.stem, text=text, source=str(path), meta={"format": fmt, **meta})


def _read_pdf(path: Path, loader: LoaderSettings) -> Iterator[Document]:
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableFile(f"{path}: encrypted PDF, skipped", "encrypted PDF")
    text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    if not text:
        raise UnreadableFile(f"{path}: no text in this PDF (a scan? run OCR first), skipped", "PDF without text")
    title = reader.metadata.title if reader.metadata is not None else None
    yield _document(path, title, text, "pdf", pages=len(reader.pages))


def _read_html(path: Path, loader: LoaderSettings) -> Iterator[Document]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_bytes(), "html.parser")  # the stdlib parser: no compiled dependency
    title = soup.title.get_text(" ", strip=True) if soup.title is not None else None
    for element in soup(_NON_CONTENT):
        element.decompose()
    lines = (" ".join(line.split()) for line in soup.get_text("\n").splitlines())
    text = "\n".join(line for line in lines if line)
    if text:
        yield _document(path, title, text, "html")


def check_zip_bounds(path: Path, fmt: str, loader: LoaderSettings) -> None:
    """Refuse (:class:`UnreadableFile`) a zip archive that would inflate past the loader's
    bounds, judged from its central directory before any part is read.

    Why the directory can be trusted: :mod:`zipfile` never inflates a member past the size
    the directory declares (it stops there, then fails the CRC check), and every reader of
    these formats (python-docx) reads through it, so an archive that lies about its sizes
    costs at most what it declares and is then an unreadable file."""
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
    inflated = sum(member.file_size for member in members)
    stored = sum(member.compress_size for member in members)
    limit = loader.max_inflated_mb * 1e6
    ratio = inflated / max(stored, 1)
    if inflated > limit:
        why = f"inflates to {inflated / 1e6:,.0f} MB, over loader.max_inflated_mb ({loader.max_inflated_mb:g})"
    elif inflated > RATIO_FLOOR_BYTES and ratio > loader.max_compression_ratio:
        why = (f"inflates {ratio:,.0f}:1 ({stored / 1e6:,.2f} MB to {inflated / 1e6:,.0f} MB), over "
               f"loader.max_compression_ratio ({loader.max_compression_ratio:g})")
    else:
        return
    raise UnreadableFile(f"{path}: {fmt.upper()} {why}: a zip bomb? skipped", f"oversized {fmt.upper()}")


def _read_docx(path: Path, loader: LoaderSettings) -> Iterator[Document]:
    import docx

    check_zip_bounds(path, "docx", loader)
    document = docx.Document(str(path))
    parts = [paragraph.text for paragraph in document.paragraphs if paragraph.text.strip()]
    for table in document.tables:
        for row in table.rows:
            cells = [cell.text.strip() for cell in row.cells if cell.text.strip()]
            if cells:
                parts.append(" | ".join(cells))
    text = "\n".join(parts)
    if text:
        yield _document(path, document.core_properties.title, text, "docx")


def _read_csv(path: Path, loader: LoaderSettings) -> Iterator[Document]:
    """One document per row: the ``loader.text_field`` column when there is one, else every
    column as ``name: value`` lines; title and id from ``title_field`` / ``id_field``."""
    raw = path.read_bytes().decode("utf-8-sig")
    sample = raw[:8192]
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = csv.DictReader(io.StringIO(raw, newline=""), dialect=dialect)
    if not rows.fieldnames:
        return
    for number, row in enumerate(rows, start=1):
        values = {str(k).strip(): (v or "").strip() for k, v in row.items() if k is not None}
        text = values.get(loader.text_field) or "\n".join(f"{k}: {v}" for k, v in values.items() if v)
        if not text:
            continue
        meta: dict[str, Any] = {"record": number}
        if values.get(loader.id_field):
            meta["key"] = values[loader.id_field]
        yield Document(title=values.get(loader.title_field, ""), text=text, source=str(path),
                       meta={"format": "csv", **meta})
