"""The artifact registry: dependency order, lazy up-to-date checks, vector and TF-IDF indices."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from tests.test_graph_build import PASSAGES
from unirag.errors import ConfigError
from unirag.artifacts.registry import (
    BuildContext,
    CHnswConfig,
    artifact_registry,
    build_order,
    ensure_artifacts,
    hierarchy_config,
    resolve_names,
)
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.entity_graph import relationship_texts, to_entity_graph
from unirag.hierarchy.communities import (
    Community,
    CommunityLink,
    HierarchyResult,
    community_id,
)
from unirag.index.tfidf import TfidfIndex
from unirag.index.vector_artifacts import load_vectors
from unirag.index.vectors import HnswIndex
from unirag.llm.base import UsageLedger
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Workspace, object, HashEmbedder]:
    corpus = tmp_path / "passages.json"
    corpus.write_text(json.dumps(PASSAGES), encoding="utf-8")
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1)
    embedder = HashEmbedder()
    run_index(ws, [corpus], settings, fake_stack(settings, ws, chat=ScriptedChat(), embedder=embedder),
              graphs=["kg"])
    return ws, settings, embedder


def ensure(ws: Workspace, settings, names: list[str], embedder=None, chat=None) -> tuple[list[str], UsageLedger]:
    ledger = UsageLedger()
    models = fake_stack(settings, ws, chat=chat, embedder=embedder).accounted(ledger)
    ctx = BuildContext(ws, settings, models, Progress())
    return ensure_artifacts(ctx, names), ledger


def test_build_order_puts_dependencies_first() -> None:
    assert build_order(["chnsw"]) == [
        "graph", "entity_vectors", "communities:archrag", "community_vectors:archrag", "chnsw",
    ]
    order = build_order(["hygrag", "tree_vectors"])
    assert order.index("chunk_links:hybrid") < order.index("communities:hygrag")
    assert order.index("tree") < order.index("tree_vectors")
    registry = artifact_registry()
    for name, spec in registry.items():  # every dependency is itself registered
        assert set(spec.requires) <= set(registry), name


def test_aliases_and_unknown_names() -> None:
    assert resolve_names(["kg", "tkg", "pg", "graphrag"]) == ["graph", "chunk_links:pg", "communities:graphrag"]
    variants = {name for name, spec in artifact_registry().items() if spec.variant}
    assert {"communities:archrag-spectral", "chnsw:archrag-leiden", "tree:kmeans"} <= variants
    on_request = {name for name, spec in artifact_registry().items() if spec.on_request}
    assert on_request == {"community_vectors:leanrag"}  # read by no shipped method (issue 34)
    assert set(resolve_names(["all"])) == set(artifact_registry()) - variants - on_request  # on request only
    assert resolve_names(["community_vectors:leanrag"]) == ["community_vectors:leanrag"]  # still buildable
    with pytest.raises(ConfigError, match="unknown artifact 'nope'"):
        resolve_names(["nope"])


def test_hierarchy_overrides_are_checked() -> None:
    settings = make_settings(index__chnsw={"m": 8})
    assert hierarchy_config(settings, "chnsw", CHnswConfig).m == 8
    with pytest.raises(ConfigError, match="index.chnsw: unknown setting mm"):
        hierarchy_config(make_settings(index__chnsw={"mm": 8}), "chnsw", CHnswConfig)


def test_entity_relation_and_tfidf_indices_build_once(indexed) -> None:
    ws, settings, embedder = indexed
    names = ["entity_vectors", "entity_name_vectors", "relation_vectors", "chunk_tfidf"]
    rebuilt, ledger = ensure(ws, settings, names, embedder=embedder)
    assert rebuilt == names  # graph and chunk indices were up to date
    ids, vectors = load_vectors(ws, "entity_name_vectors", "entity_name_vectors")
    assert "marie curie" in ids and vectors.shape == (len(ids), embedder.dim)
    hnsw = HnswIndex.load(ws.artifact_path("entity_name_vectors.hnsw"))
    query = embedder.embed(["Warsaw"]).vectors[0]
    assert hnsw.search(query, 1)[0][0][0] == "warsaw"  # a name finds itself
    rel_ids, _ = load_vectors(ws, "relation_vectors", "relation_vectors")
    assert "marie curie|warsaw" in rel_ids
    tfidf = TfidfIndex.load(ws.artifact_path("chunks.tfidf"))
    titles = {c.id: c.title for c in ws.corpus.iter_chunks()}
    assert titles[tfidf.search("capital of Poland", 1)[0][0]] == "Warsaw"
    calls = embedder.calls
    again, ledger = ensure(ws, settings, names, embedder=embedder)
    assert again == [] and embedder.calls == calls  # up to date: no work, no calls


def test_tree_vectors_index_the_tree_nodes(indexed) -> None:
    ws, settings, embedder = indexed
    rebuilt, _ = ensure(ws, settings, ["tree_vectors"], embedder=embedder)
    assert rebuilt == ["tree", "tree_vectors"]
    ids, vectors = load_vectors(ws, "tree_vectors", "tree_vectors")
    assert len(ids) == ws.manifest.entry("tree")["count"] and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_variants_are_built_beside_their_defaults(indexed) -> None:
    ws, settings, embedder = indexed
    settings = settings.model_copy(update={"index": settings.index.model_copy(update={
        "archrag": {"min_nodes": 3, "clustering": "leiden"}})})  # the preset must win over this
    rebuilt, _ = ensure(ws, settings, ["archrag", "chnsw:archrag-spectral", "tree", "tree_vectors:kmeans"],
                        embedder=embedder)
    assert {"communities:archrag", "communities:archrag-spectral", "chnsw:archrag-spectral",
            "tree", "tree:kmeans", "tree_vectors:kmeans"} <= set(rebuilt)
    assert ws.manifest.entry("communities:archrag")["config"]["clustering"] == "leiden"
    assert ws.manifest.entry("communities:archrag-spectral")["config"]["clustering"] == "spectral"
    assert ws.manifest.entry("tree:kmeans")["config"]["method"] == "kmeans"
    assert ws.manifest.entry("tree")["config"]["method"] == "gmm"
    store = CommunityStore(ws)
    spectral = store.load("archrag-spectral")
    assert spectral and all(c.hierarchy == "archrag-spectral" for c in spectral)
    assert store.load("archrag")  # the default hierarchy is still there
    assert [(h.id, h.level, h.title, h.summary) for h in store.heads("archrag-spectral")] == [
        (c.id, c.level, c.title, c.summary) for c in spectral]  # heads: load's order, nothing parsed
    assert ws.artifact_path("chnsw.archrag-spectral").is_dir()
    from unirag.graph.graph_store import GraphStore

    graph_store = GraphStore(ws)
    leaves = {node[0] for node in graph_store.load_tree() if node[1] == 0}
    assert leaves == {node[0] for node in graph_store.load_tree("tree:kmeans") if node[1] == 0}
    ids, _ = load_vectors(ws, "tree_vectors:kmeans", "tree_vectors.kmeans")
    assert set(ids) == {node[0] for node in graph_store.load_tree("tree:kmeans")}
    assert ensure(ws, settings, ["chnsw:archrag-spectral", "tree_vectors:kmeans"], embedder=embedder)[0] == []


def test_a_tree_from_before_variants_is_migrated(tmp_path: Path) -> None:
    from unirag.graph.graph_store import GraphStore

    ws = Workspace.init(tmp_path / "old")
    ws.db.execute("CREATE TABLE tree_nodes (id TEXT PRIMARY KEY, layer INTEGER, text TEXT, children TEXT, "
                  "vector BLOB)")
    ws.db.execute("INSERT INTO tree_nodes VALUES ('c1', 0, 'leaf', '[]', ?)", (np.ones(2, np.float32).tobytes(),))
    ws.db.commit()
    store = GraphStore(ws)
    assert [(n[0], n[1], n[2]) for n in store.load_tree()] == [("c1", 0, "leaf")]
    assert store.load_tree("tree:kmeans") == []
    GraphStore(ws)  # a second open finds the new schema and leaves it alone
    assert len(store.load_tree()) == 1


def test_relationship_text_names_both_ends(indexed) -> None:
    ws, _, _ = indexed
    from unirag.graph.graph_store import GraphStore

    graph = GraphStore(ws).load_graph()
    ids, texts = relationship_texts(graph)
    text = texts[ids.index("marie curie|warsaw")]
    assert "Marie Curie" in text and "Warsaw" in text
    eg = to_entity_graph(graph)
    assert len(eg.edges) == len(graph.relationships) and (eg.edges[:, 0] < eg.edges[:, 1]).all()


def test_community_store_round_trip(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    a = Community(community_id("demo", 1, ["x", "y"]), "demo", 1, ["x", "y"], ["x", "y"], "T", "S",
                  payload={"k": [1, 2]})
    b = Community(community_id("demo", 2, [a.id]), "demo", 2, [a.id], ["x", "y"], rating=7.5)
    a.parent = b.id
    result = HierarchyResult("demo", "bottom_up", [a, b], [CommunityLink("demo", 1, a.id, a.id, 2.0, "self")])
    store = CommunityStore(ws)
    store.save(result)
    store.save(result)  # a rebuild replaces, never duplicates
    loaded = store.load("demo")
    assert [c.id for c in loaded] == [a.id, b.id] and loaded[0].payload == {"k": [1, 2]}
    assert loaded[0].parent == b.id and loaded[1].rating == 7.5
    assert store.level_counts() == {"demo": {1: 1, 2: 1}}
    assert len(store.load_links("demo")) == 1
    assert community_id("demo", 1, ["y", "x"]) == a.id  # order-free, content-derived


def test_index_without_sources_builds_on_the_stored_corpus(indexed) -> None:
    from typer.testing import CliRunner

    from unirag.cli import app

    ws, _, _ = indexed
    root = ws.root
    ws.close()
    runner = CliRunner()
    result = runner.invoke(app, ["index", "-w", str(root), "--index", "chunk_tfidf", "--json", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert "chunk_tfidf" in report["rebuilt"] and report["documents_added"] == 0
    empty = runner.invoke(app, ["index", "-w", str(root.parent / "nothing"), "--index", "chunk_tfidf"])
    assert empty.exit_code == 1 and "no corpus yet" in empty.stderr
    bad = runner.invoke(app, ["index", "-w", str(root), "--index", "nope"])
    assert bad.exit_code != 0 and "unknown artifact 'nope'" in bad.stderr


# -- community hierarchies through the registry -------------------------------------

HIERARCHY_ARTIFACTS = [f"community_vectors:{name}" for name in ("graphrag", "archrag", "hygrag", "leanrag")]


def test_every_hierarchy_builds_lazily_with_llm_summaries(indexed) -> None:
    ws, _, embedder = indexed
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=2, index__summarizer="llm",
                             index__archrag={"min_nodes": 3}, index__leanrag={"cluster_size": 4})
    chat = ScriptedChat()
    rebuilt, ledger = ensure(ws, settings, HIERARCHY_ARTIFACTS, embedder=embedder, chat=chat)
    for name in ("graphrag", "archrag", "hygrag", "leanrag"):
        assert f"communities:{name}" in rebuilt and f"community_vectors:{name}" in rebuilt
    levels = CommunityStore(ws).level_counts()
    assert set(levels) == {"graphrag", "archrag", "hygrag", "leanrag"}
    assert all(sum(counts.values()) > 0 for counts in levels.values())
    stages = {r.stage for r in chat.requests}
    assert {"index.graphrag.report", "index.archrag.summarize", "index.hygrag.summarize",
            "index.leanrag.aggregate_entity"} <= stages
    assert {"index.graphrag.report", "index.archrag.summarize"} <= set(ledger.stages)  # accounted per stage
    assert ws.manifest.entry("communities:graphrag")["level_order"] == "top_down"
    entity_ids, _ = load_vectors(ws, "entity_vectors", "entity_vectors")
    assert ws.manifest.entry("hygrag_node_vectors")["count"] == len(ws.corpus.chunk_ids()) + len(entity_ids)
    calls = chat.calls
    again, _ = ensure(ws, settings, HIERARCHY_ARTIFACTS, embedder=embedder, chat=chat)
    assert again == [] and chat.calls == calls


def test_extractive_summaries_make_no_model_call(indexed) -> None:
    ws, settings, embedder = indexed  # no chat endpoint configured: summarizer auto = extractive
    chat = ScriptedChat()
    rebuilt, _ = ensure(ws, settings, HIERARCHY_ARTIFACTS, embedder=embedder, chat=chat)
    assert chat.calls == 0 and "communities:graphrag" in rebuilt
    reports = CommunityStore(ws).load("graphrag")
    assert all(c.summary for c in reports)


def test_killed_hierarchy_build_resumes_without_repeating_calls(indexed, tmp_path: Path) -> None:
    ws, _, embedder = indexed
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1, index__summarizer="llm",
                             index__archrag={"min_nodes": 3})
    dying = ScriptedChat(fail_on={3: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        ensure(ws, settings, ["communities:graphrag", "communities:archrag"], embedder=embedder, chat=dying)
    resumed = ScriptedChat()
    ensure(ws, settings, ["communities:graphrag", "communities:archrag"], embedder=embedder, chat=resumed)
    first = {r.cache_key("scripted-chat") for r in dying.requests[:2]}  # the two that finished
    assert not first & {r.cache_key("scripted-chat") for r in resumed.requests}  # none asked again
    clean = ScriptedChat()
    clean_ws = Workspace.init(tmp_path / "clean")
    corpus = tmp_path / "passages.json"
    run_index(clean_ws, [corpus], settings, fake_stack(settings, clean_ws, chat=ScriptedChat(), embedder=embedder),
              graphs=["kg"])
    ensure(clean_ws, settings, ["communities:graphrag", "communities:archrag"], embedder=embedder, chat=clean)
    assert len(dying.requests) - 1 + len(resumed.requests) == len(clean.requests)


def test_query_builds_a_missing_artifact_first(indexed) -> None:
    from typer.testing import CliRunner

    from unirag.cli import app

    ws, _, _ = indexed
    with ws.db:
        ws.db.execute("DELETE FROM manifest WHERE name = 'chunk_bm25'")
    root = ws.root
    ws.close()
    result = CliRunner().invoke(app, ["query", "capital of Poland", "-w", str(root), "-m", "bm25",
                                      "--retrieve-only", "--json"])
    assert result.exit_code == 0, result.output
    assert "brought what bm25 needs up to date first: chunk_bm25 (missing)" in result.stderr
    assert json.loads(result.stdout)["context"][0]["source"] == "Warsaw"


def test_tree_summaries_follow_the_summarizer_setting(indexed) -> None:
    ws, settings, embedder = indexed
    chat = ScriptedChat()
    ensure(ws, settings, ["tree"], embedder=embedder, chat=chat)  # no endpoint: extractive
    stats = ws.manifest.entry("tree")["stats"]
    assert chat.calls == 0 and stats["summaries"] > 0 and stats["fallback_summaries"] == stats["summaries"]
    llm = make_settings(ws.root, graph__extractor="llm", index__summarizer="llm")
    rebuilt, _ = ensure(ws, llm, ["tree"], embedder=embedder, chat=chat)
    assert rebuilt == ["tree"]  # another summarizer is another tree
    assert {r.stage for r in chat.requests} == {"build.tree.summarize"}
