"""Paired per-question comparison against a baseline (``--compare-to``), on hand-made rows."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from unirag.errors import ConfigError
from unirag.eval.compare import compare_methods, comparison_markdown, paired_bootstrap
from unirag.eval.report import write_report


def row(method: str, qid: str, grounded: float | None, recall: float, at_500: float) -> dict[str, Any]:
    return {
        "method": method, "question_id": qid, "question_type": None, "error": None, "metrics": {},
        "retrieval": {"grounded_recall": grounded, "evidence_recall": recall, "answer_in_context": recall,
                      "context_tokens": 900, "recall_at": {}},
        "budgets": {"500": {"grounded_recall": at_500, "evidence_recall": at_500, "answer_in_context": at_500,
                            "context_tokens": 480}},
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "llm_calls": 0},
        "seconds": {"retrieval": 0.01, "retrieval_llm": 0.0, "generate": 0.0, "total": 0.01},
    }


QUESTIONS = [f"q{i}" for i in range(20)]
# "better" beats vanilla by 0.5 on every question in the whole context: a CI far from 0.
# "noisy" is +0.5 on half the questions and -0.5 on the other half: mean 0, a CI around 0.
# At 500 tokens "better" is +1 on 2 questions of 20 only: a mean of +0.1 whose CI touches 0.
ROWS = [
    *(row("vanilla", q, 0.5, 0.5, 0.0) for q in QUESTIONS),
    *(row("better", q, 1.0, 1.0, 1.0 if i < 2 else 0.0) for i, q in enumerate(QUESTIONS)),
    *(row("noisy", q, 1.0 if i % 2 else 0.0, 0.5, 0.0) for i, q in enumerate(QUESTIONS)),
]


def by_key(comparisons: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(c["method"], c["budget"], c["metric"]): c for c in comparisons}


def test_paired_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    diffs = np.linspace(-0.2, 0.6, 37)
    first, again = paired_bootstrap(diffs), paired_bootstrap(diffs)
    assert first == again  # a fixed seed: the same interval every run
    mean, low, high = first
    assert low < mean < high and mean == pytest.approx(0.2)
    assert paired_bootstrap([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3, 0.3))
    with pytest.raises(ValueError, match="no paired questions"):
        paired_bootstrap([])


def test_an_always_better_method_excludes_zero_a_noisy_one_includes_it() -> None:
    found = by_key(compare_methods(ROWS, "vanilla"))
    better = found[("better", "full", "grounded_recall")]
    assert better["n"] == 20 and better["mean_difference"] == pytest.approx(0.5)
    assert better["ci_low"] > 0 and (better["better"], better["worse"]) == (20, 0)
    noisy = found[("noisy", "full", "grounded_recall")]
    assert noisy["mean_difference"] == pytest.approx(0.0) and noisy["ci_low"] < 0 < noisy["ci_high"]
    assert (noisy["better"], noisy["worse"]) == (10, 10)
    rare = found[("better", "500", "grounded_recall")]
    assert rare["mean_difference"] == pytest.approx(0.1) and rare["ci_low"] <= 0 < rare["ci_high"]
    assert {metric for _, _, metric in found} == {"grounded_recall", "evidence_recall", "answer_in_context"}
    assert not any(method == "vanilla" for method, _, _ in found)


def test_only_questions_both_methods_have_are_paired() -> None:
    rows = [*ROWS, row("partial", "q0", None, 1.0, 1.0), row("partial", "q1", 1.0, 1.0, 1.0),
            {"method": "partial", "question_id": "q2", "error": "LLMError: boom"}]
    found = by_key(compare_methods(rows, "vanilla"))
    assert found[("partial", "full", "grounded_recall")]["n"] == 1  # q0 has no grounded recall, q2 failed
    assert found[("partial", "full", "evidence_recall")]["n"] == 2


def test_an_unknown_baseline_is_one_line() -> None:
    with pytest.raises(ConfigError, match="--compare-to bm25: no answers of that method"):
        compare_methods(ROWS, "bm25")


def test_write_report_writes_comparison_csv_and_a_summary_section(tmp_path: Path) -> None:
    report = write_report(ROWS, tmp_path, "dev", compare_to="vanilla")
    assert str(tmp_path / "comparison.csv") in report["files"]
    with open(tmp_path / "comparison.csv", encoding="utf-8") as handle:
        lines = list(csv.DictReader(handle))
    assert len(lines) == 2 * 2 * 3  # methods x (full, 500) x metrics
    assert {line["baseline"] for line in lines} == {"vanilla"}
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## Compared to vanilla" in summary and "### Budget 500 tokens" in summary
    better = next(line for line in summary.split("### Whole context")[1].splitlines() if line.startswith("| better"))
    assert "+0.5000* [" in better and "n=20 (20/0)" in better
    assert comparison_markdown([]) == ""
