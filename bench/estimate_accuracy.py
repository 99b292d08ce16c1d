"""Benchmark: the cost estimate of a build next to the calls the build made.

Indexes the first ``--limit`` 2Wiki passages (``../shared/datasets``) with the LLM
extractor (one gleaning pass) into a KG and every summarised hierarchy (GraphRAG
reports, ArchRAG, HyGRAG, LeanRAG, the RAPTOR tree), then inserts the next
``--share`` of them (1 %: 10 of 1,000), each run after its estimate. The chat model
is the scripted model of tests/fakes.py (every capitalised phrase an entity, tokens
counted as an OpenAI-compatible server reports them), so the figures are unirag's own
planning, not a model's whims. ``--dataset hotpotqa`` takes the HotpotQA passages.

Run from the repository root::

    .venv/bin/python bench/estimate_accuracy.py [--limit 1000] [--share 0.01] [--dataset 2wiki]

Prints one markdown row per run (estimated and actual LLM calls and prompt tokens).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
HIERARCHIES = ["communities:graphrag", "communities:archrag", "communities:hygrag", "communities:leanrag", "tree"]
for path in (ROOT, ROOT / "tests"):  # this checkout's unirag, and the scripted model the tests use
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def passages(dataset: str) -> list[dict[str, str]]:
    if dataset == "hotpotqa":
        data = json.loads((DATASETS / "hotpotqa" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
        return [{"title": title, "text": "".join(sentences)} for title, sentences in data.items()]
    data = json.loads((DATASETS / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text(encoding="utf-8"))
    return [{"title": item["title"], "text": item["text"]} for item in data]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--dataset", choices=["2wiki", "hotpotqa"], default="2wiki")
    args = parser.parse_args()

    from fakes import HashEmbedder, TokenCountedChat, make_settings

    from unirag.llm.factory import build_stack
    from unirag.pipeline import estimate_index, run_index
    from unirag.workspace import Workspace

    records = passages(args.dataset)
    extra = max(1, round(args.limit * args.share))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base, more = Path(tmp) / "base.jsonl", Path(tmp) / "more.jsonl"
        base.write_text("".join(json.dumps(r) + "\n" for r in records[:args.limit]), encoding="utf-8")
        more.write_text("".join(json.dumps(r) + "\n" for r in records[args.limit:args.limit + extra]),
                        encoding="utf-8")
        ws = Workspace.init(Path(tmp) / "ws")
        settings = make_settings(ws.root, graph__extractor="llm", index__summarizer="llm", graph__gleaning=1)
        for label, source in ((f"full build, {args.limit} passages", base), (f"insert {extra} passages", more)):
            estimate = estimate_index(ws, [source], settings, TokenCountedChat(), graphs=["kg"],
                                      artifacts=HIERARCHIES)
            chat, tick = TokenCountedChat(), time.perf_counter()
            stack = build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())
            report = run_index(ws, [source], settings, stack, graphs=["kg"], artifacts=HIERARCHIES)
            total = report.ledger.total()
            rows.append({"run": label, "estimated_calls": estimate.calls, "calls": total.llm_calls,
                         "estimated_prompt_tokens": estimate.prompt_tokens, "prompt_tokens": total.prompt_tokens,
                         "seconds": round(time.perf_counter() - tick, 1),
                         "estimated_steps": {step.step: [step.calls, step.prompt_tokens] for step in estimate.steps},
                         "actual_stages": {stage: [usage.llm_calls, usage.prompt_tokens]
                                           for stage, usage in report.ledger.stages.items() if usage.llm_calls}})
    print("| run | estimated calls | actual calls | error | estimated prompt tokens | actual | error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        def error(estimated: int, actual: int) -> str:
            return f"{(estimated - actual) / max(1, actual):+.0%}"
        print(f"| {row['run']} | {row['estimated_calls']} | {row['calls']} | "
              f"{error(row['estimated_calls'], row['calls'])} | {row['estimated_prompt_tokens']} | "
              f"{row['prompt_tokens']} | {error(row['estimated_prompt_tokens'], row['prompt_tokens'])} |")
    print(json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
