"""Benchmark: the same index run on the local executor and on Ray with 1 and 2 local workers.

Each configuration runs in a fresh Python process, on a fresh temporary workspace with an
empty model cache: ingest (load + chunk), chunk vectors with the embedded MiniLM model, BM25,
and the KG with the zero-LLM extractor (``graph.extractor: nlp``). For each it records

* wall seconds of the index run, and of starting the Ray instance (apart: a cluster runs on);
* CPU seconds of the run: this process plus every process below it (the Ray instance a local
  ``ray.init`` starts: GCS, raylet, workers), user + system, from ``psutil``;
* wall seconds per stage (``IndexReport.timings``: ``build.chunks`` = ingest, then each artifact);
* a fingerprint of the extractions and of the chunk vectors, so the runs are seen to agree.

Run from the repository root (``pip install 'unirag[ray]'``)::

    .venv/bin/python bench/ray_index.py [--corpus PATH] [--limit 1000] [--configs local,ray1,ray2]

The markdown table goes to stdout, the figures to ``bench/out/ray_index.json``. On a 2-core
machine two Ray workers measure Ray's overhead, not a speed-up: the driver, the raylet and
two workers share two cores (and the embedded models' own threads compete with them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "datasets" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
OUT_FILE = Path(__file__).resolve().parent / "out" / "ray_index.json"
CONFIGS = {"local": None, "ray1": 1, "ray2": 2}  # name -> CPUs of the local Ray instance


def process_tree_cpu() -> float:
    """User + system CPU seconds of this process and every live process below it."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
    return total


def run_one(name: str, corpus: Path, limit: int | None, batch_size: int) -> dict[str, Any]:
    """One configuration in this process: start Ray if asked, index, measure."""
    sys.path.insert(0, str(REPO_ROOT))
    from unirag.config import load_settings
    from unirag.graph.graph_store import GraphStore
    from unirag.llm.factory import build_stack
    from unirag.pipeline import run_index
    from unirag.text.loaders import load_documents
    from unirag.workspace import Workspace

    cpus = CONFIGS[name]
    documents = []
    for doc in load_documents([corpus]):
        documents.append(doc)
        if limit is not None and len(documents) >= limit:
            break
    started_ray = 0.0
    if cpus is not None:
        import ray

        tick = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
        started_ray = time.perf_counter() - tick
    with tempfile.TemporaryDirectory(prefix=f"unirag-ray-bench-{name}-") as tmp:
        workspace = Workspace.init(Path(tmp) / "ws")
        overrides = {"graph.extractor": "nlp", "executor": "local" if cpus is None else "ray",
                     "ray.batch_size": batch_size}
        settings = load_settings(workspace.root, overrides)
        stack = build_stack(settings, workspace.cache())
        cpu_before, tick = process_tree_cpu(), time.perf_counter()
        report = run_index(workspace, [], settings, stack, documents=documents, graphs=["kg"])
        wall, cpu = time.perf_counter() - tick, process_tree_cpu() - cpu_before
        extractor = workspace.manifest.entry("graph")["config"]["extractor"]
        ids = workspace.corpus.chunk_ids()
        extractions = GraphStore(workspace).load_extractions(extractor, ids)
        import numpy as np

        vectors = np.load(workspace.artifact_path("chunk_vectors.npy"))
        result = {
            "config": name, "ray_cpus": cpus, "documents": len(documents), "chunks": len(ids),
            "ray_start_s": round(started_ray, 2), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "stages_s": {stage: round(seconds, 2) for stage, seconds in report.timings.items()},
            "extractions_sha": hashlib.sha256(json.dumps([e.to_json() for e in extractions], sort_keys=True)
                                              .encode()).hexdigest()[:12],
            "entities": len(GraphStore(workspace).load_graph().entities),
            # rounded: ONNX Runtime's float sums may differ in the last bits between processes
            "vectors_sha": hashlib.sha256(np.round(vectors, 4).tobytes()).hexdigest()[:12],
        }
        workspace.close()
    if cpus is not None:
        import ray

        ray.shutdown()
    return result


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    stages = sorted({stage for r in results for stage in r["stages_s"]})
    head = ["config", "Ray start s", "index wall s", "index CPU s", *stages, "entities", "extractions", "vectors"]
    lines = [f"{meta['documents']} passages of 2Wiki, {meta['date']}, {meta['machine']}, "
             f"load average {meta['load_start']} at start, {meta['load_end']} at end",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        row = [r["config"], f"{r['ray_start_s']:.1f}", f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}",
               *(f"{r['stages_s'].get(stage, 0):.1f}" for stage in stages), str(r["entities"]), r["extractions_sha"],
               r["vectors_sha"]]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=1000, help="first N passages (0: all)")
    parser.add_argument("--configs", default="local,ray1,ray2")
    parser.add_argument("--batch-size", type=int, default=64, help="ray.batch_size: passages per task")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one configuration, print its JSON
    args = parser.parse_args()
    limit = args.limit or None
    if args.one:
        print(json.dumps(run_one(args.one, args.corpus, limit, args.batch_size)))
        return
    results = []
    load_start = os.getloadavg()[0]
    for name in args.configs.split(","):
        print(f"ray_index: {name} ...", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, __file__, "--one", name, "--corpus", str(args.corpus),
                               "--limit", str(args.limit), "--batch-size", str(args.batch_size)],
                              capture_output=True, text=True, cwd=REPO_ROOT, check=False)
        if done.returncode != 0:
            sys.exit(f"ray_index: {name} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"ray_index: {name}: {results[-1]['wall_s']} s wall, {results[-1]['cpu_s']} s CPU",
              file=sys.stderr, flush=True)
    meta = {"date": dt.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "documents": results[0]["documents"], "load_start": round(load_start, 2),
            "load_end": round(os.getloadavg()[0], 2), "batch_size": args.batch_size}
    OUT_FILE.parent.mkdir(parents=True, exist_ok=True)
    OUT_FILE.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(markdown(results, meta))


if __name__ == "__main__":
    main()
