"""Texts per second of the embedded embedding model on short (entity) and long (passage) texts.

Why: on the 2Wiki corpus the entity vectors (36,854 short texts) took longer
than the passages; this measures the bare embedder (no cache) on the three
kinds of text the index embeds, so a change to the ONNX path shows its effect:

  * passages: ``title\\ntext`` of the first ``--passages`` 2Wiki passages;
  * entity names and entity ``name: description`` texts of the graph the
    zero-LLM extractor builds from the first ``--entity-passages`` passages
    (the texts ``entity_name_vectors`` and ``entity_vectors`` embed).

Each set goes through ``embed_in_length_order`` with the settings' batch size,
as the index does. ``--save-reference FILE`` stores the vectors; ``--reference
FILE`` compares against stored ones (the minimum cosine per set), so a faster
path is checked to give the same vectors (minimum and mean cosine per set).
``--int8-kernels`` measures the ``embedding.int8_kernels`` graph (built into the
user cache on first use, before the timing starts); ``--model wordllama-l2-supercat-256``
the opt-in static-vector embedder (``unirag[fast-embed]``; its vectors have another
dimension, so no cosine to a MiniLM reference). A JSON copy goes to bench/out/
(``embedding_speed_int8_kernels.json`` for the int8-kernel graph,
``embedding_speed_<model>.json`` for another model).

    .venv/bin/python bench/embedding_speed.py [--passages 600] [--entity-passages 300] [--int8-kernels]
        [--model wordllama-l2-supercat-256]
        [--save-reference bench/out/embedding_reference.npz | --reference bench/out/embedding_reference.npz]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import EMBEDDED_EMBEDDING_MODEL, FAST_EMBEDDING_MODEL, load_settings
from unirag.ingest import ingest
from unirag.graph.extract_nlp import NlpExtractor
from unirag.graph.merge import merge_extractions, shorten_descriptions
from unirag.hierarchy.entity_graph import entity_full_texts, entity_name_texts
from unirag.index.vector_artifacts import embed_in_length_order
from unirag.llm.embedded import EmbeddedEmbedder
from unirag.llm.wordllama_embedder import WordLlamaEmbedder
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/datasets/2wikimultihopqa/2wikimultihopqa_corpus.json"


def text_sets(corpus: Path, passages: int, entity_passages: int) -> dict[str, list[str]]:
    """The three sets of texts, built the way the index builds them."""
    root = Path(tempfile.mkdtemp(prefix="unirag-bench-embed-"))
    try:
        records = json.loads(corpus.read_text())[: max(passages, entity_passages)]
        source = root / "corpus.json"
        source.write_text(json.dumps(records))
        workspace = Workspace.init(root / "ws")
        settings = load_settings(workspace.root)
        ingest(workspace, [source], settings)
        chunks = list(workspace.corpus.iter_chunks())
        graph = merge_extractions(NlpExtractor().extract(chunks[:entity_passages]))
        tokenizer = get_tokenizer(settings.chunking.encoding)
        shorten_descriptions(graph, settings.graph.description_max_tokens, tokenizer.count, tokenizer.truncate)
        workspace.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "passages": [chunk.indexed_text for chunk in chunks[:passages]],
        "entity_names": entity_name_texts(graph)[1],
        "entity_texts": entity_full_texts(graph)[1],
    }


def measure(embedder: Any, texts: list[str], batch_size: int) -> tuple[np.ndarray, float, float]:
    """(vectors, wall seconds, CPU seconds of this process) of one set.

    CPU seconds are the steadier figure on a shared machine: other jobs stretch
    the wall time, much less the work done."""
    tick, cpu = time.perf_counter(), time.process_time()
    vectors = embed_in_length_order(embedder, texts, batch_size, Progress(), "embedding", "bench")
    return vectors, time.perf_counter() - tick, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--passages", type=int, default=600)
    parser.add_argument("--entity-passages", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=0, help="0 = the settings' embedding.batch_size")
    parser.add_argument("--save-reference", type=Path)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--int8-kernels", action="store_true", help="the embedding.int8_kernels graph")
    parser.add_argument("--model", choices=(EMBEDDED_EMBEDDING_MODEL, FAST_EMBEDDING_MODEL),
                        default=EMBEDDED_EMBEDDING_MODEL, help="the embedded model to measure")
    args = parser.parse_args()
    sets = text_sets(args.corpus, args.passages, args.entity_passages)
    batch_size = args.batch_size or load_settings(None).embedding.batch_size
    fast = args.model == FAST_EMBEDDING_MODEL
    if fast and args.int8_kernels:
        parser.error("--int8-kernels applies to MiniLM only")
    embedder: Any = WordLlamaEmbedder() if fast else EmbeddedEmbedder(int8_kernels=args.int8_kernels)
    embedder.embed(["warm up the session"])
    reference = dict(np.load(args.reference)) if args.reference else {}
    rows: dict[str, dict[str, Any]] = {}
    vectors_by_set: dict[str, np.ndarray] = {}
    load = os.getloadavg()[0]
    for name, texts in sets.items():
        vectors, seconds, cpu = measure(embedder, texts, batch_size)
        vectors_by_set[name] = vectors
        row: dict[str, Any] = {"texts": len(texts), "distinct": len(set(texts)), "seconds": round(seconds, 2),
                               "texts_per_s": round(len(texts) / seconds, 1), "cpu_seconds": round(cpu, 2),
                               "texts_per_cpu_s": round(len(texts) / cpu, 1),
                               "mean_chars": round(sum(map(len, texts)) / max(len(texts), 1), 1)}
        if name in reference and reference[name].shape == vectors.shape:
            cosines = np.sum(reference[name] * vectors, axis=1)
            row["min_cosine_vs_reference"] = float(np.min(cosines))
            row["mean_cosine_vs_reference"] = float(np.mean(cosines))
        rows[name] = row
    if args.save_reference:
        args.save_reference.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.save_reference, **vectors_by_set)
    summary = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": embedder.name, "batch_size": batch_size,
               "load_average_start": round(load, 2), "load_average_end": round(os.getloadavg()[0], 2), "sets": rows}
    print(f"**embedding_speed** {summary['date']} | {embedder.name} | batch {batch_size} | "
          f"load average {summary['load_average_start']} -> {summary['load_average_end']}\n")
    print("| texts | count | distinct | mean chars | seconds | texts/s | CPU s | texts/CPU-s "
          "| min / mean cosine vs reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        cosine = (f"{row['min_cosine_vs_reference']:.4f} / {row['mean_cosine_vs_reference']:.4f}"
                  if "min_cosine_vs_reference" in row else "")
        print(f"| {name} | {row['texts']:,} | {row['distinct']:,} | {row['mean_chars']} | {row['seconds']} | "
              f"{row['texts_per_s']} | {row['cpu_seconds']} | {row['texts_per_cpu_s']} | {cosine} |")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    name = (f"embedding_speed_{args.model}.json" if fast else
            "embedding_speed_int8_kernels.json" if args.int8_kernels else "embedding_speed.json")
    (out / name).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
