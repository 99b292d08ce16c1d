"""Turn files and directories into :class:`Document` objects.

Real corpora are messy: a stray binary, a Latin-1 file or a bad JSONL line
must not abort an hour of indexing, so such files are skipped with a warning
and counted. Only when nothing at all is readable do we raise, with one line
that says why. The multi-hop QA datasets (HotpotQA, MuSiQue, 2Wiki) arrive
as expert-split passages, which are marked ``presplit`` so that chunking
keeps each passage whole, as the survey does.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from unirag.config import LoaderSettings
from unirag.errors import ConfigError, SourceError
from unirag.text.clean import ReplacedCharacters
from unirag.text.document_formats import DOCUMENT_FORMATS, DOCUMENT_SUFFIXES, UnreadableFile, read_document_file
from unirag.text.types import TITLE_IS_FILE_NAME, Document

FORMATS = ("auto", "text", "jsonl", "json", "hotpotqa", "musique", "2wiki", *DOCUMENT_FORMATS)
PRESPLIT_MODES = ("auto", "always", "never")
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
SUFFIXES = TEXT_SUFFIXES | {".json", ".jsonl"} | set(DOCUMENT_SUFFIXES)
_BINARY_PROBE = 8192
_BOM = b"\xef\xbb\xbf"

Warn = Callable[[str], None]
#: Why a JSON value is refused when the decoder hits Python's recursion limit. No document
#: layout nests more than a few levels, so the bound is the interpreter's own (about 1,000
#: levels, ``sys.getrecursionlimit``): the stdlib C decoder checks it at every level and
#: raises RecursionError, even for 5,000,000 levels, without exhausting the C stack.
TOO_DEEP = "JSON nested too deeply (more levels than Python's JSON reader allows, about 1,000)"
_EMPTY_TEXT = "empty text"

# JSON layouts we recognise, and which format reads each.
_QUESTIONS_CONTEXT = "questions with 'context'"  # HotpotQA / 2Wiki question files
_QUESTIONS_PARAGRAPHS = "questions with 'paragraphs'"  # MuSiQue question files
_TITLE_MAP = "{title: [sentences]} mapping"  # HotpotQA corpus
_PASSAGES = "list of {title, text} passages"  # 2Wiki / MuSiQue corpus, generic
_RECORDS = "list of records"
_SINGLE = "single record"
_AUTO_FORMAT = {
    _QUESTIONS_CONTEXT: "hotpotqa",
    _QUESTIONS_PARAGRAPHS: "musique",
    _TITLE_MAP: "hotpotqa",
    _PASSAGES: "2wiki",
    _RECORDS: "json",
    _SINGLE: "json",
}
# What each forced format accepts, and the field whose absence it reports.
_ACCEPTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "hotpotqa": (
        (_QUESTIONS_CONTEXT, _TITLE_MAP, _PASSAGES),
        "context",
        "a list of questions with 'context' or a {title: [sentences]} mapping",
    ),
    "musique": ((_QUESTIONS_PARAGRAPHS, _PASSAGES), "paragraphs", "a list of questions with 'paragraphs'"),
    "2wiki": ((_PASSAGES, _QUESTIONS_CONTEXT), "text", "a list of {title, text} passages"),
    "json": ((_RECORDS, _SINGLE), "", "records"),
}


@dataclass
class _Tally:
    """What one ``load_documents`` call skipped, for the final error message."""

    files: Counter[str] = field(default_factory=Counter)
    bad_records: int = 0
    empty_documents: int = 0
    documents: int = 0

    def skipped_record(self, why: str) -> None:
        """Count a record skipped for ``why`` (empty text is an empty document)."""
        if why == _EMPTY_TEXT:
            self.empty_documents += 1
        else:
            self.bad_records += 1

    def summary(self) -> str:
        n_files = sum(self.files.values())
        reasons = [
            f"{n} {why}{'s' if n != 1 and why.endswith(('file', 'extension')) else ''}"
            for why, n in sorted(self.files.items())
        ]
        if self.bad_records:
            reasons.append(f"{self.bad_records} bad record{'s' * (self.bad_records != 1)}")
        if self.empty_documents:
            reasons.append(f"{self.empty_documents} empty document{'s' * (self.empty_documents != 1)}")
        head = f"{n_files} file{'s' * (n_files != 1)} skipped"
        return f"{head} ({', '.join(reasons)})" if reasons else f"{head} (no files found)"


class _Skip(Exception):
    """A file we cannot read: warn, count under ``reason``, carry on."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _ignore(message: str) -> None:
    """The default ``warn``: say nothing."""


def load_documents(
    sources: Sequence[str | Path],
    fmt: str = "auto",
    loader: LoaderSettings | None = None,
    presplit: str = "auto",
    warn: Warn | None = None,
) -> Iterator[Document]:
    """Documents from files and directories, lazily, in a stable order.

    ``fmt`` forces one format for every file (``auto`` picks by extension and,
    for ``.json``, by layout). ``presplit`` overrides the formats' default:
    ``always`` / ``never`` mark every document presplit or none. Arguments and
    the existence of every source are checked now, before anything is read;
    unreadable files are reported through ``warn`` while iterating. Raises
    :class:`SourceError` at the end if no document at all was produced.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if presplit not in PRESPLIT_MODES:
        raise ConfigError(f"unknown presplit mode {presplit!r}; expected one of {', '.join(PRESPLIT_MODES)}")
    paths = [Path(s) for s in sources]
    for path in paths:
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
    return _iter_documents(paths, fmt, loader or LoaderSettings(), presplit, warn or _ignore)


def _iter_documents(
    paths: list[Path], fmt: str, loader: LoaderSettings, presplit: str, warn: Warn
) -> Iterator[Document]:
    tally = _Tally()
    replaced = ReplacedCharacters()
    for path in _expand(paths, warn, tally):
        try:
            docs = list(_read_file(path, fmt, loader, warn, tally))
        except _Skip as skip:
            warn(str(skip))
            tally.files[skip.reason] += 1
            continue
        for doc in docs:
            if not doc.text or doc.text.isspace():  # not .strip(): no copy of a long text
                tally.empty_documents += 1
                continue
            if presplit != "auto" and doc.presplit != (presplit == "always"):
                doc = replace(doc, presplit=presplit == "always")
            tally.documents += 1
            yield replaced.clean(doc, str(path))
    said = replaced.summary()
    if said:
        warn(said)
    if not tally.documents:
        raise SourceError(f"no readable documents in {_describe(paths)}: {tally.summary()}")


def _describe(paths: Sequence[Path]) -> str:
    """A short list of the sources for a one-line message."""
    names = [str(p) for p in paths[:3]]
    if len(paths) > 3:
        names.append(f"and {len(paths) - 3} more")
    return ", ".join(names) or "(no sources)"


def _expand(paths: Sequence[Path], warn: Warn, tally: _Tally) -> Iterator[Path]:
    """Files to read: named files as given, directories walked in sorted order.

    Inside a directory, hidden entries are skipped silently (``.git``, editor
    files) and unsupported extensions with a warning. A file named explicitly
    is read whatever its extension, since the user asked for it.
    """
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        found: list[Path] = []
        for root, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            found.extend(Path(root, f) for f in filenames if not f.startswith("."))
        for file in sorted(found, key=lambda p: p.relative_to(path).parts):
            if file.suffix.lower() in SUFFIXES:
                yield file
            elif file.is_file():
                kind = f"extension {file.suffix!r}" if file.suffix else "file without extension"
                warn(f"{file}: unsupported {kind}, skipped")
                tally.files["unsupported extension"] += 1


def _read_text(path: Path) -> str:
    """A file's text, or :class:`_Skip` saying why it is not usable text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Skip(f"{path}: cannot read ({exc.strerror or exc}), skipped", "unreadable file") from None
    if b"\x00" in data[:_BINARY_PROBE]:
        raise _Skip(f"{path}: binary file, skipped", "binary file")
    bom = len(_BOM) if data.startswith(_BOM) else 0
    try:
        text = str(memoryview(data)[bom:], "utf-8")  # a view, not a copy of a large file's bytes
    except UnicodeDecodeError as exc:
        byte, offset = data[bom + exc.start], bom + exc.start
        why = f"not UTF-8 text (byte 0x{byte:02x} at offset {offset})"
        raise _Skip(f"{path}: {why}, skipped", "not UTF-8") from None
    if not text or text.isspace():
        raise _Skip(f"{path}: empty, skipped", "empty")
    return text


def _file_format(path: Path, fmt: str) -> str:
    """The format a file is read as, before looking inside a ``.json``."""
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in DOCUMENT_SUFFIXES:
        return DOCUMENT_SUFFIXES[suffix]
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".json":
        return "json-auto"
    return "text"


def _read_file(path: Path, fmt: str, loader: LoaderSettings, warn: Warn, tally: _Tally) -> Iterator[Document]:
    kind = _file_format(path, fmt)
    if kind in DOCUMENT_FORMATS:
        try:
            yield from read_document_file(path, kind, loader)
        except UnreadableFile as unreadable:
            raise _Skip(str(unreadable), unreadable.reason) from None
        return
    text = _read_text(path)
    if kind == "text":
        # Normalise line endings so a Windows checkout gives the same chunk ids
        # (str.replace returns the text itself when there is nothing to replace: no copy).
        body = text.replace("\r\n", "\n").replace("\r", "\n")
        yield Document(title=path.stem, text=body, source=str(path),
                       meta={"format": "text", TITLE_IS_FILE_NAME: True})
    elif kind == "jsonl":
        yield from _read_jsonl(path, text, loader, warn, tally)
    else:
        data = _parse_json(path, text)
        layout = _layout(data, loader, datasets=kind != "json")
        if kind == "json-auto":
            if layout is None:
                raise SourceError(_unrecognised(path, loader))
            kind = _AUTO_FORMAT[layout]
        else:
            _check_forced(path, kind, layout, data, loader)
        assert layout is not None  # _check_forced raised otherwise
        yield from _read_layout(path, data, layout, kind, loader, warn, tally)


def _parse_json(path: Path, text: str) -> Any:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise _Skip(f"{path}: not valid JSON ({exc.msg} at {where}), skipped", "invalid JSON") from None
    except RecursionError:
        raise _Skip(f"{path}: {TOO_DEEP}, skipped", "JSON nested too deeply") from None
    if data in ([], {}):
        raise _Skip(f"{path}: empty, skipped", "empty")
    return data


def _unrecognised(path: Path, loader: LoaderSettings) -> str:
    return (
        f"{path}: unrecognised JSON layout; expected HotpotQA or MuSiQue questions, a {{title: [sentences]}} "
        f"mapping, a list of {{title, text}} passages, or records with a {loader.text_field!r} field"
    )


def _layout(data: Any, loader: LoaderSettings, datasets: bool = True) -> str | None:
    """Which known JSON layout ``data`` has, judged by its first record.

    With ``datasets=False`` only plain records count (``--format json``), so
    a list of {title, text} passages is then read as ordinary documents.
    """
    text_field = loader.text_field
    if isinstance(data, dict):
        if datasets and all(_is_str_list(v) for v in data.values()):
            return _TITLE_MAP
        return _SINGLE if isinstance(data.get(text_field), str) else None
    if not isinstance(data, list) or not data:
        return None
    first = data[0]
    if isinstance(first, str):
        return _RECORDS
    if not isinstance(first, dict):
        return None
    if not datasets:
        return _RECORDS if text_field in first else None
    if "question" in first and isinstance(first.get("context"), (list, dict)):
        return _QUESTIONS_CONTEXT
    if isinstance(first.get("paragraphs"), list):
        return _QUESTIONS_PARAGRAPHS
    custom_field = text_field != "text" and text_field in first
    if not custom_field and isinstance(first.get("title"), str) and isinstance(first.get("text"), str):
        return _PASSAGES
    return _RECORDS if text_field in first else None


def _check_forced(path: Path, fmt: str, layout: str | None, data: Any, loader: LoaderSettings) -> None:
    """Raise a one-line :class:`SourceError` if ``data`` does not fit ``fmt``."""
    accepted, key, expected = _ACCEPTS[fmt]
    if layout in accepted:
        return
    key = key or loader.text_field
    first = data[0] if isinstance(data, list) else data
    if isinstance(first, dict):
        problem = _text_problem(first.get(key), key)
        is_text = key in first and key in ("text", loader.text_field)
        found = f"record 0: {problem}" if problem and is_text else f"record 0 has no {key!r} field"
    else:
        found = f"found a {type(data).__name__}"
        if isinstance(data, list):
            found += f" of {type(first).__name__}"
    raise SourceError(f"{path}: not in {fmt} format: expected {expected}; {found}")


def _read_layout(
    path: Path, data: Any, layout: str, fmt: str, loader: LoaderSettings, warn: Warn, tally: _Tally
) -> Iterator[Document]:
    source = str(path)
    meta = {"format": fmt}

    def bad(where: str, why: str) -> None:
        warn(f"{path}: {where}: {why}, skipped")
        tally.skipped_record(why)

    if layout == _TITLE_MAP:
        for title, sentences in data.items():
            yield Document(title, "".join(sentences).strip(), source, True, dict(meta))
    elif layout == _QUESTIONS_CONTEXT:
        for i, question in enumerate(data):
            context = question.get("context") if isinstance(question, dict) else None
            if context is None:
                bad(f"record {i}", "no 'context' field")
                continue
            for title, sentences in _context_pairs(context):
                if isinstance(title, str) and _is_str_list(sentences):
                    yield Document(title, "".join(sentences).strip(), source, True, dict(meta))
                else:
                    bad(f"record {i}", "context entry is not [title, [sentences]]")
    elif layout == _QUESTIONS_PARAGRAPHS:
        for i, question in enumerate(data):
            paragraphs = question.get("paragraphs") if isinstance(question, dict) else None
            if not isinstance(paragraphs, list):
                bad(f"record {i}", "no 'paragraphs' field")
                continue
            for para in paragraphs:
                if isinstance(para, dict) and isinstance(para.get("paragraph_text"), str):
                    title = str(para.get("title", ""))
                    yield Document(title, para["paragraph_text"].strip(), source, True, dict(meta))
                else:
                    bad(f"record {i}", "paragraph without 'paragraph_text'")
    elif layout == _PASSAGES:
        for i, record in enumerate(data):
            problem = _text_problem(record.get("text"), "text") if isinstance(record, dict) else "not a record"
            if problem:
                bad(f"record {i}", problem)
                continue
            record_meta = {**meta, "key": str(record["id"])} if isinstance(record.get("id"), (str, int)) else meta
            yield Document(str(record.get("title", "")), record["text"].strip(), source, True, dict(record_meta))
    else:
        records = [data] if layout == _SINGLE else data
        for i, record in enumerate(records):
            doc = _record_document(record, loader, source, {"format": "json", "record": i})
            if isinstance(doc, str):
                bad(f"record {i}", doc)
            else:
                yield doc


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) for s in value)


def _context_pairs(context: Any) -> list[tuple[Any, Any]]:
    """(title, sentences) pairs of a HotpotQA context, in either layout.

    The original files use ``[[title, [sentences]], ...]``; the Hugging Face
    export uses ``{"title": [...], "sentences": [[...], ...]}``.
    """
    if isinstance(context, dict):
        return list(zip(context.get("title", []), context.get("sentences", []), strict=False))
    return [tuple(pair) if isinstance(pair, list) and len(pair) == 2 else (None, None) for pair in context]


def _text_problem(text: Any, field_name: str) -> str | None:
    """Why a record's text field cannot make a document (warned with the record's
    number, never dropped silently), or None when it can."""
    if text is None:
        return f"no {field_name!r} field"
    if not isinstance(text, str):
        return f"{field_name!r} is not a string ({type(text).__name__})"
    if not text.strip():
        return _EMPTY_TEXT
    return None


def _record_document(record: Any, loader: LoaderSettings, source: str, meta: dict[str, Any]) -> Document | str:
    """A document from one JSON(L) record, or why the record is unusable."""
    if isinstance(record, str):
        return Document("", record, source, False, meta) if record.strip() else _EMPTY_TEXT
    if not isinstance(record, dict):
        return f"not a record or string ({type(record).__name__})"
    text = record.get(loader.text_field)
    problem = _text_problem(text, loader.text_field)
    if problem:
        return problem
    title = record.get(loader.title_field)
    record_id = record.get(loader.id_field)
    if isinstance(record_id, (str, int)) and not isinstance(record_id, bool) and str(record_id).strip():
        meta = {**meta, "key": str(record_id).strip()}
    return Document("" if title is None else str(title), text, source, False, meta)


def _read_jsonl(path: Path, text: str, loader: LoaderSettings, warn: Warn, tally: _Tally) -> Iterator[Document]:
    source = str(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            warn(f"{path}:{lineno}: invalid JSON ({exc.msg}), skipped")
            tally.bad_records += 1
            continue
        except RecursionError:
            warn(f"{path}:{lineno}: {TOO_DEEP}, skipped")
            tally.bad_records += 1
            continue
        doc = _record_document(record, loader, source, {"format": "jsonl", "line": lineno})
        if isinstance(doc, str):
            warn(f"{path}:{lineno}: {doc}, skipped")
            tally.skipped_record(doc)
        else:
            yield doc


def detect_format(path: Path, loader: LoaderSettings | None = None) -> str:
    """The format ``auto`` would read ``path`` as: one of :data:`FORMATS` but ``auto``.

    ``.jsonl`` is ``jsonl``, ``.json`` is judged by its layout, anything else
    is ``text``. Raises :class:`SourceError` for a missing or unreadable file
    and for a JSON layout we do not know.
    """
    path = Path(path)
    if not path.exists():
        raise SourceError(f"{path}: no such file or directory")
    if path.is_dir():
        raise SourceError(f"{path}: is a directory, not a file")
    kind = _file_format(path, "auto")
    if kind != "json-auto":
        return kind
    loader = loader or LoaderSettings()
    try:
        data = _parse_json(path, _read_text(path))
    except _Skip as skip:
        raise SourceError(str(skip).removesuffix(", skipped")) from None
    layout = _layout(data, loader)
    if layout is None:
        raise SourceError(_unrecognised(path, loader))
    return _AUTO_FORMAT[layout]
