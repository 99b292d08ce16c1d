"""Embedding + HNSW artifacts over any list of (id, text): one code path for all.

Survey §5 prescribes vector indices over chunks, entities (KG: the name;
TKG/RKG: name + description), relationships, tree nodes and community
reports. Each is a *vector artifact*: ``artifacts/<file>.npy`` (rows in id
order, L2-normalised float32), ``artifacts/<file>.hnsw`` (+ ``.ids.json``)
and a manifest entry whose ``inputs`` fingerprint covers the ids, the texts
and the embedding model. An unchanged fingerprint skips the step; a changed
one re-embeds through the embedding cache, so only new texts cost calls.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from unirag.config import config_hash
from unirag.index.vectors import HnswIndex
from unirag.llm.base import EmbeddingModel, normalise_rows
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path


def vector_paths(workspace: Workspace, file_stem: str) -> tuple[Path, Path]:
    """(vectors .npy, index .hnsw) of one vector artifact."""
    return workspace.artifact_path(f"{file_stem}.npy"), workspace.artifact_path(f"{file_stem}.hnsw")


def vector_files(workspace: Workspace, file_stem: str) -> tuple[Path, Path, Path]:
    """Every file of one vector artifact: vectors, index and the index's row -> id map."""
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    return vectors_path, hnsw_path, HnswIndex.ids_path(hnsw_path)


def texts_fingerprint(ids: Sequence[str], texts: Sequence[str], model: str) -> str:
    digest = hashlib.sha256()
    for item_id, text in zip(ids, texts, strict=True):
        digest.update(item_id.encode("utf-8") + b"\x00" + text.encode("utf-8") + b"\x01")
    return config_hash({"texts": digest.hexdigest(), "count": len(ids), "model": model})


def embed_in_length_order(
    embedder: EmbeddingModel, texts: Sequence[str], batch_size: int, progress: Progress, label: str, stage: str,
    lengths: Sequence[int] | None = None,
) -> np.ndarray:
    """Embed ``texts`` in batches of similar length (little padding: about 2x
    faster on the embedded model); rows come back in the input order.

    Each distinct text is embedded once (two entities without a description
    share their name's text), whatever the cache holds or whether there is one."""
    first_row: dict[str, int] = {}
    distinct = [first_row.setdefault(text, i) == i for i, text in enumerate(texts)]
    rows_to_embed = [i for i, new in enumerate(distinct) if new]
    lengths = lengths if lengths is not None else [len(text) for text in texts]
    order = sorted(rows_to_embed, key=lambda i: lengths[i])
    vectors = np.zeros((len(texts), 0), dtype=np.float32)
    with progress.task(label, total=len(texts)) as advance:
        for offset in range(0, len(order), batch_size):
            rows = order[offset : offset + batch_size]
            part = embedder.embed([texts[i] for i in rows], stage=stage).vectors
            if vectors.shape[1] != part.shape[1]:
                vectors = np.zeros((len(texts), part.shape[1]), dtype=np.float32)
            vectors[rows] = part
            advance(len(rows))
        if len(rows_to_embed) < len(texts):
            copies = [i for i, new in enumerate(distinct) if not new]
            vectors[copies] = vectors[[first_row[texts[i]] for i in copies]]
            advance(len(copies))
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    return normalise_rows(vectors)


def _previous_vectors(workspace: Workspace, key: str, file_stem: str) -> tuple[list[str], np.ndarray] | None:
    """The artifact's stored ids and vectors when they are whole (an in-place update starts from
    them), else None: a damaged artifact is rebuilt whole."""
    entry = workspace.manifest_entry(key)
    if entry is None or (workspace.artifact_problem(key) or "").startswith("damaged"):
        return None
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    try:
        return HnswIndex.load_ids(hnsw_path), np.load(vectors_path, mmap_mode="r")
    except (OSError, ValueError, KeyError):
        return None


def save_vector_artifact(
    workspace: Workspace, key: str, file_stem: str, ids: Sequence[str], vectors: np.ndarray,
    inputs: str, config: dict, started: float, progress: Progress,
) -> None:
    """Write the vectors and their HNSW index, then the manifest entry (last, so
    a crash in between leaves the artifact marked stale, never half-written)."""
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    index = None
    previous = _previous_vectors(workspace, key, file_stem)
    if previous is not None:
        with progress.task(f"updating HNSW index in place ({key})"):
            index = HnswIndex.updated(hnsw_path, previous[0], previous[1], list(ids), vectors)
    with atomic_path(vectors_path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors)
    if index is None:
        with progress.task(f"building HNSW index ({key})"):
            index = HnswIndex.build(vectors, list(ids))
    index.save(hnsw_path)
    workspace.set_manifest_entry(key, {
        "config": {"index": "hnsw", "space": "cosine", **config},
        "inputs": inputs,
        "count": len(ids),
        "dim": int(vectors.shape[1]) if len(ids) else 0,
        "seconds": round(time.perf_counter() - started, 3),
    }, files=vector_files(workspace, file_stem))


def build_text_vectors(
    workspace: Workspace,
    embedder: EmbeddingModel,
    key: str,
    file_stem: str,
    ids: Sequence[str],
    texts: Sequence[str],
    batch_size: int,
    progress: Progress,
    stage: str,
    label: str,
    fingerprint: str | None = None,
    lengths: Sequence[int] | None = None,
) -> bool:
    """Embed ``texts`` and index them under manifest ``key``; False when up to date."""
    inputs = fingerprint or texts_fingerprint(ids, texts, embedder.name)
    if workspace.is_current(key, inputs, vector_files(workspace, file_stem)):
        return False
    started = time.perf_counter()
    vectors = embed_in_length_order(embedder, texts, batch_size, progress, label, stage, lengths)
    save_vector_artifact(workspace, key, file_stem, ids, vectors, inputs, {"model": embedder.name}, started, progress)
    return True


def index_given_vectors(
    workspace: Workspace, key: str, file_stem: str, ids: Sequence[str], vectors: np.ndarray, inputs: str,
    model: str, progress: Progress,
) -> bool:
    """Index vectors computed elsewhere (tree nodes); False when up to date."""
    if workspace.is_current(key, inputs, vector_files(workspace, file_stem)):
        return False
    started = time.perf_counter()
    vectors = normalise_rows(np.asarray(vectors, dtype=np.float32)) if len(ids) else np.zeros((0, 1), np.float32)
    save_vector_artifact(workspace, key, file_stem, ids, vectors, inputs, {"model": model}, started, progress)
    return True


def load_vectors(workspace: Workspace, key: str, file_stem: str) -> tuple[list[str], np.ndarray]:
    """(ids, vectors) of a built vector artifact, the vectors memory-mapped."""
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    ids = HnswIndex.load_ids(hnsw_path)
    return ids, np.load(vectors_path, mmap_mode="r")
