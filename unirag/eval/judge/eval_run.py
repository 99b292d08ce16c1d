"""The LLM judge applied to an evaluation run's answers (``unirag eval --judge``).

Reads the answered rows, asks the judge what ``judge.jsonl`` does not hold
yet, appends the verdicts, then aggregates everything in the file:

* ``pairwise``: every pair of methods on every question, both orders,
  ``replicates`` times; win-rate matrices per criterion (heat maps), each
  method's mean win rate against the others, and the judge's position bias;
* ``absolute``: LeanRAG's 1-10 scores per criterion, averaged per method;
* ``claims``: GraphRAG's claim-based comprehensiveness and diversity.

A killed run loses at most the batch in flight, and not even its model
calls: they are in the response cache, so the rerun gets them for free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import ConfigError
from unirag.eval.judge.aggregate import (
    judgement_counts,
    mean_scores,
    position_bias,
    unparsed_counts,
    win_rate_matrices,
)
from unirag.eval.judge.asking import JudgeConfig, judge_pairs, score_absolute
from unirag.eval.judge.claims import AnswerClaims, ClaimItem, claim_summary, extract_claims
from unirag.eval.judge.shared import append_rows
from unirag.eval.judge.verdicts import PairItem, PairVerdict, ScoreItem, ScoreVerdict, read_records
from unirag.eval.report import plot_win_rates
from unirag.llm.base import ChatModel
from unirag.llm.factory import build_stack
from unirag.progress import Progress

JUDGE_FILE = "judge.jsonl"
JUDGE_MODES = ("pairwise", "absolute", "claims")


def _answered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if not row.get("error") and (row.get("answer") or "").strip()]


def _pair_items(rows: Sequence[dict[str, Any]]) -> list[Any]:
    by_question: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_question.setdefault(row["question_id"], []).append(row)
    items = []
    for question_id, answers in by_question.items():
        for a, b in combinations(sorted(answers, key=lambda r: r["method"]), 2):
            items.append(PairItem(question_id, a["question"], a["method"], a["answer"], b["method"], b["answer"]))
    return items


def ask_judge(
    chat: ChatModel, rows: Sequence[dict[str, Any]], modes: Sequence[str], out: Path, replicates: int,
    concurrency: int, progress: Progress, context_window: int,
) -> int:
    """Run the judgments ``judge.jsonl`` lacks; returns how many records were added."""

    unknown = sorted(set(modes) - set(JUDGE_MODES))
    if unknown:
        raise ConfigError(f"unknown judge mode {', '.join(unknown)} (known: {', '.join(JUDGE_MODES)})")
    path = out / JUDGE_FILE
    records, _ = read_records(path)
    done = {record.key for record in records}
    answered = _answered(rows)
    config = JudgeConfig(context_window=context_window)
    added = 0
    if "pairwise" in modes:
        verdicts = judge_pairs(chat, _pair_items(answered), replicates=replicates, concurrency=concurrency,
                               progress=progress, done=done, config=config)
        added += append_rows(path, verdicts)
    if "absolute" in modes:
        items = [ScoreItem(r["question_id"], r["question"], r["method"], r["answer"]) for r in answered]
        scores = score_absolute(chat, items, replicates=replicates, concurrency=concurrency, progress=progress,
                                done=done, config=config)
        added += append_rows(path, scores)
    if "claims" in modes:
        items = [ClaimItem(r["question_id"], r["method"], r["answer"]) for r in answered]
        claims = extract_claims(chat, items, concurrency=concurrency, progress=progress, done=done)
        added += append_rows(path, claims)
    return added


def judge_answers(
    settings: Any, cache: Any, rows: Sequence[dict[str, Any]], modes: Sequence[str], out: Path,
    methods: Sequence[str], *, base_url: str | None, model: str | None, replicates: int, progress: Progress,
    warn: Callable[[str], None],
) -> dict[str, Any]:
    """Judge an eval run's answers with the chat model of ``settings`` (or the endpoint and
    model given), through the workspace's cache, and aggregate ``judge.jsonl``."""
    chosen = {key: value for key, value in (("base_url", base_url), ("model", model)) if value}
    judge_settings = settings.model_copy(update={"chat": settings.chat.model_copy(update=chosen)})
    if judge_settings.chat.resolved_provider == "embedded":
        warn("the judge is the embedded SmolLM2-135M: its verdicts prove the pipeline, not the methods; "
             "give --judge-llm and --judge-model for a real judge")
    chat = build_stack(judge_settings, cache).chat
    ask_judge(chat, rows, modes, out, replicates, settings.concurrency, progress, judge_settings.chat.prompt_window)
    return judge_report(out, methods)


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), 4)


def judge_report(out: Path, methods: Sequence[str]) -> dict[str, Any]:
    """Aggregate ``judge.jsonl``: win-rate matrices and heat maps, mean scores, claim
    figures, and per-method columns for the summary table."""
    records, unreadable = read_records(out / JUDGE_FILE)
    wanted = set(methods)
    pairs = [r for r in records if isinstance(r, PairVerdict) and {r.method_a, r.method_b} <= wanted]
    scores = [r for r in records if isinstance(r, ScoreVerdict) and r.method in wanted]
    claims = [r for r in records if isinstance(r, AnswerClaims) and r.method in wanted]
    columns: dict[str, dict[str, Any]] = {m: {} for m in methods}
    result: dict[str, Any] = {"unreadable_lines": unreadable, "files": []}
    if pairs:
        ordered = sorted({m for r in pairs for m in (r.method_a, r.method_b)})
        matrices = win_rate_matrices(pairs, ordered)
        result["win_rates"] = {
            criterion: {"methods": ordered, "matrix": [[_finite(v) for v in row] for row in matrix.tolist()],
                        "judgements": judgement_counts(pairs, ordered, criterion).tolist()}
            for criterion, matrix in matrices.items()
        }
        result["position_bias"] = _finite(position_bias(pairs))
        result["unparsed"] = unparsed_counts(pairs)
        for criterion, matrix in matrices.items():
            result["files"].append(str(plot_win_rates(ordered, matrix, criterion, out)))
            for i, method in enumerate(ordered):
                row = np.asarray(matrix[i], dtype=float)
                columns[method][f"win_{criterion}"] = _finite(float(np.nanmean(row)) if np.isfinite(row).any()
                                                              else math.nan)
    if scores:
        means = mean_scores(scores)
        result["scores"] = {m: {c: _finite(v) for c, v in by.items()} for m, by in means.items()}
        for method, by in means.items():
            for criterion, value in by.items():
                columns[method][f"score_{criterion}"] = _finite(value)
    if claims:
        summary = claim_summary(claims)
        result["claims"] = {m: {"answers": s["answers"], "unparsed": s["unparsed"],
                                "comprehensiveness": _finite(s["comprehensiveness"]),
                                "diversity": _finite(s["diversity_mean"])} for m, s in summary.items()}
        for method, s in summary.items():
            columns[method]["claims"] = _finite(s["comprehensiveness"])
            columns[method]["claim_clusters"] = _finite(s["diversity_mean"])
    result["columns"] = {m: c for m, c in columns.items() if c}
    return result
