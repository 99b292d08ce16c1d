"""Retrieval cost per method beside the survey's Table 7, from a ``unirag eval`` run.

Run the evaluation first (retrieval only, so the figures are the retrieval stage's):

    unirag eval -d 2wiki -w WS -o bench/out/table7_2wiki --methods all --retrieve-only --limit 20
    .venv/bin/python bench/table7.py bench/out/table7_2wiki [--survey musique]

Prints one markdown row per method: p50 / p95 of the retrieval seconds per query without
the chat model's share (operators, question embedding, index lookups), the agent chat
seconds and prompt tokens spent during retrieval (ToG, KGP, DALK, the question
conversions), the context tokens handed to generation (k = 4), and the survey's
measured time and tokens per query for that method (Table 7, one dataset's column; the
survey's time includes generation with Llama-3-8B on its hardware, so only the ordering
is comparable).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

# Survey (Zhou et al. 2025) Table 7: average time (s) and tokens per query; None where not reported.
SURVEY_TABLE7: dict[str, dict[str, tuple[float, float] | None]] = {
    "musique": {
        "zeroshot": (1.73, 137.8), "vanilla": (1.31, 745.4), "g-retriever": (31.21, 3260.5),
        "tog": (53.55, 12480.8), "kgp": (39.82, 7555.8), "dalk": (17.48, 3510.9), "llightrag": (13.95, 3267.6),
        "glightrag": (15.20, 3260.8), "hlightrag": (20.93, 5695.3), "fastgraphrag": (15.19, 6043.5),
        "hipporag": (2.69, 828.4), "lgraphrag": (2.66, 4675.7), "raptor": (1.85, 1742.9),
    },
    "hotpotqa": {
        "zeroshot": (1.51, 125.0), "vanilla": (1.10, 652.0), "g-retriever": None, "tog": None, "kgp": None,
        "dalk": (21.33, 3989.7), "llightrag": (13.94, 3074.2), "glightrag": (13.95, 3028.7),
        "hlightrag": (19.58, 4921.7), "fastgraphrag": (28.71, 6029.8), "hipporag": (3.12, 726.4),
        "lgraphrag": (2.05, 4806.2), "raptor": (1.48, 757.6),
    },
}


def _number(value: str) -> float | None:
    return float(value) if value not in ("", None) else None


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if value < 100 else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="output directory of a 'unirag eval --retrieve-only' run")
    parser.add_argument("--survey", default="musique", choices=sorted(SURVEY_TABLE7),
                        help="which Table 7 column to print beside ours")
    args = parser.parse_args()
    path = args.run / "summary.csv"
    if not path.is_file():
        sys.exit(f"table7: {path} not found: run 'unirag eval ... --retrieve-only -o {args.run}' first")
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    survey = SURVEY_TABLE7[args.survey]
    print(f"| method | questions | retrieval p50 s | retrieval p95 s | agent chat s | agent prompt tokens | "
          f"context tokens | survey {args.survey} s | survey tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in sorted(rows, key=lambda r: _number(r["retrieval_p50_s"]) or 0.0):
        theirs = survey.get(row["method"])
        print(f"| {row['method']} | {row['questions']} | {_fmt(_number(row['retrieval_p50_s']), 4)} | "
              f"{_fmt(_number(row['retrieval_p95_s']), 4)} | {_fmt(_number(row['retrieval_llm_s']), 1)} | "
              f"{_fmt(_number(row['prompt_tokens']), 0)} | {_fmt(_number(row['context_tokens']), 0)} | "
              f"{_fmt(theirs[0], 2) if theirs else '–'} | {_fmt(theirs[1], 0) if theirs else '–'} |")


if __name__ == "__main__":
    main()
