"""LLM-as-judge for abstract questions: pairwise win rates and absolute 1-10 scores.

Abstract (sensemaking) questions have no gold answer, so answers are compared
by an LLM judge:

* **Pairwise** (GraphRAG, paper 001 §3.3 and appendix F; the survey, paper 003
  §7.1, appendix A.4, Figure 19): the judge sees the question and two answers
  and names the better one, or a tie, on comprehensiveness, diversity,
  empowerment, directness (GraphRAG's control criterion) and overall. Every
  pair is asked in both orders, so a judge that favours the first position
  cancels out, and ``replicates`` times each (GraphRAG repeats each comparison
  five times "to account for the inherent stochasticity of LLM generation").
  A win rate counts a tie as half a win (GraphRAG appendix G: winner 100,
  loser 0, tie 50).
* **Absolute** (LeanRAG, paper 004 §4 and appendix D.3): the judge scores one
  answer 1-10 on comprehensiveness, diversity, empowerment and overall, with
  LeanRAG's rubric bands, ``replicates`` times (LeanRAG: 5).

Abstract question generation (:mod:`unirag.eval.questions`) and claim-based
comprehensiveness / diversity (:mod:`unirag.eval.claims`) are re-exported here.

Decisions:

* One request per (pair, order, replicate) asks for every criterion, as the
  survey's prompt does; it yields one :class:`PairVerdict` per criterion.
* A criterion the reply does not give readably is recorded with
  ``winner=None, parsed=False`` (absolute: ``score=None``), never guessed;
  rates and means exclude those and :func:`unparsed_counts` reports them.
* Replicates differ only in the prompt's cache identity
  (``prompt_version`` ends in ``#seed=S;r=R``), never in the text the judge
  sees. With one replicate the judge decodes greedily (temperature 0); with
  several, ``REPLICATE_TEMPERATURE`` (0.7) so that they can differ at all. A
  rerun is still deterministic: the cache answers every finished request.
* Methods are put in canonical (sorted) order, so ``(A, B)`` and ``(B, A)``
  are the same comparison with the same keys; ``order`` says which one was
  shown first (``"ab"``: ``method_a`` was Answer 1).
* Each answer is cut to ``answer_tokens`` tokens, and further so that the
  whole prompt and the reply fit ``context_window`` (both answers alike).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from unirag.eval.claims import (
    DEFAULT_THRESHOLDS,
    AnswerClaims,
    ClaimItem,
    ClaimScore,
    claim_summary,
    claims_key,
    cluster_counts,
    extract_claims,
    rouge_l_matrix,
    score_claims,
    unique_claims,
)
from unirag.eval.judge_base import (
    answer_budget,
    append_rows,
    clip,
    done_keys,
    make_key,
    pending,
    read_rows,
    require_chat,
    row_fields,
    to_row,
)
from unirag.eval.judge_parse import TIE, parse_pairwise, parse_scores
from unirag.eval.questions import (
    GeneratedQuestion,
    QuestionSet,
    describe_corpus,
    generate_questions,
    sample_texts,
)
from unirag.prompts.prompt import Prompt, load_prompt
from unirag.llm.base import ChatModel, ChatRequest
from unirag.llm.batch import complete_all
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer

__all__ = [
    "ABSOLUTE_CRITERIA", "ALL_CRITERIA", "CRITERIA", "DEFAULT_THRESHOLDS", "ORDERS", "OVERALL", "TIE",
    "AnswerClaims", "ClaimItem", "ClaimScore", "GeneratedQuestion", "JudgeConfig", "PairItem", "PairRequest",
    "PairVerdict", "QuestionSet", "ScoreItem", "ScoreRequest", "ScoreVerdict",
    "append_rows", "claim_summary", "claims_key", "cluster_counts", "describe_corpus", "done_keys", "extract_claims",
    "from_row", "generate_questions", "judge_pairs", "judgement_counts", "mean_scores", "pair_requests",
    "pending_pairs", "pending_scores", "position_bias", "read_records", "read_rows", "rouge_l_matrix",
    "run_pair_requests", "run_score_requests", "sample_texts", "score_absolute", "score_claims", "score_key",
    "score_requests", "to_row", "unique_claims", "unparsed_counts", "verdict_key", "win_rate_matrices",
    "win_rates",
]

CRITERIA: tuple[str, ...] = ("comprehensiveness", "diversity", "empowerment", "directness")
OVERALL = "overall"
ALL_CRITERIA: tuple[str, ...] = (*CRITERIA, OVERALL)
#: LeanRAG's absolute scoring criteria (paper 004 appendix D.3): no directness.
ABSOLUTE_CRITERIA: tuple[str, ...] = ("comprehensiveness", "diversity", "empowerment", OVERALL)
#: "ab": method_a is shown as Answer 1; "ba": method_b is.
ORDERS: tuple[str, ...] = ("ab", "ba")
REPLICATE_TEMPERATURE = 0.7
#: How much of an unreadable reply a verdict keeps, to diagnose the judge.
RAW_CHARS = 300
PAIR_STAGE = "eval.judge.pairwise"
SCORE_STAGE = "eval.judge.absolute"

# Our own wording of the criteria of GraphRAG appendix F / the survey's Figure 19.
_DEFINITIONS: dict[str, str] = {
    "comprehensiveness": "how fully the answer covers the aspects and details the question calls for",
    "diversity": "how varied the answer is: how many distinct perspectives, angles and insights it offers",
    "empowerment": "how well the answer helps the reader understand the topic and form informed judgements "
    "of their own, for instance by explaining its reasoning and sources",
    "directness": "how specifically and clearly the answer addresses the question, without digressions",
}
_OVERALL_PAIR = "which answer is better on the whole, weighing the criteria above"
_OVERALL_SCORE = "how good the answer is on the whole, weighing the criteria above"


@dataclass(frozen=True)
class JudgeConfig:
    """Knobs of the pairwise and absolute judges (defaults fit an 8k-token window)."""

    answer_tokens: int = 2000
    context_window: int = 8000
    reply_tokens: int = 768
    temperature: float | None = None  # None: 0 for one replicate, REPLICATE_TEMPERATURE for several
    encoding: str = "cl100k_base"

    def temperature_for(self, replicates: int) -> float:
        if self.temperature is not None:
            return self.temperature
        return 0.0 if replicates <= 1 else REPLICATE_TEMPERATURE


# -- records -----------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class PairRequest:
    """One judge call: a pair in one order, one replicate."""

    item: PairItem
    order: str
    replicate: int
    criteria: tuple[str, ...]
    request: ChatRequest

    @property
    def key(self) -> str:
        return verdict_key(self.item.question_id, self.item.method_a, self.item.method_b, self.order, self.replicate)


@dataclass(frozen=True)
class ScoreRequest:
    """One judge call: one answer, one replicate."""

    item: ScoreItem
    replicate: int
    criteria: tuple[str, ...]
    request: ChatRequest

    @property
    def key(self) -> str:
        return score_key(self.item.question_id, self.item.method, self.replicate)


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


def pending_pairs(requests: Sequence[PairRequest], done: Collection[str]) -> list[PairRequest]:
    """The pairwise requests whose key is not in ``done`` (see :func:`done_keys`)."""
    return pending(requests, done)


def pending_scores(requests: Sequence[ScoreRequest], done: Collection[str]) -> list[ScoreRequest]:
    """The absolute-scoring requests whose key is not in ``done``."""
    return pending(requests, done)


# -- the two kinds of judgment -----------------------------------------------------------------


@dataclass(frozen=True)
class _Kind:
    """What tells a pairwise judgment from an absolute one; everything else (criteria,
    clipping to the window, replicates, running, resuming) is one pipeline."""

    prompt: str
    stage: str
    overall: str  # what "overall" asks, in the criteria block
    slot: str  # the value each criterion's line of the reply shape holds
    task: str  # what needs a chat model (its error) and the progress label
    label: str
    as_item: Callable[[Any], Any]
    answers: Callable[[Any], dict[str, str]]  # the item's answers to clip, by method
    # (order, prompt fields) for each way the clipped answers are shown
    arrangements: Callable[[Any, dict[str, str]], list[tuple[str, dict[str, str]]]]
    request: Callable[[Any, str, int, tuple[str, ...], ChatRequest], Any]
    verdicts: Callable[[Any, str, str], list[Any]]  # (request, reply text, judge name)


def _pair_item(raw: PairItem | Sequence[str]) -> PairItem:
    return (raw if isinstance(raw, PairItem) else PairItem(*(str(x) for x in raw))).canonical()


def _score_item(raw: ScoreItem | Sequence[str]) -> ScoreItem:
    return raw if isinstance(raw, ScoreItem) else ScoreItem(*(str(x) for x in raw))


def _pair_arrangements(item: PairItem, shown: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """Both orders: ``"ab"`` shows ``method_a`` as Answer 1."""
    out = []
    for order in ORDERS:
        first, second = (item.method_a, item.method_b) if order == "ab" else (item.method_b, item.method_a)
        out.append((order, {"first_answer": shown[first], "second_answer": shown[second]}))
    return out


def _pair_verdicts(req: PairRequest, text: str, judge: str) -> list[PairVerdict]:
    """Map the reply's positions back to method names, one verdict per criterion."""
    item = req.item
    by_position = {"1": item.method_a, "2": item.method_b} if req.order == "ab" else \
        {"1": item.method_b, "2": item.method_a}
    by_position[TIE] = TIE
    out = []
    for criterion, decision in parse_pairwise(text, req.criteria).items():
        winner = by_position.get(decision.value) if decision.value is not None else None
        out.append(PairVerdict(item.question_id, item.method_a, item.method_b, criterion, req.order,
                               req.replicate, winner, decision.reason, winner is not None, judge,
                               "" if winner is not None else text[:RAW_CHARS]))
    return out


def _score_verdicts(req: ScoreRequest, text: str, judge: str) -> list[ScoreVerdict]:
    out = []
    for criterion, decision in parse_scores(text, req.criteria).items():
        parsed = decision.value is not None
        out.append(ScoreVerdict(req.item.question_id, req.item.method, criterion, req.replicate, decision.value,
                                decision.reason, parsed, judge, "" if parsed else text[:RAW_CHARS]))
    return out


_PAIRWISE = _Kind(
    prompt="eval_pairwise", stage=PAIR_STAGE, overall=_OVERALL_PAIR, slot='"winner": "1" | "2" | "tie"',
    task="pairwise judging", label="judging answer pairs", as_item=_pair_item,
    answers=lambda item: {item.method_a: item.answer_a, item.method_b: item.answer_b},
    arrangements=_pair_arrangements,
    request=lambda item, order, replicate, criteria, request: PairRequest(item, order, replicate, criteria, request),
    verdicts=_pair_verdicts,
)
_ABSOLUTE = _Kind(
    prompt="eval_absolute", stage=SCORE_STAGE, overall=_OVERALL_SCORE, slot='"score": <1-10>',
    task="absolute scoring", label="scoring answers", as_item=_score_item,
    answers=lambda item: {item.method: item.answer},
    arrangements=lambda item, shown: [("", {"answer": shown[item.method]})],
    request=lambda item, order, replicate, criteria, request: ScoreRequest(item, replicate, criteria, request),
    verdicts=_score_verdicts,
)


# -- building requests -------------------------------------------------------------------------


def _check_criteria(criteria: Sequence[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(criteria))
    unknown = [c for c in chosen if c not in ALL_CRITERIA]
    if unknown or not chosen:
        raise ValueError(f"criteria must be a non-empty subset of {ALL_CRITERIA}, not {list(criteria)}")
    return chosen


def _criteria_block(criteria: Sequence[str], overall: str) -> str:
    return "\n".join(f"- {c}: {_DEFINITIONS.get(c, overall)}" for c in criteria)


def _format_block(criteria: Sequence[str], slot: str) -> str:
    """The reply shape, one criterion per line (small models copy a shape they can see)."""
    lines = ",\n".join(f'  "{c}": {{{slot}, "reason": "<one sentence>"}}' for c in criteria)
    return "{\n" + lines + "\n}"


def _version(prompt: Prompt, seed: int, replicate: int) -> str:
    """The prompt's cache identity for one replicate: the text the judge sees does not change."""
    return f"{prompt.cache_version}#seed={seed};r={replicate}"


def _requests(kind: _Kind, items: Iterable[Any], criteria: Sequence[str], replicates: int, seed: int,
              config: JudgeConfig | None) -> list[Any]:
    """Every (item, arrangement, replicate) request of ``kind``, each answer clipped so that
    the prompt, all of the item's answers and the reply fit the window."""
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1, got {replicates}")
    config = config or JudgeConfig()
    chosen = _check_criteria(criteria)
    prompt = load_prompt(kind.prompt)
    tokenizer = get_tokenizer(config.encoding)
    shared = {"criteria": _criteria_block(chosen, kind.overall), "format": _format_block(chosen, kind.slot)}
    temperature = config.temperature_for(replicates)
    out = []
    for raw in items:
        item = kind.as_item(raw)
        fields = {**shared, "question": item.question}
        answers = kind.answers(item)
        blank = kind.arrangements(item, dict.fromkeys(answers, ""))[0][1]
        overhead = sum(tokenizer.count(m["content"]) for m in prompt.messages(**fields, **blank))
        budget = answer_budget(overhead, len(answers), config.context_window, config.reply_tokens,
                               config.answer_tokens)
        shown = {method: clip(answer, budget, tokenizer) for method, answer in answers.items()}
        for order, shown_fields in kind.arrangements(item, shown):
            messages = prompt.messages(**fields, **shown_fields)
            for replicate in range(replicates):
                request = ChatRequest(messages=messages, stage=kind.stage,
                                      prompt_version=_version(prompt, seed, replicate),
                                      temperature=temperature, max_tokens=config.reply_tokens, json_mode=True)
                out.append(kind.request(item, order, replicate, chosen, request))
    return out


def pair_requests(
    items: Iterable[PairItem | Sequence[str]],
    criteria: Sequence[str] = ALL_CRITERIA,
    replicates: int = 1,
    seed: int = 0,
    config: JudgeConfig | None = None,
) -> list[PairRequest]:
    """Every (pair, order, replicate) request, pairs in canonical method order.

    Items are :class:`PairItem` or tuples ``(question_id, question, method_a,
    answer_a, method_b, answer_b)``.
    """
    return _requests(_PAIRWISE, items, criteria, replicates, seed, config)


def score_requests(
    items: Iterable[ScoreItem | Sequence[str]],
    criteria: Sequence[str] = ABSOLUTE_CRITERIA,
    replicates: int = 1,
    seed: int = 0,
    config: JudgeConfig | None = None,
) -> list[ScoreRequest]:
    """Every (answer, replicate) request. Items are :class:`ScoreItem` or tuples
    ``(question_id, question, method, answer)``."""
    return _requests(_ABSOLUTE, items, criteria, replicates, seed, config)


# -- running -----------------------------------------------------------------------------------


def _run(kind: _Kind, chat: ChatModel | None, requests: Sequence[Any], concurrency: int,
         progress: Progress | None) -> list[Any]:
    """Ask the judge every request (concurrently, fail fast); verdicts in request order.
    Nothing to ask needs no model."""
    if not requests:
        return []
    judge = require_chat(chat, kind.task)
    replies = complete_all(judge, [r.request for r in requests], concurrency, progress, kind.label)
    return [v for req, reply in zip(requests, replies) for v in kind.verdicts(req, reply.text, judge.name)]


def run_pair_requests(
    chat: ChatModel | None,
    requests: Sequence[PairRequest],
    concurrency: int = 4,
    progress: Progress | None = None,
) -> list[PairVerdict]:
    """Ask the judge every pairwise request; verdicts in request order."""
    return _run(_PAIRWISE, chat, requests, concurrency, progress)


def run_score_requests(
    chat: ChatModel | None,
    requests: Sequence[ScoreRequest],
    concurrency: int = 4,
    progress: Progress | None = None,
) -> list[ScoreVerdict]:
    """Ask the judge every scoring request; verdicts in request order."""
    return _run(_ABSOLUTE, chat, requests, concurrency, progress)


def judge_pairs(
    chat: ChatModel | None,
    items: Iterable[PairItem | Sequence[str]],
    criteria: Sequence[str] = ALL_CRITERIA,
    replicates: int = 1,
    concurrency: int = 4,
    progress: Progress | None = None,
    seed: int = 0,
    *,
    done: Collection[str] = (),
    config: JudgeConfig | None = None,
) -> list[PairVerdict]:
    """Judge every pair in both orders, ``replicates`` times each; requests whose key is in
    ``done`` (already in the results file) are skipped."""
    requests = pending(_requests(_PAIRWISE, items, criteria, replicates, seed, config), done)
    return _run(_PAIRWISE, chat, requests, concurrency, progress)


def score_absolute(
    chat: ChatModel | None,
    items: Iterable[ScoreItem | Sequence[str]],
    criteria: Sequence[str] = ABSOLUTE_CRITERIA,
    replicates: int = 1,
    concurrency: int = 4,
    progress: Progress | None = None,
    seed: int = 0,
    *,
    done: Collection[str] = (),
    config: JudgeConfig | None = None,
) -> list[ScoreVerdict]:
    """Score every answer 1-10 per criterion, ``replicates`` times (LeanRAG: 5); requests
    whose key is in ``done`` are skipped."""
    requests = pending(_requests(_ABSOLUTE, items, criteria, replicates, seed, config), done)
    return _run(_ABSOLUTE, chat, requests, concurrency, progress)


# -- aggregation -------------------------------------------------------------------------------


def _tally(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """(wins, judgments): wins[i, j] = judgments where i beat j (ties 0.5), over parsed verdicts."""
    index = {m: i for i, m in enumerate(methods)}
    rows = [(index[v.method_a], index[v.method_b], 1.0 if v.winner == v.method_a else 0.5 if v.winner == TIE else 0.0)
            for v in verdicts
            if v.criterion == criterion and v.parsed and v.winner is not None
            and v.method_a in index and v.method_b in index and v.method_a != v.method_b]
    n = len(methods)
    wins, counts = np.zeros((n, n)), np.zeros((n, n))
    if rows:
        a, b, s = (np.asarray(col) for col in zip(*rows))
        a, b = a.astype(np.intp), b.astype(np.intp)
        np.add.at(wins, (a, b), s)
        np.add.at(wins, (b, a), 1.0 - s)
        np.add.at(counts, (a, b), 1.0)
        np.add.at(counts, (b, a), 1.0)
    return wins, counts


def win_rates(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str = OVERALL) -> np.ndarray:
    """M[i, j]: the share of parsed judgments (both orders, all replicates, ties 0.5) in
    which ``methods[i]`` beat ``methods[j]``. Diagonal and pairs without data: NaN.
    M[i, j] + M[j, i] = 1 wherever there is data."""
    wins, counts = _tally(verdicts, methods, criterion)
    rates = np.full(wins.shape, np.nan)
    np.divide(wins, counts, out=rates, where=counts > 0)
    np.fill_diagonal(rates, np.nan)
    return rates


def judgement_counts(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str = OVERALL) -> np.ndarray:
    """N[i, j]: how many parsed judgments :func:`win_rates` averaged for that pair."""
    return _tally(verdicts, methods, criterion)[1].astype(np.int64)


def win_rate_matrices(
    verdicts: Iterable[PairVerdict], methods: Sequence[str], criteria: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """:func:`win_rates` per criterion (default: every criterion the verdicts hold, in
    :data:`ALL_CRITERIA` order)."""
    verdicts = list(verdicts)
    if criteria is None:
        present = {v.criterion for v in verdicts}
        criteria = [c for c in ALL_CRITERIA if c in present] + sorted(present - set(ALL_CRITERIA))
    return {c: win_rates(verdicts, methods, c) for c in criteria}


def position_bias(verdicts: Iterable[PairVerdict], criterion: str | None = None) -> float:
    """Share of decisive parsed verdicts (ties excluded) that chose the answer shown first;
    0.5 is an unbiased judge, NaN when there is none."""
    decisive = [v for v in verdicts
                if v.parsed and v.winner not in (None, TIE) and (criterion is None or v.criterion == criterion)]
    if not decisive:
        return math.nan
    return sum(v.winner == v.first_shown for v in decisive) / len(decisive)


def unparsed_counts(verdicts: Iterable[PairVerdict | ScoreVerdict]) -> dict[str, int]:
    """Criterion -> how many verdicts could not be read (every criterion seen appears)."""
    counts: Counter[str] = Counter()
    for v in verdicts:
        counts[v.criterion] += 0 if v.parsed else 1
    return dict(counts)


def mean_scores(scores: Iterable[ScoreVerdict]) -> dict[str, dict[str, float]]:
    """Method -> criterion -> mean parsed score (over questions and replicates); NaN when
    every score of that method and criterion was unparsed."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in scores:
        values = groups[(s.method, s.criterion)]
        if s.parsed and s.score is not None:
            values.append(s.score)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (method, criterion), values in sorted(groups.items()):
        out[method][criterion] = float(np.mean(values)) if values else math.nan
    return dict(out)


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

