"""Benchmark: the workspace store's own work, without any model, on SQLite or PostgreSQL.

What it times, on a fresh temporary workspace (``--store`` picks the store; default the
embedded SQLite file):

* ingest        -- ``ingest`` of the corpus (load + chunk + store writes);
* chunk scan    -- ``iter_chunks`` over every chunk;
* chunk fetch   -- ``get_chunks`` of 10 random ids, ``--lookups`` times (a query's fetch);
* manifest      -- ``is_current`` of one artifact, ``--lookups`` times (every builder's check);
* graph save    -- ``GraphStore.save_graph`` of a synthetic graph (an entity per 2 chunks,
  two relationships per entity; seeded);
* graph load    -- ``GraphStore.load_graph`` of it;
* extractions   -- ``save_extractions`` of one small extraction per chunk, then
  ``load_extractions`` of all;
* vectors       -- a vector index over one seeded random 384-d vector per chunk in the
  store's form (hnswlib file, or pgvector table with its HNSW index), then ``--lookups``
  top-10 searches of one query each.

Everything is the store's work only (no embedding, no extraction), so the figures compare
stores and code versions; run it before and after a change of the store layer. Figures
vary with the machine's load: the header records the load average.

    .venv/bin/python bench/bench_store.py [--corpus PATH] [--store postgresql://...] [--lookups 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "datasets" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"


def _timed(figures: dict[str, float], name: str, work: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = work()
    figures[name] = round(time.perf_counter() - started, 3)
    print(f"{name}: {figures[name]} s", file=sys.stderr)
    return result


def _synthetic_graph(chunk_ids: list[str]) -> Any:
    from unirag.graph.merge import Entity, MergedGraph, Relationship

    rng = random.Random(7)
    graph = MergedGraph()
    names = [f"e{i}" for i in range(max(1, len(chunk_ids) // 2))]
    for i, name in enumerate(names):
        graph.entities[name] = Entity(name, f"Entity {i}", "THING", f"description of entity {i} " * 4,
                                      rng.sample(chunk_ids, 3), 3)
    for i, name in enumerate(names):
        for j in range(2):
            other = names[rng.randrange(len(names))]
            rel_id = f"r{i}.{j}"
            graph.relationships[rel_id] = Relationship(rel_id, name, other, "related", "a relation " * 4,
                                                       ["k1", "k2"], 1.0 + j, 5.0, rng.sample(chunk_ids, 2))
    return graph


def _vector_figures(ws: Any, ids: list[str], lookups: int, figures: dict[str, Any]) -> None:
    """Build a vector index over one seeded random 384-d vector per chunk, in the store's form
    (hnswlib file or pgvector table), then ``lookups`` top-10 searches of one query each."""
    import numpy as np

    from unirag.index.vectors import HnswIndex

    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(len(ids), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[rng.choice(len(ids), size=lookups)]
    if ws.backend.vector_tables:
        from unirag.index.pgvector_index import PgVectorIndex

        index = _timed(figures, "vector_build", lambda: PgVectorIndex.write(ws.db, "vectors_bench", ids, vectors,
                                                                            None))
    else:
        index = _timed(figures, "vector_build", lambda: HnswIndex.build(vectors, ids))
    _timed(figures, "vector_search", lambda: [index.search(query, 10) for query in queries])


def run(corpus: Path, store: str | None, lookups: int) -> dict[str, Any]:
    from unirag.config import load_settings
    from unirag.ingest import ingest
    from unirag.graph.graph_store import GraphStore
    from unirag.graph.types import ChunkExtraction
    from unirag.progress import Progress
    from unirag.workspace import Workspace

    figures: dict[str, Any] = {"store": "postgresql" if store else "sqlite", "load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp) / "ws"
        if store and "schema=" not in store:  # a schema of its own, dropped at the end
            store += ("&" if "?" in store else "?") + f"schema=bench_store_{os.getpid()}"
        settings = load_settings(root, {"store": store} if store else {})
        ws = Workspace.init(root, **({"store": store} if store else {}))
        try:
            _timed(figures, "ingest", lambda: ingest(ws, [corpus], settings, progress=Progress(enabled=False)))
            ids = ws.corpus.chunk_ids()
            figures["chunks"] = len(ids)
            _timed(figures, "chunk_scan", lambda: sum(1 for _ in ws.corpus.iter_chunks()))
            rng = random.Random(1)
            samples = [rng.sample(ids, 10) for _ in range(lookups)]
            _timed(figures, "chunk_fetch", lambda: [ws.corpus.get_chunks(s) for s in samples])
            ws.manifest.set_entry("bench", {"inputs": "x"})
            _timed(figures, "manifest_checks", lambda: [ws.manifest.is_current("bench", "x") for _ in range(lookups)])
            graphs = GraphStore(ws)
            graph = _synthetic_graph(ids)
            _timed(figures, "graph_save", lambda: graphs.save_graph(graph))
            loaded = _timed(figures, "graph_load", graphs.load_graph)
            assert len(loaded.entities) == len(graph.entities)
            extractions = [ChunkExtraction.from_json({"chunk_id": cid, "entities": [], "relations": []})
                           for cid in ids]
            _timed(figures, "extractions_save", lambda: graphs.save_extractions("bench", extractions))
            _timed(figures, "extractions_load", lambda: graphs.load_extractions("bench", ids))
            _vector_figures(ws, ids, lookups, figures)
        finally:
            ws.close()
            ws.backend.empty()  # the bench's own store: a server's schema is dropped too
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--store", default=None, help="postgresql://... (default: the SQLite file)")
    parser.add_argument("--lookups", type=int, default=1000)
    args = parser.parse_args()
    figures = run(args.corpus, args.store, args.lookups)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"bench_store_{figures['store']}.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
