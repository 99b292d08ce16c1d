"""Benchmark datasets as questions with gold answers plus a passage corpus.

Every benchmark the survey evaluates on (Zhou et al. 2025 §7.1, Table 4; ArchRAG's
Multihop-RAG, HotpotQA and NarrativeQA; LeanRAG's UltraDomain) ships in its
own layout. This module reads each native layout into one model: a list of
:class:`Question` (gold answers with aliases, gold evidence where the dataset
marks it) and a lazily read corpus of :class:`Document` passages.

Passages an expert already cut (HotpotQA, MuSiQue, 2WikiMultihopQA, PopQA,
ALCE, and the generic Corpus.jsonl) are marked ``presplit`` so chunking keeps
each one whole, as the survey does; whole documents (MultiHop-RAG articles,
QuALITY and NarrativeQA stories, UltraDomain contexts) are left to the
chunker. Passages are built exactly as :mod:`unirag.text.loaders` builds them,
so a passage has the same :attr:`Document.id` whichever way it was loaded and
``Question.evidence_ids`` can be matched against retrieved chunks' doc ids.

An evaluation over a broken file wastes hours, so unlike the indexing loaders
(which skip bad records) a missing or malformed file or field raises
:class:`SourceError` with one line naming the file, the record and the field.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from unirag.errors import ConfigError, SourceError
from unirag.text.loaders import load_documents
from unirag.text.types import Document

KINDS = ("factoid", "multiple_choice", "long_form", "abstract")
FORMATS = (
    "auto",
    "hotpotqa",
    "2wiki",
    "musique",
    "multihoprag",
    "popqa",
    "quality",
    "alce",
    "narrativeqa",
    "ultradomain",
    "generic",
)
# Dataset names that resolve to a folder of the data directory.
NAMED = {
    "hotpotqa": "hotpotqa",
    "musique": "musique",
    "2wikimultihopqa": "2wikimultihopqa",
    "2wiki": "2wikimultihopqa",
}
DESCRIPTIONS = {
    "hotpotqa": "HotpotQA (distractor setting): multi-hop Wikipedia questions; expert-split passages; "
    "evidence = supporting-fact titles",
    "2wiki": "2WikiMultihopQA: multi-hop Wikipedia questions; expert-split passages; evidence = supporting-fact titles",
    "musique": "MuSiQue: 2-4 hop composed questions; expert-split paragraphs; evidence = supporting paragraphs",
    "multihoprag": "MultiHop-RAG: multi-hop questions over news articles; evidence = article titles",
    "popqa": "PopQA: long-tail entity questions; retrieved Wikipedia passages as corpus; no gold evidence",
    "quality": "QuALITY: multiple-choice questions on long articles; evidence = the article",
    "alce": "ALCE (ASQA): ambiguous questions with long answers and short-answer sets for STR-EM; "
    "retrieved Wikipedia passages as corpus; evidence = gold Wikipedia pages",
    "narrativeqa": "NarrativeQA: free-form answers about stories; evidence = the story",
    "ultradomain": "UltraDomain: abstract questions over domain documents, judged by an LLM (no gold answers)",
    "generic": "Generic Corpus.jsonl + Question.jsonl pair",
}
_QUESTION_FILES = ("question.jsonl", "question.json", "questions.jsonl", "questions.json")
_CORPUS_WORDS = ("corpus", "unique_contexts", "documents", "summaries", "alias", "readme", "license")
_DATA_SUFFIXES = (".json", ".jsonl", ".tsv", ".csv")
_TEXT_FIELDS = ("text", "context", "body", "contents", "paragraph_text")
_QUESTION_LINE = re.compile(r"Question\s*\d+\s*[:：]\s*(.+)", re.IGNORECASE)

Record = tuple[str, Any]  # (where in the file, e.g. "question 3" / "line 4", the parsed record)
Passages = Callable[[], Iterator[Document]]


@dataclass(frozen=True)
class Question:
    """One evaluation question with its gold data.

    ``answers`` holds the gold answer first, then its aliases (empty for
    abstract questions). ``evidence`` lists gold supporting passage titles;
    ``evidence_ids`` the :attr:`Document.id` of those passages where the
    dataset gives their text (HotpotQA, 2Wiki, MuSiQue), which is exact where
    titles repeat. ``evidence_texts`` holds the gold passages' own texts where
    the dataset gives them (HotpotQA, 2Wiki, MuSiQue, generic ``Corpus.jsonl``
    titles), for grounded recall (:func:`unirag.eval.metrics.grounded_recall`).
    ``answer_sets`` is ALCE's list of short-answer groups, each of which an output
    should cover (STR-EM); see :attr:`gold_sets`.
    """

    id: str
    question: str
    answers: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    gold_choice: int | None = None
    kind: str = "factoid"
    answer_sets: list[list[str]] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    evidence_texts: list[str] = field(default_factory=list)

    @property
    def gold_sets(self) -> list[list[str]]:
        """Answer groups for set-based metrics: ``answer_sets``, else all answers as one group."""
        if self.answer_sets:
            return self.answer_sets
        return [self.answers] if self.answers else []

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict, for per-question result files."""
        return asdict(self)


_HOPS = re.compile(r"^(\d+)hop")


def question_type(question: Question) -> str | None:
    """The kind of reasoning a multi-hop question asks for, where the dataset says it:
    HotpotQA's and 2Wiki's ``type`` (bridge, comparison, ...), MuSiQue's hop count
    (``2hop``/``3hop``/``4hop``: the id's prefix, else the length of its
    ``question_decomposition``); None where the data gives none (no default type:
    a per-type table of invented types would mislead)."""
    kind = question.meta.get("type")
    if isinstance(kind, str) and kind:
        return kind
    hops = _HOPS.match(question.id)
    if hops:
        return f"{hops.group(1)}hop"
    steps = question.meta.get("question_decomposition")
    return f"{len(steps)}hop" if isinstance(steps, list) and steps else None


@dataclass
class Dataset:
    """Questions plus a way to read the corpus they are asked over.

    The corpus is read lazily by :meth:`documents` (it can be far larger than
    the questions) and is the whole corpus whatever ``limit`` was: a sample of
    questions is still asked against every passage. ``corpus_paths`` names the
    files it comes from, for messages and manifests; index via ``documents()``,
    since several layouts are not readable by ``unirag index`` directly.
    """

    name: str
    fmt: str
    questions: list[Question]
    corpus_paths: list[Path]
    description: str
    passages: Passages = field(repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.questions)

    def documents(self) -> Iterator[Document]:
        """The corpus passages in file order, each distinct passage once, empty ones dropped."""
        seen: set[str] = set()
        for doc in self.passages():
            if not doc.text.strip() or doc.id in seen:
                continue
            seen.add(doc.id)
            yield doc
        if not seen:
            raise SourceError(f"{self.name}: no passages in {', '.join(map(str, self.corpus_paths))}")


@dataclass(frozen=True)
class _Source:
    """A question file resolved to its format and its companion corpus file."""

    fmt: str
    questions: Path
    corpus: Path | None
    records: list[Record]


@dataclass(frozen=True)
class _Parsed:
    questions: Iterator[Question]
    passages: Passages
    corpus_paths: list[Path]


def default_data_dir() -> Path:
    """``../shared/datasets`` beside the repository checkout."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def load_dataset(
    name_or_path: str | Path,
    limit: int | None = None,
    fmt: str = "auto",
    data_dir: str | Path | None = None,
) -> Dataset:
    """Load a benchmark by name (``hotpotqa``, ``musique``, a folder of ``data_dir``) or path.

    A path may be a question file or a folder holding one (with its corpus
    file beside it). ``fmt`` forces a format of :data:`FORMATS`; ``auto``
    judges by file names and the first record's fields. ``limit`` keeps the
    first N questions. Raises :class:`SourceError` naming the file and field
    for anything missing or malformed.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown dataset format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive number of questions, got {limit}")
    path, name = _locate(str(name_or_path), Path(data_dir) if data_dir is not None else default_data_dir())
    source = _resolve(path, fmt)
    parsed = _PARSERS[source.fmt](source)
    questions = list(islice(parsed.questions, limit))
    if not questions:
        raise SourceError(f"{source.questions}: no questions")
    corpus = ", ".join(p.name for p in parsed.corpus_paths)
    description = (
        f"{DESCRIPTIONS[source.fmt]}. {len(questions)} questions from {source.questions.name}; corpus: {corpus}"
    )
    return Dataset(name, source.fmt, questions, parsed.corpus_paths, description, parsed.passages)


# ---------------------------------------------------------------- locating files


def _locate(name_or_path: str, data_dir: Path) -> tuple[Path, str]:
    path = Path(name_or_path)
    if path.exists():
        return path, path.stem if path.is_file() else path.name
    key = name_or_path.lower()
    folder = NAMED.get(key, name_or_path)
    if "/" not in name_or_path and (data_dir / folder).exists():
        return data_dir / folder, folder
    known = sorted(p.name for p in data_dir.iterdir() if p.is_dir()) if data_dir.is_dir() else []
    where = f"{data_dir} has {', '.join(known)}" if known else f"{data_dir} has no datasets"
    raise SourceError(f"{name_or_path}: no such file or directory, and not a dataset name ({where})")


def _resolve(path: Path, fmt: str) -> _Source:
    questions = _question_file(path) if path.is_dir() else path
    if questions.name.lower().endswith("_unique_contexts.json"):
        questions = _ultradomain_queries(questions)
    records = _records(questions, "question")
    if not records:
        raise SourceError(f"{questions}: no questions")
    if fmt == "auto":
        fmt = _sniff(questions, records)
    return _Source(fmt, questions, _companion(questions, fmt), records)


def _is_corpus_name(path: Path) -> bool:
    name = path.name.lower()
    return any(word in name for word in _CORPUS_WORDS)


def _is_query_name(path: Path) -> bool:
    """UltraDomain question files: ``<domain>_query.jsonl`` / ``.json``, LightRAG's ``<domain>_questions.txt``."""
    name = path.name.lower()
    return bool(re.search(r"_query\.jsonl?$|_questions\.txt$", name))


def _question_file(folder: Path) -> Path:
    """The one question file in ``folder``, or a one-line error saying what is there."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    by_name = {p.name.lower(): p for p in files}
    for known in ("qaps.csv", *_QUESTION_FILES, "multihoprag.json"):
        if known in by_name:
            return by_name[known]
    queries = [p for p in files if _is_query_name(p)]
    if queries:
        candidates = queries
    else:
        candidates = [
            p
            for p in files
            if (p.suffix.lower() in _DATA_SUFFIXES or "quality" in p.name.lower()) and not _is_corpus_name(p)
        ]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        names = ", ".join(p.name for p in candidates)
        raise SourceError(f"{folder}: several question files ({names}); pass one of them")
    corpora = [p.name for p in files if _is_corpus_name(p)]
    found = f" (only corpus files: {', '.join(corpora)})" if corpora else ""
    raise SourceError(f"{folder}: no question file found{found}")


def _domain(path: Path) -> str:
    """UltraDomain's domain from a file name: ``cs_query.jsonl`` -> ``cs``."""
    return re.sub(r"_(query|questions|unique_contexts)$", "", path.stem, flags=re.IGNORECASE)


def _ultradomain_queries(contexts: Path) -> Path:
    domain = _domain(contexts)
    for suffix in ("_query.jsonl", "_query.json", "_questions.txt"):
        candidate = contexts.with_name(domain + suffix)
        if candidate.is_file():
            return candidate
    raise SourceError(f"{contexts}: no question file beside it ({domain}_query.jsonl or {domain}_questions.txt)")


def _companion(questions: Path, fmt: str) -> Path | None:
    """The corpus file that goes with a question file, if there is one."""
    folder = questions.parent
    siblings = {p.name.lower(): p for p in folder.iterdir() if p.is_file()}
    if fmt == "narrativeqa" and questions.suffix.lower() == ".csv":
        return None  # the official layout: summaries.csv and tmp/*.content, found by _narrativeqa_csv
    if fmt == "ultradomain":
        return siblings.get(f"{_domain(questions)}_unique_contexts.json".lower())
    names = [f"{questions.stem}_corpus.json", f"{questions.stem}_corpus.jsonl"]
    if fmt in ("generic", "multihoprag"):
        names += ["corpus.jsonl", "corpus.json"]
    for name in names:
        if name.lower() in siblings:
            return siblings[name.lower()]
    if fmt in ("hotpotqa", "2wiki", "musique", "popqa"):
        corpora = [p for p in siblings.values() if "corpus" in p.name.lower() and p.suffix.lower() in _DATA_SUFFIXES]
        if len(corpora) == 1:
            return corpora[0]
    return None


def _require_corpus(source: _Source, expected: str) -> Path:
    if source.corpus is None:
        raise SourceError(f"{source.questions}: no corpus file beside it (expected {expected})")
    return source.corpus


def _sniff(path: Path, records: list[Record]) -> str:
    """The format of a question file, from its name and its first record's fields."""
    name = path.name.lower()
    flat = re.sub(r"[^a-z0-9]", "", name)
    if name == "qaps.csv":
        return "narrativeqa"
    if "multihoprag" in flat:
        return "multihoprag"
    if _is_query_name(path):
        return "ultradomain"
    if name in _QUESTION_FILES:
        return "generic"
    where, first = records[0]
    if isinstance(first, str):
        return "ultradomain"  # bare question strings: abstract questions without gold answers
    if not isinstance(first, dict):
        raise SourceError(f"{path}: {where} is a {type(first).__name__}, not a question record")
    keys = set(first)
    if "paragraphs" in keys:
        return "musique"
    if {"input", "context"} <= keys:
        return "ultradomain"
    if "question" in keys and "context" in keys:
        is_2wiki = "evidences" in keys or "2wiki" in flat or "2wiki" in path.parent.name.lower()
        return "2wiki" if is_2wiki else "hotpotqa"
    if "evidence_list" in keys:
        return "multihoprag"
    if {"article", "questions"} <= keys:
        return "quality"
    if "qa_pairs" in keys:
        return "alce"
    if "possible_answers" in keys or "ctxs" in keys:
        return "popqa"
    if keys & {"document", "document_id", "answer1"}:
        return "narrativeqa"
    if "question" in keys or "query" in keys:
        return "generic"
    fields = ", ".join(sorted(map(str, keys))[:8])
    raise SourceError(f"{path}: unrecognised question layout ({where} has fields {fields}); pass fmt=")


# ---------------------------------------------------------------- reading records


def _read_text(path: Path, errors: str = "strict") -> str:
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig", errors=errors)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    if not text.strip():
        raise SourceError(f"{path}: empty file")
    return text


def _records(path: Path, noun: str, mapping: bool = False) -> list[Record]:
    """The records of a JSON list, JSON Lines, CSV/TSV or text file, each with where it is.

    Files without a known suffix (QuALITY's ``.dev``) are read as JSON Lines,
    and a ``.json`` file that is really JSON Lines is read as such. With
    ``mapping`` a JSON object ``{title: text or [sentences]}`` gives one
    ``{"title", "text"}`` record per entry (HotpotQA's corpus layout).
    """
    text = _read_text(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return _csv_records(path, text, "\t" if suffix == ".tsv" else ",")
    if suffix == ".txt":
        return [(f"line {n}", line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if suffix != ".json":
        return _jsonl_records(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return _jsonl_records(path, text)
        raise SourceError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if isinstance(data, dict):
        if mapping:
            return [(f"{noun} {title!r}", {"title": title, "text": _joined(value)}) for title, value in data.items()]
        data = [data]
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON list of {noun}s, found a {type(data).__name__}")
    return [(f"{noun} {i}", record) for i, record in enumerate(data)]


def _joined(value: Any) -> Any:
    """A passage's text from a string or a list of sentences (HotpotQA keeps their spacing)."""
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return "".join(value)
    return value


def _jsonl_records(path: Path, text: str) -> list[Record]:
    records: list[Record] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise SourceError(f"{path}: line {n}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    return records


def _csv_records(path: Path, text: str, delimiter: str) -> list[Record]:
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return [(f"line {reader.line_num}", row) for row in reader]
    except csv.Error as exc:
        raise SourceError(f"{path}: line {reader.line_num}: malformed {path.suffix[1:].upper()} ({exc})") from None


def _get(
    path: Path, where: str, record: Any, *keys: str, kind: type | tuple[type, ...] = str, required: bool = True
) -> Any:
    """The first of ``keys`` that ``record`` has (not null or empty), checked to be a ``kind``."""
    if not isinstance(record, dict):
        raise SourceError(f"{path}: {where} is a {type(record).__name__}, not a record")
    for key in keys:
        value = record.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, kind):
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise SourceError(f"{path}: {where}: {key!r} should be a {expected}, found a {type(value).__name__}")
        return value
    if required:
        others = f" (or {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else ""
        raise SourceError(f"{path}: {where} has no {keys[0]!r}{others}")
    return None


def _strings(path: Path, where: str, key: str, value: Any) -> list[str]:
    """A string, number or list of them (or of ``{"text": ...}``) as a list of strings."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("text")
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            raise SourceError(f"{path}: {where}: {key!r} holds a {type(item).__name__}, expected strings")
        out.append(item)
    return out


def _unique(values: Iterable[str]) -> list[str]:
    """Stripped, non-empty, first occurrence kept."""
    seen: dict[str, None] = {}
    for value in values:
        value = value.strip()
        if value and value not in seen:
            seen[value] = None
    return list(seen)


def _answers(path: Path, where: str, key: str, *groups: list[str]) -> list[str]:
    answers = _unique(a for group in groups for a in group)
    if not answers:
        raise SourceError(f"{path}: {where} has an empty {key!r}")
    return answers


def _strict(message: str) -> None:
    """``warn`` for :func:`load_documents`: a skipped record is an error here."""
    raise SourceError(message.removesuffix(", skipped"))


def _passages_file(
    path: Path, fmt: str, presplit: bool, meta_keys: tuple[str, ...] = ("id", "doc_id")
) -> Iterator[Document]:
    """Passages of a corpus file: {title: text} map, list of strings, or records with title + text."""
    for where, record in _records(path, "passage", mapping=True):
        if isinstance(record, str):
            yield Document("", record.strip(), str(path), presplit, {"format": fmt})
            continue
        text = _get(path, where, record, *_TEXT_FIELDS)
        title = record.get("title")
        meta = {"format": fmt} | {k: record[k] for k in meta_keys if k in record}
        yield Document("" if title is None else str(title), text.strip(), str(path), presplit, meta)


# ---------------------------------------------------------------- HotpotQA and 2WikiMultihopQA


def _context(path: Path, where: str, record: dict[str, Any], fmt: str) -> dict[str, str]:
    """{title: passage text} of a HotpotQA-style context, native or Hugging Face layout."""
    context = _get(path, where, record, "context", kind=(list, dict))
    if isinstance(context, dict):
        pairs = list(zip(context.get("title", []), context.get("sentences", []), strict=False))
    else:
        pairs = [tuple(p) if isinstance(p, list) and len(p) == 2 else (None, None) for p in context]
    out: dict[str, str] = {}
    for title, sentences in pairs:
        if not isinstance(title, str) or not (
            isinstance(sentences, list) and all(isinstance(s, str) for s in sentences)
        ):
            raise SourceError(f"{path}: {where}: 'context' entry is not [title, [sentences]]")
        out.setdefault(title, _sentences(sentences, fmt).strip())
    return out


def _sentences(sentences: list[str], fmt: str) -> str:
    """A passage's text from its sentences.

    HotpotQA sentences carry their own leading spaces, so they are
    concatenated, exactly as :mod:`unirag.text.loaders` does (same ids).
    2Wiki sentences may lack them, so a space goes where neither side has one.
    """
    if fmt == "hotpotqa":
        return "".join(sentences)
    text = ""
    for sentence in sentences:
        glue = "" if not text or text[-1].isspace() or sentence[:1].isspace() else " "
        text += glue + sentence
    return text


def _supporting_titles(path: Path, where: str, record: dict[str, Any]) -> list[str]:
    facts = record.get("supporting_facts")
    if facts is None:
        return []
    if isinstance(facts, dict):  # Hugging Face layout: {"title": [...], "sent_id": [...]}
        titles = facts.get("title", [])
    elif isinstance(facts, list):
        titles = [f[0] if isinstance(f, list) and f else None for f in facts]
    else:
        titles = [None]
    if not all(isinstance(t, str) for t in titles):
        raise SourceError(f"{path}: {where}: 'supporting_facts' entry is not [title, sentence index]")
    return _unique(titles)


def _wiki_aliases(questions: Path) -> dict[str, list[str]]:
    """2Wiki's ``id_aliases.json`` beside the questions: answer entity id -> aliases and demonyms."""
    aliases_file = questions.parent / "id_aliases.json"
    if not aliases_file.is_file():
        return {}
    out: dict[str, list[str]] = {}
    for where, record in _records(aliases_file, "alias"):
        qid = _get(aliases_file, where, record, "Q_id")
        names = [*(record.get("aliases") or []), *(record.get("demonyms") or [])]
        out[qid] = _strings(aliases_file, where, "aliases", names)
    return out


def _context_questions(source: _Source) -> _Parsed:
    path, fmt = source.questions, source.fmt
    aliases = _wiki_aliases(path) if fmt == "2wiki" else {}

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "question")
            answer = _strings(path, where, "answer", _get(path, where, record, "answer", kind=(str, int, float, list)))
            passages = _context(path, where, record, fmt)
            titles = _supporting_titles(path, where, record)
            extra = aliases.get(str(record.get("answer_id")), [])
            meta = {k: record[k] for k in ("type", "level", "evidences", "supporting_facts") if k in record}
            yield Question(
                id=str(record.get("_id") or record.get("id") or f"{path.stem}-{i}"),
                question=text.strip(),
                answers=_answers(path, where, "answer", answer, extra),
                evidence=titles,
                evidence_ids=[Document(t, passages[t], "").id for t in titles if t in passages],
                kind="factoid",
                meta=meta,
                evidence_texts=[passages[t] for t in titles if t in passages],
            )

    def passages() -> Iterator[Document]:
        if source.corpus is not None:
            yield from load_documents([source.corpus], presplit="always", warn=_strict)
            return
        for where, record in source.records:
            for title, text in _context(path, where, record, fmt).items():
                yield Document(title, text, str(path), True, {"format": fmt})

    return _Parsed(questions(), passages, [source.corpus or path])


# ---------------------------------------------------------------- MuSiQue


def _musique(source: _Source) -> _Parsed:
    path = source.questions

    def paragraphs(where: str, record: Any) -> Iterator[tuple[Document, bool]]:
        for j, para in enumerate(_get(path, where, record, "paragraphs", kind=list)):
            text = _get(path, f"{where} paragraph {j}", para, "paragraph_text")
            doc = Document(str(para.get("title", "")), text.strip(), str(path), True, {"format": "musique"})
            yield doc, bool(para.get("is_supporting"))

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "question")
            answer = _strings(path, where, "answer", _get(path, where, record, "answer", kind=(str, int, float)))
            aliases = _strings(path, where, "answer_aliases", record.get("answer_aliases") or [])
            support = [doc for doc, supporting in paragraphs(where, record) if supporting]
            meta = {k: record[k] for k in ("answerable", "question_decomposition") if k in record}
            yield Question(
                id=str(record.get("id") or f"{path.stem}-{i}"),
                question=text.strip(),
                answers=_answers(path, where, "answer", answer, aliases),
                evidence=_unique(d.title for d in support),
                evidence_ids=_unique(d.id for d in support),
                kind="factoid",
                meta=meta,
                evidence_texts=_unique(d.text for d in support),
            )

    def passages() -> Iterator[Document]:
        if source.corpus is not None:
            yield from load_documents([source.corpus], presplit="always", warn=_strict)
            return
        for where, record in source.records:
            yield from (doc for doc, _ in paragraphs(where, record))

    return _Parsed(questions(), passages, [source.corpus or path])


# ---------------------------------------------------------------- MultiHop-RAG


def _multihoprag(source: _Source) -> _Parsed:
    path, corpus = source.questions, _require_corpus(source, "corpus.json")

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "query", "question")
            answer = _strings(path, where, "answer", _get(path, where, record, "answer", kind=(str, int, float)))
            evidence = _get(path, where, record, "evidence_list", kind=list, required=False) or []
            if not all(isinstance(e, dict) for e in evidence):
                raise SourceError(f"{path}: {where}: 'evidence_list' entry is not a record")
            yield Question(
                id=str(record.get("id") or f"multihoprag-{i}"),
                question=text.strip(),
                answers=_answers(path, where, "answer", answer),
                evidence=_unique(str(e.get("title", "")) for e in evidence),
                kind="factoid",
                meta={"question_type": record.get("question_type"), "facts": [e.get("fact") for e in evidence]},
            )

    def passages() -> Iterator[Document]:
        for where, record in _records(corpus, "article"):
            title = _get(corpus, where, record, "title")
            body = _get(corpus, where, record, "body", "text")
            meta = {"format": "multihoprag"} | {
                k: record[k] for k in ("source", "published_at", "category", "url", "author") if k in record
            }
            yield Document(title.strip(), body.strip(), str(corpus), False, meta)

    return _Parsed(questions(), passages, [corpus])


# ---------------------------------------------------------------- PopQA


def _popqa(source: _Source) -> _Parsed:
    path = source.questions
    inline = any(isinstance(r, dict) and "ctxs" in r for _, r in source.records)
    if not inline:
        _require_corpus(source, f"{path.stem}_corpus.jsonl, or 'ctxs' in the questions")

    def answers(where: str, record: dict[str, Any]) -> list[str]:
        raw = _get(path, where, record, "possible_answers", "answers", kind=(str, list))
        if isinstance(raw, str) and "possible_answers" in record:
            try:
                raw = json.loads(raw)  # the TSV release stores a JSON list as a string
            except json.JSONDecodeError:
                raise SourceError(f"{path}: {where}: 'possible_answers' is not a JSON list") from None
        main = [record["obj"]] if isinstance(record.get("obj"), str) else []
        return _answers(path, where, "possible_answers", main, _strings(path, where, "possible_answers", raw))

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "question")
            meta = {k: record[k] for k in ("subj", "prop", "s_wiki_title", "s_pop", "pop") if k in record}
            yield Question(
                id=str(record.get("id") or f"popqa-{i}"),
                question=text.strip(),
                answers=answers(where, record),
                kind="factoid",
                meta=meta,
            )

    return _Parsed(questions(), _retrieved_passages(source, "popqa", "ctxs", "ctx"), [source.corpus or path])


def _retrieved_passages(source: _Source, fmt: str, field: str, label: str) -> Callable[[], Iterator[Document]]:
    """Passages of a dataset that ships each question's retrieved documents (PopQA ``ctxs``,
    ASQA ``docs``), each one pre-split passage; a companion corpus file replaces them."""
    path = source.questions

    def passages() -> Iterator[Document]:
        if source.corpus is not None:
            yield from _passages_file(source.corpus, fmt, presplit=True)
            return
        for where, record in source.records:
            for j, doc in enumerate(_get(path, where, record, field, kind=list, required=False) or []):
                text = _get(path, f"{where} {label} {j}", doc, "text")
                meta = {"format": fmt} | ({"id": doc["id"]} if "id" in doc else {})
                yield Document(str(doc.get("title", "")), text.strip(), str(path), True, meta)

    return passages


# ---------------------------------------------------------------- QuALITY


def _quality(source: _Source) -> _Parsed:
    path = source.questions

    def article(where: str, record: Any) -> tuple[str, str, str]:
        article_id = str(_get(path, where, record, "article_id", kind=(str, int)))
        return article_id, _get(path, where, record, "title").strip(), _get(path, where, record, "article")

    def questions() -> Iterator[Question]:
        for where, record in source.records:
            article_id, title, _ = article(where, record)
            for j, item in enumerate(_get(path, where, record, "questions", kind=list)):
                at = f"{where} question {j}"
                text = _get(path, at, item, "question")
                options = _strings(path, at, "options", _get(path, at, item, "options", kind=list))
                if item.get("gold_label") is None:
                    raise SourceError(f"{path}: {at} has no 'gold_label' (QuALITY's test split has none; use dev)")
                gold = _get(path, at, item, "gold_label", kind=int)
                if not 1 <= gold <= len(options):
                    raise SourceError(f"{path}: {at}: 'gold_label' {gold} is not in 1..{len(options)}")
                yield Question(
                    id=str(item.get("question_unique_id") or f"{article_id}-{j}"),
                    question=text.strip(),
                    answers=[options[gold - 1].strip()],
                    evidence=[title],
                    choices=options,
                    gold_choice=gold - 1,
                    kind="multiple_choice",
                    meta={
                        "article_id": article_id,
                        "difficult": item.get("difficult"),
                        "set_unique_id": record.get("set_unique_id"),
                    },
                )

    def passages() -> Iterator[Document]:
        seen: set[str] = set()
        for where, record in source.records:
            article_id, title, text = article(where, record)
            if article_id not in seen:
                seen.add(article_id)
                yield Document(title, text.strip(), str(path), False, {"format": "quality", "article_id": article_id})

    return _Parsed(questions(), passages, [path])


# ---------------------------------------------------------------- ALCE (ASQA)


def _alce(source: _Source) -> _Parsed:
    path = source.questions
    if source.corpus is None and not any(isinstance(r, dict) and r.get("docs") for _, r in source.records):
        raise SourceError(f"{path}: no 'docs' in the questions and no corpus file beside them")

    def long_answer(where: str, record: dict[str, Any]) -> str:
        answer = _get(path, where, record, "answer", required=False)
        if answer is None:  # the raw ASQA release keeps long answers under annotations
            notes = record.get("annotations") or []
            answer = next((n.get("long_answer") for n in notes if isinstance(n, dict) and n.get("long_answer")), None)
        if not isinstance(answer, str) or not answer.strip():
            raise SourceError(f"{path}: {where} has no 'answer' (or 'annotations' long_answer)")
        return answer.strip()

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "question")
            sets, pages, subquestions = [], [], []
            for j, pair in enumerate(_get(path, where, record, "qa_pairs", kind=list)):
                at = f"{where} qa_pair {j}"
                shorts = _get(path, at, pair, "short_answers", kind=list)
                sets.append(_unique(_strings(path, at, "short_answers", shorts)))
                pages.append(str(pair.get("wikipage") or ""))
                subquestions.append(pair.get("question"))
            pages += [str(p.get("title", "")) for p in record.get("wikipages") or [] if isinstance(p, dict)]
            yield Question(
                id=str(record.get("sample_id") or record.get("id") or f"asqa-{i}"),
                question=text.strip(),
                answers=[long_answer(where, record)],
                evidence=_unique(pages),
                kind="long_form",
                answer_sets=sets,
                meta={"sub_questions": subquestions},
            )

    return _Parsed(questions(), _retrieved_passages(source, "alce", "docs", "doc"), [source.corpus or path])


# ---------------------------------------------------------------- NarrativeQA


def _narrativeqa(source: _Source) -> _Parsed:
    if source.questions.suffix.lower() == ".csv":
        return _narrativeqa_csv(source)
    return _narrativeqa_jsonl(source)


def _narrativeqa_answers(path: Path, where: str, record: dict[str, Any]) -> list[str]:
    if record.get("answers") is not None:
        raw = _get(path, where, record, "answers", kind=(str, list))
        return _answers(path, where, "answers", _strings(path, where, "answers", raw))
    pair = [record.get("answer1") or "", record.get("answer2") or ""]
    if not any(isinstance(a, str) and a.strip() for a in pair):
        raise SourceError(f"{path}: {where} has no 'answers' (or 'answer1')")
    return _answers(path, where, "answer1", _strings(path, where, "answer1", pair))


def _narrativeqa_csv(source: _Source) -> _Parsed:
    """The official release: qaps.csv, documents.csv, summaries.csv, and stories in tmp/<id>.content."""
    path, root = source.questions, source.questions.parent
    titles: dict[str, str] = {}
    if (root / "documents.csv").is_file():
        for where, row in _records(root / "documents.csv", "document"):
            titles[_get(root / "documents.csv", where, row, "document_id")] = (row.get("wiki_title") or "").strip()
    summary_file = next(
        (p for p in (root / "summaries.csv", root / "third_party" / "wikipedia" / "summaries.csv") if p.is_file()), None
    )
    summaries: dict[str, str] = {}
    if summary_file is not None:
        for where, row in _records(summary_file, "summary"):
            summaries[_get(summary_file, where, row, "document_id")] = _get(summary_file, where, row, "summary")
    order: dict[str, None] = {}
    for where, row in source.records:
        doc_id = _get(path, where, row, "document_id")
        if doc_id not in order and doc_id not in summaries and not (root / "tmp" / f"{doc_id}.content").is_file():
            raise SourceError(
                f"{path}: {where}: no text for document {doc_id} (neither tmp/{doc_id}.content nor summaries.csv)"
            )
        order.setdefault(doc_id, None)

    def title(doc_id: str) -> str:
        return titles.get(doc_id) or doc_id

    def questions() -> Iterator[Question]:
        per_doc: dict[str, int] = {}
        for where, row in source.records:
            doc_id = row["document_id"]
            n = per_doc[doc_id] = per_doc.get(doc_id, -1) + 1
            yield Question(
                id=f"{doc_id}-{n}",
                question=_get(path, where, row, "question").strip(),
                answers=_narrativeqa_answers(path, where, row),
                evidence=[title(doc_id)],
                kind="long_form",
                meta={"document_id": doc_id, "split": row.get("set")},
            )

    def passages() -> Iterator[Document]:
        for doc_id in order:
            story = root / "tmp" / f"{doc_id}.content"
            if story.is_file():  # scraped web pages: a stray byte must not lose the story
                text, origin, part = _read_text(story, errors="replace"), story, "story"
            else:
                text, origin, part = summaries[doc_id], summary_file, "summary"
            meta = {"format": "narrativeqa", "document_id": doc_id, "part": part}
            yield Document(title(doc_id), text.strip(), str(origin), False, meta)

    paths = [p for p in (root / "tmp", summary_file) if p is not None and p.exists()]
    return _Parsed(questions(), passages, paths)


def _narrativeqa_jsonl(source: _Source) -> _Parsed:
    """One question a line: Hugging Face's nested layout or a flat one (see the module's docs)."""
    path = source.questions

    def document(where: str, record: Any) -> tuple[str, str, str]:
        """(id, title, text: the story, else the summary, else "") of a record's document."""
        doc = _get(path, where, record, "document", kind=dict, required=False)
        if doc is None:  # flat layout: document_id, title, text / summary on the record itself
            doc, doc_id = record, _get(path, where, record, "document_id", kind=(str, int))
        else:
            doc_id = _get(path, f"{where} document", doc, "id", kind=(str, int))
        summary = doc.get("summary")
        summary_text = summary.get("text") if isinstance(summary, dict) else summary
        summary_title = summary.get("title") if isinstance(summary, dict) else None
        doc_title = doc.get("title") or summary_title or str(doc_id)
        text = doc.get("text") or doc.get("story") or summary_text or ""
        if not isinstance(text, str) or not isinstance(doc_title, str):
            raise SourceError(f"{path}: {where}: document text and title should be strings")
        return str(doc_id), doc_title.strip(), text

    def questions() -> Iterator[Question]:
        per_doc: dict[str, int] = {}
        for where, record in source.records:
            question = _get(path, where, record, "question", kind=(str, dict))
            text = question.get("text") if isinstance(question, dict) else question
            if not isinstance(text, str) or not text.strip():
                raise SourceError(f"{path}: {where} has no 'question' text")
            doc_id, title, body = document(where, record)
            if not body.strip() and source.corpus is None:
                raise SourceError(f"{path}: {where} has no document 'text' (or 'summary') and there is no corpus file")
            n = per_doc[doc_id] = per_doc.get(doc_id, -1) + 1
            qid = record.get("id") or record.get("question_id") or f"{doc_id}-{n}"
            yield Question(
                id=str(qid),
                question=text.strip(),
                answers=_narrativeqa_answers(path, where, record),
                evidence=[title],
                kind="long_form",
                meta={"document_id": doc_id},
            )

    def passages() -> Iterator[Document]:
        if source.corpus is not None:
            yield from _passages_file(source.corpus, "narrativeqa", presplit=False, meta_keys=("document_id", "id"))
            return
        seen: set[str] = set()
        for where, record in source.records:
            doc_id, title, body = document(where, record)
            if doc_id not in seen:
                seen.add(doc_id)
                yield Document(title, body.strip(), str(path), False, {"format": "narrativeqa", "document_id": doc_id})

    return _Parsed(questions(), passages, [source.corpus or path])


# ---------------------------------------------------------------- UltraDomain


def _ultradomain(source: _Source) -> _Parsed:
    """``<domain>_unique_contexts.json`` with ``<domain>_query.jsonl``, or the raw ``<domain>.jsonl``.

    The raw release's records carry ``input`` (the question), ``context`` (a
    whole document) and reference ``answers``; LightRAG-style pipelines split
    it into unique contexts and queries. Either way the questions are judged
    by an LLM, so they are ``abstract`` with no gold answers; any reference
    answers are kept in ``meta``.
    """
    path, domain = source.questions, _domain(source.questions)
    raw = any(isinstance(r, dict) and "context" in r for _, r in source.records)
    if not raw:
        _require_corpus(source, f"{domain}_unique_contexts.json")
    records = source.records
    if path.suffix.lower() == ".txt":  # LightRAG writes "- Question 3: ..." among user/task lines
        matches = [(w, m.group(1).strip("* ")) for w, line in records if (m := _QUESTION_LINE.search(line))]
        records = matches or records

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(records):
            if isinstance(record, str):
                text, qid, meta = record, None, {}
            else:
                text = _get(path, where, record, "query", "question", "input")
                qid = record.get("id") or record.get("_id")
                meta = {"reference_answers": record["answers"]} if "answers" in record else {}
            yield Question(
                id=str(qid or f"{domain}-{i}"), question=text.strip(), kind="abstract", meta={"domain": domain} | meta
            )

    def passages() -> Iterator[Document]:
        if source.corpus is not None:
            yield from _passages_file(source.corpus, "ultradomain", presplit=False)
            return
        for where, record in source.records:
            text = _get(path, where, record, "context")
            yield Document("", text.strip(), str(path), False, {"format": "ultradomain"})

    return _Parsed(questions(), passages, [source.corpus or path])


# ---------------------------------------------------------------- generic pair


def _generic(source: _Source) -> _Parsed:
    """``Question.jsonl`` ({"id", "question", "answer", "evidence"?, ...}) beside ``Corpus.jsonl`` ({"title", "text"})."""
    path, corpus = source.questions, _require_corpus(source, "Corpus.jsonl")
    known = {
        "id",
        "_id",
        "question",
        "query",
        "answer",
        "answers",
        "aliases",
        "evidence",
        "choices",
        "options",
        "gold_choice",
        "kind",
    }

    texts: dict[str, str] = {}
    scanned: list[bool] = []

    def passage_texts(titles: list[str]) -> list[str]:
        """The corpus texts of ``titles`` (for grounded recall), scanned once when a question
        first names evidence. A malformed passage is skipped here: reading the corpus for
        indexing (:func:`_passages_file`) reports it, with its line."""
        if titles and not scanned:
            scanned.append(True)
            for _, record in _records(corpus, "passage", mapping=True):
                if not isinstance(record, dict) or not isinstance(record.get("title"), str):
                    continue
                text = next((v for k in _TEXT_FIELDS if isinstance(v := record.get(k), str) and v.strip()), None)
                if text is not None:
                    texts.setdefault(record["title"], text.strip())
        return [texts[t] for t in titles if t in texts]

    def questions() -> Iterator[Question]:
        for i, (where, record) in enumerate(source.records):
            text = _get(path, where, record, "question", "query")
            choices = _strings(
                path, where, "choices", _get(path, where, record, "choices", "options", kind=list, required=False) or []
            )
            kind = _get(path, where, record, "kind", required=False) or ("multiple_choice" if choices else "factoid")
            if kind not in KINDS:
                raise SourceError(f"{path}: {where}: 'kind' {kind!r} is not one of {', '.join(KINDS)}")
            raw = _get(
                path, where, record, "answer", "answers", kind=(str, int, float, list), required=kind != "abstract"
            )
            answers: list[str] = []
            if raw is not None:
                aliases = _strings(path, where, "aliases", record.get("aliases") or [])
                answers = _answers(path, where, "answer", _strings(path, where, "answer", raw), aliases)
            gold = _get(path, where, record, "gold_choice", kind=int, required=False)
            if gold is None and choices and answers and answers[0] in choices:
                gold = choices.index(answers[0])
            if gold is not None and not 0 <= gold < len(choices):
                raise SourceError(f"{path}: {where}: 'gold_choice' {gold} is not an index of 'choices'")
            evidence = record.get("evidence") or []
            evidence = [
                e.get("title", "") if isinstance(e, dict) else e
                for e in (evidence if isinstance(evidence, list) else [evidence])
            ]
            titles = _unique(_strings(path, where, "evidence", evidence))
            yield Question(
                id=str(record.get("id") or record.get("_id") or f"{path.stem}-{i}"),
                question=text.strip(),
                answers=answers,
                evidence=titles,
                choices=choices,
                gold_choice=gold,
                kind=kind,
                meta={k: v for k, v in record.items() if k not in known},
                evidence_texts=passage_texts(titles),
            )

    def passages() -> Iterator[Document]:
        yield from _passages_file(corpus, "generic", presplit=True)

    return _Parsed(questions(), passages, [corpus])


_PARSERS: dict[str, Callable[[_Source], _Parsed]] = {
    "hotpotqa": _context_questions,
    "2wiki": _context_questions,
    "musique": _musique,
    "multihoprag": _multihoprag,
    "popqa": _popqa,
    "quality": _quality,
    "alce": _alce,
    "narrativeqa": _narrativeqa,
    "ultradomain": _ultradomain,
    "generic": _generic,
}
