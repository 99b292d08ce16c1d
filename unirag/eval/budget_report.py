"""Tables and plots of budget-matched figures (rows written with ``unirag eval --budget``).

One summary per (method, budget, question type): the mean grounded recall, evidence
recall (and its conditional mean over questions whose cut context has a passage), answer
in context and context tokens of the context cut to the budget (:mod:`unirag.eval.budget`),
over the method's questions of that type (``all``: every question; types only where the
data gives them), each with its n, and passage recall@k of the whole ranking beside them.
``budget_summary.csv`` holds them all (long format, an ``n_<figure>`` column beside each
figure); ``summary.md`` gets one table per budget; ``grounded_recall_vs_budget.png`` and
``evidence_recall_vs_budget.png`` plot each method's recall against the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unirag.eval.budget import RECALL_AT
from unirag.eval.tables import cell_with_n, put_mean, pyplot, table_cell, write_csv

ALL = "all"
FIGURES = ("grounded_recall", "evidence_recall", "evidence_recall_with_passage", "answer_in_context",
           "context_tokens")
AT_K = tuple(f"recall@{k}" for k in RECALL_AT)
CSV_COLUMNS = ("method", "budget", "question_type", "questions",
               *(column for name in (*FIGURES, *AT_K) for column in (name, f"n_{name}")))
#: The figures ``summary.md`` shows per budget, with their headers.
SHOWN = {"grounded_recall": "grounded recall", "evidence_recall": "evidence recall",
         "evidence_recall_with_passage": "recall \\| context has a passage", "answer_in_context": "answer in context",
         "context_tokens": "context tokens"}


def question_types(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The question types of ``rows`` (bridge, comparison; 2hop, 3hop, 4hop), sorted; none
    for untyped data."""
    return sorted({row.get("question_type") or "" for row in rows} - {""})


def budget_summaries(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means (and their n) per (method, budget, question type) over the rows that have
    budget figures, methods in the order they first appear, budgets ascending, ``all`` first."""
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
                    put_mean(summary, name, [f.get(name) for f in figures])
                for k in RECALL_AT:
                    put_mean(summary, f"recall@{k}", [r["retrieval"].get("recall_at", {}).get(str(k))
                                                      for r in chosen])
                out.append(summary)
    return out


def write_budget_csv(summaries: Sequence[dict[str, Any]], out: Path) -> Path:
    return write_csv(out / "budget_summary.csv", CSV_COLUMNS, summaries)


def _rank(summary: dict[str, Any]) -> tuple[float, float]:
    """Best first: grounded recall, then evidence recall (a missing figure last)."""
    def value(name: str) -> float:
        return summary.get(name) if summary.get(name) is not None else -1.0
    return -value("grounded_recall"), -value("evidence_recall")


def budget_markdown(summaries: Sequence[dict[str, Any]]) -> str:
    """One table per budget: the recalls, grounded recall per question type (no type
    columns for untyped data), answer in context, tokens, recall@k; each mean with its n
    where it is not over every question; methods best first by grounded recall."""
    types = sorted({s["question_type"] for s in summaries} - {ALL})
    lines: list[str] = ["", "## Budget-matched contexts", "",
                        "Each mean is over the method's `questions` unless its cell says (n=...). *Grounded "
                        "recall* (headline): gold passages whose text is in the cut context. *Evidence recall*: "
                        "gold passages an item of the cut context came from (entities and relationships bring "
                        "their source passages), 0 where the cut context holds no passage item; *recall | "
                        "context has a passage*: its mean over the questions whose cut context has one."]
    for budget in sorted({s["budget"] for s in summaries}):
        at = {(s["method"], s["question_type"]): s for s in summaries if s["budget"] == budget}
        methods = sorted({m for m, t in at if t == ALL}, key=lambda m: _rank(at[(m, ALL)]))
        ranked = [name for name in AT_K if any(s.get(f"n_{name}") for s in at.values())]  # passage rankers only
        header = ["method", "questions", *SHOWN.values(), *(f"grounded {t}" for t in types), *ranked]
        lines += ["", f"### Budget {budget:,} tokens", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        for method in methods:
            overall = at[(method, ALL)]
            questions = overall["questions"]
            cells = [method, table_cell(questions),
                     *(cell_with_n(overall.get(name), overall.get(f"n_{name}"), questions) for name in SHOWN),
                     *(typed_cell(at.get((method, t))) for t in types),
                     *(cell_with_n(overall.get(name), overall.get(f"n_{name}"), questions) for name in ranked)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def typed_cell(summary: dict[str, Any] | None) -> str:
    """Grounded recall over one type's questions, with its n (the type's size or fewer)."""
    if summary is None:
        return "–"
    return f"{table_cell(summary.get('grounded_recall')) or '–'} (n={summary.get('n_grounded_recall', 0)})"


def plot_recall_vs_budget(summaries: Sequence[dict[str, Any]], out: Path,
                          metric: str = "evidence_recall") -> Path | None:
    """``metric`` (all questions) against the budget, one line per method."""
    points: dict[str, list[tuple[int, float]]] = {}
    for s in summaries:
        if s["question_type"] == ALL and s.get(metric) is not None:
            points.setdefault(s["method"], []).append((s["budget"], s[metric]))
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
    axes.set_ylabel(metric.replace("_", " "))
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    path = out / f"{metric}_vs_budget.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_budget_report(rows: Sequence[dict[str, Any]], out: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """(summaries, files written, markdown for summary.md); nothing when no row has budgets."""
    summaries = budget_summaries(rows)
    if not summaries:
        return [], [], ""
    files = [str(write_budget_csv(summaries, out))]
    for metric in ("grounded_recall", "evidence_recall"):
        plot = plot_recall_vs_budget(summaries, out, metric)
        if plot is not None:
            files.append(str(plot))
    return summaries, files, budget_markdown(summaries)
