"""Benchmark: how each index stage scales with the corpus (1k, 6k, 60k passages and beyond, on paper).

Builds a corpus of N passages from the 2Wiki passages (``../shared/datasets``; past the
6,119 real ones, synthetic passages: see ``bench/scaling_corpus.py``), then indexes it
in-process with ``run_index``, stage by stage, into a fresh workspace: the zero-LLM
``nlp`` extractor, summaries and reports asked of the instant stand-in endpoint of
``bench/living_corpus.py`` (its own process; hashed 384-d vectors for embeddings), so
the figures are unirag's own work plus the calls it makes, not a model's speed.

Each stage is its own ``run_index`` call (``--index STAGE``), in dependency order; the
first call ingests and builds the chunk vectors and BM25. A sampler thread reads this
process's CPU time (user + system, every thread) and RSS every 0.1 s, and each stage's
interval comes from the run's ``timings``, so per stage the benchmark prints wall s,
CPU s, peak RSS, LLM calls, prompt/completion tokens, embedding calls/tokens (from the
run's usage ledger), and afterwards the bytes on disk per artifact (its recorded files,
its tables in ``store.sqlite`` via ``dbstat``) and of the model cache.

Run from the repository root::

    .venv/bin/python bench/scaling.py --passages 1000 [--stages all] [--keep DIR]
    .venv/bin/python bench/scaling.py --passages 60000 --stages graph,chunk_links:pg,...

The figures go to ``bench/out/scaling_<N>.json`` (rewritten after every stage, so a
long run that is stopped keeps what it finished); ``bench/scaling_report.py`` fits them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from living_corpus import CORPUS, ROOT, start_stand_in, stand_in_settings

if str(ROOT) not in sys.path:  # measure this checkout's unirag, whatever the environment's install points at
    sys.path.insert(0, str(ROOT))
from scaling_corpus import build_corpus

SAMPLE_SECONDS = 0.1


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Sampler:
    """(wall, CPU s, RSS) of this process every ``period`` seconds, read back per interval.

    Why sampling: a stage's CPU and peak memory are wanted per stage, but several stages
    run inside one call (ingest, chunk vectors and BM25; extraction and merge), and
    ``ru_maxrss`` never goes down. CPU is interpolated between samples, peaks are the
    highest sample in the interval (a spike shorter than the period can be missed)."""

    def __init__(self, period: float = SAMPLE_SECONDS) -> None:
        self.period = period
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), _cpu_seconds(), _rss_bytes()))
            self._stop.wait(self.period)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_at(self, moment: float) -> float:
        before = max((s for s in self.samples if s[0] <= moment), default=self.samples[0], key=lambda s: s[0])
        after = min((s for s in self.samples if s[0] >= moment), default=self.samples[-1], key=lambda s: s[0])
        if after[0] == before[0]:
            return before[1]
        share = (moment - before[0]) / (after[0] - before[0])
        return before[1] + share * (after[1] - before[1])

    def peak_rss(self, start: float, end: float) -> int:
        inside = [s[2] for s in self.samples if start <= s[0] <= end]
        return max(inside, default=_rss_bytes())


def _intervals(started: float, timings: dict[str, float], merge_seconds: float | None) -> list[tuple[str, float, float]]:
    """(stage, start, end) of one run in the order it ran: ``timings`` are sequential
    durations from the run's start; the graph's is split into extraction and merge."""
    out, cursor = [], started
    for key, seconds in timings.items():
        if key == "index.graph" and merge_seconds is not None:
            out.append(("extraction", cursor, cursor + seconds - merge_seconds))
            out.append(("graph", cursor + seconds - merge_seconds, cursor + seconds))
        else:
            out.append(("ingest" if key == "build.chunks" else key.removeprefix("index."), cursor, cursor + seconds))
        cursor += seconds
    return out


def _usage(ledger: Any) -> dict[str, int]:
    total = ledger.total()
    keys = ("llm_calls", "prompt_tokens", "completion_tokens", "embedding_calls", "embedded_texts",
            "embedding_tokens")
    return {key: int(getattr(total, key)) for key in keys}


def _stage_rows(sampler: Sampler, started: float, report: Any, merge_seconds: float | None) -> list[dict[str, Any]]:
    """One row per stage the run rebuilt, the run's usage charged to the stage that made calls."""
    rebuilt = set(report.rebuilt) | {"extraction"} | ({"ingest"} if report.ingest.documents_added else set())
    rows = []
    for stage, start, end in _intervals(started, report.timings, merge_seconds):
        if stage not in rebuilt:
            continue  # an up-to-date check of an artifact built before: milliseconds
        rows.append({"stage": stage, "wall_s": round(end - start, 2),
                     "cpu_s": round(sampler.cpu_at(end) - sampler.cpu_at(start), 2),
                     "peak_rss_mib": round(sampler.peak_rss(start, end) / 2**20)})
    usage = _usage(report.ledger)
    callers = [row for row in rows if row["stage"] not in ("ingest", "chunk_bm25", "extraction", "graph")]
    for row in rows:
        row.update({key: 0 for key in usage})
    if callers and any(usage.values()):
        callers[0].update(usage)  # a call builds one artifact that asks models (the first: chunk vectors)
    by_stage = {name: u.to_json() for name, u in report.ledger.stages.items()}
    if by_stage and callers:
        callers[0]["ledger"] = {name: {k: v for k, v in u.items() if v} for name, u in by_stage.items()}
    return rows


def _table_bytes(store: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    return {name: int(size) for name, size in rows}


def _storage(root: Path, manifest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Bytes on disk: each artifact's recorded files, store.sqlite per table and index, the cache."""
    files = {name: sum(entry.get("files", {}).values()) for name, entry in manifest.items() if entry.get("files")}
    store = root / "store.sqlite"
    on_disk = {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}
    return {"artifact_files": files, "store_tables": _table_bytes(store),
            "store_bytes": store.stat().st_size, "cache_bytes": sum(v for k, v in on_disk.items() if k.startswith("cache")),
            "workspace_bytes": sum(on_disk.values())}


def _graph_counts(manifest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    graph = manifest.get("graph", {})
    counts: dict[str, Any] = {"entities": graph.get("entities"), "relationships": graph.get("relationships")}
    for name, entry in manifest.items():
        if name.startswith("chunk_links:"):
            counts[name] = entry.get("count")
    return counts


def _code_version() -> str:
    """The commit of the unirag package this process imported (not necessarily this checkout's:
    a shared virtual environment's editable install points at another one)."""
    import unirag

    checkout = Path(unirag.__file__).resolve().parents[1]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True).stdout.strip()

    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--", "unirag") else ""
    return f"{checkout}: {git('rev-parse', '--short', 'HEAD')} {git('log', '-1', '--format=%s')}{dirty}"


def _stage_list(names: str) -> list[str]:
    from unirag.artifacts.registry import build_order, resolve_names

    wanted = resolve_names(["all"]) if names == "all" else resolve_names(names.split(","))
    return [name for name in build_order(wanted) if name not in ("chunk_vectors", "chunk_bm25")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--passages", type=int, required=True, help="N: real passages first, then synthetic ones")
    parser.add_argument("--stages", default="all",
                        help="artifacts after the chunk ones, comma-separated (names or aliases), or all")
    parser.add_argument("--keep", type=Path, help="build the workspace in this new directory and keep it")
    parser.add_argument("--out", type=Path, help="default bench/out/scaling_<N>.json")
    args = parser.parse_args()

    from unirag.config import load_settings
    from unirag.llm.factory import build_stack
    from unirag.pipeline import run_index
    from unirag.progress import Progress
    from unirag.workspace import Workspace

    stages = _stage_list(args.stages)
    passages = build_corpus(json.loads(args.corpus.read_text(encoding="utf-8")), args.passages)
    out_path = args.out or ROOT / "bench" / "out" / f"scaling_{args.passages}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="unirag-scaling-"))
    root.mkdir(parents=True, exist_ok=True)
    source = root / "corpus.json"
    source.write_text(json.dumps(passages), encoding="utf-8")
    server, base_url = start_stand_in()
    workspace = Workspace.init(root / "ws", stand_in_settings(base_url))
    settings = load_settings(workspace.root)
    stack = build_stack(settings, workspace.cache())
    sampler = Sampler()
    sampler.start()
    result: dict[str, Any] = {
        "passages": len(passages), "synthetic": max(0, len(passages) - 6119), "code": _code_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_start": os.getloadavg(), "stages_asked": stages, "rows": [],
    }

    def save() -> None:
        out_path.write_text(json.dumps(result, indent=1), encoding="utf-8")

    def run(label: str, **kwargs: Any) -> None:
        result["running"] = label  # left in the file when the run is stopped during this call
        started, cpu, wall = time.perf_counter(), _cpu_seconds(), time.perf_counter()
        report = run_index(workspace, settings=settings, stack=stack, progress=Progress(), graphs=[], **kwargs)
        merge = workspace.manifest.entry("graph") if "graph" in report.rebuilt else None
        rows = _stage_rows(sampler, started, report, merge.get("seconds") if merge else None)
        result["rows"].extend(rows)
        del result["running"]
        result.setdefault("calls", []).append({"call": label, "cpu_s": round(_cpu_seconds() - cpu, 2),
                                               "wall_s": round(time.perf_counter() - wall, 2)})
        save()
        for row in rows:
            print(f"{row['stage']}: {row['cpu_s']} CPU s, {row['wall_s']} s, {row['peak_rss_mib']} MiB, "
                  f"{row['llm_calls']} LLM calls, {row['embedding_calls']} embedding calls", file=sys.stderr)

    try:
        run("ingest + chunk vectors + BM25", sources=[source])
        counts = workspace.corpus.counts()
        result.update({"chunks": counts["chunks"], "chunk_tokens": counts["chunk_tokens"],
                       "tokens_per_passage": round(counts["chunk_tokens"] / len(passages), 1)})
        for stage in stages:
            if not any(row["stage"] == stage for row in result["rows"]):
                run(stage, sources=[], artifacts=[stage])
    finally:
        sampler.stop()
        manifest = workspace.manifest.entries()
        workspace.close()
        server.terminate()
        if "running" in result:
            result["stopped_during"] = result.pop("running")
        result["load_average_end"] = os.getloadavg()
        result["graph_counts"] = _graph_counts(manifest)
        result["storage"] = _storage(root / "ws", manifest)
        save()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({row["stage"]: row["cpu_s"] for row in result["rows"]}), file=sys.stderr)


if __name__ == "__main__":
    main()
