"""Turn a model's extraction reply into per-chunk mentions, never trusting its shape.

Small models (the embedded SmolLM2-135M above all) rarely return the JSON the
``extract_graph`` prompt asks for: they wrap it in prose or code fences, stop
mid-record at ``max_tokens``, rename keys, switch to GraphRAG's tuple format,
put relationships in the entity list, or answer with prose only. Every reply
is model output, so nothing here may raise on it: what is valid is salvaged,
what is not is dropped, and every drop or repair is counted under a named
reason so a build report can say how much of the extraction was usable.

Counted reasons (keys of the ``dropped`` counters):

* per chunk, dropped: ``empty_name``, ``name_too_long``, ``missing_endpoint``,
  ``self_loop``, ``truncated_record`` (the record cut by ``max_tokens`` lost a
  required field), ``missing_subject`` (claims);
* per chunk, repaired and kept: ``repaired_strength``, ``implicit_entity``,
  ``duplicate_entity``, ``duplicate_relation``, ``duplicate_claim``,
  ``misplaced_record`` (a relationship in the entity list or vice versa);
* whole reply: ``no_records``, ``unknown_passage``, ``unrecognised_record``,
  ``unrequested_claim``, ``repaired_json`` (syntax fixed by json_repair),
  ``truncated_json`` (the reply ended inside the JSON).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unirag.graph.types import (
    ChunkExtraction,
    ClaimMention,
    EntityMention,
    RelationMention,
)
from unirag.text.replies import repair_json, strip_think

MAX_NAME_LENGTH = 120
# Deeper nesting than this is never an extraction; refusing it early keeps the
# stdlib decoder and json_repair (both recursive) away from RecursionError.
_MAX_DEPTH = 32
# clean_name peels one layer (quotes, markdown, a bracket pair, punctuation)
# per round; real names need two or three, and the cap bounds the work.
_CLEAN_ROUNDS = 8

_JSON_START = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()
# Characters a JSON value can end with: where prose may start after valid JSON.
_COMPLETE_VALUE_END = frozenset('"]}0123456789el')

_ENTITY_LISTS = frozenset({"entities", "entity", "nodes", "node", "entity_list"})
_RELATION_LISTS = frozenset(
    {"relationships", "relationship", "relations", "relation", "edges", "edge", "links", "relationship_list"}
)
_CLAIM_LISTS = frozenset({"claims", "claim", "covariates"})

_PASSAGE_KEYS = ("passage", "passage_id", "passage_label", "chunk", "chunk_id", "source_passage", "p")
_NAME_KEYS = ("name", "entity_name", "entity", "title", "entity_title")
_TYPE_KEYS = ("type", "entity_type", "category", "label")
_DESCRIPTION_KEYS = ("description", "desc", "entity_description", "relationship_description", "summary")
_SOURCE_KEYS = ("source", "src", "source_entity", "head", "from", "source_name")
_TARGET_KEYS = ("target", "tgt", "target_entity", "tail", "to", "target_name")
_RELATION_KEYS = (
    "relation",
    "relation_name",
    "relationship",
    "predicate",
    "relation_type",
    "relationship_type",
    "type",
    "label",
)
_KEYWORD_KEYS = ("keywords", "relationship_keywords", "keyword", "tags")
_STRENGTH_KEYS = ("strength", "weight", "score", "relationship_strength")
_SUBJECT_KEYS = ("subject", "subject_entity", "claim_subject")
_OBJECT_KEYS = ("object", "object_entity", "claim_object")
_CLAIM_TYPE_KEYS = ("type", "claim_type")
_STATUS_KEYS = ("status", "claim_status")
_DATE_KEYS = ("date", "claim_date", "start_date", "time")
_CLAIM_DESCRIPTION_KEYS = ("description", "claim_description", "desc")

# GraphRAG / LightRAG tuple records: a tag, then a delimiter, then fields.
_TUPLE_RECORD = re.compile(
    r"""^[\s\-*•>]*(?P<paren>\()?\s*(?P<quote>["'`])?
    (?P<tag>entity|entities|node|relationship|relationships|relation|relations|edge|claim|claims)
    ["'`]?\s*(?P<delim><\|\#\|>|<\|>|\||;|\t|,)""",
    re.IGNORECASE | re.VERBOSE,
)
_TUPLE_SPLIT = re.compile(r"##|\n|<\|COMPLETE\|>", re.IGNORECASE)
_TAGS = {
    "entity": "entity",
    "entities": "entity",
    "node": "entity",
    "relationship": "relationship",
    "relationships": "relationship",
    "relation": "relationship",
    "relations": "relationship",
    "edge": "relationship",
    "claim": "claim",
    "claims": "claim",
}

_HEADER_WORDS = frozenset({"name", "entity", "entity_name", "entity name", "source", "subject"})
_PASSAGE_LABEL = re.compile(r"(?:p(?:assage)?[\s_#\-]*)?(\d{1,6})", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_FRACTION = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:/|out of)\s*(\d+(?:\.\d*)?)", re.IGNORECASE)
_STRENGTH_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*(?:/|out of)\s*\d+(?:\.\d*)?)?")
_STRENGTH_WORDS = {
    "very high": 10.0,
    "very strong": 10.0,
    "high": 8.0,
    "strong": 8.0,
    "medium": 5.0,
    "moderate": 5.0,
    "low": 2.0,
    "weak": 2.0,
    "very low": 1.0,
    "very weak": 1.0,
}
_CLAIM_STATUSES = frozenset({"TRUE", "FALSE", "SUSPECTED"})
_NO_OBJECT = frozenset({"NONE", "N/A", "NA", "NULL", "UNKNOWN"})

_QUOTES = "\"'`“”‘’«»„"
_LEADING_MARKS = _QUOTES + "*_~#"
_TRAILING_MARKS = _QUOTES + "*_~"
# "!" and "?" are kept: they end real names ("Yahoo!", "Jeopardy!") far more
# often than a model appends them by mistake.
_TRAILING_PUNCT = ".,;:"
_BULLET = re.compile(r"^(?:[-*•+>]\s+|\d{1,3}[.)]\s+)")
_OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSERS = {close: open_ for open_, close in _OPENERS.items()}



@dataclass
class ParseResult:
    """Mentions per chunk, and what could not be pinned to any one chunk."""

    extractions: dict[str, ChunkExtraction]
    dropped: Counter[str] = field(default_factory=Counter)

    def total_dropped(self) -> Counter[str]:
        """Reply-wide and per-chunk reasons together, for one line in a build report."""
        total = Counter(self.dropped)
        for extraction in self.extractions.values():
            total.update(extraction.dropped)
        return total


@dataclass
class _Record:
    """One candidate record before validation, keys already normalised.

    ``kind`` is what the record is taken to be; ``passage`` is its own passage
    field or the one inherited from an enclosing per-passage object.
    """

    kind: str
    data: dict[str, Any]
    passage: Any = None
    truncated: bool = False
    misplaced: bool = False


# --------------------------------------------------------------------------- names


def clean_name(name: str) -> str:
    """Strip what models wrap names in, so one entity is spelt one way across chunks.

    Removes surrounding quotes, brackets, markdown emphasis, list bullets and
    trailing ``.,;:``, and collapses whitespace; internal case and punctuation
    stay ("U.S.", "Queen (band)"), because names are matched case-insensitively
    later and case carries meaning.
    """
    text = " ".join(str(name).split())
    for _ in range(_CLEAN_ROUNDS):
        before = text
        text = _BULLET.sub("", text)
        text = text.lstrip(_LEADING_MARKS + " ").rstrip(_TRAILING_MARKS + " ")
        text = _strip_brackets(text)
        text = _strip_trailing_punct(text)
        if text == before:
            break
    return text


def _strip_brackets(text: str) -> str:
    """Remove one wrapping bracket pair or one unmatched bracket at either end."""
    if not text:
        return text
    first, last = text[0], text[-1]
    if len(text) >= 2 and _OPENERS.get(first) == last:
        inner = text[1:-1]
        if inner.count(first) == inner.count(last):
            return inner.strip()
    if last in _CLOSERS and text.count(_CLOSERS[last]) < text.count(last):
        return text[:-1].rstrip()
    if first in _OPENERS and text.count(first) > text.count(_OPENERS[first]):
        return text[1:].lstrip()
    return text


def _strip_trailing_punct(text: str) -> str:
    """Drop trailing ``.,;:`` but keep the final dot of abbreviations like "U.S."."""
    stripped = text.rstrip(_TRAILING_PUNCT + " ")
    if text.endswith(".") and stripped == text[:-1] and "." in text.rsplit(" ", 1)[-1][:-1]:
        return text
    return stripped


# --------------------------------------------------------------------------- JSON spans


@dataclass
class _Span:
    """A bracketed region of the reply and how its JSON was obtained."""

    value: Any
    start: int
    end: int
    repaired: bool = False
    truncated: bool = False


def _scan(text: str, start: int) -> tuple[int, int, str]:
    """Walk from the opener at ``start`` to where the brackets balance.

    Returns ``(end, cut, state)`` with state "closed", "open" (the text ended
    first: truncated output) or "deep" (nested past ``_MAX_DEPTH``). ``end`` is
    one past the closing bracket, or ``len(text)``. For an open run, ``cut`` is
    where to cut so the JSON ends after a complete element: the element being
    written when the text stopped may be half a name, so it is left out rather
    than repaired into a wrong value.
    """
    # One frame per open bracket: [is_list, last_safe_cut, value_done, in_value]
    stack: list[list[Any]] = []
    in_string = False
    escape = False
    length = len(text)
    i = start
    while i < length:
        char = text[i]
        if in_string:
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == '"':
                in_string = False
                top = stack[-1]
                if top[0] or top[3]:
                    top[2] = True
            i += 1
            continue
        if char == '"':
            in_string = True
            stack[-1][2] = False
        elif char in "{[":
            if len(stack) >= _MAX_DEPTH:
                return i, i, "deep"
            stack.append([char == "[", i + 1, False, char == "["])
        elif char in "}]":
            stack.pop()
            if not stack:
                return i + 1, i + 1, "closed"
            stack[-1][2] = True
        elif char == ",":
            top = stack[-1]
            top[1], top[2], top[3] = i, False, top[0]
        elif char == ":":
            stack[-1][2], stack[-1][3] = False, True
        elif not char.isspace():
            stack[-1][2] = False
        i += 1
    top = stack[-1]
    cut = length if (not in_string and top[2]) else top[1]
    return length, cut, "open"


def _repair(fragment: str) -> tuple[Any, bool]:
    """json_repair's reading of a fragment; ``(None, False)`` when it gives up.

    A fragment with neither a colon nor a double quote holds no record (a
    "[P1]" in prose), and json_repair is slow enough per call that skipping
    those keeps replies full of bracketed labels fast. json_repair is
    third-party code fed arbitrary model output; any failure of it is a parse
    failure of this fragment, never of the whole reply (:func:`repair_json`).
    """
    if ":" not in fragment and '"' not in fragment:
        return None, False
    value = repair_json(fragment)
    return value, value is not None


def _decode_span(text: str, start: int) -> tuple[_Span | None, int]:
    """Decode the JSON value opening at ``start``; also return where scanning resumes."""
    end, cut, state = _scan(text, start)
    if state == "deep":
        return None, end
    if state == "closed":
        fragment = text[start:end]
        try:
            return _Span(json.loads(fragment), start, end), end
        except (ValueError, RecursionError):
            value, ok = _repair(fragment)
            return (_Span(value, start, end, repaired=True) if ok else None), end
    # The brackets never close. Either prose followed a complete but unclosed
    # object (the stdlib decoder stops right where the prose starts), or the
    # reply was cut off mid-JSON by max_tokens.
    try:
        value, stop = _DECODER.raw_decode(text, start)
        return _Span(value, start, stop), stop
    except RecursionError:
        return None, end
    except json.JSONDecodeError as error:
        prefix = text[start : error.pos].rstrip().rstrip(",").rstrip()
        if (
            text[error.pos :].strip()
            and prefix
            and prefix[-1] in _COMPLETE_VALUE_END
            and error.msg.startswith(("Expecting ',' delimiter", "Expecting property name"))
        ):
            value, ok = _repair(text[start : error.pos])
            return (_Span(value, start, error.pos, repaired=True) if ok else None), error.pos
    value, ok = _repair(text[start:cut])
    return (_Span(value, start, end, repaired=True, truncated=True) if ok else None), end


# --------------------------------------------------------------------------- collecting records


def _norm_key(key: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(key).strip().strip(_QUOTES).lower())


def _normalise(record: Mapping[Any, Any]) -> dict[str, Any]:
    """Lower-case, underscore keys; the first spelling of a key wins."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        out.setdefault(_norm_key(key), value)
    return out


def _has(data: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    return _first(data, keys) is not None


def _first(data: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The first non-empty value among synonym keys (models fill one, leave others blank)."""
    for key in keys:
        if key in data:
            value = data[key]
            if value is not None and _text(value):
                return value
    return None


def _text(value: Any) -> str:
    """Any JSON value as one line of text (lists joined, objects ignored)."""
    if value is None or isinstance(value, dict):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ", ".join(part for part in (_text(item) for item in value) if part)
    return " ".join(str(value).split())


def _passage_label(value: Any) -> str | None:
    """Canonical label for "P1", "p1", "[P1]", "Passage 1", "1" or 1; cleaned text otherwise."""
    if value is None or isinstance(value, (bool, dict, list)):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int):
        return f"P{value}"
    text = clean_name(str(value))
    match = _PASSAGE_LABEL.fullmatch(text)
    if match:
        return f"P{int(match.group(1))}"
    return text or None


class _Collector:
    """Walks decoded JSON and tuple lines, turning everything record-like into ``_Record``s."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = labels
        self.records: list[_Record] = []
        # Bumped for every record list or record seen, even an empty list:
        # {"entities": []} is an answer ("nothing here"), prose is not.
        self.structure = 0
        self.dropped: Counter[str] = Counter()

    def walk(self, value: Any, hint: str | None, passage: Any, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(value, dict):
            self._walk_object(value, hint, passage, depth)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, (dict, list)):
                    self._walk_item(item, hint, passage, depth + 1)
                elif isinstance(item, str):
                    self._string_record(item, hint, passage)

    def _walk_item(self, item: dict[str, Any] | list[Any], hint: str | None, passage: Any, depth: int) -> None:
        if isinstance(item, dict):
            self._walk_object(item, hint, passage, depth, in_list=True)
        elif hint is not None or _tag_of(item) is not None:
            self._array_record(item, hint, passage)
        else:
            self.walk(item, None, passage, depth)

    def _walk_object(
        self, value: dict[str, Any], hint: str | None, passage: Any, depth: int, in_list: bool = False
    ) -> None:
        data = _normalise(value)
        own_passage = _first(data, _PASSAGE_KEYS)
        inherited = own_passage if own_passage is not None else passage
        containers = False
        for key, child in data.items():
            if not isinstance(child, (dict, list)):
                continue
            if key in _ENTITY_LISTS:
                child_hint: str | None = "entity"
            elif key in _RELATION_LISTS:
                child_hint = "relationship"
            elif key in _CLAIM_LISTS:
                child_hint = "claim"
            elif _passage_label(key) in self.labels and _PASSAGE_LABEL.fullmatch(key):
                self.walk(child, hint, key, depth + 1)
                containers = True
                continue
            else:
                continue
            containers = True
            self.structure += 1
            if isinstance(child, dict) and not _looks_like_record(_normalise(child)):
                # {"entities": {"Marie Curie": {...}}}: names as keys.
                child = [
                    dict(item, name=name) if isinstance(item, dict) else [name, item] for name, item in child.items()
                ]
            self.walk(child if isinstance(child, list) else [child], child_hint, inherited, depth + 1)
        if _looks_like_record(data) or (hint is not None and not containers):
            self._object_record(data, hint, inherited)
        elif not containers:
            # A wrapper such as {"result": {...}} or {"output": [...]}.
            children = [child for child in data.values() if isinstance(child, (dict, list))]
            for child in children:
                self.walk(child, hint, inherited, depth + 1)
            if in_list and not children:
                self.dropped["unrecognised_record"] += 1

    def _object_record(self, data: dict[str, Any], hint: str | None, passage: Any) -> None:
        strict_ends = _has(data, _SOURCE_KEYS) and _has(data, _TARGET_KEYS)
        loose_ends = _has(data, _SOURCE_KEYS + _SUBJECT_KEYS) or _has(data, _TARGET_KEYS + _OBJECT_KEYS)
        named = _has(data, _NAME_KEYS)
        misplaced = False
        if hint == "entity":
            kind = "relationship" if strict_ends and not named else "entity"
            misplaced = kind != hint
        elif hint == "relationship":
            kind = "entity" if named and not loose_ends else "relationship"
            misplaced = kind != hint
            if kind == "relationship":
                data = _endpoints_from_subject(data)
        elif hint == "claim":
            kind = "claim"
        elif strict_ends:
            kind = "relationship"
        elif named:
            kind = "entity"
        elif _has(data, _SUBJECT_KEYS):
            kind = "claim"
        else:
            self.dropped["unrecognised_record"] += 1
            return
        self.structure += 1
        self.records.append(_Record(kind, data, passage, misplaced=misplaced))

    def _array_record(self, item: list[Any], hint: str | None, passage: Any) -> None:
        tag = _tag_of(item)
        if tag is not None:
            kind, data = tag, _tuple_fields(tag, item[1:])
        elif hint == "entity":
            kind, data = "entity", _positional(item, ("name", "type", "description"))
        elif hint == "relationship":
            kind = "relationship"
            data = _positional(item, ("source", "target", "relation", "description", "keywords", "strength"))
        elif hint == "claim":
            kind = "claim"
            data = _positional(item, ("subject", "object", "type", "status", "date", "description"))
        else:
            return
        self.structure += 1
        self.records.append(_Record(kind, data, passage))

    def _string_record(self, item: str, hint: str | None, passage: Any) -> None:
        record = _tuple_record(item)
        if record is not None:
            self.structure += 1
            record.passage = passage
            self.records.append(record)
        elif hint == "entity" and clean_name(item):
            self.structure += 1
            self.records.append(_Record("entity", {"name": item}, passage))
        elif hint is not None:
            self.dropped["unrecognised_record"] += 1


def _looks_like_record(data: Mapping[str, Any]) -> bool:
    return _has(data, _NAME_KEYS + _SOURCE_KEYS + _TARGET_KEYS + _SUBJECT_KEYS + _OBJECT_KEYS)


def _endpoints_from_subject(data: dict[str, Any]) -> dict[str, Any]:
    """In a relationship list, subject/object are the endpoints' other names."""
    if _has(data, _SOURCE_KEYS) and _has(data, _TARGET_KEYS):
        return data
    out = dict(data)
    if not _has(out, _SOURCE_KEYS):
        out["source"] = _first(data, _SUBJECT_KEYS)
    if not _has(out, _TARGET_KEYS):
        out["target"] = _first(data, _OBJECT_KEYS)
    return out


def _positional(fields: list[Any], names: tuple[str, ...]) -> dict[str, Any]:
    return dict(zip(names, fields, strict=False))


def _tag_of(item: list[Any]) -> str | None:
    if item and isinstance(item[0], str):
        return _TAGS.get(clean_name(item[0]).lower())
    return None


def _tuple_fields(kind: str, fields: list[Any]) -> dict[str, Any]:
    """Map positional tuple fields to keys (GraphRAG and LightRAG orders both fit)."""
    if kind == "entity":
        description = " ".join(_text(value) for value in fields[2:])
        return {"name": _at(fields, 0), "type": _at(fields, 1), "description": description}
    if kind == "relationship":
        rest = list(fields[2:])
        strength: Any = None
        # GraphRAG: desc, strength; LightRAG: desc, keywords, strength.
        if len(rest) >= 3 or (len(rest) == 2 and _is_strength(rest[-1])):
            strength = rest.pop(2 if len(rest) >= 3 else 1)
        return {
            "source": _at(fields, 0),
            "target": _at(fields, 1),
            "description": _at(rest, 0),
            "keywords": _at(rest, 1),
            "strength": strength,
        }
    names = ("subject", "object", "type", "status", "date", "description")
    return _positional(fields, names)


def _is_strength(value: Any) -> bool:
    """Whether a field is a whole strength ("8", "8/10", "high"), not text that starts with a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    text = _text(value).lower().strip(" .!")
    return bool(_STRENGTH_TEXT.fullmatch(text)) or text in _STRENGTH_WORDS


def _at(fields: list[Any], index: int) -> Any:
    return fields[index] if index < len(fields) else ""


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value


def _tuple_record(line: str, last: bool = False) -> _Record | None:
    """One ``("entity"<|>NAME<|>TYPE<|>DESC)``-style line, or None if it is not one.

    ``last`` marks the reply's final line: if it opened a parenthesis it never
    closed, max_tokens cut it, and its final field may be half a word, so that
    field is left out (as a cut JSON element is).
    """
    match = _TUPLE_RECORD.match(line)
    if match is None:
        return None
    delimiter = match.group("delim")
    if delimiter == "," and not (match.group("paren") or match.group("quote")):
        return None  # "Entity, which ..." is prose, not a record
    body = line[match.end() :].strip()
    cut = bool(match.group("paren")) and not body.endswith(")") and last
    if body.endswith(")") and match.group("paren"):
        body = body[:-1]
    if len(delimiter) == 1:
        try:
            fields = next(csv.reader([body], delimiter=delimiter, quotechar='"', skipinitialspace=True), [])
        except csv.Error:
            fields = body.split(delimiter)
    else:
        fields = body.split(delimiter)
    if cut:
        fields = fields[:-1]
    if fields and clean_name(fields[0]).lower() in _HEADER_WORDS:
        return None  # "Entity | Name | Type | Description": a table header
    kind = _TAGS[match.group("tag").lower()]
    return _Record(kind, _tuple_fields(kind, [_unquote(value) for value in fields]), truncated=cut)


# --------------------------------------------------------------------------- validation


def _strength(value: Any) -> tuple[float | None, bool]:
    """``(strength, repaired)``; strength is None when nothing numeric can be read."""
    if value is None or isinstance(value, bool):
        return None, True
    repaired = False
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # a 400-digit integer is not a strength
            return None, True
    elif isinstance(value, str):
        text = value.strip().lower()
        if _NUMBER.fullmatch(text):
            number = float(text)
        else:
            repaired = True
            fraction = _FRACTION.match(text)
            leading = _NUMBER.match(text)
            if fraction and float(fraction.group(2)) > 0:
                number = float(fraction.group(1)) / float(fraction.group(2)) * 10.0
            elif text.strip(" .!") in _STRENGTH_WORDS:
                number = _STRENGTH_WORDS[text.strip(" .!")]
            elif leading:
                number = float(leading.group(0))
            else:
                return None, True
    else:
        return None, True
    if not math.isfinite(number):
        return None, True
    clamped = min(max(number, 1.0), 10.0)
    return clamped, repaired or clamped != number


def _keywords(value: Any) -> list[str]:
    items = value if isinstance(value, list) else re.split(r"[,;]", _text(value))
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        keyword = _text(item).strip(_QUOTES + " ")
        if keyword and keyword.lower() not in seen:
            seen.add(keyword.lower())
            out.append(keyword)
    return out


def _name(value: Any, counter: Counter[str]) -> str | None:
    """A cleaned name, or None after counting why it cannot be one."""
    name = clean_name(_text(value))
    if not name:
        return None
    if len(name) > MAX_NAME_LENGTH:
        counter["name_too_long"] += 1
        return None
    return name


class _ChunkBuilder:
    """Accumulates one chunk's validated mentions, merging duplicates as they arrive."""

    def __init__(self, chunk_id: str) -> None:
        self.extraction = ChunkExtraction(chunk_id)
        self.entities: dict[str, EntityMention] = {}
        self.relations: dict[tuple[str, str, str], RelationMention] = {}
        self.claims: set[tuple[str, str, str, str]] = set()

    @property
    def dropped(self) -> Counter[str]:
        return self.extraction.dropped

    def add(self, record: _Record) -> None:
        if record.misplaced:
            self.dropped["misplaced_record"] += 1
        if record.kind == "entity":
            self._entity(record)
        elif record.kind == "relationship":
            self._relation(record)
        else:
            self._claim(record)

    def _missing(self, record: _Record, reason: str) -> None:
        self.dropped["truncated_record" if record.truncated else reason] += 1

    def _entity(self, record: _Record) -> None:
        data = record.data
        raw = _first(data, _NAME_KEYS)
        if not clean_name(_text(raw)):
            self._missing(record, "empty_name")
            return
        name = _name(raw, self.dropped)
        if name is None:
            return
        entity_type = clean_name(_text(_first(data, _TYPE_KEYS))).lower()
        description = _text(_first(data, _DESCRIPTION_KEYS))
        existing = self.entities.get(name.lower())
        if existing is None:
            mention = EntityMention(name, entity_type, description)
            self.entities[name.lower()] = mention
            self.extraction.entities.append(mention)
            return
        self.dropped["duplicate_entity"] += 1
        if not existing.type:
            existing.type = entity_type
        if description and description not in existing.description:
            existing.description = f"{existing.description} {description}".strip()

    def _relation(self, record: _Record) -> None:
        data = record.data
        raw_source, raw_target = _first(data, _SOURCE_KEYS), _first(data, _TARGET_KEYS)
        if not clean_name(_text(raw_source)) or not clean_name(_text(raw_target)):
            self._missing(record, "missing_endpoint")
            return
        source, target = _name(raw_source, self.dropped), _name(raw_target, self.dropped)
        if source is None or target is None:
            return
        if source.lower() == target.lower():
            self.dropped["self_loop"] += 1
            return
        strength, repaired = _strength(_first(data, _STRENGTH_KEYS))
        if repaired:
            self.dropped["repaired_strength"] += 1
        relation = RelationMention(
            source=source,
            target=target,
            relation=" ".join(clean_name(_text(_first(data, _RELATION_KEYS))).split()),
            description=_text(_first(data, _DESCRIPTION_KEYS)),
            keywords=_keywords(_first(data, _KEYWORD_KEYS)),
            strength=strength if strength is not None else 1.0,
        )
        key = (source.lower(), target.lower(), relation.relation.lower())
        existing = self.relations.get(key)
        if existing is None:
            self.relations[key] = relation
            self.extraction.relations.append(relation)
            return
        self.dropped["duplicate_relation"] += 1
        existing.strength = max(existing.strength, relation.strength)
        if relation.description and relation.description not in existing.description:
            existing.description = f"{existing.description} {relation.description}".strip()
        existing.keywords = _keywords(existing.keywords + relation.keywords)

    def _claim(self, record: _Record) -> None:
        data = record.data
        raw = _first(data, _SUBJECT_KEYS)
        if not clean_name(_text(raw)):
            self._missing(record, "missing_subject")
            return
        subject = _name(raw, self.dropped)
        if subject is None:
            return
        obj = clean_name(_text(_first(data, _OBJECT_KEYS)))
        status = _text(_first(data, _STATUS_KEYS)).strip(_QUOTES + " .").upper()
        claim = ClaimMention(
            subject=subject,
            object="" if obj.upper() in _NO_OBJECT else obj,
            type=clean_name(_text(_first(data, _CLAIM_TYPE_KEYS))).lower(),
            status=status if status in _CLAIM_STATUSES else "",
            date=_text(_first(data, _DATE_KEYS)),
            description=_text(_first(data, _CLAIM_DESCRIPTION_KEYS)),
        )
        key = (claim.subject.lower(), claim.object.lower(), claim.type, claim.description.lower())
        if key in self.claims:
            self.dropped["duplicate_claim"] += 1
            return
        self.claims.add(key)
        self.extraction.claims.append(claim)

    def finish(self) -> ChunkExtraction:
        """Give relationship endpoints the entities' spelling and add the ones never listed."""
        for relation in self.extraction.relations:
            for end in ("source", "target"):
                name = getattr(relation, end)
                entity = self.entities.get(name.lower())
                if entity is None:
                    entity = EntityMention(name)
                    self.entities[name.lower()] = entity
                    self.extraction.entities.append(entity)
                    self.dropped["implicit_entity"] += 1
                setattr(relation, end, entity.name)
        return self.extraction


# --------------------------------------------------------------------------- entry point


def parse_extraction(text: str, passages: Mapping[str, str], with_claims: bool = False) -> ParseResult:
    """Parse one ``extract_graph`` / ``extract_glean`` reply; never raises on the reply.

    ``passages`` maps the labels used in the prompt ("P1", "P2", ...) to chunk
    ids. Records name their passage; with a single passage a missing or
    unknown label is taken to mean it, with several such records cannot be
    placed and are counted as ``unknown_passage``.
    """
    labels: dict[str, str] = {}
    for label, chunk_id in passages.items():
        labels.setdefault(chunk_id, chunk_id)
        labels[_passage_label(label) or label] = chunk_id
    chunk_ids = list(dict.fromkeys(passages.values()))
    only = chunk_ids[0] if len(chunk_ids) == 1 else None

    dropped: Counter[str] = Counter()
    body = strip_think(text if isinstance(text, str) else "")
    collector = _Collector(labels)
    leftover = _collect_json(body, collector, dropped)
    lines = [line for line in _TUPLE_SPLIT.split(leftover) if line.strip()]
    for index, line in enumerate(lines):
        record = _tuple_record(line, last=index == len(lines) - 1)
        if record is not None:
            collector.structure += 1
            collector.records.append(record)
    dropped.update(collector.dropped)
    if not collector.structure:
        dropped["no_records"] += 1

    builders = {chunk_id: _ChunkBuilder(chunk_id) for chunk_id in chunk_ids}
    for record in collector.records:
        if record.kind == "claim" and not with_claims:
            dropped["unrequested_claim"] += 1
            continue
        own = _first(record.data, _PASSAGE_KEYS)
        label = _passage_label(own if own is not None else record.passage)
        chunk_id = labels.get(label, only) if label is not None else only
        if chunk_id is None:
            dropped["unknown_passage"] += 1
            continue
        builders[chunk_id].add(record)
    return ParseResult({chunk_id: builder.finish() for chunk_id, builder in builders.items()}, dropped)


def _collect_json(body: str, collector: _Collector, dropped: Counter[str]) -> str:
    """Feed every JSON value in the reply to ``collector``; return the text outside them.

    A candidate that yields nothing (a stray "[" or "{" in prose) is re-scanned
    from its next character, so it cannot swallow the JSON after it; the
    re-scanned length is budgeted so a reply full of stray brackets stays linear.
    """
    outside: list[str] = []
    pos = 0
    kept_until = 0
    budget = 2 * len(body) + 1024
    while True:
        match = _JSON_START.search(body, pos)
        if match is None:
            break
        start = match.start()
        span, resume = _decode_span(body, start)
        before_records, before_structure = len(collector.records), collector.structure
        if span is not None:
            collector.walk(span.value, None, None)
        if span is not None and collector.structure > before_structure:
            added = collector.records[before_records:]
            if span.truncated:
                dropped["truncated_json"] += 1
                if added:
                    added[-1].truncated = True
            elif span.repaired:
                dropped["repaired_json"] += 1
            outside.append(body[kept_until:start])
            kept_until = span.end
        elif resume - start <= budget:
            budget -= resume - start
            resume = start + 1
        pos = max(resume, start + 1)
    outside.append(body[kept_until:])
    return "\n".join(outside)
