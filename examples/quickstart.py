"""Index a small corpus and ask it a question, from Python.

Run: python examples/quickstart.py [WORKSPACE]

The model settings come from the environment, as for the CLI: with nothing set,
the embedded offline models answer (SmolLM2-135M only proves the pipeline runs);
set UNIRAG_CHAT_BASE_URL and UNIRAG_CHAT_MODEL (and UNIRAG_CHAT_API_KEY) for a
real OpenAI-compatible model. ``main(rag)`` is the part to copy: it takes any
UniRAG, which is how the tests run it on a scripted model.
"""

from __future__ import annotations

import sys
from pathlib import Path

from unirag import UniRAG

CORPUS = Path(__file__).resolve().parent / "sample_corpus"


def main(rag: UniRAG) -> str:
    report = rag.index(CORPUS)  # a second run finds everything indexed already
    print(f"{report.ingest.documents_added} new documents; {len(rag.documents())} in the workspace")
    result = rag.query("How does RAPTOR build its tree?", method="vanilla")
    print(f"Answer: {result.answer}")
    for number, item in enumerate(result.context, start=1):
        print(f"  [{number}] {item.source} ({item.kind}, score {item.score:.3f})")
    usage = result.usage()
    print(f"{usage['llm_calls']} LLM calls, {usage['prompt_tokens']} prompt tokens")
    return result.answer


if __name__ == "__main__":
    with UniRAG(sys.argv[1] if len(sys.argv) > 1 else "quickstart-ws") as workspace:
        main(workspace)
