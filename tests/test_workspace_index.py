"""Indexing into a workspace: counts, de-duplication, no-op re-runs, resume, locks, indices."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import (
    N_DOCUMENTS,
    HashEmbedder,
    ScriptedChat,
    long_text,
    make_settings,
    small_corpus,
)
from tests.dev_sets import SAMPLE

from unirag.errors import WorkspaceError
from unirag.index.bm25 import Bm25Index
from unirag.index.chunks import chunk_vector_paths
from unirag.index.vectors import HnswIndex
from unirag.llm.factory import build_stack
from unirag.pipeline import IndexReport, run_index
from unirag.workspace import Workspace, atomic_write_bytes


def index(
    root: Path, sources: list[Any], embedder: HashEmbedder | None = None, **overrides: Any
) -> tuple[IndexReport, HashEmbedder]:
    """One ``run_index`` with fakes, the way the CLI runs it (workspace opened and closed)."""
    embedder = embedder or HashEmbedder()
    ws = Workspace.init(root)
    try:
        settings = make_settings(root, **overrides)
        stack = build_stack(settings, ws.cache(), chat=ScriptedChat(), embedder=embedder)
        return run_index(ws, [str(s) for s in sources], settings, stack), embedder
    finally:
        ws.close()


def counts(root: Path) -> dict[str, int]:
    ws = Workspace.open(root)
    try:
        return ws.corpus.counts()
    finally:
        ws.close()


def test_index_small_corpus(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    root = tmp_path / "ws"
    report, embedder = index(root, [corpus])
    data = report.to_json()
    assert data["documents_seen"] == N_DOCUMENTS
    assert data["documents_added"] == N_DOCUMENTS
    assert data["chunks_added"] == N_DOCUMENTS  # every document is shorter than one chunk
    assert data["duplicates_skipped"] == 0
    assert data["rebuilt"] == ["chunk_vectors", "chunk_bm25"]
    assert data["embedding_calls"] == embedder.calls >= 1
    assert data["llm_calls"] == 0
    assert embedder.embedded_texts == N_DOCUMENTS
    assert data["usage_by_stage"]["index.embed_chunks"]["embedded_texts"] == N_DOCUMENTS

    ws = Workspace.open(root)
    try:
        assert ws.corpus.counts()["documents"] == N_DOCUMENTS
        assert ws.corpus.counts()["chunks"] == N_DOCUMENTS
        manifest = ws.manifest.entries()
        for name in ("chunks", "chunk_vectors", "chunk_bm25"):
            assert name in manifest, name
            assert manifest[name]["config"], name
            assert manifest[name]["count"] == N_DOCUMENTS
        assert manifest["chunks"]["config"] == {"size": 1200, "overlap": 100, "encoding": "cl100k_base"}
        assert manifest["chunk_vectors"]["config"]["model"] == embedder.name
        assert manifest["chunk_vectors"]["dim"] == embedder.dim
        vectors_path, hnsw_path = chunk_vector_paths(ws)
        assert vectors_path.is_file() and hnsw_path.is_file()
        assert np.load(vectors_path).shape == (N_DOCUMENTS, embedder.dim)
        assert ws.usage.by_stage()["index.embed_chunks"].embedded_texts == N_DOCUMENTS
        titles = {chunk.title for chunk in ws.corpus.iter_chunks()}
        assert {"paris", "tokyo", "nile", "Zanzibar", "Quokka", "Marie Curie"} == titles
    finally:
        ws.close()


def test_manifest_records_build_seconds(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    (corpus / "volcano.txt").write_text(long_text("volcano", 30))
    root = tmp_path / "ws"
    started = time.perf_counter()
    index(root, [corpus], chunking__size=64, chunking__overlap=8, embedding__batch_size=2)
    elapsed = time.perf_counter() - started
    ws = Workspace.open(root)
    try:
        manifest = ws.manifest.entries()
    finally:
        ws.close()
    for name in ("chunk_vectors", "chunk_bm25"):
        assert 0 <= manifest[name]["seconds"] <= elapsed + 0.01, (name, manifest[name]["seconds"], elapsed)


def test_a_lost_file_of_a_directory_artifact_makes_it_stale(tmp_path: Path) -> None:
    """Directory artifacts record every file under them: losing one rebuilds the index."""
    corpus, root = small_corpus(tmp_path), tmp_path / "ws"
    index(root, [corpus])
    ws = Workspace.open(root)
    try:
        recorded = ws.manifest.entry("chunk_bm25")["files"]
        assert "artifacts/chunks.bm25/ids.json" in recorded and all(size > 0 for size in recorded.values())
        assert not ws.manifest.stale_artifacts()
        (root / "artifacts" / "chunks.bm25" / "ids.json").unlink()
        assert ws.manifest.stale_artifacts() == {"chunk_bm25": "damaged (artifacts/chunks.bm25/ids.json is missing)"}
    finally:
        ws.close()
    report, embedder = index(root, [corpus])
    assert report.to_json()["rebuilt"] == ["chunk_bm25"] and embedder.calls == 0
    assert Bm25Index.load(root / "artifacts" / "chunks.bm25").ids


def test_duplicate_documents_are_skipped(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "paris.txt").write_bytes((corpus / "paris.txt").read_bytes())  # same title and text
    report, _ = index(tmp_path / "ws", [corpus, corpus / "tokyo.txt", copy])
    assert report.ingest.documents_seen == N_DOCUMENTS + 2
    assert report.ingest.duplicates == 2
    assert report.ingest.documents_added == N_DOCUMENTS
    assert counts(tmp_path / "ws")["documents"] == N_DOCUMENTS


def test_duplicate_records_in_jsonl(tmp_path: Path) -> None:
    src = tmp_path / "dups.jsonl"
    src.write_text(
        '{"title": "A", "text": "Alpha   text."}\n{"title": "A", "text": "Alpha text."}\n{"title": "B", "text": "Beta."}\n'
    )
    report, _ = index(tmp_path / "ws", [src])
    assert (report.ingest.documents_added, report.ingest.duplicates) == (2, 1)


def test_second_identical_run_is_a_no_op(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    root = tmp_path / "ws"
    index(root, [corpus])
    report, embedder = index(root, [corpus])
    data = report.to_json()
    assert data["embedding_calls"] == 0 and embedder.calls == 0
    assert data["rebuilt"] == []
    assert data["documents_added"] == 0 and data["chunks_added"] == 0
    assert data["already_indexed"] == N_DOCUMENTS
    assert counts(root)["chunks"] == N_DOCUMENTS


def test_new_file_embeds_only_new_chunks(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    root = tmp_path / "ws"
    index(root, [corpus], chunking__size=64, chunking__overlap=8)
    before = counts(root)["chunks"]
    (corpus / "volcano.txt").write_text(long_text("volcano", 30))
    report, embedder = index(root, [corpus], chunking__size=64, chunking__overlap=8)
    new_chunks = report.ingest.chunks_added
    assert report.ingest.documents_added == 1
    assert new_chunks > 1
    assert counts(root)["chunks"] == before + new_chunks
    assert embedder.embedded_texts == new_chunks
    assert set(report.rebuilt) == {"chunk_vectors", "chunk_bm25"}
    assert all("volcano" in text for batch in embedder.batches for text in batch)


def test_resume_after_kill_embeds_nothing_twice(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    (corpus / "volcano.txt").write_text(long_text("volcano", 30))
    root = tmp_path / "ws"
    settings = dict(chunking__size=64, chunking__overlap=8, embedding__batch_size=2)

    killed = HashEmbedder(fail_after_calls=2)
    with pytest.raises(KeyboardInterrupt):
        index(root, [corpus], killed, **settings)
    assert killed.calls == 2 and killed.embedded_texts == 4
    n_chunks = counts(root)["chunks"]
    assert n_chunks > 6  # several batches were still to come

    resumed = HashEmbedder()
    report, _ = index(root, [corpus], resumed, **settings)
    assert report.ingest.documents_added == 0  # documents were committed before the kill
    assert "chunk_vectors" in report.rebuilt
    assert killed.embedded_texts + resumed.embedded_texts == n_chunks
    embedded = [t for b in killed.batches + resumed.batches for t in b]
    assert len(embedded) == len(set(embedded))

    ws = Workspace.open(root)
    try:
        # the killed run's usage was recorded too
        assert ws.usage.by_stage()["index.embed_chunks"].embedded_texts == n_chunks
        hnsw = HnswIndex.load(chunk_vector_paths(ws)[1])
        assert len(hnsw) == n_chunks
        probe = HashEmbedder()
        for chunk in list(ws.corpus.iter_chunks())[:5]:
            (best_id, score), *_ = hnsw.search(probe.embed([chunk.indexed_text]).vectors, 3)[0]
            assert score == pytest.approx(1.0, abs=1e-5)
            assert ws.corpus.get_chunks([best_id])[best_id].indexed_text == chunk.indexed_text
        top = Bm25Index.load(ws.artifact_path("chunks.bm25")).search("Zanzibar cloves", 1)[0][0]
        assert top in ws.corpus.chunk_ids()
    finally:
        ws.close()


def test_changing_chunk_size_needs_rebuild(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    root = tmp_path / "ws"
    index(root, [corpus], chunking__size=64, chunking__overlap=8)
    before = counts(root)
    with pytest.raises(WorkspaceError, match="--rebuild"):
        index(root, [corpus], chunking__size=128, chunking__overlap=8)
    assert counts(root) == before
    # after clearing (what --rebuild does) the new size is accepted
    ws = Workspace.open(root)
    ws.corpus.clear()
    ws.close()
    report, embedder = index(root, [corpus], chunking__size=128, chunking__overlap=8)
    assert report.ingest.documents_added == N_DOCUMENTS
    assert embedder.calls == 0  # same chunk texts: the embedding cache answers


def test_write_lock(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    other = Workspace.open(tmp_path / "ws")
    try:
        with ws.writing():
            with pytest.raises(WorkspaceError, match="another unirag process"):
                with other.writing():
                    pass
            with pytest.raises(WorkspaceError):
                with ws.writing():
                    pass
        with other.writing():  # released
            pass
    finally:
        ws.close()
        other.close()


def test_run_index_refuses_while_locked(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    holder = Workspace.init(tmp_path / "ws")
    try:
        with holder.writing(), pytest.raises(WorkspaceError):
            index(tmp_path / "ws", [corpus])
    finally:
        holder.close()
    assert counts(tmp_path / "ws")["documents"] == 0


def test_open_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="no unirag workspace"):
        Workspace.open(tmp_path / "nothing")


# -- indices -----------------------------------------------------------------------------


def test_hnsw_equals_exact_cosine_top_k(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"id{i}" for i in range(300)]
    queries = rng.normal(size=(10, 24)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    k = 8
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :k]

    built = HnswIndex.build(vectors, ids)
    path = tmp_path / "artifacts" / "v.hnsw"
    built.save(path)
    loaded = HnswIndex.load(path)
    for index_ in (built, loaded):
        results = index_.search(queries, k)
        assert len(results) == len(queries)
        for row, hits in enumerate(results):
            assert [h[0] for h in hits] == [ids[j] for j in exact[row]]
            expected_scores = [float(queries[row] @ vectors[j]) for j in exact[row]]
            np.testing.assert_allclose([h[1] for h in hits], expected_scores, atol=1e-5)
    # one query vector (1-d) and k beyond the size
    assert len(loaded.search(queries[0], 1000)[0]) == 300


def test_hnsw_empty() -> None:
    empty = HnswIndex.build(np.zeros((0, 1), dtype=np.float32), [])
    assert empty.search(np.ones(4, dtype=np.float32), 3) == [[]]


def test_bm25_rare_word_first_and_unknown_words(tmp_path: Path) -> None:
    texts = [
        "The river flows through the valley to the sea.",
        "A city by the river has many bridges over the river.",
        "The axolotl is a salamander that keeps its larval features.",
        "Bridges and rivers and valleys everywhere in the valley.",
    ]
    ids = ["d0", "d1", "d2", "d3"]
    built = Bm25Index.build(texts, ids)
    built.save(tmp_path / "bm25")
    built.save(tmp_path / "bm25")  # replacing an existing index works
    loaded = Bm25Index.load(tmp_path / "bm25")
    for index_ in (built, loaded):
        hits = index_.search("Where does the axolotl live by the river?", 4)
        assert hits[0][0] == "d2"
        assert all(score > 0 for _, score in hits)
        assert index_.search("qwertyuiop zxcvbnm", 4) == []
        assert index_.search("the of and", 4) == []  # stopwords only
        assert len(index_.search("river valley", 2)) <= 2
    assert not (tmp_path / "bm25.tmp").exists() and not (tmp_path / "bm25.old").exists()


def test_bm25_empty_index() -> None:
    assert Bm25Index.build([], []).search("anything", 3) == []


def test_atomic_write_bytes_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.json"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["file.json"]


def test_atomic_write_bytes_failure_keeps_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file.bin"
    atomic_write_bytes(target, b"old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.bin"]


# -- a real dataset -----------------------------------------------------------------------------


def test_hotpotqa_questions_and_corpus(tmp_path: Path, sample_datasets: Path) -> None:
    """The question file's contexts and the corpus file hold the same passages: each is stored once."""
    folder = sample_datasets / "hotpotqa"
    questions, corpus = folder / "hotpotqa_train.json", folder / "hotpotqa_train_corpus.json"
    root = tmp_path / "ws"
    report, embedder = index(root, [questions, corpus])
    data = report.to_json()
    assert data["documents_added"] == SAMPLE.hotpotqa_passages
    assert data["duplicates_skipped"] == data["documents_seen"] - data["documents_added"] > 0
    assert data["chunks_added"] == data["documents_added"]  # presplit passages stay whole
    assert embedder.embedded_texts == data["chunks_added"]

    ws = Workspace.open(root)
    try:
        chunks = list(ws.corpus.iter_chunks())
        bm25 = Bm25Index.load(ws.artifact_path("chunks.bm25"))
        hnsw = HnswIndex.load(chunk_vector_paths(ws)[1])
        probe = HashEmbedder()
        for chunk in chunks[:: max(1, len(chunks) // 25)]:
            assert bm25.search(chunk.indexed_text, 3)[0][0] == chunk.id
            (best, score), *_ = hnsw.search(probe.embed([chunk.indexed_text]).vectors, 3)[0]
            assert score == pytest.approx(1.0, abs=1e-5)
            assert ws.corpus.get_chunks([best])[best].indexed_text == chunk.indexed_text
    finally:
        ws.close()

    again, embedder = index(root, [corpus])
    assert again.ingest.already_indexed == data["documents_added"]
    assert again.rebuilt == [] and embedder.calls == 0


def test_hnsw_rejects_query_of_another_dimension() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(50, 64)).astype(np.float32)
    index_ = HnswIndex.build(vectors, [str(i) for i in range(50)])
    with pytest.raises(WorkspaceError, match="64-dimension vectors, but the query embeds with 32-dimension"):
        index_.search(rng.normal(size=(1, 32)).astype(np.float32), 3)
