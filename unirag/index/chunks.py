"""Chunk-level retrieval artifacts: chunk vectors + HNSW, BM25 and TF-IDF.

Each artifact records in the manifest a fingerprint of its inputs (the chunk
ids in order — content hashes — and the embedding model for vectors). When the
fingerprint is unchanged the artifact is not touched; when it changed, vectors
come from the embedding cache for every chunk embedded before, so only new
chunks cost calls; BM25 and TF-IDF keep their chunks' term counts, so only new
chunks are tokenised.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from unirag.config import Settings, config_hash
from unirag.executors import model_call_parallelism
from unirag.index.bm25 import Bm25Index
from unirag.index.term_counts import count_terms, load_term_counts, save_term_counts
from unirag.index.tfidf import TfidfIndex
from unirag.index.vector_artifacts import build_text_vectors, vector_paths
from unirag.llm.base import EmbeddingModel
from unirag.progress import Progress
from unirag.workspace import Workspace

if TYPE_CHECKING:
    from unirag.index.term_counts import TermCounts

CHUNK_VECTORS = "chunk_vectors"
CHUNK_BM25 = "chunk_bm25"
CHUNK_TFIDF = "chunk_tfidf"
TEXT_BATCH = 500  # chunk ids per query when an update reads its new chunks' texts


class LexicalIndex(Protocol):
    """What :func:`_build_lexical` needs of an index class (BM25, TF-IDF)."""

    @classmethod
    def signature(cls) -> str: ...
    @classmethod
    def tokenize(cls, texts: list[str]) -> list[list[str]]: ...
    @classmethod
    def from_counts(cls, counts: TermCounts) -> Any: ...


def chunk_vector_paths(workspace: Workspace) -> tuple[Path, Path]:
    """(``chunk_vectors.npy``, ``chunk_vectors.hnsw``)."""
    return vector_paths(workspace, "chunk_vectors")


def build_chunk_vectors(
    workspace: Workspace, embedder: EmbeddingModel, settings: Settings, progress: Progress | None = None
) -> bool:
    """Embed every chunk and build the HNSW index; returns False when already up to date."""
    ids = workspace.corpus.chunk_ids()
    chunks = list(workspace.corpus.iter_chunks())
    # Chunk ids are content hashes, so the ids alone fingerprint the texts.
    return build_text_vectors(
        workspace, embedder, CHUNK_VECTORS, "chunk_vectors", ids, [chunk.indexed_text for chunk in chunks],
        settings.embedding.resolved_batch_size, progress or Progress(), "index.embed_chunks", "embedding chunks",
        fingerprint=config_hash({"chunks": ids, "model": embedder.name}),
        lengths=[chunk.n_tokens for chunk in chunks], parallel=model_call_parallelism(settings),
    )


def _build_lexical(
    workspace: Workspace, key: str, name: str, label: str, index: type[LexicalIndex], config: dict,
    progress: Progress,
) -> bool:
    """Build a lexical index over chunk texts into artifact ``name`` unless up to date.

    The chunks' term counts are kept beside it (``<name>.terms.npz``, an economy file):
    an update tokenises only new or changed chunks and recomputes the weights from the
    counts, giving the same index as a build over every chunk. Writes go artifact, then
    counts, then manifest: a build killed between them is redone from whichever counts
    file is there, which says itself which chunks it counted (chunk ids are content
    hashes: an id names one text)."""
    directory = workspace.artifact_path(name)
    ids = workspace.corpus.chunk_ids()
    fingerprint = config_hash({"chunks": ids, **config})
    if workspace.manifest.is_current(key, fingerprint, (directory,)):
        return False
    start = time.perf_counter()
    counts_file = workspace.artifact_path(f"{name}.terms.npz")
    signature = index.signature()
    with progress.task(label):
        counts = count_terms(ids, lambda rows: _chunk_texts(workspace, [ids[i] for i in rows], len(ids)),
                             index.tokenize, signature, load_term_counts(counts_file, signature))
        index.from_counts(counts).save(directory)
        save_term_counts(counts_file, counts)
    workspace.manifest.set_entry(
        key, {"config": config, "inputs": fingerprint, "count": len(ids),
              "seconds": round(time.perf_counter() - start, 3)},
        files=(directory,),
    )
    return True


def _chunk_texts(workspace: Workspace, ids: list[str], total: int) -> list[str]:
    """The indexed texts of chunks ``ids``, in that order: all ``total`` chunks in one pass when
    most are asked for (a full build), else by id in batches (an update's new chunks)."""
    if 2 * len(ids) > total:
        wanted = set(ids)
        texts = {chunk.id: chunk.indexed_text for chunk in workspace.corpus.iter_chunks() if chunk.id in wanted}
    else:
        texts = {}
        for start in range(0, len(ids), TEXT_BATCH):
            texts.update({chunk_id: chunk.indexed_text
                          for chunk_id, chunk in workspace.corpus.get_chunks(ids[start:start + TEXT_BATCH]).items()})
    return [texts[chunk_id] for chunk_id in ids]


def build_chunk_bm25(workspace: Workspace, progress: Progress | None = None) -> bool:
    """BM25 over chunk texts; returns False when already up to date."""
    return _build_lexical(
        workspace, CHUNK_BM25, "chunks.bm25", "building BM25 index", Bm25Index,
        {"library": "bm25s", "stopwords": "en"}, progress or Progress(),
    )


def build_chunk_tfidf(workspace: Workspace, progress: Progress | None = None) -> bool:
    """Sparse TF-IDF matrix over chunk texts (KGP's seed retrieval); False when up to date."""
    return _build_lexical(
        workspace, CHUNK_TFIDF, "chunks.tfidf", "building TF-IDF matrix", TfidfIndex,
        {"library": "scikit-learn", **TfidfIndex.CONFIG}, progress or Progress(),
    )
