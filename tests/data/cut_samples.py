"""Cut the small dataset samples in ``tests/data/datasets`` from ``../shared/datasets``.

Why: tests that only need "some real passages and questions" must run on a bare
clone, where the shared dev sets (a few MB, kept outside the repository) are
absent. The samples keep each shared file's native layout and formatting, so a
loader sees exactly what it sees on the full file, only shorter:

* HotpotQA: the first ``HOTPOTQA_QUESTIONS`` questions and the corpus entries
  their contexts hold (the shared corpus lists contexts in question order, so
  this is also the corpus file's prefix).
* MuSiQue: the first ``MUSIQUE_QUESTIONS`` questions and their paragraphs,
  deduplicated by (title, text) as the shared corpus file is.
* 2WikiMultihopQA: the shared folder holds only a corpus; its first
  ``TWOWIKI_PASSAGES`` passages.

Run from the repository root: ``python tests/data/cut_samples.py [SHARED_DATASETS]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HOTPOTQA_QUESTIONS = 4  # 40 passages: the workspace of tests/test_methods_all.py
MUSIQUE_QUESTIONS = 3  # 60 paragraphs
TWOWIKI_PASSAGES = 40

HERE = Path(__file__).resolve().parent
DEFAULT_SHARED = HERE.parents[2] / "shared" / "datasets"
TARGET = HERE / "datasets"


def read(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, data: object, indent: int | None) -> None:
    """Write as the shared files are written: ASCII escapes, 4-space indent or one line, no final newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent), encoding="utf-8")


def cut_hotpotqa(shared: Path, target: Path) -> None:
    questions = read(shared / "hotpotqa_train.json")[:HOTPOTQA_QUESTIONS]
    corpus = read(shared / "hotpotqa_train_corpus.json")
    titles = dict.fromkeys(title for q in questions for title, _ in q["context"])
    write(target / "hotpotqa_train.json", questions, indent=4)
    write(target / "hotpotqa_train_corpus.json", {title: corpus[title] for title in titles}, indent=4)


def cut_musique(shared: Path, target: Path) -> None:
    questions = read(shared / "musique_train.json")[:MUSIQUE_QUESTIONS]
    passages = dict.fromkeys((p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"])
    write(target / "musique_train.json", questions, indent=None)
    write(target / "musique_train_corpus.json", [{"title": t, "text": x} for t, x in passages], indent=None)


def cut_2wiki(shared: Path, target: Path) -> None:
    passages = read(shared / "2wikimultihopqa_corpus.json")[:TWOWIKI_PASSAGES]
    write(target / "2wikimultihopqa_corpus.json", passages, indent=4)


def main(shared: Path = DEFAULT_SHARED, target: Path = TARGET) -> None:
    cut_hotpotqa(shared / "hotpotqa", target / "hotpotqa")
    cut_musique(shared / "musique", target / "musique")
    cut_2wiki(shared / "2wikimultihopqa", target / "2wikimultihopqa")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SHARED)
