"""Gold-evidence recall of a retrieval method on the HotpotQA / MuSiQue question files.

For each question, runs the method through the same runner as
``unirag query -m METHOD --json`` (retrieval only; generation does not change
the context) and checks whether the retrieved context holds a gold supporting
passage (matched by passage title). Prints the fraction of questions with at
least one gold passage, and with all of them.

    python bench/vanilla_recall.py --workspace WS --questions ../shared/datasets/hotpotqa/hotpotqa_train.json
(the workspace must already index the matching corpus).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unirag.config import load_settings
from unirag.llm.factory import build_stack
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import resolve_method
from unirag.workspace import Workspace


def gold_titles(record: dict) -> set[str]:
    """Supporting passage titles: HotpotQA supporting_facts, or MuSiQue is_supporting paragraphs."""
    if "supporting_facts" in record:
        return {title for title, _ in record["supporting_facts"]}
    return {p["title"] for p in record.get("paragraphs", []) if p.get("is_supporting")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", "-w", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--method", "-m", default="vanilla")
    parser.add_argument("--limit", type=int, default=100)
    args = parser.parse_args()

    records = json.loads(args.questions.read_text())[: args.limit]
    workspace = Workspace.open(args.workspace)
    settings = load_settings(args.workspace)
    runner = MethodRunner(workspace, settings, build_stack(settings, workspace.cache()))
    spec = resolve_method(args.method)
    any_hit = all_hit = 0
    for record in records:
        gold = gold_titles(record)
        got = {item.source for item in runner.run(spec, record["question"], generate=False).context}
        any_hit += bool(gold & got)
        all_hit += gold <= got
    n = len(records)
    print(f"method={spec.name} k={settings.retrieval.top_k} questions={n} "
          f"embedding={settings.embedding.model} file={args.questions.name}")
    print(f"at least one gold passage in context: {any_hit}/{n} = {any_hit / n:.2f}")
    print(f"all gold passages in context:        {all_hit}/{n} = {all_hit / n:.2f}")


if __name__ == "__main__":
    main()
