"""Issue 30 §5: the CLI, the server, the MCP tools and the framework retrievers (issue 32)
are thin callers of ``UniRAG``.

A door that calls the pipeline itself skips what the API adds around it (the
per-object writer lock, dropping the loaded indices after a write) and checks
requests its own way; these tests hold every door to the API, and check the API
methods the CLI needed to get there (the estimate and the dry run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedChat, make_settings, small_corpus
from typer.testing import CliRunner

import unirag.cli as cli
from unirag import UniRAG
from unirag.errors import ConfigError, SourceError

PACKAGE = Path(__file__).resolve().parents[1] / "unirag"
#: The entry points: each reaches a workspace through ``unirag.api`` only.
DOORS = [PACKAGE / "cli.py", *sorted((PACKAGE / "server").glob("*.py")),
         *sorted((PACKAGE / "integrations").glob("*.py"))]
#: What lies under the API: a door importing it calls around the API.
UNDER_THE_API = ("unirag.pipeline", "unirag.stats")
#: ``door: reason`` for a door that must read ``<x>.workspace`` itself (none today: add a UniRAG method first).
WORKSPACE_READS_ALLOWED: dict[str, str] = {}
PAID = {"chat__base_url": "http://127.0.0.1:9/v1", "chat__model": "paid-model"}  # nothing listens: no call may go out


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("door", DOORS, ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_no_door_calls_the_pipeline_itself(door: Path) -> None:
    used = sorted(name for name in imported_modules(door) if name.startswith(UNDER_THE_API))
    assert not used, f"{door.name} imports {used}: call the UniRAG method instead"


def workspace_reads(path: Path) -> list[int]:
    """Lines of ``path`` that reach through an object's ``.workspace`` (the store behind the API)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "workspace")


@pytest.mark.parametrize("door", DOORS, ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_no_door_reaches_into_the_workspace(door: Path) -> None:
    """The server's graph pages, its staleness and its wait for writers read ``rag.workspace``
    directly; now each is a UniRAG method, so a door never depends on the Workspace's parts."""
    name = door.relative_to(PACKAGE).as_posix()
    lines = workspace_reads(door)
    assert not lines or name in WORKSPACE_READS_ALLOWED, (
        f"{name} reads '.workspace' at lines {lines}: add a UniRAG method instead")


def test_the_workspace_scan_sees_an_attribute_read() -> None:
    """Guards the scan itself: an empty result would pass every door."""
    probe = PACKAGE.parent / "tests" / "test_thin_callers.py"
    assert workspace_reads(probe), "this file's own 'rag.workspace' below must be seen"


def test_estimate_is_none_for_free_models_and_counts_paid_calls(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    with UniRAG(tmp_path / "free", settings=make_settings(), chat_backend=ScriptedChat(),
                embedding_backend=HashEmbedder()) as rag:
        assert rag.estimate(corpus, graphs="kg") is None  # the embedded model costs nothing
    with UniRAG(tmp_path / "paid", settings=make_settings(**PAID), chat_backend=ScriptedChat(),
                embedding_backend=HashEmbedder()) as rag:
        estimate = rag.estimate(corpus, graphs="kg")
        assert estimate is not None and estimate.calls > 0
        assert rag.documents() == []  # an estimate indexes nothing


def test_dry_run_of_a_workspace_never_made_creates_nothing(tmp_path: Path) -> None:
    corpus, fresh = small_corpus(tmp_path), tmp_path / "never-made"
    estimate = UniRAG.dry_run(fresh, corpus, settings=make_settings(**PAID), graphs="kg")
    assert estimate is not None and estimate.calls > 0
    assert not fresh.exists()


def test_plan_refuses_a_request_before_anything_exists(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        UniRAG.plan(tmp_path / "missing.txt")
    assert not any(tmp_path.iterdir())


def test_a_bad_extractor_is_the_settings_one_line_for_every_door(tmp_path: Path) -> None:
    """The CLI checked ``--extractor`` by hand; now the settings check it, for the API too."""
    with pytest.raises(ConfigError, match="graph.extractor"):
        UniRAG(tmp_path / "ws", **{"graph.extractor": "nope"})


@pytest.mark.parametrize("flag, key", [("--extractor", "graph.extractor"), ("--question-path", "retrieval.question_path")])
def test_eval_refuses_a_bad_choice_through_the_settings(tmp_path: Path, flag: str, key: str) -> None:
    """``unirag eval`` checked these two by hand (a second list of the allowed values); the
    settings check them now, with the same line as every other door, before anything is created."""
    result = CliRunner().invoke(cli.app, ["eval", "-d", str(tmp_path / "none"), "-w", str(tmp_path / "ws"),
                                          "-o", str(tmp_path / "out"), flag, "nope"])
    assert result.exit_code != 0 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("unirag: error:") and key in lines[0], result.stderr
    assert not (tmp_path / "ws").exists()


def test_the_read_methods_the_server_uses(tmp_path: Path) -> None:
    """What the graph pages, the staleness marks and the job writers call instead of ``rag.workspace``."""
    with UniRAG(tmp_path / "ws", settings=make_settings(), chat_backend=ScriptedChat(),
                embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path), graphs="kg")
        assert {chunk.id for chunk in rag.passages()} == {chunk.id for chunk in rag.workspace.corpus.iter_chunks()}
        assert rag.being_written() is False and rag.hierarchies() == []
        assert rag.artifact_problems(["graph", "never_built"]) == {}  # built and current; never built: left out
        version = rag.built_version("graph")
        assert version[0] is not None and rag.graph_view("kg").nodes
        with rag.sibling() as writer:
            assert writer.workspace is not rag.workspace and writer.root == rag.root
            writer.index(documents=[{"text": "Ada Lovelace wrote notes on the Analytical Engine."}], graphs="kg")
        assert rag.built_version("graph") != version  # a cached view keyed on it is reloaded
