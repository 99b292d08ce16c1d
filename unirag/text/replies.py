"""Readers of model replies, one per reply shape, below every module that asks a model.

Replies come from small or reasoning models: reasoning blocks (``<think>``),
fences, prose around the payload, JSON cut at ``max_tokens``. A reader
returns None (or its documented fallback) for a reply it cannot read; the
caller counts that and falls back, never crashes. Keeping the readers here,
in the text layer, lets the graph build, the operators, generation and the
judge read one shape the same way instead of each growing its own variant.

Shapes: :func:`strip_think` (reasoning blocks), :func:`repair_json`,
:func:`first_object`, :func:`first_list`, :func:`first_json` (JSON in prose),
:func:`read_yes_no` (a YES/NO verdict), :func:`read_points` (scored points of
a map reply), :func:`read_summary` (a community summary: title + summary). Readers of richer shapes (extraction records, judge verdicts)
build on these in their own layers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

# -- <think> ---------------------------------------------------------------------------------------

_THINK_TAG = re.compile(r"<\s*(/?)\s*think(?:ing)?\s*>", re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove ``<think>`` blocks; keep the reasoning only if the answer is inside it.

    A ``</think>`` with no opening tag (the template opened it) drops everything
    before it; an opening tag never closed (cut by ``max_tokens``) is removed and
    the rest parsed anyway, since the answer may follow the reasoning.
    """
    outside: list[str] = []
    inside: list[str] = []
    pos = 0
    open_at: int | None = None
    for match in _THINK_TAG.finditer(text):
        if match.group(1):  # closing tag
            if open_at is None:
                outside.clear()
                inside.append(text[pos : match.start()])
            else:
                inside.append(text[open_at : match.start()])
                open_at = None
            pos = match.end()
        elif open_at is None:
            outside.append(text[pos : match.start()])
            open_at = match.end()
    if open_at is not None:
        outside.append(text[open_at:])
    else:
        outside.append(text[pos:])
    body = "".join(outside)
    if not body.strip() and inside:
        return "\n".join(inside)
    return body


# -- JSON ------------------------------------------------------------------------------------------

_JSON_START = re.compile(r"[{\[]")


def repair_json(fragment: str) -> Any | None:
    """json_repair's reading of ``fragment``; None when it gives up.

    json_repair is third-party code fed arbitrary model output and raises
    assorted exception types on pathological input, so any failure of it is a
    parse failure of that reply (the caller falls back and counts it), never a
    crash of the build or the query.
    """
    import json_repair  # imported on first use: no work at import time

    try:
        return json_repair.loads(fragment, skip_json_loads=True)
    except Exception:  # noqa: BLE001 — see the docstring: a failed parse, counted by the caller
        return None


def first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (from its first ``{``); a list yields its first object."""
    start = text.find("{")
    if start < 0:
        return None
    value = repair_json(text[start:])
    if isinstance(value, list):
        value = next((item for item in value if isinstance(item, dict)), None)
    return value if isinstance(value, dict) else None


def first_list(text: str) -> list[Any] | None:
    """The JSON list read from a reply's first ``[``; None when there is none."""
    start = text.find("[")
    if start < 0:
        return None
    value = repair_json(text[start:])
    return value if isinstance(value, list) else None


def first_json(text: str) -> dict[str, Any] | list[Any] | None:
    """The JSON object or list starting at the first ``{`` or ``[`` of ``text``, read leniently."""
    match = _JSON_START.search(text)
    if match is None:
        return None
    value = repair_json(text[match.start():])
    return value if isinstance(value, (dict, list)) else None


# -- YES / NO --------------------------------------------------------------------------------------

_YES_OR_NO = re.compile(r"\b(?:yes\s*(?:or|/|\|)\s*no|no\s*(?:or|/|\|)\s*yes)\b", re.IGNORECASE)
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_QUOTES = "\"'`“”‘’«»„"
_BULLET = re.compile(r"^(?:[-*•+>]\s+|\d{1,3}[.)]\s+)")
_LEADING = _QUOTES + "*_~#([{< "
_TRAILING = _QUOTES + "*_~)]}>.,;: "
_BARE_ROUNDS = 8


def _bare_word(text: str) -> str:
    """``text`` without the bullets, quotes, markdown, brackets and ``.,;:`` models wrap a word in.

    The same peeling as :func:`unirag.graph.parse.clean_name` for a one-word
    reply ("**Y**", "(true).", "- n"), which is all it is used for here.
    """
    word = " ".join(text.split())
    for _ in range(_BARE_ROUNDS):
        before = word
        word = _BULLET.sub("", word).lstrip(_LEADING).rstrip(_TRAILING)
        if word == before:
            break
    return word


def read_yes_no(text: str) -> bool | None:
    """A YES/NO reply (gleaning check, the stop check of a repeat block); None when it says neither.

    Reasoning blocks are skipped, and an echo of the question's "YES or NO" is
    ignored so a model repeating the instruction is not read as answering YES.
    """
    body = _YES_OR_NO.sub(" ", strip_think(text))
    match = _YES_NO.search(body)
    if match:
        return match.group(1).lower() == "yes"
    short = _bare_word(body).lower()
    if short in ("y", "true"):
        return True
    if short in ("n", "false"):
        return False
    return None


# -- scored points (map-reduce and adaptive-filter map replies) ------------------------------------

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SCORE_TAG = re.compile(r"<\s*ANSWER_HELPFULNESS\s*>\s*(-?\d+(?:\.\d+)?)\s*<\s*/\s*ANSWER_HELPFULNESS\s*>", re.IGNORECASE)
_SCORE_LINE = re.compile(
    r"^[ \t*_#-]*(?:helpfulness|relevance|importance)?[ \t]*score[ \t*_]*[:=][ \t]*(-?\d+(?:\.\d+)?)"
    r"[ \t]*(?:/[ \t]*100)?[ \t*_.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_POINT_TEXT_KEYS = ("description", "answer", "point", "text", "content", "summary", "report")
_POINT_SCORE_KEYS = ("score", "helpfulness", "relevance", "importance", "rating")
_POINT_LIST_KEYS = ("points", "reports", "answers", "key_points")


def _score(value: Any) -> float | None:
    """A score in [0, 100] from a number or a numeric string; None when there is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = _NUMBER.search(value)
        value = float(match.group()) if match else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(min(100.0, max(0.0, value)))
    return None


def _points_list(reply: str) -> list[Any] | None:
    """The points the reply holds: ``{"points": [...]}``, a bare list, or one point object."""
    brace, bracket = reply.find("{"), reply.find("[")
    if bracket >= 0 and (brace < 0 or bracket < brace):
        value = first_list(reply)
        if value is not None and any(isinstance(v, (dict, str)) for v in value):
            return value
    obj = first_object(reply)
    if obj is None:
        return None
    for key in _POINT_LIST_KEYS:
        if isinstance(obj.get(key), list):
            return obj[key]
    if any(isinstance(obj.get(key), str) for key in _POINT_TEXT_KEYS):
        return [obj]
    lists = [value for value in obj.values() if isinstance(value, list)]
    return lists[0] if lists else None


def read_points(reply: str, max_points: int, unparsed_score: float) -> tuple[list[tuple[str, float]], bool]:
    """(points as (description, score 0-100), whether the reply held a points list).

    Points are read from ``{"points": [{"description", "score"}]}`` (or
    ``answer``/``text`` and ``helpfulness``/``relevance`` keys, a bare list,
    one point object); a point without a score gets ``unparsed_score``, one
    without text is skipped, at most ``max_points`` are kept. A reply with no
    list at all is one point: its text, scored by a score it states
    (``<ANSWER_HELPFULNESS>n</ANSWER_HELPFULNESS>`` or a ``score: n`` line,
    both removed from the text), else ``unparsed_score``, because small models
    often answer well in prose. An empty reply has no points.
    """
    limit = max(int(max_points), 1)
    items = _points_list(reply)
    if items is not None:
        out: list[tuple[str, float]] = []
        for entry in items:
            if isinstance(entry, str) and entry.strip():
                out.append((entry.strip(), unparsed_score))
            elif isinstance(entry, dict):
                text = next((entry[k].strip() for k in _POINT_TEXT_KEYS if isinstance(entry.get(k), str)
                             and entry[k].strip()), "")
                if not text:
                    continue
                score = next((s for s in (_score(entry.get(k)) for k in _POINT_SCORE_KEYS) if s is not None), None)
                out.append((text, unparsed_score if score is None else score))
            if len(out) >= limit:
                break
        return out, True
    text = reply.strip()
    if not text:
        return [], False
    stated = _SCORE_TAG.search(text) or _SCORE_LINE.search(text)
    score = _score(stated.group(1)) if stated else None
    text = _SCORE_LINE.sub("", _SCORE_TAG.sub("", text)).strip()
    if not text:
        return [], False
    return [(text, unparsed_score if score is None else score)], False


# -- community summaries ------------------------------------------------------------------------

SummaryReading = Literal["json", "prose", "fallback"]
_LABELLED = re.compile(r"^\s*\**\s*(title|summary)\s*\**\s*:\s*(.*)$", re.IGNORECASE)


def _string_field(data: dict[str, Any], keys: Sequence[str]) -> str:
    for key in keys:
        value = data.get(key)
        if isinstance(value, list):  # a summary given as a list of points
            value = " ".join(item for item in value if isinstance(item, str))
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


def read_summary(text: str) -> tuple[str, str, SummaryReading]:
    """``(title, summary, reading)`` of a community-summary reply (ArchRAG, HyGRAG).

    ``json``: an object with a non-empty ``summary`` (or ``description``,
    ``text``, ``content``; a list of strings is joined), repaired when broken
    or cut. ``prose``: no usable JSON but plain text (``Title:``/``Summary:``
    lines are read when present). ``fallback``: nothing usable (empty, JSON
    without a summary, JSON-looking garbage); the caller then writes an
    extractive summary and counts it.
    """
    cleaned = strip_think(text or "").strip().strip("`").strip()
    if cleaned.lower().startswith("json"):
        cleaned = cleaned[4:].strip()
    if not cleaned:
        return "", "", "fallback"
    start = cleaned.find("{")
    if start >= 0:
        data = first_object(cleaned[start:])
        if data is not None:
            summary = _string_field(data, ("summary", "description", "text", "content"))
            title = _string_field(data, ("title", "name", "topic"))
            return (title, summary, "json") if summary else (title, "", "fallback")
        if start == 0:
            return "", "", "fallback"
    if cleaned[0] in "[{":
        return "", "", "fallback"
    title, lines = "", []
    for line in cleaned.splitlines():
        match = _LABELLED.match(line)
        if match and match.group(1).lower() == "title" and not title:
            title = match.group(2).strip().strip("*").strip()
        elif match:
            lines.append(match.group(2))
        else:
            lines.append(line)
    summary = " ".join(" ".join(lines).split())
    return (title, summary, "prose") if summary else ("", "", "fallback")
