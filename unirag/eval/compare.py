"""Paired comparison of every method against a baseline, question by question.

Two methods' means over the same 100 questions differ by a few hundredths all the
time; whether that is more than the luck of which questions were drawn is what a
paired bootstrap answers. For each other method, each context (the whole one and
each budget's cut) and each headline figure (grounded recall, evidence recall,
answer in context), the per-question difference ``method - baseline`` is taken over
the questions both have the figure for (``n``); its mean gets a 95 % confidence
interval from resampling those questions with replacement (10,000 resamples, a fixed
seed, so a report is reproducible). An interval that excludes 0 says the difference
holds for this kind of question, not for this draw of them only.

``unirag eval --compare-to vanilla`` (and ``unirag eval-report OUT --compare-to
vanilla`` over an existing run) writes the rows to ``comparison.csv`` and a section
of ``summary.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import ConfigError
from unirag.eval.tables import write_csv

COMPARED = ("grounded_recall", "evidence_recall", "answer_in_context")
FULL = "full"  # the whole context, beside the budgets
RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
_BLOCK = 1_000  # resamples drawn at once: memory stays ~BLOCK x n indices
CSV_COLUMNS = ("method", "baseline", "budget", "metric", "n", "mean_difference", "ci_low", "ci_high", "better",
               "worse")


def paired_bootstrap(differences: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED,
                     level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high) of per-question paired ``differences``: the percentile interval
    of the resampled means. Deterministic for a seed; an empty input is a ``ValueError``."""
    values = np.asarray(differences, dtype=float)
    if values.size == 0:
        raise ValueError("no paired questions to compare")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _BLOCK):
        stop = min(start + _BLOCK, resamples)
        picks = rng.integers(0, values.size, size=(stop - start, values.size))
        means[start:stop] = values[picks].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(values.mean()), float(low), float(high)


def _figures(row: dict[str, Any], budget: str) -> dict[str, Any]:
    return row.get("retrieval", {}) if budget == FULL else row.get("budgets", {}).get(budget, {})


def compare_methods(rows: Sequence[dict[str, Any]], baseline: str,
                    metrics: Sequence[str] = COMPARED) -> list[dict[str, Any]]:
    """One comparison per (other method, context, metric) with at least one paired question;
    contexts ``full`` then the budgets ascending. Rows are the latest per (method,
    question); error rows are left out."""
    by_method: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        if not row.get("error"):
            by_method.setdefault(row["method"], {})[row["question_id"]] = row
    if baseline not in by_method:
        known = ", ".join(sorted(by_method)) or "none"
        raise ConfigError(f"--compare-to {baseline}: no answers of that method (methods answered: {known})")
    base = by_method[baseline]
    budgets = sorted({b for r in base.values() for b in r.get("budgets", {})}, key=int)
    out = []
    for method, answered in by_method.items():
        if method == baseline:
            continue
        for budget in (FULL, *budgets):
            for metric in metrics:
                pairs = [(_figures(row, budget).get(metric), _figures(base[q], budget).get(metric))
                         for q, row in answered.items() if q in base]
                diffs = [a - b for a, b in pairs if a is not None and b is not None]
                if not diffs:
                    continue
                mean, low, high = paired_bootstrap(diffs)
                out.append({"method": method, "baseline": baseline, "budget": budget, "metric": metric,
                            "n": len(diffs), "mean_difference": mean, "ci_low": low, "ci_high": high,
                            "better": sum(d > 0 for d in diffs), "worse": sum(d < 0 for d in diffs)})
    return out


def write_comparison_csv(comparisons: Sequence[dict[str, Any]], out: Path) -> Path:
    return write_csv(out / "comparison.csv", CSV_COLUMNS, comparisons)


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def comparison_markdown(comparisons: Sequence[dict[str, Any]]) -> str:
    """A ``summary.md`` section: one table per context, a row per method, per metric the
    mean difference, its 95 % CI and n; a * marks an interval that excludes 0."""
    if not comparisons:
        return ""
    baseline = comparisons[0]["baseline"]
    metrics = list(dict.fromkeys(c["metric"] for c in comparisons))
    lines = ["", f"## Compared to {baseline} (paired, per question)", "",
             f"Mean of (method - {baseline}) over the n questions both have the figure for, with a 95 % "
             f"paired bootstrap interval ({RESAMPLES:,} resamples over questions, seed {SEED}); "
             "* : the interval excludes 0; better / worse: questions where the method is above / below."]
    contexts = list(dict.fromkeys(c["budget"] for c in comparisons))
    for context in contexts:
        at = {(c["method"], c["metric"]): c for c in comparisons if c["budget"] == context}
        title = "Whole context" if context == FULL else f"Budget {int(context):,} tokens"
        header = ["method", *(f"{m.replace('_', ' ')}" for m in metrics)]
        lines += ["", f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for method in dict.fromkeys(m for m, _ in at):
            cells = [method]
            for metric in metrics:
                item = at.get((method, metric))
                if item is None:
                    cells.append("–")
                    continue
                mark = "*" if item["ci_low"] > 0 or item["ci_high"] < 0 else ""
                cells.append(f"{_signed(item['mean_difference'])}{mark} [{_signed(item['ci_low'])}, "
                             f"{_signed(item['ci_high'])}] n={item['n']} ({item['better']}/{item['worse']})")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
