"""Every shipped method on real questions over an indexed workspace, with the configured models.

For each method and question: the answer, the context kinds, prompt/completion tokens, and
the retrieval (non-LLM) and total seconds. One process, so indices and models load once.

    .venv/bin/python bench/methods_smoke.py -w WS [--questions FILE] [--limit 1] [--methods a,b] [--retrieve-only]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_QUESTIONS = ROOT.parent / "shared/datasets/hotpotqa/hotpotqa_train.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", type=Path, required=True)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--limit", type=int, default=1)
    parser.add_argument("--methods", default="", help="comma-separated names (default: every shipped method)")
    parser.add_argument("--retrieve-only", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/out/methods_smoke.jsonl")
    args = parser.parse_args()

    from unirag.config import load_settings
    from unirag.eval.datasets import load_dataset
    from unirag.llm.factory import build_stack
    from unirag.methods.runner import MethodRunner
    from unirag.methods.spec import builtin_methods
    from unirag.pipeline import prepare_query
    from unirag.workspace import Workspace

    questions = load_dataset(str(args.questions), limit=args.limit).questions
    ws = Workspace.open(args.workspace)
    settings = load_settings(args.workspace)
    stack = build_stack(settings, ws.cache())
    names = [n for n in args.methods.split(",") if n] or sorted(builtin_methods())
    runner = MethodRunner(ws, settings, stack)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as out:
        for name in names:
            spec = builtin_methods()[name]
            prepare_query(ws, settings, stack, spec.requires())
            for question in questions:
                started = time.perf_counter()
                result = runner.run(spec, question.question, generate=not args.retrieve_only)
                timings = result.timings
                retrieval = sum(v for k, v in timings.items() if k.startswith("operator."))
                usage = result.usage()
                row = {
                    "method": name, "question": question.question, "gold": question.answers[:1],
                    "answer": result.answer, "kinds": sorted({item.kind for item in result.context}),
                    "items": len(result.context), "retrieval_s": round(retrieval, 4),
                    "total_s": round(time.perf_counter() - started, 2),
                    "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                    "llm_calls": usage["llm_calls"],
                }
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"{name:<22} {row['kinds']} {row['items']} items, retrieval {row['retrieval_s']:.3f} s, "
                      f"total {row['total_s']:.1f} s, {row['prompt_tokens']} prompt tokens: {row['answer'][:60]!r}",
                      file=sys.stderr)


if __name__ == "__main__":
    main()
