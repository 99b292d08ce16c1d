"""Reading the LLM judge's replies, never trusting their shape.

The judge prompts ask for one JSON object, but judges (small local models most
of all) answer in code fences, add prose after the object, stop mid-string at
``max_tokens``, rename keys (``"Overall Winner"``, ``"Explanation"``), give
numbers as strings, name the answers ``"Answer 2"`` or ``"B"``, or answer in
prose only. Everything here returns ``None`` for what it cannot read, so the
caller records an unparsed verdict and counts it; nothing here raises on model
output.

Reading order for a reply: ``<think>`` blocks are dropped
(:func:`unirag.text.replies.strip_think`); the JSON from the first ``{`` or ``[``
is read leniently (:func:`unirag.text.replies.first_json`, which also closes a
truncated object); criteria are found by key prefix, one
level of nesting deep; what JSON does not give is looked for line by line in
the prose ("Comprehensiveness: Answer 1 ...", "Overall score: 7/10").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unirag.text.replies import first_json, strip_think

TIE = "tie"
#: A criterion matches a reply key that starts with its prefix (keys lowercased, letters only),
#: so "Comprehensive", "comprehensiveness_winner" and "Overall Winner" all count.
KEY_PREFIXES: dict[str, str] = {
    "comprehensiveness": "comprehens",
    "diversity": "divers",
    "empowerment": "empower",
    "directness": "direct",
    "overall": "overall",
}
_WINNER_KEYS = ("winner", "better", "choice", "preferred", "preference", "answer", "verdict", "result", "decision")
_REASON_KEYS = ("reason", "explanation", "rationale", "justification", "why", "comment")
_SCORE_KEYS = ("score", "rating", "grade", "value", "points", "mark")
_LIST_ITEM_KEYS = ("description", "question", "task", "claim", "user", "persona", "text", "name", "content")

_JSON_START = re.compile(r"[{\[]")
_DIGIT_CHOICE = re.compile(r"(?<![\w.])(?:answer|response|option|#)?\s*([12])(?!\w|\.\d)")
_LETTER_CHOICE = re.compile(r"\b(?:answer|response|option)\s*([ab])\b")
_TIE_WORD = re.compile(r"\b(?:tie|tied|draw|equal|equally|both|neither|same|even)\b")
_FIRST_SECOND = {"a": "1", "first": "1", "b": "2", "second": "2"}
_PROSE_OVERALL = (
    re.compile(r"\banswer\s*([12])\s+(?:is|was)\s+(?:the\s+)?(?:clearly\s+|slightly\s+|much\s+)?"
               r"(?:better|stronger|preferred|superior|winner)"),
    re.compile(r"\b(?:overall\s+)?winner\s*(?:is|:|=|-)?\s*(?:answer\s*)?([12])\b"),
    re.compile(r"\bprefer\s+answer\s*([12])\b"),
)
_OUT_OF_TEN = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*10\b")
_SCORE_WORD = re.compile(r"\b(?:score|rating|grade)d?\s*(?:of|is|was|:|=|-)?\s*(-?\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PLACEHOLDER_RANGE = re.compile(r"^\W*1\s*(?:-|to|–)\s*10\W*$")
_LINE_LEAD = re.compile(r"^[\s\-•#>\"'`]*(?:\d{1,2}[.)]\s*)?[\s\"'`]*")
_LABEL = re.compile(r"^(?:user|persona|task|question|claim)\s*\d{1,3}\s*[.):\-]\s*", re.IGNORECASE)
_BULLET = re.compile(
    r"^\s*(?:[-*•+]|\d{1,3}\s*[.):]|(?:user|persona|task|question|claim)\s*\d{1,3}\s*[.):\-])\s*(.+?)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Decision:
    """One criterion read from a reply: ``value`` is None when it could not be read."""

    value: Any
    reason: str = ""


# -- shared steps -------------------------------------------------------------------------------


def norm_key(key: Any) -> str:
    """Lowercase letters and digits only: "Overall Winner" -> "overallwinner", "Answer 1" -> "answer1"."""
    return re.sub(r"[^a-z0-9]", "", str(key).lower())


def _lookup(mapping: Mapping[Any, Any], keys: Sequence[str]) -> Any:
    """The value of the first key (normalised) in ``keys`` present in ``mapping``; None if none."""
    normalised = {norm_key(k): v for k, v in mapping.items()}
    for key in keys:
        if key in normalised:
            return normalised[key]
    return None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _as_mapping(value: Any) -> dict[Any, Any] | None:
    """A reply object; a list of per-criterion objects (``[{"criterion": ..., "winner": ...}]``)
    becomes one mapping keyed by criterion, other lists merge their objects' keys."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        return None
    merged: dict[Any, Any] = {}
    for entry in value:
        if not isinstance(entry, dict):
            continue
        name = _lookup(entry, ("criterion", "criteria", "metric", "dimension", "aspect", "name"))
        if isinstance(name, str) and name.strip():
            merged[name] = entry
        else:
            merged.update(entry)
    return merged or None


def criteria_values(mapping: Mapping[Any, Any], criteria: Sequence[str]) -> dict[str, Any]:
    """Criterion -> the reply's value for it, matched by key prefix.

    When no top-level key names a criterion, one level of nesting is searched
    (``{"evaluation": {"comprehensiveness": ...}}``).
    """
    found: dict[str, Any] = {}
    for key, value in mapping.items():
        normalised = norm_key(key)
        for criterion in criteria:
            if criterion not in found and normalised.startswith(KEY_PREFIXES.get(criterion, criterion)):
                found[criterion] = value
                break
    if found:
        return found
    for value in mapping.values():
        if isinstance(value, dict):
            nested = criteria_values(value, criteria)
            if nested:
                return nested
    return found


def _criterion_lines(body: str, criteria: Sequence[str]) -> dict[str, str]:
    """Criterion -> the rest of the first prose line that starts with its name, as a label does
    ("**Comprehensiveness**: Answer 1 ...", "2. Diversity - winner 2"). Only line starts count:
    "Answer 2 directly answers it" says nothing about directness."""
    out: dict[str, str] = {}
    for line in body.splitlines():
        low = _LINE_LEAD.sub("", line.lower().replace("*", ""))
        for criterion in criteria:
            prefix = KEY_PREFIXES.get(criterion, criterion)
            if criterion not in out and low.startswith(prefix):
                out[criterion] = re.sub(r"^[a-z]*", "", low[len(prefix):])  # drop the word's tail
                break
    return out


# -- pairwise -----------------------------------------------------------------------------------


def parse_choice(value: Any) -> str | None:
    """"1", "2" or :data:`TIE` from a winner value (1, "2", "Answer 1", "B", "tie"); None if unclear."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return {1: "1", 2: "2"}.get(int(value)) if float(value) in (1.0, 2.0) else None
    if isinstance(value, dict):
        return parse_choice(_lookup(value, _WINNER_KEYS))
    if not isinstance(value, str):
        return None
    text = re.sub(r"[*\"'`\[\]()]", " ", value.lower()).strip(" .:;!")
    if text in _FIRST_SECOND:
        return _FIRST_SECOND[text]
    digits = set(_DIGIT_CHOICE.findall(text)) | {_FIRST_SECOND[x] for x in _LETTER_CHOICE.findall(text)}
    if len(digits) == 1:
        return digits.pop()
    if _TIE_WORD.search(text):
        return TIE
    return None


def _pair_decision(value: Any) -> Decision:
    if isinstance(value, dict):
        return Decision(parse_choice(_lookup(value, _WINNER_KEYS)), _text(_lookup(value, _REASON_KEYS)))
    return Decision(parse_choice(value))


def _prose_overall(body: str) -> str | None:
    """The overall winner of a prose reply ("Answer 2 is better"), when it names exactly one.
    Lines labelled with another criterion ("Diversity: winner 2") are not about the overall winner."""
    named: set[str] = set()
    for line in body.lower().replace("*", "").splitlines():
        lead = _LINE_LEAD.sub("", line)
        if any(lead.startswith(p) for c, p in KEY_PREFIXES.items() if c != "overall"):
            continue
        named |= {m for pattern in _PROSE_OVERALL for m in pattern.findall(line)}
    return named.pop() if len(named) == 1 else None


def _read_criteria(
    body: str, criteria: Sequence[str], decide: Callable[[Any], Decision], parse_line: Callable[[str], Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str], dict[str, Decision]]:
    """The reply's JSON mapping, its values and ``Criterion: ...`` lines per criterion, and one
    decision per criterion: from the JSON where it names the criterion, else from its line.
    Shared by the pairwise and the absolute judge, which differ only in how a value is read."""
    mapping = _as_mapping(first_json(body)) or {}
    values = criteria_values(mapping, criteria)
    out = {c: decide(values[c]) if c in values else Decision(None) for c in criteria}
    lines = _criterion_lines(body, criteria)
    for criterion in criteria:
        if out[criterion].value is None and criterion in lines:
            out[criterion] = Decision(parse_line(lines[criterion]), out[criterion].reason)
    return mapping, values, lines, out


def parse_pairwise(text: str, criteria: Sequence[str]) -> dict[str, Decision]:
    """Criterion -> the position it prefers ("1", "2", "tie") or None, with the reason given.

    A bare ``{"winner": ...}`` object, or prose that names one answer as
    better, is read as the overall verdict only.
    """
    body = strip_think(text)
    mapping, values, _, out = _read_criteria(body, criteria, _pair_decision, parse_choice)
    if "overall" in out and out["overall"].value is None:
        bare = _pair_decision(mapping) if mapping and not values else Decision(None)
        out["overall"] = bare if bare.value is not None else Decision(_prose_overall(body))
    return out


# -- absolute scores ----------------------------------------------------------------------------


def clamp_score(number: float, low: int = 1, high: int = 10) -> int | None:
    """``number`` rounded half up and clamped to [low, high]; None for NaN or infinity."""
    if not math.isfinite(number):
        return None
    return max(low, min(high, math.floor(number + 0.5)))


def parse_score(value: Any) -> int | None:
    """A 1-10 score from 7, "7", "7/10", "Score: 8", "8 (strong)"; None for "[1-10]" or anything unclear."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return clamp_score(float(value))
    if isinstance(value, dict):
        return parse_score(_lookup(value, _SCORE_KEYS))
    if not isinstance(value, str):
        return None
    text = value.lower()
    if _PLACEHOLDER_RANGE.match(text):
        return None
    for pattern in (_OUT_OF_TEN, _SCORE_WORD):
        match = pattern.search(text)
        if match:
            return clamp_score(float(match.group(1)))
    numbers = _NUMBER.findall(text)
    return clamp_score(float(numbers[0])) if len(numbers) == 1 else None


def _score_decision(value: Any) -> Decision:
    if isinstance(value, dict):
        return Decision(parse_score(_lookup(value, _SCORE_KEYS)), _text(_lookup(value, _REASON_KEYS)))
    return Decision(parse_score(value))


def parse_scores(text: str, criteria: Sequence[str]) -> dict[str, Decision]:
    """Criterion -> integer score 1..10 (clamped) or None, with the reason given.

    A reply that names no criterion but states one score ("Score: 7", "7/10",
    ``{"score": 7}``) is read as the overall score (or the only criterion asked).
    """
    body = strip_think(text)
    mapping, values, lines, out = _read_criteria(body, criteria, _score_decision, parse_score)
    target = "overall" if "overall" in criteria else (criteria[0] if len(criteria) == 1 else None)
    if target and out[target].value is None and not values and not lines:
        bare = _score_decision(mapping) if mapping else Decision(None)
        out[target] = bare if bare.value is not None else Decision(_prose_score(body))
    return out


def _prose_score(body: str) -> int | None:
    """The one score a prose reply states ("Score: 7", "7/10"); None if it states none or several."""
    low = body.lower()
    found = {m.group(1) for pattern in (_OUT_OF_TEN, _SCORE_WORD) for m in pattern.finditer(low)}
    if len(found) != 1:
        return None
    return clamp_score(float(found.pop()))


# -- lists (users, tasks, questions, claims) ----------------------------------------------------


def _item_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        chosen = _lookup(value, _LIST_ITEM_KEYS)
        if isinstance(chosen, str):
            return chosen.strip()
        return next((v.strip() for v in value.values() if isinstance(v, str) and v.strip()), "")
    return ""


def _json_list(value: Any, keys: Sequence[str]) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        return None
    named = _lookup(value, keys)
    if isinstance(named, list):
        return named
    return next((v for v in value.values() if isinstance(v, list)), None)


def _bullet_lines(body: str) -> tuple[list[str], int]:
    """(items, offset of the first bullet line) of the reply's bulleted or numbered lines."""
    items, first, offset = [], -1, 0
    for line in body.splitlines(keepends=True):
        match = _BULLET.match(line.replace("**", "").replace("__", ""))
        if match:
            item = _LABEL.sub("", match.group(1)).strip().strip("\"'").strip()
            if item:
                items.append(item)
                first = offset if first < 0 else first
        offset += len(line)
    return items, first


def parse_list(text: str, keys: Sequence[str]) -> tuple[list[str], bool]:
    """(items, parsed): strings of the reply's JSON list under one of ``keys`` (or its first
    list), else its bulleted or numbered lines. JSON that starts inside a bulleted line (a
    bracket in prose) does not count. ``{"claims": []}`` is a parsed empty list; a reply with
    neither is unparsed."""
    body = strip_think(text)
    bullets, first_bullet = _bullet_lines(body)
    start = _JSON_START.search(body)
    found = None
    if start is not None and (not bullets or start.start() < first_bullet):
        found = _json_list(first_json(body), [norm_key(k) for k in keys])
    items = [item for item in (_item_text(entry) for entry in found or []) if item]
    if items:
        return items, True
    if bullets:
        return bullets, True
    return [], found is not None
