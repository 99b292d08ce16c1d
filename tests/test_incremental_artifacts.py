"""Artifacts updated from their previous build after a corpus change: synonym edges, the
Tri-Graph and HNSW indices over given vectors. Each equals a whole build, an insert then a
delete equals never inserting, and a damaged previous file means a whole build."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import HashEmbedder, fake_stack, make_settings
from tests.test_living_corpus import A, B, _delete, _index, _write
from unirag.config import config_hash
from unirag.errors import UniragError
from unirag.graph.graph_store import GraphStore
from unirag.index import synonyms
from unirag.index.synonyms import SYNONYM_EDGES, SynonymConfig, build_synonym_edges, load_synonym_edges, synonym_path
from unirag.index.vector_artifacts import index_given_vectors, load_vectors, vector_paths
from unirag.index.vectors import HnswIndex
from unirag.llm.base import normalise_rows
from unirag.index.tri_graph import PARTS_FILE, TRI_GRAPH, load_tri_graph
from unirag.pipeline import run_delete, run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

# Small enough that the hashed test embeddings give edges and full lists on a dozen names.
SMALL = SynonymConfig(threshold=0.5, max_neighbours=2)


@pytest.fixture()
def small_synonyms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every synonym build of the test (the registry's refreshes too) uses ``SMALL``."""
    monkeypatch.setattr(synonyms, "SynonymConfig", lambda: SMALL)


def _synonyms(ws: Workspace) -> tuple[dict[str, Any], set[tuple[str, str, float]]]:
    """The synonym edges (built when not current); (their update record, the edges by id)."""
    inputs = {"entity_name_vectors": (ws.manifest.entry("entity_name_vectors") or {}).get("inputs")}
    build_synonym_edges(ws, lambda: GraphStore(ws).load_graph(), inputs, Progress(enabled=False))
    edges = load_synonym_edges(ws)
    ids = edges.entity_ids
    found = {(ids[a], ids[b], round(s, 5)) for a, b, s in zip(edges.source.tolist(), edges.target.tolist(),
                                                            edges.similarity.tolist(), strict=True)}
    return ws.manifest.entry(SYNONYM_EDGES)["update"], found


def _fresh_synonyms(ws: Workspace) -> set[tuple[str, str, float]]:
    """A whole build on the same workspace (the previous build forgotten)."""
    ws.manifest.drop_entry(SYNONYM_EDGES)
    update, edges = _synonyms(ws)
    assert update["mode"] == "full"
    return edges


@pytest.mark.usefixtures("small_synonyms")
def test_synonym_edges_update_equals_a_whole_build_and_undoes_an_insert(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    first, alone = _synonyms(ws)
    assert first["mode"] == "full" and alone
    b = _write(tmp_path / "b.json", B)
    _index(ws, [b])
    update, grown = _synonyms(ws)
    assert update["mode"] == "update" and update["new"] > 0
    assert update["queried"] < len(GraphStore(ws).load_graph().entities)
    assert grown == _fresh_synonyms(ws)
    _delete(ws, [str(b)])
    update, after = _synonyms(ws)
    assert update["mode"] == "update" and update["gone"] > 0
    assert after == alone
    ws.close()


@pytest.mark.usefixtures("small_synonyms")
def test_a_damaged_synonym_file_means_a_whole_build(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    _, alone = _synonyms(ws)
    path = synonym_path(ws)
    path.write_bytes(path.read_bytes()[:100])
    _index(ws, [_write(tmp_path / "b.json", B)])
    update, grown = _synonyms(ws)
    assert update == {**update, "mode": "full", "reason": "previous file damaged"}
    assert grown == _fresh_synonyms(ws)
    ws.close()


# -- the Tri-Graph -------------------------------------------------------------------------------


def _tri(ws: Workspace, sources: list[Path] | None = None, delete: list[str] | None = None) -> dict[str, Any]:
    """Index ``sources`` (or delete ``delete``) with only the Tri-Graph built; its update record."""
    settings = make_settings(ws.root, concurrency=1)
    stack = fake_stack(settings, ws, embedder=HashEmbedder())
    if delete is not None:
        run_delete(ws, delete, settings, stack)
    else:
        run_index(ws, sources or [], settings, stack, graphs=[], artifacts=[TRI_GRAPH])
    return ws.manifest.entry(TRI_GRAPH)["update"]


def _tri_arrays(ws: Workspace) -> dict[str, Any]:
    graph = load_tri_graph(ws)
    return {"entity_ids": graph.entity_ids, "entity_names": graph.entity_names, "chunk_ids": graph.chunk_ids,
            "entity_passage": graph.entity_passage.toarray().tolist(),
            "sentence_entity": graph.sentence_entity.toarray().tolist(),
            "entity_vectors": graph.entity_vectors.tolist(), "sentence_vectors": graph.sentence_vectors.tolist(),
            "inputs": ws.manifest.entry(TRI_GRAPH)["inputs"]}


@pytest.fixture(scope="module")
def tri_alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tri-alone")
    ws = Workspace.init(root / "ws")
    try:
        try:
            assert _tri(ws, [_write(root / "a.json", A)])["mode"] == "full"
        except UniragError as exc:  # no spaCy model
            pytest.skip(str(exc))
        return _tri_arrays(ws)
    finally:
        ws.close()


def test_tri_graph_insert_reads_only_new_passages_and_equals_a_fresh_build(tmp_path: Path,
                                                                             tri_alone: dict[str, Any]) -> None:
    a, b = _write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)
    ws = Workspace.init(tmp_path / "ws")
    _tri(ws, [a])
    update = _tri(ws, [b])
    assert update["mode"] == "update" and update["passages_read"] == len(B)
    assert 0 < update["sentences_embedded"] < len(load_tri_graph(ws).sentence_vectors)
    fresh = Workspace.init(tmp_path / "fresh")
    _tri(fresh, [a, b])
    assert _tri_arrays(ws) == _tri_arrays(fresh)
    fresh.close()
    update = _tri(ws, delete=[str(b)])
    assert update == {"mode": "update", "passages_read": 0, "entities_embedded": 0, "sentences_embedded": 0}
    assert _tri_arrays(ws) == tri_alone
    ws.close()


def test_a_damaged_tri_graph_means_a_whole_build(tmp_path: Path, tri_alone: dict[str, Any]) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _tri(ws, [_write(tmp_path / "a.json", A)])
    parts = ws.artifact_path(TRI_GRAPH) / PARTS_FILE
    parts.write_text(parts.read_text(encoding="utf-8")[:50], encoding="utf-8")
    b = _write(tmp_path / "b.json", B)
    update = _tri(ws, [b])
    assert update["mode"] == "full" and update["reason"] == "previous files damaged"
    assert update["passages_read"] == len(A) + len(B)
    _tri(ws, delete=[str(b)])
    assert _tri_arrays(ws) == tri_alone
    ws.close()


# -- HNSW indices over given vectors -------------------------------------------------------------


def _given(ws: Workspace, ids: list[str], vectors: np.ndarray) -> dict[str, Any]:
    """Index ``vectors`` as the ``given`` artifact; its update record."""
    inputs = config_hash({"ids": ids, "vectors": vectors.tobytes().hex()})
    assert index_given_vectors(ws, "given", "given", ids, vectors, inputs, "test-model", Progress(enabled=False))
    return ws.manifest.entry("given")["update"]


def _top(ws: Workspace, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    index = HnswIndex.load(vector_paths(ws, "given")[1])
    return [[(item, round(score, 5)) for item, score in hits] for hits in index.search(queries, 5)]


def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 24)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_given_vectors_update_in_place_and_an_insert_then_delete_leaves_them_as_they_were(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    rng = np.random.default_rng(0)
    ids, vectors = [f"n{i}" for i in range(300)], _unit_rows(rng, 300)
    queries = _unit_rows(rng, 20)
    assert _given(ws, ids, vectors)["mode"] == "full"
    alone = _top(ws, queries)
    grown = np.concatenate([vectors + 0.001 * _unit_rows(rng, 300), _unit_rows(rng, 6)])  # a propagated change
    grown /= np.linalg.norm(grown, axis=1, keepdims=True)
    grown_ids = ids + [f"new{i}" for i in range(6)]
    update = _given(ws, grown_ids, grown)
    assert update == {"mode": "update", "kept": 0, "moved": 300, "relabelled": 0, "added": 6, "deleted": 0}
    fresh = Workspace.init(tmp_path / "fresh")
    _given(fresh, grown_ids, grown)
    assert _top(ws, queries) == _top(fresh, queries)  # equal to a whole build (exact at this size)
    fresh.close()
    assert _given(ws, ids, vectors)["mode"] == "update"
    assert np.array_equal(load_vectors(ws, "given", "given")[1], normalise_rows(vectors))
    assert _top(ws, queries) == alone
    ws.close()


def test_a_damaged_index_of_given_vectors_means_a_whole_build(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    rng = np.random.default_rng(1)
    ids, vectors = [f"n{i}" for i in range(50)], _unit_rows(rng, 50)
    _given(ws, ids, vectors)
    path = vector_paths(ws, "given")[1]
    path.write_bytes(path.read_bytes()[:64])
    update = _given(ws, ids + ["extra"], np.concatenate([vectors, _unit_rows(rng, 1)]))
    assert update == {"mode": "full", "reason": "no whole previous index"}
    assert [hits[0][0] for hits in HnswIndex.load(path).search(vectors, 1)] == ids
    ws.close()
