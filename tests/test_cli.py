"""The command line end to end, with fake models behind ``unirag.cli._stack``."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from fakes import N_DOCUMENTS, HashEmbedder, ScriptedChat, small_corpus
from typer.testing import CliRunner

import unirag.cli as cli
from unirag.llm.factory import build_stack

runner = CliRunner()


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every stack the CLI builds uses ScriptedChat + HashEmbedder (recorded here)."""
    made: dict[str, Any] = {"chats": [], "embedders": []}

    def fake_stack(settings: Any, ws: Any) -> Any:
        chat, embedder = ScriptedChat(), HashEmbedder()
        made["chats"].append(chat)
        made["embedders"].append(embedder)
        return build_stack(settings, ws.cache(), chat=chat, embedder=embedder)

    monkeypatch.setattr(cli, "_stack", fake_stack)
    return made


def run(*args: str | Path) -> Result:
    return runner.invoke(cli.app, [str(a) for a in args])


def ok(*args: str | Path) -> Result:
    result = run(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def assert_one_line_error(result: Result, *needles: str) -> str:
    """Non-zero exit; stderr is exactly one ``unirag: error:`` line (plus any ``unirag: warning:`` lines)."""
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("unirag: warning:")]
    assert len(lines) == 1, f"expected one error line on stderr, got: {result.stderr!r}"
    assert lines[0].startswith("unirag: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def workspace(tmp_path: Path, fakes: dict[str, Any]) -> Path:
    """A workspace indexed from the small corpus through the CLI."""
    ws = tmp_path / "ws"
    ok("index", small_corpus(tmp_path), "-w", ws, "-q")
    return ws


# -- commands that work --------------------------------------------------------------------------


def test_init_writes_settings(tmp_path: Path) -> None:
    ws = tmp_path / "new"
    result = ok("init", ws)
    assert (ws / "unirag.yaml").is_file()
    assert "chat:" in (ws / "unirag.yaml").read_text()
    assert str(ws) in result.stdout
    # init again keeps an edited file
    (ws / "unirag.yaml").write_text("concurrency: 2\n")
    ok("init", ws)
    assert (ws / "unirag.yaml").read_text() == "concurrency: 2\n"


def test_index_then_query_json(tmp_path: Path, fakes: dict[str, Any]) -> None:
    ws = tmp_path / "ws"
    result = ok("index", small_corpus(tmp_path), "-w", ws, "--json")
    report = json.loads(result.stdout)  # progress bars go to stderr: stdout is one JSON object
    assert report["documents_added"] == N_DOCUMENTS
    assert report["chunks_added"] == N_DOCUMENTS
    assert report["rebuilt"] == ["chunk_vectors", "chunk_bm25"]
    assert report["embedding_calls"] >= 1

    result = ok("query", "What is the capital of France?", "-w", ws, "-m", "vanilla", "--json")
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    assert {"answer", "method", "context", "usage", "timings"} <= set(data)
    assert data["method"] == "vanilla"
    assert data["answer"] and data["answer"] == data["context"][0]["source"]
    assert len(data["context"]) == 4
    for item in data["context"]:
        assert {"kind", "id", "text", "score", "source"} <= set(item)
        assert item["kind"] == "chunk"
    assert {"llm_calls", "prompt_tokens", "completion_tokens", "embedding_calls"} <= set(data["usage"])
    assert data["usage"]["llm_calls"] == 1
    assert fakes["chats"][-1].calls == 1


def test_index_human_output_and_noop_rerun(tmp_path: Path, fakes: dict[str, Any]) -> None:
    corpus, ws = small_corpus(tmp_path), tmp_path / "ws"
    first = ok("index", corpus, "-w", ws, "-q")
    assert f"indexed {N_DOCUMENTS} new documents" in first.stdout
    second = ok("index", corpus, "-w", ws, "-q")
    assert "0 new documents" in second.stdout and "up to date" in second.stdout
    assert fakes["embedders"][-1].calls == 0


def test_query_second_time_is_cached(workspace: Path, fakes: dict[str, Any]) -> None:
    args = ("query", "Where does the quokka live?", "-w", workspace, "-m", "vanilla", "--json")
    first = json.loads(ok(*args).stdout)
    second = json.loads(ok(*args).stdout)
    assert first["usage"]["llm_calls"] == 1
    assert second["usage"]["llm_calls"] == 0 and second["usage"]["cache_hits"] == 1
    assert second["answer"] == first["answer"]


def test_query_flags(workspace: Path) -> None:
    data = json.loads(ok("query", "Which river flows through Egypt, the capital?", "-w", workspace, "-m", "BM25",
                         "--top-k", "2", "--json").stdout)
    assert data["method"] == "bm25"
    assert len(data["context"]) == 2
    assert data["context"][0]["source"] == "nile"


def test_query_human_output(workspace: Path) -> None:
    result = ok("query", "What is the capital of France?", "-w", workspace, "-m", "zeroshot")
    assert "scripted answer" in result.stdout
    assert "LLM calls" in result.stdout


def test_query_warns_about_cut_replies(workspace: Path, fakes: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def cutting_stack(settings: Any, ws: Any) -> Any:
        chat = ScriptedChat()
        chat.finish_reason = "length"
        return build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", cutting_stack)
    result = ok("query", "What is the capital of France?", "-w", workspace, "-m", "vanilla", "--json")
    assert json.loads(result.stdout)["usage"]["cut_replies"] == 1
    warnings = [line for line in result.stderr.splitlines() if line.startswith("unirag: warning:")]
    assert len(warnings) == 1 and "1 model replies were cut short" in warnings[0]
    assert "query.generate: 1" in warnings[0]
    monkeypatch.setattr(cli, "_stack", lambda settings, ws: build_stack(settings, ws.cache(), chat=ScriptedChat(),
                                                                        embedder=HashEmbedder()))
    whole = ok("query", "Where does the quokka live?", "-w", workspace, "-m", "zeroshot", "--json")
    assert "cut short" not in whole.stderr
    assert json.loads(whole.stdout)["usage"]["cut_replies"] == 0


def test_index_warns_about_cut_extraction_replies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def cutting_stack(settings: Any, ws: Any) -> Any:
        chat = ScriptedChat()
        chat.finish_reason = "length"
        return build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", cutting_stack)
    result = ok("index", small_corpus(tmp_path), "-w", tmp_path / "ws", "--graph", "kg", "--extractor", "llm", "-q")
    warnings = [line for line in result.stderr.splitlines() if "cut short" in line]
    assert len(warnings) == 1 and "build.extract: " in warnings[0]


def test_query_uses_method_and_workspace_from_env(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNIRAG_WORKSPACE", str(workspace))
    monkeypatch.setenv("UNIRAG_METHOD", "cot")
    data = json.loads(ok("query", "Why?", "--json").stdout)
    assert data["method"] == "cot" and data["answer"] == "scripted"


def test_methods_json() -> None:
    methods = json.loads(ok("methods", "--json").stdout)
    assert {"zeroshot", "cot", "bm25", "vanilla", "hipporag", "ggraphrag"} <= {m["name"] for m in methods}
    by_name = {m["name"]: m for m in methods}
    for method in methods:
        assert method["pipeline"] and isinstance(method["requires"], list)
    assert by_name["vanilla"]["requires"] == ["chunk_vectors"]
    assert by_name["vanilla"]["pipeline"] == "q:embedding -> chunk.vdb -> generate:direct"
    assert by_name["zeroshot"]["requires"] == []
    assert by_name["hipporag"]["requires"] == ["graph", "entity_name_vectors"]
    assert by_name["ggraphrag"]["pipeline"] == "community.layer -> generate:map_reduce"


def test_methods_plain_and_show() -> None:
    listing = ok("methods").stdout
    for name in ("zeroshot", "cot", "bm25", "vanilla"):
        assert name in listing
    shown = ok("methods", "show", "vanilla").stdout
    assert "VanillaRAG" in shown and "chunk.vdb" in shown and "requires: chunk_vectors" in shown
    shown = json.loads(ok("methods", "show", "Zero-Shot", "--json").stdout)
    assert shown["name"] == "zeroshot"
    shown = ok("methods", "show", "tog").stdout.splitlines()
    start = shown.index("  repeat up to 3 rounds, stopping early when the LLM answers YES to prompt 'enough_context':")
    assert shown[start - 1].startswith("  node.link:")
    assert [line.split(":")[0] for line in shown[start + 1:start + 5]] == [
        "    relationship.onehop", "    relationship.agent", "    node.relnode", "    node.agent"]


def test_stats_json(workspace: Path) -> None:
    ok("query", "What is the capital of Japan?", "-w", workspace, "-m", "vanilla", "--json")
    data = json.loads(ok("stats", "-w", workspace, "--json").stdout)
    assert data["documents"] == N_DOCUMENTS and data["chunks"] == N_DOCUMENTS
    stages = data["usage_by_stage"]
    assert stages["index.embed_chunks"]["embedded_texts"] == N_DOCUMENTS
    assert stages["query.generate"]["llm_calls"] == 1
    assert {"chunks", "chunk_vectors", "chunk_bm25"} <= set(data["artifacts"])
    plain = ok("stats", "-w", workspace).stdout
    assert f"{N_DOCUMENTS} documents" in plain


def test_version() -> None:
    assert ok("--version").stdout.strip()


def _delete_file(path: Path) -> None:
    path.unlink()


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(("file", "damage", "why"), [
    ("entity_vectors.ids.json", _delete_file, "artifacts/entity_vectors.ids.json is missing"),
    ("entity_vectors.npy", _cut_in_half, "artifacts/entity_vectors.npy has"),
])
def test_index_on_the_same_sources_repairs_a_damaged_artifact(
    tmp_path: Path, fakes: dict[str, Any], file: str, damage: Any, why: str
) -> None:
    """What the 'damaged artifact' error advises (index again on the same sources) repairs it."""
    corpus, ws = small_corpus(tmp_path), tmp_path / "ws"
    (ws / "unirag.yaml").parent.mkdir()
    (ws / "unirag.yaml").write_text("graph:\n  extractor: llm\n")
    ok("index", corpus, "-w", ws, "--graph", "kg", "--index", "entity_vectors", "-q")
    damage(ws / "artifacts" / file)
    stale = json.loads(ok("stats", "-w", ws, "--json").stdout)["stale_artifacts"]
    assert list(stale) == ["entity_vectors"] and stale["entity_vectors"].startswith(f"damaged ({why}")
    query = ("query", "Where does the quokka live?", "-w", ws, "-m", "graphrag-er", "--retrieve-only", "--json")
    assert_one_line_error(run(*query, "--no-build"), "'entity_vectors' is damaged", "--index entity_vectors")
    report = json.loads(ok("index", corpus, "-w", ws, "--json").stdout)
    assert report["rebuilt"] == ["entity_vectors"]
    assert json.loads(ok("stats", "-w", ws, "--json").stdout)["stale_artifacts"] == {}
    context = json.loads(ok(*query, "--no-build").stdout)["context"]
    assert any(item["kind"] == "entity" for item in context)


# -- errors: one line, non-zero, no traceback -----------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["-q"], ["--json"]], ids=["default", "quiet", "json"])
def test_error_empty_source_directory(tmp_path: Path, fakes: dict[str, Any], flags: list[str]) -> None:
    (tmp_path / "empty").mkdir()
    result = run("index", tmp_path / "empty", "-w", tmp_path / "ws", *flags)
    assert_one_line_error(result, "no readable documents")
    assert result.stdout == ""


def test_error_binary_only_source(tmp_path: Path, fakes: dict[str, Any]) -> None:
    src = tmp_path / "bin"
    src.mkdir()
    (src / "blob.txt").write_bytes(b"\x00\x01\x02binary\x00" * 50)
    (src / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    line = assert_one_line_error(run("index", src, "-w", tmp_path / "ws"), "no readable documents")
    assert "2 binary files" in line


def test_error_nonexistent_source(tmp_path: Path, fakes: dict[str, Any]) -> None:
    assert_one_line_error(run("index", tmp_path / "nope", "-w", tmp_path / "ws"), "nope", "no such file")


def test_error_bogus_format(tmp_path: Path, fakes: dict[str, Any]) -> None:
    result = run("index", small_corpus(tmp_path), "-w", tmp_path / "ws", "--format", "bogus")
    assert_one_line_error(result, "bogus")


def test_error_unknown_method(workspace: Path) -> None:
    result = run("query", "q", "-w", workspace, "-m", "nosuchmethod")
    line = assert_one_line_error(result, "nosuchmethod")
    assert "vanilla" in line
    assert_one_line_error(run("methods", "show", "nosuchmethod"), "nosuchmethod")


def test_error_query_missing_workspace(tmp_path: Path, fakes: dict[str, Any]) -> None:
    missing = tmp_path / "missing"
    assert_one_line_error(run("query", "q", "-w", missing, "-m", "zeroshot"), "no unirag workspace")
    assert not missing.exists()  # a query does not create a workspace
    assert_one_line_error(run("stats", "-w", missing), "no unirag workspace")


def test_error_bad_settings_file(workspace: Path) -> None:
    (workspace / "unirag.yaml").write_text("retrieval:\n  top_k: zero\n")
    assert_one_line_error(run("query", "q", "-w", workspace, "-m", "bm25"), "retrieval.top_k")


def test_error_chunk_size_change_needs_rebuild(tmp_path: Path, workspace: Path) -> None:
    corpus = tmp_path / "corpus"
    assert_one_line_error(run("index", corpus, "-w", workspace, "--chunk-size", "64", "--chunk-overlap", "8"),
                          "--rebuild")
    data = json.loads(ok("index", corpus, "-w", workspace, "--chunk-size", "64", "--chunk-overlap", "8",
                         "--rebuild", "-q", "--json").stdout)
    assert data["documents_added"] == N_DOCUMENTS


def test_failing_index_keeps_earlier_chunks(tmp_path: Path, workspace: Path) -> None:
    before = json.loads(ok("stats", "-w", workspace, "--json").stdout)
    (tmp_path / "empty").mkdir()
    # -q: this test is about the data; the progress output on errors is checked above
    assert_one_line_error(run("index", tmp_path / "empty", "-w", workspace, "-q"), "no readable documents")
    assert_one_line_error(run("index", tmp_path / "nope", "-w", workspace, "-q"), "no such file")
    after = json.loads(ok("stats", "-w", workspace, "--json").stdout)
    assert (after["documents"], after["chunks"]) == (before["documents"], before["chunks"]) == (
        N_DOCUMENTS, N_DOCUMENTS)
    assert after["artifacts"]["chunk_vectors"]["inputs"] == before["artifacts"]["chunk_vectors"]["inputs"]
    data = json.loads(ok("query", "Which archipelago is famous for cloves?", "-w", workspace, "-m", "bm25",
                         "--json").stdout)
    assert data["context"][0]["source"] == "Zanzibar"


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_chat_endpoint(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the real stack, chat built from the settings; only the embedder is a fake
    monkeypatch.setattr(cli, "_stack", lambda settings, ws: build_stack(settings, ws.cache(), embedder=HashEmbedder()))
    monkeypatch.setenv("UNIRAG_MAX_RETRIES", "0")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.perf_counter()
    result = run("query", "What is the capital of France?", "-w", workspace, "-m", "zeroshot",
                 "--chat-base-url", url, "--chat-model", "some-model")
    line = assert_one_line_error(result, "cannot reach")
    assert "127.0.0.1" in line
    assert time.perf_counter() - started < 10


def test_failing_rebuild_keeps_earlier_chunks(tmp_path: Path, workspace: Path) -> None:
    """``--rebuild`` with a mistyped source must not wipe the corpus it cannot replace."""
    assert_one_line_error(run("index", tmp_path / "typo", "-w", workspace, "--rebuild", "-q"), "no such file")
    after = json.loads(ok("stats", "-w", workspace, "--json").stdout)
    assert (after["documents"], after["chunks"]) == (N_DOCUMENTS, N_DOCUMENTS)


def test_rebuild_respects_the_write_lock(tmp_path: Path, workspace: Path) -> None:
    """``--rebuild`` while another process writes must fail without touching the corpus."""
    from unirag.workspace import Workspace

    holder = Workspace.open(workspace)
    try:
        with holder.writing():
            result = run("index", tmp_path / "corpus", "-w", workspace, "--rebuild", "-q")
            assert_one_line_error(result, "being written")
            assert holder.corpus.counts()["chunks"] == N_DOCUMENTS
    finally:
        holder.close()


def test_query_on_unindexed_workspace(tmp_path: Path, fakes: dict[str, Any]) -> None:
    ok("init", tmp_path / "ws")
    assert_one_line_error(run("query", "q", "-w", tmp_path / "ws", "-m", "vanilla"), "unirag index")


def test_methods_show_spec_file(tmp_path: Path) -> None:
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: mine\ntitle: Mine\ndescription: d\nsource: s\noperators:\n  - op: chunk.bm25\n")
    assert "chunk.bm25" in ok("methods", "show", spec).stdout
    spec.write_text("name: mine\ntitle: Mine\ndescription: d\nsource: s\noperators:\n  - op: chunk.nope\n")
    assert_one_line_error(run("methods", "show", spec), str(spec), "chunk.nope")


def test_query_stream_prints_the_answer_then_sources(workspace: Path) -> None:
    result = ok("query", "What is the capital of France?", "-w", workspace, "-m", "vanilla", "--stream")
    lines = result.stdout.splitlines()
    assert lines[0] == "Answer (VanillaRAG): paris"
    assert "Sources" in result.stdout and "LLM calls" in result.stdout


def test_query_stream_json_is_one_event_per_line(workspace: Path) -> None:
    result = ok("query", "What is the capital of France?", "-w", workspace, "-m", "vanilla", "--stream", "--json")
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [event["event"] for event in events] == ["delta", "delta", "done"]
    assert "".join(event["data"]["text"] for event in events[:-1]) == events[-1]["data"]["raw_answer"] == "paris"
    assert events[-1]["data"]["context"] and events[-1]["data"]["usage"]["llm_calls"] == 1
