"""A living corpus: documents replaced, synced and deleted with every artifact kept true.

The property that matters: index A, add B, delete B gives the same workspace as
indexing A alone (entities, relationships, descriptions, communities, retrieval,
and the same artifact fingerprints, since every builder here is deterministic).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from unirag.cli import app
from unirag.errors import SourceError, WorkspaceError
from unirag.ingest import ingest
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.community_store import CommunityStore
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import resolve_method
from unirag.pipeline import prepare_query, run_delete, run_index
from unirag.workspace import Workspace

A = [
    {"title": "Marie Curie", "text": "Marie Curie was born in Warsaw. She moved to Paris and married Pierre Curie."},
    {"title": "Pierre Curie", "text": "Pierre Curie worked in Paris with Marie Curie on Radium research."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland. Marie Curie was born in Warsaw."},
    {"title": "Radium", "text": "Radium was discovered by Marie Curie and Pierre Curie in Paris."},
    {"title": "Paris", "text": "Paris is the capital of France, home of the Sorbonne where Marie Curie taught."},
    {"title": "Sorbonne", "text": "The Sorbonne is a university in Paris where Pierre Curie lectured."},
]
B = [
    {"title": "Quokka", "text": "The quokka is a small marsupial that lives on Rottnest Island near Perth."},
    {"title": "Perth", "text": "Perth is the capital of Western Australia. Rottnest Island lies off Perth."},
    {"title": "Warsaw Uprising", "text": "The Warsaw Uprising of 1944 was fought in Warsaw against the occupation."},
]
# Every graph and hierarchy whose build is deterministic (seeded clustering, sorted ids).
ARTIFACTS = ["graph", "chunk_links:pg", "chunk_links:hybrid", "tree", "entity_vectors", "entity_name_vectors",
             "relation_vectors", "communities:graphrag", "communities:archrag", "communities:hygrag",
             "communities:leanrag", "community_vectors:graphrag", "chnsw", "tree_vectors", "chunk_tfidf"]
METHODS = ["vanilla", "llightrag", "hipporag", "lgraphrag", "archrag", "hygrag", "leanrag", "raptor", "kgp"]
QUESTION = "Where was Marie Curie born?"


def _write(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _stack(ws: Workspace, settings: Any) -> Any:
    return fake_stack(settings, ws, chat=ScriptedChat(), embedder=HashEmbedder())


def _index(ws: Workspace, sources: list[Path], **kwargs: Any) -> Any:
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1)
    needs = [name for method in METHODS for name in resolve_method(method).requires()]
    return run_index(ws, sources, settings, _stack(ws, settings), graphs=[], artifacts=ARTIFACTS + needs, **kwargs)


def _delete(ws: Workspace, targets: list[str]) -> Any:
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1)
    return run_delete(ws, targets, settings, _stack(ws, settings))


def snapshot(ws: Workspace) -> dict[str, Any]:
    """Everything a query can read, in a comparable form."""
    graph = GraphStore(ws).load_graph()
    communities = CommunityStore(ws)
    manifest = ws.manifest.entries()
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1)
    runner = MethodRunner(ws, settings, _stack(ws, settings))
    retrieved = {}
    for name in METHODS:
        result = runner.run(resolve_method(name), QUESTION, generate=False)
        retrieved[name] = [(item.kind, item.id) for item in result.context]
    return {
        "chunks": ws.corpus.chunk_ids(),
        "entities": {key: (e.name, e.type, e.description) for key, e in graph.entities.items()},
        "relationships": sorted((r.source, r.target, r.description) for r in graph.relationships.values()),
        "communities": {
            name: sorted((c.id, c.level, tuple(sorted(c.entities)), c.summary) for c in communities.load(name))
            for name in ("graphrag", "archrag", "hygrag", "leanrag")
        },
        "links": {kind: sorted(GraphStore(ws).load_chunk_links(kind)) for kind in ("pg", "hybrid")},
        "tree": sorted((node[0], node[1], node[2]) for node in GraphStore(ws).load_tree()),
        "fingerprints": {name: entry.get("inputs") for name, entry in manifest.items() if name != "chunks"},
        "retrieved": retrieved,
    }


#: A workspace whose long texts are embedded as the mean of their sentences (opt-in).
BY_SENTENCES = "index:\n  long_texts: sentences\n"


def _alone(root: Path, settings_yaml: str | None) -> dict[str, Any]:
    ws = Workspace.init(root / "ws", **({"settings_yaml": settings_yaml} if settings_yaml else {}))
    _index(ws, [_write(root / "a.json", A)])
    try:
        return snapshot(ws)
    finally:
        ws.close()


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _alone(tmp_path_factory.mktemp("alone"), None)


@pytest.fixture(scope="module")
def alone_by_sentences(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _alone(tmp_path_factory.mktemp("alone-sentences"), BY_SENTENCES)


def _insert_then_delete(root: Path, alone: dict[str, Any], settings_yaml: str | None) -> None:
    ws = Workspace.init(root / "ws", **({"settings_yaml": settings_yaml} if settings_yaml else {}))
    a, b = _write(root / "a.json", A), _write(root / "b.json", B)
    _index(ws, [a])
    grown = _index(ws, [b])
    assert grown.ingest.documents_added == len(B)
    middle = snapshot(ws)
    assert len(middle["entities"]) > len(alone["entities"])  # B added entities (Quokka, Perth...)
    assert not ws.manifest.stale_artifacts()  # the insert refreshed every built artifact

    report = _delete(ws, [str(b)])
    assert report.documents_removed == len(B)
    after = snapshot(ws)
    assert not ws.manifest.stale_artifacts()
    for key in alone:
        assert after[key] == alone[key], key
    ws.close()


def test_insert_then_delete_equals_never_inserted(tmp_path: Path, alone: dict[str, Any]) -> None:
    _insert_then_delete(tmp_path, alone, None)


def test_insert_then_delete_equals_never_inserted_with_sentence_mean_vectors(
    tmp_path: Path, alone_by_sentences: dict[str, Any],
) -> None:
    _insert_then_delete(tmp_path, alone_by_sentences, BY_SENTENCES)
    assert "+sentence-mean" in Workspace.open(tmp_path / "ws").manifest.entry("entity_vectors")["config"]["model"]


class _Killed(KeyboardInterrupt):
    """The kill a fault injects into one stage of a delete (KeyboardInterrupt: nothing may catch it)."""


@pytest.mark.parametrize("kill_in", ["forget_chunks", "refresh"])
@pytest.mark.parametrize("resume_by", ["delete", "index"])
def test_a_killed_delete_is_finished_by_the_next_run(tmp_path: Path, alone: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch, kill_in: str,
                                                     resume_by: str) -> None:
    """Killed after the documents are removed but before the extractions are forgotten or
    the artifacts refreshed: rerunning the delete (or any index) finishes it, and the
    workspace is then the one never given B (issue 29 §3.6: the rerun said ``no document``)."""
    import unirag.pipeline as pipeline

    ws = Workspace.init(tmp_path / "ws")
    a, b = _write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)
    _index(ws, [a])
    _index(ws, [b])

    def killed(*args: Any, **kwargs: Any) -> None:
        raise _Killed

    with monkeypatch.context() as faults:
        if kill_in == "forget_chunks":
            faults.setattr(GraphStore, "forget_chunks", killed)
        else:
            faults.setattr(pipeline, "ensure_artifacts", killed)
        with pytest.raises(_Killed):
            _delete(ws, [str(b)])
    assert len(ws.corpus.documents()) == len(A) and ws.manifest.stale_artifacts()

    if resume_by == "delete":
        report = _delete(ws, [str(b)])
        assert (report.documents_removed, report.finished) == (0, [str(b)])
    else:
        _index(ws, [])
    assert not ws.manifest.stale_artifacts() and ws.manifest.pending_delete() is None
    after = snapshot(ws)
    for key in alone:
        assert after[key] == alone[key], key
    with pytest.raises(SourceError, match="no document"):  # finished: a third run has nothing to do
        _delete(ws, [str(b)])
    ws.close()


def test_cli_rerun_of_a_killed_delete_says_it_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import unirag.pipeline as pipeline

    a, b = _write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)
    root = tmp_path / "ws"
    runner = CliRunner()
    assert runner.invoke(app, ["index", str(a), str(b), "-w", str(root), "-q", "--graph", "kg"]).exit_code == 0
    with monkeypatch.context() as faults:
        faults.setattr(pipeline, "ensure_artifacts", lambda *args, **kwargs: (_ for _ in ()).throw(_Killed()))
        killed = runner.invoke(app, ["delete", str(b), "-w", str(root), "-q"])
    assert killed.exit_code != 0 and "interrupted" in killed.stderr
    result = runner.invoke(app, ["delete", str(b), "-w", str(root), "-q"])
    assert result.exit_code == 0, result.output
    assert "deleted 0 documents" in result.stdout and f"finished the interrupted delete of {b}" in result.stdout
    stats = json.loads(runner.invoke(app, ["stats", "-w", str(root), "--json"]).stdout)
    assert stats["stale_artifacts"] == {}


def test_insert_equals_fresh_index(tmp_path: Path) -> None:
    """Equal when each passage has its own extraction call: grouped short passages share a
    prompt, so which passages arrive together (a batch of the insert, or of a fresh index)
    changes what a model answers, and no extractor can promise the same graph then."""
    a, b = _write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)
    for root in ("grown", "fresh"):
        (tmp_path / root).mkdir()
        (tmp_path / root / "unirag.yaml").write_text("graph:\n  max_passages_per_call: 1\n", encoding="utf-8")
    grown = Workspace.init(tmp_path / "grown")
    _index(grown, [a])
    _index(grown, [b])
    fresh = Workspace.init(tmp_path / "fresh")
    _index(fresh, [a, b])
    one, two = snapshot(grown), snapshot(fresh)
    for key in one:
        assert one[key] == two[key], key


def test_delete_forgets_the_documents_entities_and_extractions(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)])
    names = {e.name for e in GraphStore(ws).load_graph().entities.values()}
    assert "Quokka" in names
    quokka = next(doc["id"] for doc in ws.corpus.documents() if doc["title"] == "Quokka")
    _delete(ws, [quokka])
    graph = GraphStore(ws).load_graph()
    assert "Quokka" not in {e.name for e in graph.entities.values()}
    assert len(ws.corpus.documents()) == len(A) + len(B) - 1
    stored = {row[0] for row in ws.db.execute("SELECT chunk_id FROM extractions")}
    assert stored == set(ws.corpus.chunk_ids())  # no extraction outlives its chunk
    ws.close()


def test_unknown_target_changes_nothing(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    a = _write(tmp_path / "a.json", A)
    _index(ws, [a])
    version, count = ws.corpus.version(), len(ws.corpus.documents())
    with pytest.raises(SourceError, match="no document 'doc-nope'.*nothing was deleted"):
        _delete(ws, [str(a), "doc-nope"])
    assert ws.corpus.version() == version and len(ws.corpus.documents()) == count
    ws.close()


def test_deleting_everything_leaves_a_valid_empty_workspace(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    a = _write(tmp_path / "a.json", A)
    _index(ws, [a])
    _delete(ws, [str(a)])
    assert ws.corpus.counts() == {"documents": 0, "chunks": 0, "chunk_tokens": 0}
    assert set(ws.manifest.entries()) <= {"chunks"}
    assert not GraphStore(ws).load_graph().entities
    assert not (ws.root / "artifacts").exists()
    settings = make_settings(ws.root)
    with pytest.raises(WorkspaceError, match="no indexed corpus"):
        prepare_query(ws, settings, _stack(ws, settings), ["chunk_vectors"])
    _index(ws, [_write(tmp_path / "b.json", B)])  # and it takes a new corpus
    assert len(ws.corpus.documents()) == len(B)
    ws.close()


def test_changed_file_replaces_its_old_version(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "curie.txt").write_text("Marie Curie was born in Warsaw.", encoding="utf-8")
    (folder / "paris.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [folder])
    old = {doc["title"]: doc["id"] for doc in ws.corpus.documents()}
    (folder / "curie.txt").write_text("Marie Curie discovered Polonium in Paris.", encoding="utf-8")
    report = _index(ws, [folder])
    docs = {doc["title"]: doc for doc in ws.corpus.documents()}
    assert len(docs) == 2 and report.ingest.documents_removed == 1
    assert docs["curie"]["id"] != old["curie"] and docs["paris"]["id"] == old["paris"]
    names = {e.name for e in GraphStore(ws).load_graph().entities.values()}
    assert "Polonium" in names and "Warsaw" not in names  # the old version's entities are gone
    ws.close()


def test_sync_deletes_documents_of_vanished_files(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("one", "two", "three"):
        (folder / f"{name}.txt").write_text(f"The {name} file talks about Warsaw and {name.title()}.", encoding="utf-8")
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [folder])
    (folder / "two.txt").unlink()
    kept = _index(ws, [folder])
    assert len(ws.corpus.documents()) == 3 and kept.ingest.documents_removed == 0  # without --sync: kept
    synced = _index(ws, [folder], sync=True)
    assert synced.ingest.documents_removed == 1
    assert sorted(doc["title"] for doc in ws.corpus.documents()) == ["one", "three"]
    ws.close()


def test_jsonl_records_are_replaced_and_deleted_by_id(tmp_path: Path) -> None:
    path = tmp_path / "facts.jsonl"
    records = [{"id": "r1", "text": "Marie Curie was born in Warsaw."},
               {"id": "r2", "text": "Perth is the capital of Western Australia."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [path])
    records[1]["text"] = "Perth lies on the Swan River."
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    _index(ws, [path])
    sources = sorted(source for doc in ws.corpus.documents() for source in doc["sources"])
    assert sources == [f"{path.resolve()}#r1", f"{path.resolve()}#r2"]
    _delete(ws, [f"{path}#r2"])
    assert [doc["sources"] for doc in ws.corpus.documents()] == [[f"{path.resolve()}#r1"]]
    ws.close()


def test_a_query_never_answers_from_a_stale_artifact(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1)
    ingest(ws, [_write(tmp_path / "b.json", B)], settings)  # corpus grows; nothing refreshed yet
    stale = ws.manifest.stale_artifacts()
    assert {"graph", "communities:graphrag", "chunk_vectors"} <= set(stale)
    needs = resolve_method("lgraphrag").requires()
    with pytest.raises(WorkspaceError, match=r"artifact '.+' is (stale|missing).*--no-build"):
        prepare_query(ws, settings, _stack(ws, settings), needs, build=False)
    done = prepare_query(ws, settings, _stack(ws, settings), needs)
    assert "communities:graphrag" in done and "built on corpus version" in done["communities:graphrag"]
    graph = GraphStore(ws).load_graph()
    members = {m for c in CommunityStore(ws).load("graphrag") for m in c.entities}
    assert members == set(graph.entities)  # communities cover the refreshed graph, not the old one
    ws.close()


def test_cli_documents_delete_and_stale_stats(tmp_path: Path) -> None:
    a, b = _write(tmp_path / "a.json", A), _write(tmp_path / "b.json", B)
    root = tmp_path / "ws"
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(a), str(b), "-w", str(root), "-q", "--graph", "kg"])
    assert result.exit_code == 0, result.output
    listed = json.loads(runner.invoke(app, ["documents", "-w", str(root), "--json"]).stdout)
    assert len(listed) == len(A) + len(B) and all(row["chunks"] == 1 for row in listed)
    result = runner.invoke(app, ["delete", str(b), "-w", str(root), "-q"])
    assert result.exit_code == 0, result.output
    assert f"deleted {len(B)} documents" in result.stdout
    result = runner.invoke(app, ["delete", "doc-nope", "-w", str(root)])
    assert result.exit_code != 0 and "no document 'doc-nope'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    ws = Workspace.open(root)
    ingest(ws, [b], make_settings(root))
    ws.close()
    stats = runner.invoke(app, ["stats", "-w", str(root)])
    assert "stale" in stats.stdout and "graph (built on corpus version" in stats.stdout
    result = runner.invoke(app, ["query", "Where is Perth?", "-w", str(root), "-m", "vanilla", "--retrieve-only",
                                 "--no-build"])
    assert result.exit_code != 0 and "chunk_vectors" in result.stderr and "--no-build" in result.stderr


# -- attaching instead of re-clustering (index.update: attach) ------------------------------------

ATTACHED = ("communities:graphrag", "communities:archrag", "communities:hygrag", "communities:leanrag", "tree")
C = [{"title": "Warsaw Uprising", "text": "The Warsaw Uprising of 1944 was fought in Warsaw, the capital of Poland."}]


def _attach_workspace(root: Path) -> Workspace:
    """A workspace whose small insert stays within index.rebuild_share, so hierarchies are carried."""
    root.mkdir(parents=True)
    (root / "unirag.yaml").write_text("index:\n  rebuild_share: 1.0\n", encoding="utf-8")
    return Workspace.init(root)


def _assert_hierarchies_whole(ws: Workspace) -> None:
    """Invariants an attached hierarchy keeps: every entity (HyGRAG: node) in exactly one community
    per level where the algorithm places all, at most one elsewhere; children exist one level down;
    every id refers to something stored."""
    graph = GraphStore(ws).load_graph()
    chunks = set(ws.corpus.chunk_ids())
    store = CommunityStore(ws)
    for name in ("archrag", "hygrag", "leanrag"):
        communities = store.load(name)
        by_level: dict[int, list[Any]] = {}
        for community in communities:
            by_level.setdefault(community.level, []).append(community)
        for level, members in by_level.items():
            seen = [e for c in members for e in c.entities]
            assert len(seen) == len(set(seen)), (name, level, "an entity in two communities")
            assert set(seen) <= set(graph.entities), (name, level, "a dangling entity id")
            if name in ("hygrag", "leanrag") and level == 1:
                assert set(seen) == set(graph.entities), (name, "an entity without a community")
            below = {c.id for c in by_level.get(level - 1, [])} if level > 1 else set(graph.entities) | chunks
            for community in members:
                assert set(community.children) <= below, (name, level, "a dangling child")
                assert set(community.chunks) <= chunks, (name, level, "a dangling chunk")
    nodes = GraphStore(ws).load_tree()
    ids = {node[0] for node in nodes}
    assert {node[0] for node in nodes if node[1] == 0} == chunks
    assert all(set(node[3]) <= ids for node in nodes)


def test_a_small_insert_attaches_and_keeps_every_hierarchy_whole(tmp_path: Path) -> None:
    ws = _attach_workspace(tmp_path / "ws")
    first = _index(ws, [_write(tmp_path / "a.json", A)])
    grown = _index(ws, [_write(tmp_path / "c.json", C)])
    manifest = ws.manifest.entries()
    for name in ATTACHED:
        assert manifest[name]["update"]["mode"] == "attach", name
        assert manifest[name]["update"]["changed"] > 0, name
    _assert_hierarchies_whole(ws)
    assert not ws.manifest.stale_artifacts()
    # ArchRAG's kNN augmentation continued the last build's lists; LeanRAG recorded its links' bases.
    assert manifest["communities:archrag"]["stats"]["per_level"][0]["knn_lists"] == "update"
    assert ws.artifact_path("communities.archrag.knn.npz").exists()
    assert ws.artifact_path("communities.leanrag.link_bases.npz").exists()
    # C-HNSW (updated in place when little changed; here most of a tiny graph did) indexes what is stored.
    from unirag.hierarchy.chnsw import CHnswIndex

    chnsw = CHnswIndex.load(ws.artifact_path("chnsw"))
    assert set(chnsw.ids[0]) == set(GraphStore(ws).load_graph().entities)
    assert {c for layer in chnsw.ids[1:] for c in layer} == {c.id for c in CommunityStore(ws).load("archrag")}
    # Only communities whose members or member texts changed were asked again.
    assert grown.ledger.total().llm_calls < first.ledger.total().llm_calls
    root = ws.root
    ws.close()
    shown = CliRunner().invoke(app, ["stats", "-w", str(root)])
    assert shown.exit_code == 0 and "communities hygrag" in shown.stdout
    assert "last change attached" in shown.stdout


def test_attached_insert_then_delete_equals_never_inserted(tmp_path: Path) -> None:
    alone = _attach_workspace(tmp_path / "alone")
    _index(alone, [_write(tmp_path / "a.json", A)])
    expected = snapshot(alone)
    alone.close()
    ws = _attach_workspace(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    _index(ws, [_write(tmp_path / "c.json", C)])
    assert ws.manifest.entries()["communities:hygrag"]["update"]["mode"] == "attach"
    _delete(ws, [str(tmp_path / "c.json")])
    after = snapshot(ws)
    for key in expected:
        assert after[key] == expected[key], key
    ws.close()


def test_update_rebuild_setting_clusters_afresh(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "unirag.yaml").write_text("index:\n  update: rebuild\n", encoding="utf-8")
    ws = Workspace.init(root)
    _index(ws, [_write(tmp_path / "a.json", A)])
    _index(ws, [_write(tmp_path / "c.json", C)])
    assert {ws.manifest.entries()[name]["update"]["mode"] for name in ATTACHED} == {"rebuild"}
    ws.close()


def test_a_lost_leaf_list_means_a_full_build(tmp_path: Path) -> None:
    from unirag.hierarchy.incremental import leaves_path

    ws = _attach_workspace(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    leaves_path(ws, "communities:archrag").unlink()
    assert "communities:archrag" in ws.manifest.stale_artifacts()  # its file record says it is damaged
    _index(ws, [_write(tmp_path / "c.json", C)])
    assert ws.manifest.entries()["communities:archrag"]["update"]["reason"] == "no leaf list from the last build"
    _assert_hierarchies_whole(ws)
    ws.close()


def _index_with(ws: Workspace, sources: list[Path], chat: Any) -> Any:
    settings = make_settings(ws.root, graph__extractor="llm", concurrency=1, index__summarizer="llm")
    needs = [name for method in METHODS for name in resolve_method(method).requires()]
    stack = fake_stack(settings, ws, chat=chat, embedder=HashEmbedder())
    return run_index(ws, sources, settings, stack, graphs=[], artifacts=ARTIFACTS + needs)


@pytest.mark.parametrize("kill_at", [1, 4, 7])
def test_a_killed_attached_insert_resumes_to_the_same_state_without_repeating_calls(
        tmp_path: Path, kill_at: int) -> None:
    a, c = _write(tmp_path / "a.json", A), _write(tmp_path / "c.json", C)
    clean = _attach_workspace(tmp_path / "clean")
    _index_with(clean, [a], ScriptedChat())
    uninterrupted = ScriptedChat()
    _index_with(clean, [c], uninterrupted)
    expected = snapshot(clean)
    clean.close()
    stages = [request.stage for request in uninterrupted.requests]
    assert len(stages) >= 7 and stages[3].startswith("index.")  # the kills land in extraction and in summaries

    ws = _attach_workspace(tmp_path / "ws")
    _index_with(ws, [a], ScriptedChat())
    dying = ScriptedChat(fail_on={kill_at: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        _index_with(ws, [c], dying)
    resumed = ScriptedChat()
    _index_with(ws, [c], resumed)
    assert not ws.manifest.stale_artifacts()
    after = snapshot(ws)
    for key in expected:
        assert after[key] == expected[key], key
    # Every call the killed run finished came from the cache on the resumed run.
    assert len(dying.requests) - 1 + len(resumed.requests) == len(uninterrupted.requests)
    ws.close()


def test_communities_whose_members_did_not_change_keep_their_summaries(tmp_path: Path) -> None:
    ws = _attach_workspace(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    store = CommunityStore(ws)
    before = {name: {(c.level, frozenset(c.children)): c.summary for c in store.load(name)}
              for name in ("graphrag", "archrag", "hygrag", "leanrag")}
    _index(ws, [_write(tmp_path / "c.json", C)])  # Warsaw and Poland gain a description
    manifest = ws.manifest.entries()
    kept_any = False
    for name, summaries in before.items():
        after = store.load(name)
        same = [c for c in after if (c.level, frozenset(c.children)) in summaries]
        for community in same:
            assert community.summary == summaries[(community.level, frozenset(community.children))], name
        kept = manifest[f"communities:{name}"]["stats"]["kept_summaries"]
        assert kept == len(same) or name == "graphrag", name  # GraphRAG matches on entity sets, not children
        kept_any |= kept > 0
    assert kept_any
    ws.close()


def test_resummarize_share_reaches_the_attached_hierarchies(tmp_path: Path) -> None:
    """The setting is the carrier's drift share: on, ArchRAG and LeanRAG report how many upper
    communities they kept within it; 0, none is kept on drift (every ancestor is re-asked)."""
    from unirag.config import load_settings
    from unirag.hierarchy.attach import PreviousNode
    from unirag.hierarchy.incremental import leaves_path, plan_update

    ws = _attach_workspace(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    _index(ws, [_write(tmp_path / "c.json", C)])
    manifest = ws.manifest.entries()
    for name in ("communities:archrag", "communities:leanrag"):
        assert "kept_within_drift" in manifest[name]["stats"]["update"], name
    settings = load_settings(ws.root)
    name = "communities:archrag"
    leaves = json.loads(leaves_path(ws, name).read_text(encoding="utf-8"))["leaves"]
    for share in (0.1, 0.0):
        changed = settings.model_copy(update={"index": settings.index.model_copy(update={"resummarize_share": share})})
        plan = plan_update(ws, changed, name, manifest[name]["identity"], leaves, lambda: {1: [PreviousNode("c", ())]})
        assert plan.carrier is not None and plan.carrier.resummarize_share == share
    ws.close()


def test_the_tree_records_its_kept_summaries_bases_and_a_lost_record_re_asks_instead(tmp_path: Path) -> None:
    """The leaves each kept tree summary was written from live in ``tree.written_from.json``, a file
    of the tree artifact: damaged, the tree is stale, and its update measures no drift (every
    changed ancestor is asked again) rather than measure it against the last update."""
    ws = _attach_workspace(tmp_path / "ws")
    _index(ws, [_write(tmp_path / "a.json", A)])
    basis = ws.artifact_path("tree.written_from.json")
    assert json.loads(basis.read_text(encoding="utf-8")) == {}  # a full build: every basis is its leaves
    assert "artifacts/tree.written_from.json" in ws.manifest.entries()["tree"]["files"]
    basis.write_text("{not json", encoding="utf-8")
    assert "tree" in ws.manifest.stale_artifacts()
    _index(ws, [_write(tmp_path / "c.json", C)])
    assert ws.manifest.entries()["tree"]["update"]["mode"] == "attach"
    assert ws.manifest.entries()["tree"]["stats"]["update"].get("kept_within_drift", 0) == 0
    assert isinstance(json.loads(basis.read_text(encoding="utf-8")), dict)
    assert not ws.manifest.stale_artifacts()
    ws.close()
