"""Chunk-level retrieval artifacts: chunk vectors + HNSW, BM25 and TF-IDF.

Each artifact records in the manifest a fingerprint of its inputs (the chunk
ids in order — content hashes — and the embedding model for vectors). When the
fingerprint is unchanged the artifact is not touched; when it changed, vectors
come from the embedding cache for every chunk embedded before, so only new
chunks cost calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from unirag.config import Settings, config_hash
from unirag.index.bm25 import Bm25Index
from unirag.executors import model_call_parallelism
from unirag.index.vector_artifacts import build_text_vectors, vector_paths
from unirag.llm.base import EmbeddingModel
from unirag.progress import Progress
from unirag.workspace import Workspace

CHUNK_VECTORS = "chunk_vectors"
CHUNK_BM25 = "chunk_bm25"
CHUNK_TFIDF = "chunk_tfidf"


def chunk_vector_paths(workspace: Workspace) -> tuple[Path, Path]:
    """(``chunk_vectors.npy``, ``chunk_vectors.hnsw``)."""
    return vector_paths(workspace, "chunk_vectors")


def build_chunk_vectors(
    workspace: Workspace, embedder: EmbeddingModel, settings: Settings, progress: Progress | None = None
) -> bool:
    """Embed every chunk and build the HNSW index; returns False when already up to date."""
    ids = workspace.chunk_ids()
    chunks = list(workspace.iter_chunks())
    # Chunk ids are content hashes, so the ids alone fingerprint the texts.
    return build_text_vectors(
        workspace, embedder, CHUNK_VECTORS, "chunk_vectors", ids, [chunk.indexed_text for chunk in chunks],
        settings.embedding.batch_size, progress or Progress(), "index.embed_chunks", "embedding chunks",
        fingerprint=config_hash({"chunks": ids, "model": embedder.name}),
        lengths=[chunk.n_tokens for chunk in chunks], parallel=model_call_parallelism(settings),
    )


def _build_lexical(
    workspace: Workspace, key: str, directory: Path, label: str,
    build: Callable[[list[str], list[str]], None], config: dict, progress: Progress,
) -> bool:
    """Build a lexical index over chunk texts into ``directory`` unless up to date."""
    ids = workspace.chunk_ids()
    fingerprint = config_hash({"chunks": ids, **config})
    if workspace.is_current(key, fingerprint, (directory,)):
        return False
    start = time.perf_counter()
    with progress.task(label):
        build([chunk.indexed_text for chunk in workspace.iter_chunks()], ids)
    workspace.set_manifest_entry(
        key, {"config": config, "inputs": fingerprint, "count": len(ids),
              "seconds": round(time.perf_counter() - start, 3)},
        files=(directory,),
    )
    return True


def build_chunk_bm25(workspace: Workspace, progress: Progress | None = None) -> bool:
    """BM25 over chunk texts; returns False when already up to date."""
    directory = workspace.artifact_path("chunks.bm25")
    return _build_lexical(
        workspace, CHUNK_BM25, directory, "building BM25 index",
        lambda texts, ids: Bm25Index.build(texts, ids).save(directory),
        {"library": "bm25s", "stopwords": "en"}, progress or Progress(),
    )


def build_chunk_tfidf(workspace: Workspace, progress: Progress | None = None) -> bool:
    """Sparse TF-IDF matrix over chunk texts (KGP's seed retrieval); False when up to date."""
    from unirag.index.tfidf import TfidfIndex

    directory = workspace.artifact_path("chunks.tfidf")
    return _build_lexical(
        workspace, CHUNK_TFIDF, directory, "building TF-IDF matrix",
        lambda texts, ids: TfidfIndex.build(texts, ids).save(directory),
        {"library": "scikit-learn", **TfidfIndex.CONFIG}, progress or Progress(),
    )
