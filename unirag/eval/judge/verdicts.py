"""What the pairwise and absolute judges record: criteria, items, verdicts, their keys and rows.

A verdict's key names the request that produced it (question, methods, order,
replicate), so a rerun skips what ``judge.jsonl`` already holds; :func:`from_row`
reads every kind of judge row back (verdicts, claims, generated questions).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from unirag.eval.judge.claims import AnswerClaims
from unirag.eval.judge.questions import GeneratedQuestion
from unirag.eval.judge.shared import make_key, row_fields
from unirag.eval.jsonl import read_rows

CRITERIA: tuple[str, ...] = ("comprehensiveness", "diversity", "empowerment", "directness")
OVERALL = "overall"
ALL_CRITERIA: tuple[str, ...] = (*CRITERIA, OVERALL)
#: LeanRAG's absolute scoring criteria (Zhang et al. 2025 appendix D.3): no directness.
ABSOLUTE_CRITERIA: tuple[str, ...] = ("comprehensiveness", "diversity", "empowerment", OVERALL)
#: "ab": method_a is shown as Answer 1; "ba": method_b is.
ORDERS: tuple[str, ...] = ("ab", "ba")


@dataclass(frozen=True)
class PairItem:
    """Two methods' answers to one question."""

    question_id: str
    question: str
    method_a: str
    answer_a: str
    method_b: str
    answer_b: str

    def canonical(self) -> PairItem:
        """The same comparison with the methods in sorted order."""
        if self.method_a == self.method_b:
            raise ValueError(f"question {self.question_id}: cannot compare method {self.method_a!r} with itself")
        if self.method_a < self.method_b:
            return self
        return replace(self, method_a=self.method_b, answer_a=self.answer_b,
                       method_b=self.method_a, answer_b=self.answer_a)


@dataclass(frozen=True)
class PairVerdict:
    """One criterion of one pairwise judgment. ``winner``: a method name, ``"tie"``,
    or None when the reply did not give this criterion readably (``parsed=False``)."""

    kind: ClassVar[str] = "pair"

    question_id: str
    method_a: str
    method_b: str
    criterion: str
    order: str
    replicate: int
    winner: str | None
    reason: str = ""
    parsed: bool = True
    judge: str = ""
    raw: str = ""  # the start of the reply, kept only when this criterion was unparsed

    @property
    def key(self) -> str:
        """The key of the request that produced it (shared by its criteria)."""
        return verdict_key(self.question_id, self.method_a, self.method_b, self.order, self.replicate)

    @property
    def first_shown(self) -> str:
        return self.method_a if self.order == "ab" else self.method_b


@dataclass(frozen=True)
class ScoreItem:
    """One method's answer to one question."""

    question_id: str
    question: str
    method: str
    answer: str


@dataclass(frozen=True)
class ScoreVerdict:
    """One criterion of one absolute judgment: an integer 1..10, or None when unparsed."""

    kind: ClassVar[str] = "score"

    question_id: str
    method: str
    criterion: str
    replicate: int
    score: int | None
    reason: str = ""
    parsed: bool = True
    judge: str = ""
    raw: str = ""  # the start of the reply, kept only when this criterion was unparsed

    @property
    def key(self) -> str:
        return score_key(self.question_id, self.method, self.replicate)


# -- keys --------------------------------------------------------------------------------------


def verdict_key(question_id: str, method_a: str, method_b: str, order: str, replicate: int) -> str:
    """The key of a pairwise request; the same whichever way round the methods are given
    (``order`` is flipped with them, so it still says which method was shown first)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    if method_b < method_a:
        method_a, method_b, order = method_b, method_a, order[::-1]
    return make_key("pair", question_id, method_a, method_b, order, int(replicate))


def score_key(question_id: str, method: str, replicate: int) -> str:
    """The key of an absolute-scoring request."""
    return make_key("score", question_id, method, int(replicate))


# -- rows --------------------------------------------------------------------------------------

_RECORD_TYPES: tuple[type, ...] = (PairVerdict, ScoreVerdict, AnswerClaims, GeneratedQuestion)


def from_row(row: dict[str, Any]) -> PairVerdict | ScoreVerdict | AnswerClaims | GeneratedQuestion:
    """The record a :func:`to_row` row came from (dispatch on ``kind``)."""
    for cls in _RECORD_TYPES:
        if row.get("kind") == cls.kind:  # type: ignore[attr-defined]
            values = row_fields(cls, row)
            if cls is AnswerClaims:
                values["claims"] = tuple(values.get("claims") or ())
            return cls(**values)
    raise ValueError(f"unknown judge row kind {row.get('kind')!r}")


def read_records(path: Path | str) -> tuple[list[Any], int]:
    """(records, unreadable lines) of a JSONL file of judge rows; rows of unknown kinds count as unreadable."""
    rows, bad = read_rows(Path(path))
    out = []
    for row in rows:
        try:
            out.append(from_row(row))
        except (ValueError, TypeError):
            bad += 1
    return out, bad

