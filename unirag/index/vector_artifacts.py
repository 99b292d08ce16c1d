"""Embedding + HNSW artifacts over any list of (id, text): one code path for all.

Survey §5 prescribes vector indices over chunks, entities (KG: the name;
TKG/RKG: name + description), relationships, tree nodes and community
reports. Each is a *vector artifact*: ``artifacts/<file>.npy`` (rows in id
order, L2-normalised float32), ``artifacts/<file>.hnsw`` (+ ``.ids.json``)
and a manifest entry whose ``inputs`` fingerprint covers the ids, the texts
and the embedding model. An unchanged fingerprint skips the step; a changed
one re-embeds through the embedding cache, so only new texts cost calls.

On a PostgreSQL store the index is a pgvector table instead of the ``.hnsw`` file
(:mod:`unirag.index.pgvector_index`); the ``.npy`` and ``.ids.json`` are the same.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unirag.config import config_hash
from unirag.index.pgvector_index import PgVectorIndex, table_name
from unirag.index.vectors import (
    HnswIndex,
    RowMatch,
    VectorIndex,
    embedding_mismatch,
    read_ids_file,
    write_ids_file,
)
from unirag.llm.base import EmbeddingModel, normalise_rows
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path


def vector_paths(workspace: Workspace, file_stem: str) -> tuple[Path, Path]:
    """(vectors .npy, index .hnsw) of one vector artifact."""
    return workspace.artifact_path(f"{file_stem}.npy"), workspace.artifact_path(f"{file_stem}.hnsw")


def vector_files(workspace: Workspace, file_stem: str) -> tuple[Path, ...]:
    """Every file of one vector artifact: vectors, index (none on PostgreSQL: a table) and the
    index's row -> id map."""
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    if workspace.backend.vector_tables:
        return vectors_path, HnswIndex.ids_path(hnsw_path)
    return vectors_path, hnsw_path, HnswIndex.ids_path(hnsw_path)


def texts_fingerprint(ids: Sequence[str], texts: Sequence[str], model: str) -> str:
    digest = hashlib.sha256()
    for item_id, text in zip(ids, texts, strict=True):
        digest.update(item_id.encode("utf-8") + b"\x00" + text.encode("utf-8") + b"\x01")
    return config_hash({"texts": digest.hexdigest(), "count": len(ids), "model": model})


@dataclass(frozen=True)
class KnownRows:
    """The rows of a text artifact being rebuilt whose id and text the last build embedded, and
    that build's ids and vectors (the in-place index update starts from them)."""

    mask: np.ndarray  # bool per row of the new texts
    old_rows: np.ndarray  # int64 per row of the new texts: its row in the last build, -1 for a new id
    previous: tuple[list[str], np.ndarray]  # the last build's ids and (memory-mapped) vectors

    @property
    def dim(self) -> int:
        return int(self.previous[1].shape[1])

    def gathered(self) -> np.ndarray:
        """One row per new text, the known ones holding their stored (normalised) vector: one
        gather from the mapped file (the rest hold some stored row, to be overwritten)."""
        return np.asarray(self.previous[1])[np.where(self.mask, self.old_rows, 0)].astype(np.float32, copy=False)

    def row_match(self) -> RowMatch:
        """Known rows keep their stored vector as it is: an index update need not compare them."""
        return RowMatch(self.old_rows, self.mask)


def text_digests(texts: Sequence[str]) -> np.ndarray:
    """One uint64 per text (its UTF-8 bytes): equal exactly when the text is unchanged."""
    joined = b"".join([hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest() for text in texts])
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)  # the bytes read at once, not an int each


def _texts_path(workspace: Workspace, file_stem: str) -> Path:
    """Per-row text digests of a text artifact, with the ``inputs`` of the build that wrote them."""
    return workspace.artifact_path(f"{file_stem}.texts.npz")


def save_text_digests(workspace: Workspace, file_stem: str, inputs: str, digests: np.ndarray) -> None:
    """Written before the vectors and the manifest entry: a build that stops in between leaves
    digests whose ``inputs`` the entry does not have, which :func:`known_rows` ignores."""
    with atomic_path(_texts_path(workspace, file_stem)) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, inputs=np.array(inputs), digests=digests)


def known_rows(workspace: Workspace, key: str, file_stem: str, ids: Sequence[str], digests: np.ndarray,
                model: str) -> KnownRows | None:
    """The rows whose id and text the artifact's current build embedded with ``model``, and
    their vectors; None without a whole previous build that stored its text digests."""
    entry = workspace.manifest.entry(key)
    if entry is None or entry.get("config", {}).get("model") != model:
        return None
    try:
        with np.load(_texts_path(workspace, file_stem)) as data:
            built_from, stored = str(data["inputs"]), data["digests"]
    except (OSError, ValueError, KeyError):
        return None
    previous = _previous_vectors(workspace, key, file_stem)
    if built_from != entry.get("inputs") or previous is None or not len(previous[0]):
        return None
    old_ids, old_vectors = previous
    if not len(old_ids) == len(stored) == old_vectors.shape[0]:
        return None
    matched = RowMatch.of(old_ids, ids).old_rows
    mask = matched >= 0
    mask[mask] = stored[matched[mask]] == digests[mask]
    return KnownRows(mask, matched, previous)


def embed_in_length_order(
    embedder: EmbeddingModel, texts: Sequence[str], batch_size: int, progress: Progress, label: str, stage: str,
    lengths: Sequence[int] | None = None, parallel: int = 1, known: KnownRows | None = None,
) -> np.ndarray:
    """Embed ``texts`` in batches of similar length (little padding: about 2x
    faster on the embedded model); rows come back in the input order.

    ``parallel`` batches are in flight at once (:func:`unirag.executors.model_call_parallelism`:
    more than one only when the batches run on a cluster; the embedded model uses its own threads).
    Each distinct text is embedded once (two entities without a description
    share their name's text), whatever the cache holds or whether there is one.

    ``known`` rows (their normalised vectors from the last build) are not embedded again; the
    rest are packed into full batches of similar length, so an update of 1 % of the rows makes
    about 1 % of a whole embedding's calls (not one small call per whole-build batch)."""
    first_row: dict[str, int] = {}
    distinct = [first_row.setdefault(text, i) == i for i, text in enumerate(texts)]
    distinct_rows = [i for i, new in enumerate(distinct) if new]
    rows_to_embed = distinct_rows if known is None else [i for i in distinct_rows if not known.mask[i]]
    lengths = lengths if lengths is not None else [len(text) for text in texts]
    order = sorted(rows_to_embed, key=lambda i: lengths[i])
    batches = [order[offset : offset + batch_size] for offset in range(0, len(order), batch_size)]
    # known rows hold their stored vector from the start (one copy from the mapped file); every
    # other row is written below: embedded, or a copy of the row with its text
    vectors = known.gathered() if known is not None else np.empty((len(texts), 0), dtype=np.float32)

    def embed(rows: list[int]) -> tuple[list[int], np.ndarray]:
        return rows, embedder.embed([texts[i] for i in rows], stage=stage).vectors

    with progress.task(label, total=len(texts)) as advance:
        for rows, part in _in_flight(embed, batches, parallel):
            if known is not None and part.shape[1] != known.dim:
                raise embedding_mismatch(label, f"{known.dim}-dimension vectors", f"{part.shape[1]}-dimension vectors")
            if vectors.shape[1] != part.shape[1]:
                vectors = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            vectors[rows] = part
            advance(len(rows))
        # the embedded rows normalised, each alone (its result depends on that row only)
        embedded = np.asarray(rows_to_embed, dtype=np.int64)
        vectors[embedded] = normalise_rows(vectors[embedded])
        # a repeated text takes its first row's final vector; a known row keeps its own
        copies = [i for i, new in enumerate(distinct) if not new and (known is None or not known.mask[i])]
        vectors[copies] = vectors[[first_row[texts[i]] for i in copies]]
        advance(len(texts) - len(rows_to_embed))  # copies and known rows
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    return vectors


def _in_flight(embed: Callable[[list[int]], tuple[list[int], np.ndarray]], batches: list[list[int]],
               parallel: int) -> Iterator[tuple[list[int], np.ndarray]]:
    """Each batch embedded, one after another or ``parallel`` at a time (as they finish)."""
    if parallel <= 1:
        yield from map(embed, batches)
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(embed, rows) for rows in batches]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _previous_vectors(workspace: Workspace, key: str, file_stem: str) -> tuple[list[str], np.ndarray] | None:
    """The artifact's stored ids and vectors when they are whole (an in-place update starts from
    them), else None: a damaged artifact is rebuilt whole."""
    entry = workspace.manifest.entry(key)
    if entry is None or (workspace.manifest.artifact_problem(key) or "").startswith("damaged"):
        return None
    workspace.manifest.checkout(key)
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    try:
        return HnswIndex.load_ids(hnsw_path), np.load(vectors_path, mmap_mode="r")
    except (OSError, ValueError, KeyError):
        return None


def save_vector_artifact(
    workspace: Workspace, key: str, file_stem: str, ids: Sequence[str], vectors: np.ndarray,
    inputs: str, config: dict, started: float, progress: Progress, known: KnownRows | None = None,
) -> None:
    """Write the vectors and their index, then the manifest entry (last, so
    a crash in between leaves the artifact marked stale, never half-written;
    on PostgreSQL the table and the entry are one transaction). ``known``: the rows
    :func:`known_rows` found, with the previous build it read them from."""
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    previous = known.previous if known is not None else _previous_vectors(workspace, key, file_stem)
    match = known.row_match() if known is not None else None

    def save_vectors() -> None:
        with atomic_path(vectors_path) as tmp, open(tmp, "wb") as handle:
            np.save(handle, vectors)

    def record(kind: str, update: dict[str, object] | None = None) -> None:
        workspace.manifest.set_entry(key, {
            "config": {"index": kind, "space": "cosine", **config},
            "inputs": inputs,
            "count": len(ids),
            "dim": int(vectors.shape[1]) if len(ids) else 0,
            **({"update": update} if update is not None else {}),
            "seconds": round(time.perf_counter() - started, 3),
        }, files=vector_files(workspace, file_stem))

    if workspace.backend.vector_tables:
        with progress.task(f"writing pgvector index ({key})"), workspace.db:
            save_vectors()
            labels = read_ids_file(HnswIndex.ids_path(hnsw_path)).get("labels") if previous is not None else None
            index = PgVectorIndex.write(workspace.db, table_name(file_stem), list(ids), vectors, previous, match,
                                        labels)
            write_ids_file(HnswIndex.ids_path(hnsw_path), index.ids, index.dim, index.label_rows)
            record("pgvector")
        return
    index = None
    if previous is not None:
        with progress.task(f"updating HNSW index in place ({key})"):
            index = HnswIndex.updated(hnsw_path, previous[0], previous[1], list(ids), vectors, match=match)
    save_vectors()
    if index is None:
        with progress.task(f"building HNSW index ({key})"):
            index = HnswIndex.build(vectors, list(ids))
    index.save(hnsw_path)
    update: dict[str, object] = (
        {"mode": "update", **index.update_counts} if index.update_counts is not None
        else {"mode": "full", "reason": "no whole previous index" if previous is None
              else "too many rows changed, or the saved index unusable"})
    record("hnsw", update)


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
    parallel: int = 1,
) -> bool:
    """Embed ``texts`` and index them under manifest ``key``; False when up to date. Rows whose
    id and text the last build embedded keep their stored vector (:class:`KnownRows`): an insert
    embeds, and reads from the embedding cache, only the new and changed texts."""
    inputs = fingerprint or texts_fingerprint(ids, texts, embedder.name)
    if workspace.manifest.is_current(key, inputs, vector_files(workspace, file_stem)):
        return False
    started = time.perf_counter()
    digests = text_digests(texts)
    known = known_rows(workspace, key, file_stem, ids, digests, embedder.name)
    save_text_digests(workspace, file_stem, inputs, digests)
    vectors = embed_in_length_order(embedder, texts, batch_size, progress, label, stage, lengths, parallel, known)
    save_vector_artifact(workspace, key, file_stem, ids, vectors, inputs, {"model": embedder.name}, started, progress,
                         known)
    return True


def index_given_vectors(
    workspace: Workspace, key: str, file_stem: str, ids: Sequence[str], vectors: np.ndarray, inputs: str,
    model: str, progress: Progress,
) -> bool:
    """Index vectors computed elsewhere (tree nodes, HyGRAG's structure-aware embeddings); False
    when up to date. Updated in place like text vectors: rows that moved a little (a propagated
    embedding near a change) keep their place in the graph with their new vector."""
    if workspace.manifest.is_current(key, inputs, vector_files(workspace, file_stem)):
        return False
    started = time.perf_counter()
    vectors = normalise_rows(np.asarray(vectors, dtype=np.float32)) if len(ids) else np.zeros((0, 1), np.float32)
    save_vector_artifact(workspace, key, file_stem, ids, vectors, inputs, {"model": model}, started, progress)
    return True


def load_vectors(workspace: Workspace, key: str, file_stem: str) -> tuple[list[str], np.ndarray]:
    """(ids, vectors) of a built vector artifact, the vectors memory-mapped."""
    workspace.manifest.checkout(key)
    vectors_path, hnsw_path = vector_paths(workspace, file_stem)
    ids = HnswIndex.load_ids(hnsw_path)
    return ids, np.load(vectors_path, mmap_mode="r")


def open_vector_index(workspace: Workspace, key: str, file_stem: str) -> VectorIndex:
    """The index of a built vector artifact, named ``key`` in messages: the hnswlib file, or
    the pgvector table of a PostgreSQL store."""
    workspace.manifest.checkout(key)
    hnsw_path = vector_paths(workspace, file_stem)[1]
    if workspace.backend.vector_tables:
        return PgVectorIndex.load(workspace.db, table_name(file_stem), HnswIndex.ids_path(hnsw_path)).labelled(key)
    return HnswIndex.load(hnsw_path).labelled(key)
