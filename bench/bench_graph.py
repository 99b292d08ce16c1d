"""Graph building on a corpus with the zero-LLM extractor: seconds, peak memory, sizes.

Measures, stage by stage on a fresh workspace (chunk vectors come from the
embedded embedding model, cached after the first run of bench_index or this):
  * nlp extraction (spaCy) over every chunk,
  * merge of the extractions into one graph,
  * the passage graph and the hybrid graph's chunk links (sparse M·Mᵀ),
  * each projection kg/tkg/rkg/pg/hybrid materialised as a GraphView,
  * the RAPTOR tree's first-layer clustering (GMM+BIC over UMAP, and K-means)
    without summaries: summaries need a chat model, timed elsewhere.
Prints a markdown table (nodes/edges per graph type included) and writes
bench/out/bench_graph.json.

    .venv/bin/python bench/bench_graph.py [--corpus PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from unirag.graph.extract_nlp import NlpExtractor
from unirag.graph.graph_store import GraphStore
from unirag.graph.projections import project, shared_entity_links
from unirag.graph.merge import merge_extractions
from unirag.hierarchy.tree import TreeConfig, cluster_layer
from unirag.config import load_settings
from unirag.llm.factory import build_stack
from unirag.pipeline import run_index
from unirag.workspace import Workspace

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/datasets/2wikimultihopqa/2wikimultihopqa_corpus.json"


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages (0 = all)")
    args = parser.parse_args()
    corpus = args.corpus
    root = Path(tempfile.mkdtemp(prefix="unirag-bench-graph-"))
    rows: list[tuple[str, float, str]] = []
    figures: dict[str, Any] = {"corpus": str(corpus), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} CPUs",
                               "python": platform.python_version()}
    try:
        if args.limit:
            records = json.loads(corpus.read_text())[: args.limit]
            corpus = root / "corpus.json"
            corpus.write_text(json.dumps(records))
        ws = Workspace.init(root / "ws")
        settings = load_settings(ws.root)
        tick = time.perf_counter()
        run_index(ws, [corpus], settings, build_stack(settings, ws.cache()))
        print(f"[bench] chunks + vectors: {time.perf_counter() - tick:.1f} s", file=sys.stderr)
        chunks = list(ws.corpus.iter_chunks())
        chunk_ids = [c.id for c in chunks]

        def stage(name: str, started: float, note: str) -> None:
            seconds = time.perf_counter() - started
            rows.append((name, seconds, note))
            print(f"[bench] {name}: {seconds:.2f} s {note} (peak {peak_mib():.0f} MiB)", file=sys.stderr)

        extractor = NlpExtractor()
        tick = time.perf_counter()
        extractions = list(extractor.extract(chunks))
        n_ent = sum(len(e.entities) for e in extractions)
        n_rel = sum(len(e.relations) for e in extractions)
        stage("nlp extraction (spaCy)", tick, f"{len(chunks) / (time.perf_counter() - tick):.0f} chunks/s; "
              f"{n_ent / len(chunks):.1f} entities, {n_rel / len(chunks):.1f} relations per chunk")
        GraphStore(ws).save_extractions(extractor.name, extractions)
        tick = time.perf_counter()
        graph = merge_extractions(extractions)
        stage("merge", tick, f"{len(graph.entities):,} entities, {len(graph.relationships):,} relationships")
        tick = time.perf_counter()
        pg_links = shared_entity_links(graph, chunk_ids, settings.graph.passage_threshold)
        stage("passage-graph links (>= t shared)", tick, f"t = {settings.graph.passage_threshold}")
        tick = time.perf_counter()
        hy_links = shared_entity_links(graph, chunk_ids, settings.graph.hybrid_threshold + 1)
        stage("hybrid chunk links (> l shared)", tick, f"l = {settings.graph.hybrid_threshold}")
        titles = {c.id: c.title for c in chunks}
        sizes: dict[str, dict[str, int]] = {}
        for kind in ("kg", "tkg", "rkg", "pg", "hybrid"):
            tick = time.perf_counter()
            links = pg_links if kind == "pg" else hy_links if kind == "hybrid" else None
            view = project(kind, graph, titles, links)
            adjacency = view.adjacency()
            sizes[kind] = {"nodes": len(view.nodes), "edges": len(view.edges)}
            stage(f"projection {kind} (+ sparse adjacency)", tick, f"{adjacency.nnz:,} non-zeros")
        vectors = np.load(ws.artifact_path("chunk_vectors.npy"))
        tokens = [c.n_tokens for c in chunks]
        for method in ("kmeans", "gmm"):
            tick = time.perf_counter()
            clusters = cluster_layer(vectors, tokens, TreeConfig(method=method))
            stage(f"tree layer-1 clustering ({method})", tick,
                  f"{sum(len(c) >= 2 for c in clusters)} clusters of >= 2 (one summary each)")
        figures.update(stages={name: round(sec, 3) for name, sec, _ in rows}, graph_sizes=sizes,
                       chunks=len(chunks), peak_rss_mib=round(peak_mib(), 1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"**bench_graph** {figures['date']} | {figures['machine']} | Python {figures['python']} | "
          f"corpus {Path(figures['corpus']).name}, {figures['chunks']:,} chunks | peak RSS {figures['peak_rss_mib']:,} MiB\n")
    print("| Stage | Seconds | Notes |\n|---|---:|---|")
    for name, seconds, note in rows:
        print(f"| {name} | {seconds:.2f} | {note} |")
    print("\n| Graph | Nodes | Edges |\n|---|---:|---:|")
    for kind, size in sizes.items():
        print(f"| {kind} | {size['nodes']:,} | {size['edges']:,} |")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "bench_graph.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
