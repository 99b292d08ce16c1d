"""Probe questions for a corpus that ships without questions (2WikiMultihopQA here).

Writes a generic dataset (``Question.jsonl`` + ``Corpus.jsonl``) that ``unirag eval``
reads: each question is the first sentence of a passage drawn with a fixed seed, its
gold answer and evidence that passage's title. It measures retrieval cost on the
corpus's graph (survey Table 7 style) and whether the source passage comes back; it is
not a QA benchmark.

    .venv/bin/python bench/probe_questions.py ../shared/datasets/2wikimultihopqa/2wikimultihopqa_corpus.json \
        -o bench/out/2wiki_probe -n 50
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SEED = 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("-n", "--questions", type=int, default=50)
    args = parser.parse_args()

    from unirag.text.loaders import load_documents
    from unirag.text.sentences import first_sentence

    docs = [d for d in load_documents([args.corpus], presplit="always") if d.title and len(d.text.split()) >= 12]
    picked = sorted(random.Random(SEED).sample(range(len(docs)), min(args.questions, len(docs))))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "Question.jsonl", "w", encoding="utf-8") as handle:
        for n, i in enumerate(picked):
            doc = docs[i]
            handle.write(json.dumps({"id": f"probe-{n}", "question": first_sentence(doc.text),
                                     "answer": doc.title, "evidence": [doc.title]}, ensure_ascii=False) + "\n")
    with open(args.out / "Corpus.jsonl", "w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps({"title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n")
    print(f"{len(picked)} probe questions from {len(docs)} passages in {args.out}")


if __name__ == "__main__":
    main()
