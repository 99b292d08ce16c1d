"""Offline answers, bounded: the demo's question and ten HotpotQA questions with the embedded SmolLM2.

Builds (or reuses) an offline workspace on the demo corpus (what ``scripts/demo.sh``
indexes: ``../shared/datasets/hotpotqa/hotpotqa_train_corpus.json``, 994 passages),
then answers the demo question and the first ``--questions`` HotpotQA questions with
``vanilla`` through the library (:class:`unirag.UniRAG`), the response cache off so
every answer is generated. Prints one row per answer: wall seconds of the whole query,
seconds of the generation, prompt and completion tokens, the finish reason (``stop``,
``length``, ``time_limit``, ``repetition``, ``invented_context``), then the machine's
load and the code's version. The model is loaded once before the first timed answer.

    .venv/bin/python bench/offline_answer.py [--workspace DIR] [--passages N] [--questions 10]

``--passages N`` indexes only the passages of the first questions up to N passages (a
busy machine); the full corpus is the default. Target: every answer in <= 20 s on
2 idle cores (issue 29); ``chat.embedded_time_limit`` bounds each one anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unirag import UniRAG
from unirag.config import load_settings
from unirag.llm.backends import backend_chat
from unirag.llm.base import ChatRequest, ChatResponse

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "hotpotqa"
DEMO_QUESTION = "What language were books being translated into during the era of Haymo of Faversham?"


@dataclass
class Timed:
    """The last reply of the wrapped backend and how long it took (the answer's generation)."""

    response: ChatResponse | None = None
    seconds: float = 0.0


class TimingChat:
    """Wraps the embedded backend to see each reply's finish reason and generation time."""

    def __init__(self, inner: Any, last: Timed) -> None:
        self.inner, self.last, self.name = inner, last, inner.name

    def complete(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        response = self.inner.complete(request)
        self.last.response, self.last.seconds = response, time.perf_counter() - start
        return response


def passages(limit: int | None, records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The corpus as documents; with ``limit``, the passages of the first questions first."""
    corpus: dict[str, list[str]] = json.loads((DATA / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    titles = list(corpus)
    if limit is not None:
        wanted = [title for record in records for title, _ in record["context"] if title in corpus]
        titles = list(dict.fromkeys(wanted + titles))[:limit]
    return [{"title": title, "text": "".join(corpus[title])} for title in titles]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", "-w", type=Path, default=ROOT / "bench" / "out" / "offline_answer_ws")
    parser.add_argument("--passages", type=int, default=None, help="index at most N passages (default: all 994)")
    parser.add_argument("--questions", type=int, default=10)
    args = parser.parse_args()

    records = json.loads((DATA / "hotpotqa_train.json").read_text(encoding="utf-8"))[: args.questions]
    questions = [("demo", DEMO_QUESTION)] + [(f"hotpotqa {i + 1}", r["question"]) for i, r in enumerate(records)]
    load_start = os.getloadavg()
    settings = load_settings(args.workspace if args.workspace.is_dir() else None)
    last = Timed()
    chat = TimingChat(backend_chat(settings), last)
    with UniRAG(args.workspace, chat_backend=chat, cache=False) as rag:
        start = time.perf_counter()
        report = rag.index(documents=passages(args.passages, records))
        index_seconds = time.perf_counter() - start
        chat.complete(ChatRequest(({"role": "user", "content": "Hi"},), max_tokens=1))  # load the model untimed
        rows = []
        for label, question in questions:
            start = time.perf_counter()
            result = rag.query(question, "vanilla")
            seconds = time.perf_counter() - start
            reply = last.response
            assert reply is not None
            rows.append((label, question, seconds, last.seconds, reply.prompt_tokens, reply.completion_tokens,
                         reply.finish_reason, result.answer))
            print(f"{label}: {seconds:.1f} s, {reply.finish_reason}, load {os.getloadavg()[0]:.2f}",
                  file=sys.stderr, flush=True)
    load_end = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    print(f"offline answers, vanilla, {settings.chat.model} on {settings.chat.n_threads} threads; "
          f"chat.embedded_time_limit {settings.chat.embedded_time_limit:g} s; max_tokens {settings.chat.max_tokens}")
    indexed = report.to_json()
    print(f"index: {indexed['documents_added']} new documents ({indexed['chunks_added']} chunks), "
          f"{indexed['already_indexed']} already indexed, {index_seconds:.1f} s")
    print()
    print("| question | s (query) | s (generation) | prompt tokens | completion tokens | finish | answer |")
    print("|---|---:|---:|---:|---:|---|---|")
    for label, question, seconds, gen, prompt, completion, finish, answer in rows:
        short = " ".join(answer.split())[:60].replace("|", "/")
        print(f"| {label}: {question[:50]} | {seconds:.1f} | {gen:.1f} | {prompt} | {completion} | {finish} | {short} |")
    total = sorted(row[2] for row in rows)
    print()
    print(f"query seconds: median {total[len(total) // 2]:.1f}, max {total[-1]:.1f}; "
          f"answers over 20 s: {sum(s > 20 for s in total)} of {len(total)}")
    print(f"load average (1, 5, 15 min): start {tuple(round(x, 2) for x in load_start)}, "
          f"end {tuple(round(x, 2) for x in load_end)}; cpus {os.cpu_count()}; "
          f"{platform.processor() or platform.machine()}; python {sys.version.split()[0]}; commit {commit}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
