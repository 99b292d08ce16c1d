"""Turn ``unirag eval --budget`` output directories into the tables of docs/results.md.

The numbers on the Results page are generated from the rows of ``answers.jsonl``, never typed
by hand: this script reads one or more eval output directories of one dataset and prints (or,
with ``--write``, puts between the page's markers) one Markdown section:

* a table per dataset, a row per method: grounded recall at each budget, grounded recall per
  question type at the focus budget (only where the data gives types), evidence recall, answer
  in context and context tokens at the focus budget, passage recall@2/@5 of the whole ranking
  ("—" for a method that ranks no passages); each mean shows its n where it is not over every
  question; methods best first by grounded recall at the focus budget;
* the **goal check**: the baseline is the better of ``vanilla`` and ``hybrid`` by grounded recall
  at the focus budget; every graph method (all but the baselines, BM25, ZeroShot, CoT and the
  ``-rerank`` variants) is compared with it question by question (the paired bootstrap of
  :mod:`unirag.eval.compare`), and one sentence says whether a graph method beats it by at least
  0.05 with the 95 % interval above zero.

One retrieve-only run may be split over several directories (the zero-LLM question path in one,
``--question-path llm`` in another): give such a directory a label, ``DIR=LABEL``, and its
methods are named ``method [LABEL]``; the same method name from two directories is refused.

Run from the repository root::

    .venv/bin/python bench/results_tables.py out/hotpot out/hotpot-llm=llm --dataset hotpotqa \\
        --command "unirag eval -d hotpotqa ..." --write docs/results.md

``--write PAGE`` replaces what is between ``<!-- results:DATASET:start -->`` and
``<!-- results:DATASET:end -->`` (running it again with the same rows gives the same page) and
rewrites the page's ``<!-- results:goal:start -->`` block from every dataset section's verdict.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unirag.eval.budget_report import ALL, budget_summaries, question_types
from unirag.eval.compare import LEVEL, RESAMPLES, SEED, compare_methods
from unirag.eval.runner import all_rows

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ("vanilla", "hybrid")
#: Not graph methods: the baselines, the other non-graph retrievers and the no-retrieval ones.
NOT_GRAPH = frozenset({*BASELINES, "bm25", "zeroshot", "cot"})
GOAL_MARGIN = 0.05
GOAL_DATASETS = ("hotpotqa", "musique")  # the goal asks for both
TITLES = {"hotpotqa": "HotpotQA", "musique": "MuSiQue", "2wiki": "2WikiMultiHopQA"}
NOT_MEASURED = "_Not yet measured with the grounded metric._"
METRIC = "grounded_recall"
#: A mean of 100 per-question differences that is 0.05 on paper may sum to 0.04999...: not a miss.
TOLERANCE = 1e-9
PERCENT = f"{LEVEL * 100:.0f} %"


class ResultsError(Exception):
    """Bad input to the script: one line, no traceback."""


@dataclass(frozen=True)
class RunDir:
    """An eval output directory and the label its methods get (none: their own names)."""

    path: Path
    label: str = ""

    @classmethod
    def parse(cls, text: str) -> RunDir:
        path, _, label = text.partition("=")
        return cls(Path(path), label.strip())


def labelled(method: str, label: str) -> str:
    return f"{method} [{label}]" if label else method


def base_method(name: str) -> str:
    """The shipped method a (labelled) table name is: ``hipporag [llm]`` -> ``hipporag``."""
    return name.split(" [", 1)[0]


def is_graph_method(name: str) -> bool:
    """Everything but the non-graph baselines and the rerank variants (those need an HTTP
    reranker; a graph method's gain must not be a cross-encoder's)."""
    base = base_method(name)
    return base not in NOT_GRAPH and not base.endswith("-rerank")


def load_rows(runs: Sequence[RunDir]) -> list[dict[str, Any]]:
    """The latest row per (method, question) of every directory, methods renamed by label; a
    method name found in two directories is refused (which one would the table show?)."""
    owner: dict[str, Path] = {}
    rows: list[dict[str, Any]] = []
    dirs = [run.path.resolve() for run in runs]
    twice = sorted({str(path) for path in dirs if dirs.count(path) > 1})
    if twice:
        raise ResultsError(f"{', '.join(twice)} given twice: each directory once")
    for run in runs:
        found = all_rows(run.path)
        if not found:
            raise ResultsError(f"{run.path}: no rows in answers.jsonl (run unirag eval -o {run.path} first)")
        for row in found:
            name = labelled(row["method"], run.label)
            if owner.setdefault(name, run.path) != run.path:
                raise ResultsError(f"method {name} is in both {owner[name]} and {run.path}: "
                                   f"label one directory (DIR=LABEL)")
            rows.append({**row, "method": name})
    return rows


def dataset_of(rows: Sequence[dict[str, Any]], wanted: str | None) -> str:
    """The one dataset the rows are of (``--dataset`` must agree with it)."""
    names = sorted({str(row.get("dataset")) for row in rows})
    if len(names) != 1:
        raise ResultsError(f"the directories hold rows of several datasets ({', '.join(names)}): one at a time")
    if wanted and wanted != names[0]:
        raise ResultsError(f"--dataset {wanted}: the rows are of {names[0]}")
    return names[0]


def fraction(value: float | None, n: int, total: int) -> str:
    """A mean of 0..1 with three decimals, and its n where it is not over all ``total``."""
    if value is None or n == 0:
        return "– (n=0)"
    text = f"{value:.3f}"
    return text if n == total else f"{text} (n={n})"


def by_key(summaries: Sequence[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    return {(s["method"], s["budget"], s["question_type"]): s for s in summaries}


def rank_key(summary: dict[str, Any] | None, method: str) -> tuple[float, str]:
    value = (summary or {}).get(METRIC)
    return (-value if value is not None else 1.0), method


def types_with_counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Question type -> how many distinct questions of it (empty for untyped data)."""
    scored = [row for row in rows if not row.get("error")]
    return {kind: len({r["question_id"] for r in scored if r.get("question_type") == kind})
            for kind in question_types(scored)}


def summaries_at(rows: Sequence[dict[str, Any]], at: int) -> list[dict[str, Any]]:
    """The budget summaries of ``rows`` (:mod:`unirag.eval.budget_report`); ``at`` must be a budget."""
    summaries = budget_summaries(rows)
    if not summaries:
        raise ResultsError("no row has budget figures: run unirag eval with --budget")
    budgets = sorted({s["budget"] for s in summaries})
    if at not in budgets:
        raise ResultsError(f"--at {at}: the rows have budgets {', '.join(map(str, budgets))} only")
    return summaries


def method_table(rows: Sequence[dict[str, Any]], summaries: Sequence[dict[str, Any]], at: int) -> list[str]:
    """The per-method table (Markdown lines)."""
    budgets = sorted({s["budget"] for s in summaries})
    found = by_key(summaries)
    total = len({row["question_id"] for row in rows})
    types = types_with_counts(rows)
    methods = sorted({s["method"] for s in summaries}, key=lambda m: rank_key(found.get((m, at, ALL)), m))
    header = ["method", *(f"grounded recall @{b:,}" if b == budgets[0] else f"@{b:,}" for b in budgets),
              *(f"{kind} @{at:,}" for kind in types),
              f"evidence recall @{at:,}", f"answer in context @{at:,}", f"context tokens @{at:,}", "R@2", "R@5"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for method in methods:
        here = found[(method, at, ALL)]
        cells = [method]
        for budget in budgets:
            summary = found.get((method, budget, ALL), {})
            cells.append(fraction(summary.get(METRIC), summary.get(f"n_{METRIC}", 0), total))
        for kind, count in types.items():
            typed = found.get((method, at, kind), {})
            cells.append(fraction(typed.get(METRIC), typed.get(f"n_{METRIC}", 0), count))
        for name in ("evidence_recall", "answer_in_context"):
            cells.append(fraction(here.get(name), here.get(f"n_{name}", 0), total))
        tokens = here.get("context_tokens")
        cells.append(f"{tokens:,.0f}" if tokens is not None else "–")
        for name in ("recall@2", "recall@5"):  # "—": the method ranks no passages
            cells.append(fraction(here.get(name), here[f"n_{name}"], total) if here.get(f"n_{name}") else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


@dataclass(frozen=True)
class GoalCheck:
    lines: list[str]
    verdict: str  # "met", "not-met" or "no-baseline"


def goal_check(rows: Sequence[dict[str, Any]], summaries: Sequence[dict[str, Any]], at: int,
               title: str) -> GoalCheck:
    """The better baseline at ``at`` tokens, every graph method's paired difference from it,
    and the sentence that says whether the goal is met on this dataset."""
    found = by_key(summaries)
    present = [(found[(b, at, ALL)][METRIC], b) for b in BASELINES
               if (b, at, ALL) in found and found[(b, at, ALL)].get(METRIC) is not None]
    if not present:
        return GoalCheck([f"**Goal check on {title}: no baseline** (neither {' nor '.join(BASELINES)} was run "
                          f"with budget {at:,}): nothing to compare with."], "no-baseline")
    # the better baseline; on a tie the first of BASELINES (the simpler method)
    base_value, baseline = min(present, key=lambda item: (-item[0], BASELINES.index(item[1])))
    graph = {row["method"] for row in rows if is_graph_method(row["method"])}
    compared = [c for c in compare_methods([r for r in rows if r["method"] in graph | {baseline}], baseline,
                                           metrics=(METRIC,)) if c["budget"] == str(at)]
    compared.sort(key=lambda c: (-c["mean_difference"], c["method"]))
    meets = [c for c in compared if c["mean_difference"] >= GOAL_MARGIN - TOLERANCE and c["ci_low"] > 0]
    others = ", ".join(f"{b} {v:.3f}" for v, b in sorted(present, reverse=True) if b != baseline)
    lines = [f"**Goal check at {at:,} tokens.** Baseline: **{baseline}** (grounded recall {base_value:.3f}"
             + (f"; {others}" if others else "; the other baseline was not run") + "). Per graph method, the "
             f"mean of (method − {baseline}) over the n questions both have, with a {PERCENT} paired "
             f"bootstrap interval ({RESAMPLES:,} resamples, seed {SEED}); better / worse: questions up / down.",
             "", f"| graph method | grounded recall @{at:,} | − {baseline} | {PERCENT} CI | n | better / worse | "
             f"≥ {GOAL_MARGIN} and CI > 0 |", "|---|---:|---:|---:|---:|---:|---|"]
    for c in compared:
        value = found[(c["method"], at, ALL)].get(METRIC)
        ok = "yes" if c in meets else "no"
        lines.append(f"| {c['method']} | {value:.3f} | {c['mean_difference']:+.3f} | "
                     f"{c['ci_low']:+.3f} to {c['ci_high']:+.3f} | {c['n']} | {c['better']} / {c['worse']} | {ok} |")
    lines.append("")
    if not compared:
        lines.append(f"**Goal not met on {title}:** no graph method was run with budget {at:,}.")
        return GoalCheck(lines, "not-met")
    if meets:
        best = meets[0]
        also = [c["method"] for c in meets[1:]]
        lines.append(f"**Goal met on {title}:** at {at:,} tokens {best['method']} beats {baseline} by "
                     f"{best['mean_difference']:+.3f} in grounded recall ({PERCENT} CI {best['ci_low']:+.3f} to "
                     f"{best['ci_high']:+.3f}, n = {best['n']}): at least {GOAL_MARGIN} with the interval above zero"
                     + (f" (so {'does' if len(also) == 1 else 'do'} {', '.join(also)})." if also else "."))
        return GoalCheck(lines, "met")
    best = compared[0]
    short = []
    if best["mean_difference"] < GOAL_MARGIN - TOLERANCE:
        short.append(f"below the {GOAL_MARGIN} margin")
    if best["ci_low"] <= 0:
        short.append("its interval does not exclude zero")
    lines.append(f"**Goal not met on {title}:** at {at:,} tokens the best graph method, {best['method']}, is "
                 f"{best['mean_difference']:+.3f} against {baseline} in grounded recall ({PERCENT} CI "
                 f"{best['ci_low']:+.3f} to {best['ci_high']:+.3f}, n = {best['n']}): {' and '.join(short)}; no "
                 f"graph method beats {baseline} by at least {GOAL_MARGIN} with the interval above zero.")
    return GoalCheck(lines, "not-met")


@dataclass(frozen=True)
class Provenance:
    """When, where and how the tables were measured: the page must say it."""

    date: str
    commit: str
    machine: str
    commands: tuple[str, ...]
    script: str


def default_commit() -> str:
    """The checkout's short commit; "(unknown)" outside a git checkout."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError):
        return "(unknown)"
    return done.stdout.strip()


def default_machine() -> str:
    return f"{os.cpu_count()}-core {platform.machine()} {platform.system()}"


def section(rows: Sequence[dict[str, Any]], key: str, at: int, provenance: Provenance) -> tuple[str, str]:
    """(the dataset's Markdown section, its verdict)."""
    title = TITLES.get(key, key)
    total = len({row["question_id"] for row in rows})
    types = types_with_counts(rows)
    kinds = "; " + ", ".join(f"{count} {kind}" for kind, count in types.items()) if types else ""
    summaries = summaries_at(rows, at)
    check = goal_check(rows, summaries, at, title)
    lines = [f"**{title}** ({total} questions{kinds}). Measured {provenance.date} on {provenance.machine}, "
             f"commit `{provenance.commit}`.", "",
             "<!-- docs-test: not-run a benchmark of hours on the shared datasets -->", "```bash",
             *provenance.commands, provenance.script, "```", "", *method_table(rows, summaries, at), "", *check.lines, "",
             f"<!-- results-verdict:{key}:{check.verdict} -->"]
    return "\n".join(lines), check.verdict


def markers(key: str) -> tuple[str, str]:
    return f"<!-- results:{key}:start -->", f"<!-- results:{key}:end -->"


def replace_between(page: str, key: str, body: str, where: str) -> str:
    """``page`` with what lies between the ``key`` markers replaced by ``body``."""
    start, end = markers(key)
    first, last = page.find(start), page.find(end)
    if first < 0 or last < first:
        raise ResultsError(f"{where} has no {start} ... {end} pair: add it where the section goes")
    return page[:first + len(start)] + "\n" + body.strip("\n") + "\n" + page[last:]


def goal_summary(page: str) -> str:
    """The goal block: each goal dataset's verdict as its section says, and the answer."""
    verdicts = dict(re.findall(r"<!-- results-verdict:([\w-]+):([\w-]+) -->", page))
    words = {"met": "met", "not-met": "**not met**", "no-baseline": "**no baseline run**"}
    parts = [f"{TITLES.get(k, k)}: {words.get(verdicts[k], verdicts[k]) if k in verdicts else 'not yet measured'}"
             for k in GOAL_DATASETS]
    if all(verdicts.get(k) == "met" for k in GOAL_DATASETS):
        answer = "**The goal is met** on both datasets."
    elif any(k not in verdicts for k in GOAL_DATASETS):
        answer = "The goal is **not yet answered**: a dataset has no tables with the grounded metric."
    else:
        answer = "**The goal is not met**: it needs both datasets."
    return f"{'; '.join(parts)}. {answer}"


def write_page(page_path: Path, key: str, body: str) -> None:
    page = page_path.read_text(encoding="utf-8")
    page = replace_between(page, key, body, str(page_path))
    if all(marker in page for marker in markers("goal")):
        page = replace_between(page, "goal", goal_summary(page), str(page_path))
    page_path.write_text(page, encoding="utf-8")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="OUT_DIR[=LABEL]",
                        help="eval output directories of one dataset; =LABEL names their methods 'method [LABEL]'")
    parser.add_argument("--dataset", help="the dataset key of the section (default: the rows' dataset name)")
    parser.add_argument("--at", type=int, default=1000, help="the focus budget of the goal check (default 1000)")
    parser.add_argument("--write", type=Path, metavar="PAGE",
                        help="replace the section between the page's results markers instead of printing it")
    parser.add_argument("--date", default=datetime.datetime.now(datetime.UTC).date().isoformat())
    parser.add_argument("--commit", default=None, help="the commit the runs were made with (default: git HEAD)")
    parser.add_argument("--machine", default=None, help="the machine the runs were made on")
    parser.add_argument("--command", action="append", default=[], dest="commands",
                        help="a command the runs were made with (repeat for each)")
    return parser.parse_args(argv)


def script_command(args: argparse.Namespace, key: str) -> str:
    """The command that remakes this section (without the provenance options)."""
    runs = [f"{run.path}={run.label}" if run.label else str(run.path) for run in map(RunDir.parse, args.runs)]
    page = ["--write", str(args.write)] if args.write else []
    at = ["--at", str(args.at)] if args.at != 1000 else []
    return shlex.join([".venv/bin/python", "bench/results_tables.py", *runs, "--dataset", key, *at, *page])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        rows = load_rows([RunDir.parse(text) for text in args.runs])
        key = args.dataset or dataset_of(rows, None)
        dataset_of(rows, key)
        provenance = Provenance(args.date, args.commit or default_commit(), args.machine or default_machine(),
                                tuple(args.commands), script_command(args, key))
        body, verdict = section(rows, key, args.at, provenance)
        if args.write:
            write_page(args.write, key, body)
            print(f"{args.write}: {key} section written ({verdict})")
        else:
            print(body)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
