#!/usr/bin/env bash
# Demo, fully offline on the embedded defaults: index the HotpotQA passages
# (../shared/datasets) or, if absent, the sample corpus in examples/, ask one
# question with VanillaRAG, print the answer and its sources.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
corpus=../shared/datasets/hotpotqa/hotpotqa_train_corpus.json
question="What language were books being translated into during the era of Haymo of Faversham?"
if [ ! -f "$corpus" ]; then
  corpus=examples/sample_corpus
  question="Which graph-based RAG method builds a tree of cluster summaries?"
fi
ws=${UNIRAG_DEMO_WORKSPACE:-.demo-workspace}
unirag index "$corpus" -w "$ws"
unirag query "$question" -w "$ws" -m vanilla
unirag stats -w "$ws"
