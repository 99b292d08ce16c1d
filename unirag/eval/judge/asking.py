"""Asking the judge: the pairwise and absolute prompts, one request per (item, order,
replicate), answers clipped to the window, replies turned into verdicts."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from unirag.eval.judge.parse import TIE, parse_pairwise, parse_scores
from unirag.eval.judge.shared import answer_budget, clip, pending, require_chat
from unirag.eval.judge.verdicts import (
    ABSOLUTE_CRITERIA,
    ALL_CRITERIA,
    ORDERS,
    PairItem,
    PairVerdict,
    ScoreItem,
    ScoreVerdict,
    score_key,
    verdict_key,
)
from unirag.prompts.prompt import Prompt, load_prompt
from unirag.llm.base import ChatModel, ChatRequest
from unirag.llm.batch import complete_all
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer

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
