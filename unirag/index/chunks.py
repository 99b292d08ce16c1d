"""Chunk-level retrieval artifacts: chunk vectors + HNSW, and BM25.

Each artifact records in the manifest a fingerprint of its inputs (the chunk
ids in order, and the embedding model for vectors). When the fingerprint is
unchanged the artifact is not touched; when it changed, vectors come from the
embedding cache for every chunk embedded before, so only new chunks cost calls.
"""

from __future__ import annotations

import time

import numpy as np

from unirag.config import Settings, config_hash
from unirag.index.bm25 import Bm25Index
from unirag.index.vectors import HnswIndex
from unirag.llm.base import EmbeddingModel
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path

CHUNK_VECTORS = "chunk_vectors"
CHUNK_BM25 = "chunk_bm25"


def chunk_vector_paths(workspace: Workspace) -> tuple:
    return workspace.artifact_path("chunk_vectors.npy"), workspace.artifact_path("chunks.hnsw")


def build_chunk_vectors(
    workspace: Workspace, embedder: EmbeddingModel, settings: Settings, progress: Progress | None = None
) -> bool:
    """Embed every chunk and build the HNSW index; returns False when already up to date."""
    progress = progress or Progress()
    ids = workspace.chunk_ids()
    fingerprint = config_hash({"chunks": ids, "model": embedder.name})
    entry = workspace.manifest_entry(CHUNK_VECTORS)
    vectors_path, hnsw_path = chunk_vector_paths(workspace)
    if entry and entry.get("inputs") == fingerprint and hnsw_path.exists():
        return False
    start = time.perf_counter()
    batch = settings.embedding.batch_size
    chunks = list(workspace.iter_chunks())
    # Embed in order of length: batches of similar length pad little (about 2x
    # faster on the embedded model); rows are put back in chunk order after.
    order = sorted(range(len(chunks)), key=lambda i: chunks[i].n_tokens)
    vectors = np.zeros((len(chunks), 0), dtype=np.float32)
    with progress.task("embedding chunks", total=len(ids)) as advance:
        for offset in range(0, len(order), batch):
            rows = order[offset : offset + batch]
            part = embedder.embed([chunks[i].indexed_text for i in rows], stage="index.embed_chunks").vectors
            if vectors.shape[1] != part.shape[1]:
                vectors = np.zeros((len(chunks), part.shape[1]), dtype=np.float32)
            vectors[rows] = part
            advance(len(rows))
    if not chunks:
        vectors = np.zeros((0, 1), dtype=np.float32)
    with atomic_path(vectors_path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors)
    with progress.task("building HNSW index"):
        HnswIndex.build(vectors, ids).save(hnsw_path)
    workspace.set_manifest_entry(
        CHUNK_VECTORS,
        {
            "config": {"model": embedder.name, "index": "hnsw", "space": "cosine"},
            "inputs": fingerprint,
            "count": len(ids),
            "dim": int(vectors.shape[1]) if len(ids) else 0,
            "seconds": round(time.perf_counter() - start, 3),
        },
    )
    return True


def build_chunk_bm25(workspace: Workspace, progress: Progress | None = None) -> bool:
    """BM25 over chunk texts; returns False when already up to date."""
    progress = progress or Progress()
    ids = workspace.chunk_ids()
    fingerprint = config_hash({"chunks": ids})
    entry = workspace.manifest_entry(CHUNK_BM25)
    directory = workspace.artifact_path("chunks.bm25")
    if entry and entry.get("inputs") == fingerprint and directory.exists():
        return False
    start = time.perf_counter()
    with progress.task("building BM25 index"):
        texts = [chunk.indexed_text for chunk in workspace.iter_chunks()]
        Bm25Index.build(texts, ids).save(directory)
    workspace.set_manifest_entry(
        CHUNK_BM25,
        {"config": {"library": "bm25s", "stopwords": "en"}, "inputs": fingerprint, "count": len(ids),
         "seconds": round(time.perf_counter() - start, 3)},
    )
    return True
