"""The whole offline pipeline, stage by stage: wall seconds, CPU seconds, peak memory.

Issue 20's measure: ``unirag index`` of the 2WikiMultihopQA corpus with
``--graph all --index all``, the zero-LLM extractor (``graph.extractor: nlp``)
and extractive summaries (``index.summarizer: extractive``, the offline
default: no chat model is called), on a fresh workspace so every embedding is
computed. It calls what ``unirag index`` calls (``pipeline.plan_index``, then
``pipeline.run_index``), with ``on_stage`` marking where each step starts.

Per stage: wall seconds, CPU seconds (this process and its reaped child
processes, e.g. spaCy's workers), peak RSS of this process and peak memory of
the process tree while it has children (the sum of proportional set sizes: a
forked spaCy worker's pages shared with this process count once) sampled every
``--interval`` seconds, and what the usage ledger says was embedded. Then the whole run's
wall time and peak RSS (``ru_maxrss``). Markdown to stdout, JSON to
``bench/out/offline_pipeline_<N>.json``.

    .venv/bin/python bench/offline_pipeline.py [--limit 1000] [--corpus PATH] [--workspace DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unirag.pipeline import plan_index
from unirag.config import load_settings
from unirag.llm.factory import build_stack
from unirag.pipeline import run_index
from unirag.workspace import Workspace

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/datasets/2wikimultihopqa/2wikimultihopqa_corpus.json"
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of one process from /proc (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def pss_bytes(pid: int | str = "self") -> int:
    """Proportional set size of one process: shared pages (a forked worker's inherited
    ones) divided among the processes sharing them, so a tree's sum counts each once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def child_pids() -> list[int]:
    """Live children of this process (every thread's), from /proc."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                pids += [int(pid) for pid in handle.read().split()]
        except OSError:
            continue
    return pids


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Stage:
    name: str
    started: float
    cpu_started: float
    peak_rss: int = 0
    peak_tree_rss: int = 0
    wall: float = 0.0
    cpu: float = 0.0


@dataclass
class StageMeter:
    """Samples memory in a thread; ``start(name)`` closes the running stage and opens the next."""

    interval: float = 0.2
    stages: list[Stage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> StageMeter:
        self._thread = threading.Thread(target=self._sample_until_stopped, name="bench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def start(self, name: str) -> None:
        self.finish()
        with self._lock:
            self.stages.append(Stage(name, time.perf_counter(), cpu_seconds()))
        self._sample()

    def finish(self) -> None:
        self._sample()
        with self._lock:
            if self.stages and not self.stages[-1].wall:
                stage = self.stages[-1]
                stage.wall = time.perf_counter() - stage.started
                stage.cpu = cpu_seconds() - stage.cpu_started

    def _sample(self) -> None:
        own = rss_bytes()
        children = child_pids()
        tree = pss_bytes() + sum(pss_bytes(pid) for pid in children) if children else own
        with self._lock:
            if self.stages and not self.stages[-1].wall:
                stage = self.stages[-1]
                stage.peak_rss = max(stage.peak_rss, own)
                stage.peak_tree_rss = max(stage.peak_tree_rss, tree)

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()


def print_embedding_ledger(usage: dict[str, dict[str, Any]], corpus_tokens: int) -> None:
    """Per artifact (ledger stage): texts embedded, tokens the model read (after its truncation)
    and tokens sent, cache hits (texts another artifact embedded already), and the read tokens'
    ratio to the corpus's tokens."""
    rows = {stage: u for stage, u in usage.items() if u.get("embedded_texts") or u.get("embedding_cache_hits")}
    if not rows:
        return
    print("\n| ledger stage | texts embedded | tokens read | tokens sent | cache hits | x corpus | embedding s |"
          "\n|---|---:|---:|---:|---:|---:|---:|")
    per_corpus = 1 / corpus_tokens if corpus_tokens else 0.0
    for stage, u in rows.items():
        read = u.get("embedding_tokens", 0)
        print(f"| {stage} | {u['embedded_texts']:,} | {read:,} | {u.get('embedding_tokens_sent', 0):,} | "
              f"{u.get('embedding_cache_hits', 0):,} | {read * per_corpus:.2f} | {u.get('seconds', 0):.1f} |")
    total = {name: sum(u.get(name, 0) for u in rows.values())
             for name in ("embedded_texts", "embedding_tokens", "embedding_tokens_sent", "embedding_cache_hits")}
    print(f"| **all** | {total['embedded_texts']:,} | {total['embedding_tokens']:,} | "
          f"{total['embedding_tokens_sent']:,} | {total['embedding_cache_hits']:,} | "
          f"**{total['embedding_tokens'] * per_corpus:.2f}** ({corpus_tokens:,} corpus tokens) | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages (0 = all)")
    parser.add_argument("--workspace", type=Path, help="a new workspace here (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the workspace")
    parser.add_argument("--interval", type=float, default=0.2, help="memory sampling interval, seconds")
    args = parser.parse_args()
    root = args.workspace or Path(tempfile.mkdtemp(prefix="unirag-bench-offline-"))
    if (root / "store.sqlite").exists():
        raise SystemExit(f"{root} already holds a workspace: give a new directory")
    corpus = args.corpus
    load_start = os.getloadavg()
    try:
        if args.limit:
            root.mkdir(parents=True, exist_ok=True)
            corpus = root / f"corpus_{args.limit}.json"
            corpus.write_text(json.dumps(json.loads(args.corpus.read_text())[: args.limit]))
        plan = plan_index([corpus], graphs="all", indices="all")
        workspace = Workspace.init(root / "ws")
        settings = load_settings(workspace.root, {"graph.extractor": "nlp", "index.summarizer": "extractive"})
        started, cpu_started = time.perf_counter(), cpu_seconds()
        with StageMeter(args.interval) as meter:
            report = run_index(workspace, plan.sources, settings, build_stack(settings, workspace.cache()),
                               graphs=plan.graphs, artifacts=plan.artifacts, on_stage=meter.start)
        wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        usage = report.ledger.to_json()
        counts = workspace.corpus.counts()
        chunks, corpus_tokens = counts["chunks"], counts["chunk_tokens"]
        workspace.close()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    figures: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "corpus": str(args.corpus), "limit": args.limit,
        "chunks": chunks, "corpus_tokens": corpus_tokens, "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs",
        "python": platform.python_version(), "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "settings": {"graph.extractor": "nlp", "index.summarizer": "extractive",
                     # absent before issue 20 (one process): the bench also measures the code before it
                     "nlp_processes": getattr(settings.graph, "resolved_nlp_processes", lambda: 1)()},
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mib": round(peak / MIB, 1),
        "stages": [{"stage": s.name, "wall_s": round(s.wall, 2), "cpu_s": round(s.cpu, 2),
                    "peak_rss_mib": round(s.peak_rss / MIB, 1), "peak_tree_rss_mib": round(s.peak_tree_rss / MIB, 1)}
                   for s in meter.stages],
        "usage": usage,
    }
    print(f"**offline_pipeline** {figures['date']} | {figures['machine']} | {chunks:,} chunks | nlp extractor, "
          f"extractive summaries | load average {figures['load_average_start'][0]} -> {figures['load_average_end'][0]}\n")
    print("| stage | wall s | CPU s | peak RSS MiB | peak with workers (PSS) MiB |\n|---|---:|---:|---:|---:|")
    for row in figures["stages"]:
        print(f"| {row['stage']} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['peak_rss_mib']:.0f} | "
              f"{row['peak_tree_rss_mib']:.0f} |")
    print(f"| **total** | **{figures['wall_s']:.1f}** | **{figures['cpu_s']:.1f}** | **{figures['peak_rss_mib']:.0f}** | |")
    print_embedding_ledger(usage, corpus_tokens)
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / f"offline_pipeline_{args.limit or 'all'}.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
