"""Tables and a plot of budget-matched figures (rows written with ``unirag eval --budget``).

One summary per (method, budget, question type): the mean evidence recall, answer in
context and context tokens of the context cut to the budget (:mod:`unirag.eval.budget`),
over the method's questions of that type (``all``: every question), with passage
recall@k of the whole ranking beside them. ``budget_summary.csv`` holds them all (long
format); ``summary.md`` gets one table per budget; ``evidence_recall_vs_budget.png``
plots each method's recall against the budget.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unirag.eval.budget import RECALL_AT
from unirag.eval.tables import mean_of, pyplot, table_cell

ALL = "all"
FIGURES = ("evidence_recall", "answer_in_context", "context_tokens")
CSV_COLUMNS = ("method", "budget", "question_type", "questions", *FIGURES, *(f"recall@{k}" for k in RECALL_AT))


def question_types(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The question types of ``rows`` (bridge, comparison; 2hop, 3hop, 4hop), sorted."""
    return sorted({row.get("question_type") or "" for row in rows} - {""})


def budget_summaries(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means per (method, budget, question type) over the rows that have budget figures,
    methods in the order they first appear, budgets ascending, ``all`` first."""
    scored = [row for row in rows if not row.get("error") and row.get("budgets")]
    types = [ALL, *question_types(scored)]
    by_method: dict[str, list[dict[str, Any]]] = {}
    for row in scored:
        by_method.setdefault(row["method"], []).append(row)
    budgets = sorted({int(b) for row in scored for b in row["budgets"]})
    out = []
    for method, method_rows in by_method.items():
        for budget in budgets:
            for kind in types:
                chosen = [r for r in method_rows if kind == ALL or r.get("question_type") == kind]
                figures = [r["budgets"].get(str(budget), {}) for r in chosen]
                if not chosen:
                    continue
                summary: dict[str, Any] = {"method": method, "budget": budget, "question_type": kind,
                                           "questions": len(chosen)}
                for name in FIGURES:
                    summary[name] = mean_of([f.get(name) for f in figures])
                for k in RECALL_AT:
                    summary[f"recall@{k}"] = mean_of([r["retrieval"].get("recall_at", {}).get(str(k)) for r in chosen])
                out.append(summary)
    return out


def write_budget_csv(summaries: Sequence[dict[str, Any]], out: Path) -> Path:
    path = out / "budget_summary.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for summary in summaries:
            writer.writerow([table_cell(summary.get(name)) for name in CSV_COLUMNS])
    return path


def budget_markdown(summaries: Sequence[dict[str, Any]]) -> str:
    """One table per budget: recall over all questions and per type, answer in context,
    tokens, recall@k; methods by recall over all questions, best first."""
    types = sorted({s["question_type"] for s in summaries} - {ALL})
    lines: list[str] = []
    for budget in sorted({s["budget"] for s in summaries}):
        at = {(s["method"], s["question_type"]): s for s in summaries if s["budget"] == budget}
        methods = sorted({m for m, t in at if t == ALL}, key=lambda m: -(at[(m, ALL)]["evidence_recall"] or -1.0))
        header = ["method", "questions", "evidence recall", *(f"recall {t}" for t in types), "answer in context",
                  "context tokens", *(f"recall@{k}" for k in RECALL_AT)]
        lines += ["", f"## Budget {budget:,} tokens", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for method in methods:
            overall = at[(method, ALL)]
            cells = [method, table_cell(overall["questions"]), table_cell(overall["evidence_recall"]),
                     *(table_cell(at.get((method, t), {}).get("evidence_recall")) for t in types),
                     table_cell(overall["answer_in_context"]), table_cell(overall["context_tokens"]),
                     *(table_cell(overall.get(f"recall@{k}")) for k in RECALL_AT)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_recall_vs_budget(summaries: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """Evidence recall (all questions) against the budget, one line per method."""
    points: dict[str, list[tuple[int, float]]] = {}
    for s in summaries:
        if s["question_type"] == ALL and s["evidence_recall"] is not None:
            points.setdefault(s["method"], []).append((s["budget"], s["evidence_recall"]))
    if not points:
        return None
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 5.5))
    styles = ("-", "--", ":", "-.")  # the colour cycle has 10 colours: more methods change the line style
    for number, (method, line) in enumerate(points.items()):
        line.sort()
        axes.plot([b for b, _ in line], [r for _, r in line], marker="o", label=method,
                  linestyle=styles[(number // 10) % len(styles)])
    axes.set_xscale("log")
    axes.minorticks_off()
    axes.set_xticks(sorted({b for line in points.values() for b, _ in line}),
                    labels=[f"{b:,}" for b in sorted({b for line in points.values() for b, _ in line})])
    axes.set_xlabel("context budget (tokens)")
    axes.set_ylabel("evidence recall")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    path = out / "evidence_recall_vs_budget.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_budget_report(rows: Sequence[dict[str, Any]], out: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """(summaries, files written, markdown for summary.md); nothing when no row has budgets."""
    summaries = budget_summaries(rows)
    if not summaries:
        return [], [], ""
    files = [str(write_budget_csv(summaries, out))]
    plot = plot_recall_vs_budget(summaries, out)
    if plot is not None:
        files.append(str(plot))
    return summaries, files, budget_markdown(summaries)
