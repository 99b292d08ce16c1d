"""Community hierarchies on a real corpus: seconds and peak memory per index, community
quality (ArchRAG attributed communities vs plain Leiden), and C-HNSW hierarchical search
against one HNSW per layer on the real ArchRAG layers.

Each index is built in its own subprocess (so its peak RSS is its own) through the same
artifact registry `unirag index --index` uses, on the nlp (zero-LLM) graph with the
extractive summarizer: the figures are the framework's own work, not the LLM's (an LLM
adds one call per summary; `unirag stats` counts them when one is configured).

    .venv/bin/python bench/bench_hierarchies.py [--corpus PATH | --workspace DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/datasets/2wikimultihopqa/2wikimultihopqa_corpus.json"
STEPS = ["graph", "chunk_links:hybrid", "entity_vectors", "communities:graphrag", "communities:archrag",
         "communities:hygrag", "communities:leanrag", "community_vectors:archrag", "chnsw"]


def settings_for(workspace: Path) -> Any:
    from unirag.config import load_settings

    return load_settings(workspace, {"graph.extractor": "nlp", "index.summarizer": "extractive"})


def ingest_step(workspace: Path, corpus: Path) -> dict[str, Any]:
    """Chunks and chunk vectors of a fresh workspace (in a subprocess of its own, like every step:
    on Linux a child's peak RSS starts from its parent's at fork time, so the parent stays small)."""
    from unirag.llm.factory import build_stack
    from unirag.pipeline import run_index
    from unirag.workspace import Workspace

    ws = Workspace.init(workspace)
    settings = settings_for(workspace)
    started = time.perf_counter()
    run_index(ws, [corpus], settings, build_stack(settings, ws.cache()), graphs=[])
    return {"step": "chunks + chunk vectors", "rebuilt": True, "seconds": round(time.perf_counter() - started, 2),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "levels": None, "count": len(ws.corpus.chunk_ids())}


def run_step(workspace: Path, name: str, force: bool) -> dict[str, Any]:
    """Build one artifact (its dependencies must be built); prints JSON figures."""
    from unirag.artifacts.registry import BuildContext, artifact_registry
    from unirag.llm.base import UsageLedger
    from unirag.llm.factory import build_stack
    from unirag.progress import Progress
    from unirag.workspace import Workspace

    ws = Workspace.open(workspace)
    settings = settings_for(workspace)
    if force:
        ws.manifest.drop_entry(name)
    ledger = UsageLedger()
    ctx = BuildContext(ws, settings, build_stack(settings, ws.cache()).accounted(ledger), Progress())
    started = time.perf_counter()
    rebuilt = artifact_registry()[name].build(ctx)
    seconds = time.perf_counter() - started
    entry = ws.manifest.entry(name) or {}
    total = ledger.total()
    return {"step": name, "rebuilt": rebuilt, "seconds": round(seconds, 2),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "levels": entry.get("levels"), "count": entry.get("count", entry.get("entities")),
            "llm_calls": total.llm_calls, "embedding_calls": total.embedding_calls}


def quality(workspace: Path) -> dict[str, Any]:
    from unirag.graph.graph_store import GraphStore
    from unirag.hierarchy.archrag import ArchragConfig, archrag_partition, community_quality
    from unirag.hierarchy.entity_graph import to_entity_graph
    from unirag.index.vector_artifacts import load_vectors
    from unirag.workspace import Workspace

    ws = Workspace.open(workspace)
    _, vectors = load_vectors(ws, "entity_vectors", "entity_vectors")
    graph = to_entity_graph(GraphStore(ws).load_graph(), np.asarray(vectors, dtype=np.float32))
    variants = {
        "plain Leiden (paper's baseline)": ArchragConfig(augment="none", edge_weight="unit", max_community_size=None),
        "plain Leiden, capped at 15": ArchragConfig(augment="none", edge_weight="unit"),
        "ArchRAG attributed (kNN, similarity weights, cap 15)": ArchragConfig(),
        "ArchRAG attributed, CODICIL": ArchragConfig(augment="codicil"),
    }
    out = {}
    for name, config in variants.items():
        labels = archrag_partition(graph, config)
        figures = community_quality(graph.vectors, labels)
        sizes = np.bincount(labels)
        out[name] = {**{k: round(float(v), 4) for k, v in figures.items()}, "max_size": int(sizes.max())}
    return out


def chnsw_vs_hnsw(workspace: Path, queries: int, k: int, ef: int, seed: int = 7) -> dict[str, Any]:
    """Top-k of every layer per query: C-HNSW hierarchical search vs one hnswlib index per layer."""
    import hnswlib

    from unirag.hierarchy.chnsw import CHnswIndex
    from unirag.index.vector_artifacts import load_vectors
    from unirag.workspace import Workspace

    ws = Workspace.open(workspace)
    index = CHnswIndex.load(ws.artifact_path("chnsw"))
    _, chunk_vectors = load_vectors(ws, "chunk_vectors", "chunk_vectors")
    rng = np.random.default_rng(seed)
    q = np.ascontiguousarray(chunk_vectors[rng.choice(len(chunk_vectors), min(queries, len(chunk_vectors)),
                                                      replace=False)], dtype=np.float32)
    layers = [index.layer_vectors(layer) for layer in range(index.n_layers)]
    per_layer = []
    build_started = time.perf_counter()
    for vectors in layers:
        h = hnswlib.Index(space="ip", dim=vectors.shape[1])
        h.init_index(max_elements=len(vectors), M=32, ef_construction=100, random_seed=1)
        h.add_items(vectors, np.arange(len(vectors)), num_threads=1)
        h.set_ef(max(ef, k))
        per_layer.append(h)
    hnsw_build = time.perf_counter() - build_started
    index.search_many(q[:2], k, ef)  # JIT / warm-up
    best_a = best_b = float("inf")
    for _ in range(3):
        started = time.process_time()
        found_a = index.search_many(q, k, ef)
        best_a = min(best_a, time.process_time() - started)
        started = time.process_time()
        found_b = [[h.knn_query(row[None, :], k=min(k, h.get_current_count()))[0][0] for h in per_layer] for row in q]
        best_b = min(best_b, time.process_time() - started)
    rows_a, _, _ = index.search_arrays(q, k, ef)
    recall_a, recall_b = [], []
    for layer, vectors in enumerate(layers):
        kk = min(k, len(vectors))
        exact = np.argsort(-(q @ vectors.T), axis=1)[:, :kk]
        a_hits = sum(len(set(rows_a[i, layer, :kk].tolist()) & set(exact[i].tolist())) for i in range(len(q)))
        b_hits = sum(len(set(found_b[i][layer].tolist()) & set(exact[i].tolist())) for i in range(len(q)))
        recall_a.append(a_hits / (kk * len(q)))
        recall_b.append(b_hits / (kk * len(q)))
    del found_a
    return {"layers": index.layer_sizes(), "queries": len(q), "k": k, "ef": ef,
            "chnsw_cpu_s": round(best_a, 4), "hnsw_per_layer_cpu_s": round(best_b, 4),
            "speedup_hnsw_over_chnsw": round(best_b / best_a, 2) if best_a else None,
            "recall_chnsw": [round(r, 3) for r in recall_a], "recall_hnsw": [round(r, 3) for r in recall_b],
            "hnsw_build_s": round(hnsw_build, 2), "chnsw_build": json.loads(json.dumps(index.stats()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--workspace", type=Path, help="reuse a workspace (its nlp graph and vectors)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages (0 = all)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--ef", type=int, default=100)
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--ingest", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help="force rebuilding nothing already built")
    args = parser.parse_args()
    if args.step:
        print(json.dumps(run_step(args.workspace, args.step, force=not args.keep)))
        return
    if args.ingest:
        print(json.dumps(ingest_step(args.workspace, args.ingest)))
        return
    figures: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs", "python": platform.python_version(),
        "summarizer": "extractive (zero-LLM)", "extractor": "nlp",
    }
    workspace = args.workspace
    steps = []
    if workspace is None:
        workspace = Path(tempfile.mkdtemp(prefix="unirag-bench-hier-")) / "ws"
        corpus = args.corpus
        if args.limit:
            corpus = workspace.parent / "corpus.json"
            corpus.write_text(json.dumps(json.loads(args.corpus.read_text())[: args.limit]))
        done = subprocess.run([sys.executable, __file__, "--workspace", str(workspace), "--ingest", str(corpus)],
                              check=True, capture_output=True, text=True)
        steps.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"[bench] {steps[-1]}", file=sys.stderr)
    figures["workspace"] = str(workspace)
    for name in STEPS:
        done = subprocess.run(
            [sys.executable, __file__, "--workspace", str(workspace), "--step", name, *(["--keep"] if name in (
                "graph", "chunk_links:hybrid", "entity_vectors") else [])],
            check=True, capture_output=True, text=True,
        )
        steps.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"[bench] {steps[-1]}", file=sys.stderr)
    figures["steps"] = steps
    figures["quality"] = quality(workspace)
    figures["chnsw"] = chnsw_vs_hnsw(workspace, args.queries, args.k, args.ef)
    print(f"**bench_hierarchies** {figures['date']} | {figures['machine']} | nlp graph, extractive summaries\n")
    print("| Step | Seconds | Peak RSS MiB | Levels / count |\n|---|---:|---:|---|")
    for step in steps:
        print(f"| {step['step']} | {step['seconds']:.1f} | {step['peak_rss_mib']:.0f} | "
              f"{step['levels'] or step['count']} |")
    print("\n| Partition (level 1) | CHI | cosine | cosine (non-singleton) | clusters | singletons | max size |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, q in figures["quality"].items():
        print(f"| {name} | {q['chi']:.2f} | {q['cosine']:.3f} | {q['cosine_multi']:.3f} | {int(q['clusters'])} | "
              f"{int(q['singletons'])} | {q['max_size']} |")
    c = figures["chnsw"]
    print(f"\nC-HNSW vs one HNSW per layer, layers {c['layers']}, {c['queries']} queries, top-{c['k']} of every "
          f"layer, ef {c['ef']}: C-HNSW {c['chnsw_cpu_s']} s, per-layer hnswlib {c['hnsw_per_layer_cpu_s']} s "
          f"(ratio {c['speedup_hnsw_over_chnsw']}x); recall {c['recall_chnsw']} vs {c['recall_hnsw']}")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "bench_hierarchies.json").write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
