"""Benchmark: index a real corpus with the real embedded model, stage by stage.

What it measures, on a fresh temporary workspace with default settings
(``load_settings(workspace)``, ``build_stack(settings, workspace.cache())``):

* loading      -- ``load_documents`` alone over the corpus (documents/s);
* tokenizer    -- the first ``get_tokenizer`` (BPE ranks), reported apart;
* chunking     -- ``chunk_document`` over every loaded document (passages/s);
* ingest       -- ``ingest`` into the workspace store (load + chunk + SQLite);
* model load   -- the embedded ONNX model's first call, reported apart;
* embedding    -- ``build_chunk_vectors`` (embed + save .npy + HNSW); the pure
  embedding time is the ledger's ``index.embed_chunks`` seconds;
* HNSW build   -- ``HnswIndex.build`` timed again on the saved vectors;
* BM25 build   -- ``build_chunk_bm25``;
* re-index     -- a second ``run_index`` over the same corpus (a no-op: its
  seconds and embedding calls);
* retrieval    -- VanillaRAG retrieval without generation, per query:
  (a) question embedding through the model stack (``embed_question``),
  (b) HNSW top-k search + chunk fetch from the store (``chunk_vdb``),
  (c) both; p50 / p95 / mean in ms. Queries are the first sentences of
  ``--queries`` passages drawn with a fixed seed.

Also: total wall time, peak RSS (``ru_maxrss``), passages, chunks, tokens.
Progress bars are off; one line per finished stage goes to stderr.

Run from the repository root::

    .venv/bin/python bench/bench_index.py [--corpus PATH] [--workspace DIR] [--queries 100] [--keep]

The markdown report goes to stdout (paste it into a README); the same figures
go to ``bench/out/bench_index.json``. Without ``--workspace`` a temporary
workspace is used and deleted at the end unless ``--keep``; a ``--workspace``
you name must be new or empty and is never deleted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from unirag.ingest import ingest
from unirag.config import Settings, load_settings
from unirag.index.chunks import build_chunk_bm25, build_chunk_vectors
from unirag.index.vectors import HnswIndex
from unirag.llm.base import StageUsage, UsageLedger
from unirag.llm.factory import backend_embedder, build_stack
from unirag.operators.chunk import chunk_vdb
from unirag.operators.context import QueryState, Resources
from unirag.operators.question import embed_question
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.text.chunking import chunk_document
from unirag.text.loaders import load_documents
from unirag.text.tokenizer import get_tokenizer
from unirag.text.types import Document
from unirag.workspace import Workspace

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "datasets" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
OUT_FILE = Path(__file__).resolve().parent / "out" / "bench_index.json"
SEED = 13
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class Stages:
    """Named stage timings, each with its peak RSS at the end and free-form figures."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        row: dict[str, Any] = {}
        start = time.perf_counter()
        yield row
        row["seconds"] = time.perf_counter() - start
        row["peak_rss_mib"] = round(peak_rss_mib(), 1)
        self.rows[name] = row
        extra = ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("seconds", "peak_rss_mib"))
        log(f"{name}: {row['seconds']:.3f} s{', ' + extra if extra else ''} (peak RSS {row['peak_rss_mib']} MiB)")


def latency_ms(samples: list[float]) -> dict[str, float]:
    """p50 / p95 / mean / max of seconds, in milliseconds."""
    ms = np.asarray(samples) * 1000.0
    return {
        "p50": round(float(np.percentile(ms, 50)), 3),
        "p95": round(float(np.percentile(ms, 95)), 3),
        "mean": round(float(ms.mean()), 3),
        "max": round(float(ms.max()), 3),
    }


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def pick_queries(docs: list[Document], n: int, seed: int = SEED) -> list[tuple[str, str]]:
    """(query, source title): the first sentence of ``n`` passages drawn with ``seed``."""
    sample = random.Random(seed).sample(docs, min(n, len(docs)))
    return [(first_sentence(doc.text), doc.title) for doc in sample]


def machine_info(model: str, settings: Settings) -> dict[str, Any]:
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu_model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "processor": platform.processor() or platform.machine(),
        "machine": platform.machine(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "embedding_model": model,
        "embedding_threads": settings.embedding.n_threads,
        "embedding_batch_size": settings.embedding.batch_size,
        "chunking": f"size={settings.chunking.size} overlap={settings.chunking.overlap} "
        f"presplit={settings.chunking.presplit} encoding={settings.chunking.encoding}",
    }


def run(corpus: Path, root: Path, n_queries: int) -> dict[str, Any]:
    """Run every stage on a fresh workspace at ``root``; returns the figures."""
    wall_start = time.perf_counter()
    stages = Stages()
    quiet = Progress(enabled=False)
    sources = [corpus]

    ws = Workspace.init(root)
    settings = load_settings(root)
    backend = backend_embedder(settings)
    stack = build_stack(settings, ws.cache(), embedder=backend)
    info = machine_info(stack.embedder.name, settings)
    log(f"corpus {corpus}, workspace {root}, model {info['embedding_model']}")

    with stages.stage("loading") as row:
        docs = list(load_documents(sources, "auto", settings.loader, presplit=settings.chunking.presplit))
        row["documents"] = len(docs)

    with stages.stage("tokenizer load") as row:
        tokenizer = get_tokenizer(settings.chunking.encoding)
        row["encoding"] = settings.chunking.encoding

    with stages.stage("chunking") as row:
        size, overlap = settings.chunking.size, settings.chunking.overlap
        chunks = [chunk for doc in docs for chunk in chunk_document(doc, tokenizer, size, overlap)]
        row["chunks"] = len(chunks)
        row["tokens"] = sum(chunk.n_tokens for chunk in chunks)

    with ws.writing():
        with stages.stage("ingest") as row:
            report = ingest(ws, sources, settings, "auto", quiet)
            row["documents_added"] = report.documents_added
            row["chunks_added"] = report.chunks_added
            row["duplicates"] = report.duplicates
        counts = ws.corpus.counts()

        with stages.stage("model load"):
            backend.embed(["warm-up"], stage="bench.warmup")  # bypasses cache and ledger

        ledger = UsageLedger()
        models = stack.accounted(ledger)
        with stages.stage("embedding + HNSW") as row:
            row["rebuilt"] = build_chunk_vectors(ws, models.embedder, settings, quiet)
        embed_usage = ledger.stages.get("index.embed_chunks", StageUsage())
        stages.rows["embedding + HNSW"].update(
            embedding_calls=embed_usage.embedding_calls,
            embedded_texts=embed_usage.embedded_texts,
            embedding_tokens=embed_usage.embedding_tokens,
            embed_seconds=round(embed_usage.seconds, 3),
        )

        with stages.stage("HNSW build (again)") as row:
            vectors = np.load(ws.artifact_path("chunk_vectors.npy"))
            ids = ws.corpus.chunk_ids()
            HnswIndex.build(vectors, ids)
            row["vectors"] = int(vectors.shape[0])
            row["dim"] = int(vectors.shape[1])

        with stages.stage("BM25 build") as row:
            row["rebuilt"] = build_chunk_bm25(ws, quiet)

    index_seconds = sum(stages.rows[name]["seconds"] for name in ("ingest", "embedding + HNSW", "BM25 build"))

    with stages.stage("re-index (no-op)") as row:
        again = run_index(ws, sources, settings, stack, progress=quiet).to_json()
        row["rebuilt"] = again["rebuilt"]
        row["embedding_calls"] = again["embedding_calls"]
        row["already_indexed"] = again["already_indexed"]

    resources = Resources(ws, settings)
    with stages.stage("HNSW load") as row:
        row["vectors"] = len(resources.chunk_hnsw(stack.embedder.name))

    top_k = settings.retrieval.top_k
    queries = pick_queries(docs, n_queries)
    warmup = QueryState(question="warm-up question", resources=resources, models=stack.accounted())
    embed_question(warmup)
    chunk_vdb(warmup, top_k)
    embed_s: list[float] = []
    search_s: list[float] = []
    total_s: list[float] = []
    found = 0
    with stages.stage("retrieval") as row:
        for question, title in queries:
            state = QueryState(question=question, resources=resources, models=stack.accounted())
            tick = time.perf_counter()
            embed_question(state)
            embedded = time.perf_counter()
            items = chunk_vdb(state, top_k)
            done = time.perf_counter()
            embed_s.append(embedded - tick)
            search_s.append(done - embedded)
            total_s.append(done - tick)
            found += any(item.source == title for item in items)
        row["queries"] = len(queries)
        row["source_in_top_k"] = found

    cache_counts = ws.cache().counts()
    wall = time.perf_counter() - wall_start
    figures: dict[str, Any] = {
        "machine": info,
        "corpus": str(corpus),
        "workspace": str(root),
        "counts": {
            "documents_loaded": len(docs),
            "documents_stored": counts["documents"],
            "chunks": counts["chunks"],
            "chunk_tokens": counts["chunk_tokens"],
            "embedding_tokens": embed_usage.embedding_tokens,
            "cached_embeddings": cache_counts["embeddings"],
        },
        "stages": {name: {**row, "seconds": round(row["seconds"], 3)} for name, row in stages.rows.items()},
        "index_seconds": round(index_seconds, 3),
        "reindex": again,
        "retrieval": {
            "queries": len(queries),
            "top_k": top_k,
            "seed": SEED,
            "source_in_top_k": found,
            "embed_ms": latency_ms(embed_s),
            "search_fetch_ms": latency_ms(search_s),
            "total_ms": latency_ms(total_s),
        },
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(wall, 3),
        "peak_rss_mib": round(peak_rss_mib(), 1),
    }
    ws.close()
    return figures


def _rate(count: int, seconds: float, unit: str) -> str:
    return f"{count / seconds:,.0f} {unit}/s" if seconds > 0 else "-"


def render(fig: dict[str, Any]) -> str:
    """The figures as markdown: a header line, a stage table, a latency table."""
    m, c, s, r = fig["machine"], fig["counts"], fig["stages"], fig["retrieval"]
    emb = s["embedding + HNSW"]
    hnsw = s["HNSW build (again)"]
    reindex = s["re-index (no-op)"]
    n_chunks = c["chunks"]
    lines = [
        f"**bench_index** {m['date']} | {m['processor']}/{m['machine']} ({m['cpu_model'] or 'cpu'}), "
        f"{m['cpu_count']} CPUs ({m['usable_cpus']} usable) | Python {m['python']} | "
        f"embedding {m['embedding_model']} ({m['embedding_threads']} threads, batch {m['embedding_batch_size']}) | "
        f"chunking {m['chunking']} | load average (1/5/15 min) at start "
        f"{'/'.join(map(str, m['load_average_at_start']))}, at end {'/'.join(map(str, fig['load_average_at_end']))}",
        "",
        f"Corpus `{Path(fig['corpus']).name}`: {c['documents_loaded']:,} passages, {c['documents_stored']:,} "
        f"documents stored, {n_chunks:,} chunks, {c['chunk_tokens']:,} cl100k tokens, "
        f"{c['embedding_tokens']:,} embedding (WordPiece) tokens.",
        "",
        "| Stage | Seconds | Rate | Notes |",
        "|---|---:|---:|---|",
        f"| Loading (`load_documents`) | {s['loading']['seconds']:.3f} | "
        f"{_rate(s['loading']['documents'], s['loading']['seconds'], 'docs')} | JSON parse + Document objects |",
        f"| Tokenizer load (`get_tokenizer`) | {s['tokenizer load']['seconds']:.3f} | - | "
        f"{s['tokenizer load']['encoding']} ranks, once per process |",
        f"| Chunking (`chunk_document`) | {s['chunking']['seconds']:.3f} | "
        f"{_rate(s['loading']['documents'], s['chunking']['seconds'], 'passages')} | {s['chunking']['chunks']:,} chunks |",
        f"| Ingest into store (`ingest`) | {s['ingest']['seconds']:.3f} | "
        f"{_rate(s['ingest']['documents_added'], s['ingest']['seconds'], 'docs')} | "
        f"load + chunk + SQLite, tokenizer already loaded |",
        f"| Embedding model load | {s['model load']['seconds']:.3f} | - | ONNX session + tokenizer, first call |",
        f"| Embedding (ledger `index.embed_chunks`) | {emb['embed_seconds']:.3f} | "
        f"{_rate(emb['embedded_texts'], emb['embed_seconds'], 'passages')} | "
        f"{emb['embedding_calls']} calls, {emb['embedded_texts']:,} texts, incl. cache writes |",
        f"| `build_chunk_vectors` total | {emb['seconds']:.3f} | "
        f"{_rate(n_chunks, emb['seconds'], 'passages')} | embedding + .npy + HNSW + manifest |",
        f"| HNSW build (`HnswIndex.build`) | {hnsw['seconds']:.3f} | "
        f"{_rate(hnsw['vectors'], hnsw['seconds'], 'vectors')} | {hnsw['vectors']:,} x {hnsw['dim']}, "
        f"incl. .npy load, timed again |",
        f"| BM25 build (`build_chunk_bm25`) | {s['BM25 build']['seconds']:.3f} | "
        f"{_rate(n_chunks, s['BM25 build']['seconds'], 'chunks')} | bm25s, incl. save |",
        f"| **Index total** (ingest + vectors + BM25) | **{fig['index_seconds']:.3f}** | "
        f"{_rate(n_chunks, fig['index_seconds'], 'passages')} | what a cold `run_index` costs, model load excluded |",
        f"| Re-index, same corpus (`run_index`) | {reindex['seconds']:.3f} | - | "
        f"{reindex['embedding_calls']} embedding calls, rebuilt: {reindex['rebuilt'] or 'nothing'}, "
        f"{reindex['already_indexed']:,} already indexed |",
        f"| HNSW load (`Resources.chunk_hnsw`) | {s['HNSW load']['seconds']:.3f} | - | once per process |",
        f"| **Benchmark wall time** | **{fig['wall_seconds']:.3f}** | - | "
        f"peak RSS **{fig['peak_rss_mib']:,.1f} MiB** |",
        "",
        f"VanillaRAG retrieval, no generation: {r['queries']} queries (first sentences of passages, seed "
        f"{r['seed']}), top-{r['top_k']}; source passage in top-{r['top_k']}: {r['source_in_top_k']}/{r['queries']}.",
        "",
        "| Step | p50 ms | p95 ms | mean ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, key in (
        ("(a) question embedding (`embed_question`, via cache layer)", "embed_ms"),
        ("(b) HNSW top-k + chunk fetch (`chunk_vdb`)", "search_fetch_ms"),
        ("(c) (a) + (b)", "total_ms"),
    ):
        q = r[key]
        lines.append(f"| {label} | {q['p50']:.2f} | {q['p95']:.2f} | {q['mean']:.2f} | {q['max']:.2f} |")
    lines.append("")
    lines.append("Peak RSS after each stage (MiB): " + ", ".join(f"{k} {v['peak_rss_mib']}" for k, v in s.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus file or directory")
    parser.add_argument("--workspace", type=Path, help="new or empty directory (kept); default: a temp dir")
    parser.add_argument("--queries", type=int, default=100, help="retrieval queries to time (default 100)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = parser.parse_args(argv)
    if not args.corpus.exists():
        parser.error(f"corpus not found: {args.corpus}")
    if args.queries <= 0:
        parser.error("--queries must be positive")
    if args.workspace is not None:
        if args.workspace.exists() and any(args.workspace.iterdir()):
            parser.error(f"--workspace {args.workspace} is not empty: the benchmark needs a fresh workspace")
        root, temporary = args.workspace, False
    else:
        root, temporary = Path(tempfile.mkdtemp(prefix="unirag-bench-")), True
    try:
        figures = run(args.corpus, root, args.queries)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif temporary:
            log(f"workspace kept at {root}")
    print(render(figures))
    OUT_FILE.parent.mkdir(parents=True, exist_ok=True)
    OUT_FILE.write_text(json.dumps(figures, indent=2) + "\n")
    log(f"figures written to {OUT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
