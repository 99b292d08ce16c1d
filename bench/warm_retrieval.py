"""Warm retrieval latency per stage: one process, one workspace, questions of a dataset file.

Each method answers 3 warm-up questions, then ``--runs`` questions retrieve-only on the
zero-LLM question path; the medians of its stage timings (question conversions, each
operator, the whole retrieval) are printed in ms. Run it once as is and once with
``OPENBLAS_NUM_THREADS=1``: on a small, busy machine OpenBLAS's threads wait on each other in
the small matrix-vector products of a query, which can cost more than the work.

    .venv/bin/python bench/warm_retrieval.py -w WORKSPACE [--methods linearrag,hipporag2] [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from unirag.api import UniRAG

QUESTIONS = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "hotpotqa" / "hotpotqa_train.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", required=True)
    parser.add_argument("--methods", default="linearrag")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--questions", type=Path, default=QUESTIONS, help="a HotpotQA-style JSON list")
    args = parser.parse_args()
    questions = [item["question"] for item in json.loads(args.questions.read_text(encoding="utf-8"))]
    with UniRAG(args.workspace, create=False, **{"retrieval.question_path": "nlp"}) as rag:
        for method in args.methods.split(","):
            for question in questions[:3]:
                rag.query(question, method, retrieve_only=True)
            stages: dict[str, list[float]] = defaultdict(list)
            for question in questions[3:3 + args.runs]:
                for stage, seconds in rag.query(question, method, retrieve_only=True).timings.items():
                    stages[stage].append(seconds)
            cells = [f"{stage} {1000 * statistics.median(values):.1f}" for stage, values in stages.items()
                     if stage not in ("retrieval.llm", "total")]
            print(f"{method} (median ms over {args.runs}): " + ", ".join(cells))


if __name__ == "__main__":
    main()
