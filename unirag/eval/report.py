"""Summaries and plots of an evaluation run (``answers.jsonl`` rows in, files out).

* ``summary.csv`` / ``summary.md``: one line per method with every metric's
  mean over the questions that have it and that number (``n_<metric>`` columns in
  the CSV; in the Markdown a cell says "(n=...)" where it is not every question),
  the retrieval-level figures, mean tokens and calls per query, and seconds per
  query (retrieval without the chat model's share, its p50/p95, generation, total).
* ``<metric>_vs_tokens.png``: each method's metric against its mean prompt
  tokens (or context tokens when nothing was generated), the survey's
  cost/quality view.
* ``winrate_<criterion>.png``: pairwise win-rate heat maps (survey figures 6-10).
* with ``--budget``: ``budget_summary.csv``, a table per budget in ``summary.md`` and
  ``evidence_recall_vs_budget.png`` (:mod:`unirag.eval.budget_report`).

Rows of typed questions (HotpotQA bridge/comparison, MuSiQue 2/3/4-hop) also give
``grounded_recall:<type>`` and ``evidence_recall:<type>`` columns; untyped rows give none.

The report is always of every row of ``answers.jsonl`` (:func:`unirag.eval.runner.all_rows`),
so a resumed run with fewer methods keeps the others in the tables.

Figures use matplotlib's Agg backend (files only, no display needed).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unirag.eval.budget_report import write_budget_report
from unirag.eval.compare import compare_methods, comparison_markdown, write_comparison_csv
from unirag.eval.tables import cell_with_n, mean_of, pyplot, put_mean, table_cell

RETRIEVAL_COLUMNS = ("grounded_recall", "evidence_recall", "evidence_recall_with_passage", "answer_in_context",
                     "context_tokens")
TYPED = ("grounded_recall", "evidence_recall")  # the recalls also given per question type
COST_COLUMNS = ("prompt_tokens", "completion_tokens", "llm_calls")
TIME_COLUMNS = ("retrieval_s", "retrieval_p50_s", "retrieval_p95_s", "retrieval_cold_s", "retrieval_llm_s",
                "generate_s", "total_s")


N_NOTE = ("Each mean is over the method's questions (`questions`) unless its cell says (n=...): then over "
          "the n questions that have the figure. `grounded_recall` is the headline (a gold passage counts "
          "only if its text is in the context); `evidence_recall` counts passages an item came from, 0 for "
          "a context without passages; `evidence_recall_with_passage` is the recall | context has a passage.")


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per method, in the order methods first appear in ``rows``.

    Retrieval seconds are the non-LLM part (``retrieval - retrieval_llm``): the
    operators' own work, which the survey's Table 7 compares; the chat time of
    agent operators is its own column. The p50/p95 are over warm queries; a
    method's first query in a process (``cold``) also loads its indices and is
    averaged on its own (``retrieval_cold_s``).
    """
    by_method: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_method.setdefault(row["method"], []).append(row)
    out = []
    for method, method_rows in by_method.items():
        ok = [r for r in method_rows if not r.get("error")]
        metric_names = sorted({name for r in ok for name in r.get("metrics", {})})
        def own_seconds(row: dict[str, Any]) -> float:
            return max(0.0, row["seconds"]["retrieval"] - row["seconds"]["retrieval_llm"])

        retrieval_s = [own_seconds(r) for r in ok]
        # Percentiles over warm queries: a method's first query in a process also loads its indices.
        warm_s = [own_seconds(r) for r in ok if not r.get("cold")] or retrieval_s
        cold_s = [own_seconds(r) for r in ok if r.get("cold")]
        summary: dict[str, Any] = {"method": method, "questions": len(ok),
                                   "errors": len(method_rows) - len(ok)}
        for name in metric_names:
            put_mean(summary, name, [r["metrics"].get(name) for r in ok])
        for name in RETRIEVAL_COLUMNS:
            put_mean(summary, name, [r["retrieval"].get(name) for r in ok])
        for kind in sorted({r.get("question_type") or "" for r in ok} - {""}):
            typed = [r for r in ok if r.get("question_type") == kind]
            for name in TYPED:
                put_mean(summary, f"{name}:{kind}", [r["retrieval"].get(name) for r in typed])
        for name in COST_COLUMNS:
            summary[name] = mean_of([r["usage"].get(name) for r in ok])
        summary.update({
            "retrieval_s": mean_of(retrieval_s), "retrieval_p50_s": _percentile(warm_s, 50),
            "retrieval_p95_s": _percentile(warm_s, 95), "retrieval_cold_s": mean_of(cold_s),
            "retrieval_llm_s": mean_of([r["seconds"]["retrieval_llm"] for r in ok]),
            "generate_s": mean_of([r["seconds"]["generate"] for r in ok]),
            "total_s": mean_of([r["seconds"]["total"] for r in ok]),
        })
        out.append(summary)
    return out


def columns(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """Table columns: method and counts, answer metrics, retrieval, per type, cost, time
    (each mean's ``n_`` column is not one of them: see :func:`csv_columns`)."""
    keys = {key for s in summaries for key in s if not key.startswith("n_")}
    by_type = sorted((key for key in keys if ":" in key and key.split(":")[0] in TYPED),
                     key=lambda key: (TYPED.index(key.split(":")[0]), key))  # grounded ones first
    fixed = {"method", "questions", "errors", *RETRIEVAL_COLUMNS, *by_type, *COST_COLUMNS, *TIME_COLUMNS}
    metrics = sorted(keys - fixed)
    return ["method", "questions", "errors", *metrics, *RETRIEVAL_COLUMNS, *by_type, *COST_COLUMNS, *TIME_COLUMNS]


def csv_columns(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`columns` with each mean's ``n_<metric>`` right after it."""
    names: list[str] = []
    for name in columns(summaries):
        names.append(name)
        if any(f"n_{name}" in s for s in summaries):
            names.append(f"n_{name}")
    return names


def write_tables(summaries: Sequence[dict[str, Any]], out: Path, title: str = "") -> tuple[Path, Path]:
    """``summary.csv`` and ``summary.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    names = columns(summaries)
    csv_path, md_path = out / "summary.csv", out / "summary.md"
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(csv_columns(summaries))
        for summary in summaries:
            writer.writerow([table_cell(summary.get(name)) for name in csv_columns(summaries)])
    lines = [f"# {title}", ""] if title else []
    lines += [N_NOTE, ""]
    lines += ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell_with_n(s.get(name), s.get(f"n_{name}"), s["questions"]) for name in names)
              + " |" for s in summaries]
    md_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return csv_path, md_path


def plot_metric_vs_tokens(summaries: Sequence[dict[str, Any]], metric: str, out: Path) -> Path | None:
    """Scatter of ``metric`` against mean prompt tokens per query, one labelled point per method.
    Falls back to context tokens when no prompt was sent (a retrieval-only run)."""
    cost = "prompt_tokens" if any(s.get("prompt_tokens") for s in summaries) else "context_tokens"
    points = [(s[cost], s[metric], s["method"]) for s in summaries
              if s.get(metric) is not None and s.get(cost) is not None]
    if not points:
        return None
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(7, 5))
    axes.scatter([p[0] for p in points], [p[1] for p in points])
    for x, y, label in points:
        axes.annotate(label, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    axes.set_xlabel(f"mean {cost.replace('_', ' ')} per query")
    axes.set_ylabel(metric.replace("_", " "))
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path = out / f"{metric}_vs_tokens.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_win_rates(methods: Sequence[str], matrix: np.ndarray, criterion: str, out: Path) -> Path:
    """Heat map of ``matrix[i][j]`` = how often method i beat method j on ``criterion``."""
    plt = pyplot()
    size = max(4.0, 0.6 * len(methods) + 2)
    figure, axes = plt.subplots(figsize=(size, size))
    shown = np.ma.masked_invalid(np.asarray(matrix, dtype=float))
    image = axes.imshow(shown, vmin=0.0, vmax=1.0, cmap="RdYlGn")
    axes.set_xticks(range(len(methods)), labels=list(methods), rotation=45, ha="right")
    axes.set_yticks(range(len(methods)), labels=list(methods))
    for i in range(len(methods)):
        for j in range(len(methods)):
            if not np.ma.is_masked(shown[i, j]):
                axes.text(j, i, f"{shown[i, j]:.2f}", ha="center", va="center", fontsize=8)
    axes.set_title(f"win rate (row beats column): {criterion}")
    figure.colorbar(image, ax=axes, fraction=0.046)
    figure.tight_layout()
    path = out / f"winrate_{criterion}.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def headline_metrics(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """The metrics worth a cost/quality plot: answer metrics, plus the retrieval ones."""
    names = columns(summaries)
    start, stop = names.index("errors") + 1, names.index(RETRIEVAL_COLUMNS[0])
    judged = ("win_", "score_", "claim")  # one plot each for the judge: its overall figures
    answer = [name for name in names[start:stop] if not name.startswith(judged)]
    return [*answer, *(n for n in ("win_overall", "score_overall") if n in names), "grounded_recall",
            "evidence_recall", "answer_in_context"]


def write_report(
    rows: Sequence[dict[str, Any]], out: Path, title: str = "", extra: dict[str, dict[str, Any]] | None = None,
    compare_to: str | None = None,
) -> dict[str, Any]:
    """Tables and cost/quality plots for ``rows``; ``extra`` adds per-method columns (the
    judge's win rates and scores); ``compare_to`` a baseline method every other one is
    compared to, question by question (:mod:`unirag.eval.compare`). Returns the summaries,
    the comparisons and the files written."""
    comparisons: list[dict[str, Any]] = []
    compared = ""
    if compare_to:  # first: an unknown baseline is one line, before any file is rewritten
        comparisons = compare_methods(rows, compare_to)
    summaries = summarize(rows)
    for summary in summaries:
        summary.update((extra or {}).get(summary["method"], {}))
    files = [str(p) for p in write_tables(summaries, out, title)]
    for metric in headline_metrics(summaries):
        path = plot_metric_vs_tokens(summaries, metric, out)
        if path is not None:
            files.append(str(path))

    budgets, budget_files, markdown = write_budget_report(rows, out)
    if compare_to:
        files.append(str(write_comparison_csv(comparisons, out)))
        compared = comparison_markdown(comparisons)
    if markdown or compared:
        with open(out / "summary.md", "a", encoding="utf-8") as handle:
            handle.write(markdown + compared)
    return {"summaries": summaries, "files": files + budget_files, "budgets": budgets, "comparisons": comparisons}
