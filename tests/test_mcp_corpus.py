"""The MCP corpus tools (add_text, add_files, delete_documents, list_documents, stats) over
stdio, through the ``mcp`` package's own client, against a real ``unirag mcp`` process on the
scripted model (tests/mcp_launcher.py): writes land, replace, and stay inside the files root."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import small_corpus
from server_harness import scripted_rag

from unirag import UniRAG, package_version

pytest.importorskip("mcp")

TESTS = Path(__file__).resolve().parent
WRITE_TOOLS = {"add_text", "add_files", "delete_documents", "list_documents", "stats"}
WOMBAT = "The wombat is a burrowing marsupial of Australia whose droppings are cube shaped."
OKAPI = "The okapi is a forest giraffe of the Congo with striped legs like a zebra."

Session = Any
Script = Callable[[Session], Awaitable[Any]]


def run_session(workspace: Path, files_root: Path, script: Script, env: dict[str, str] | None = None) -> Any:
    """Start ``unirag mcp`` (scripted models) on ``workspace``, initialize, run ``script(session)``;
    ``env``: added to this process's environment."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main() -> Any:
        params = StdioServerParameters(command=sys.executable, cwd=str(TESTS.parent),
                                       args=[str(TESTS / "mcp_launcher.py"), str(workspace), str(files_root)],
                                       env={**os.environ, **(env or {})})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            return initialized, await script(session)

    return asyncio.run(main())


def result(called: Any) -> dict[str, Any]:
    assert not called.is_error, called.content[0].text
    return called.structured_content


def error_line(called: Any) -> str:
    assert called.is_error
    text = called.content[0].text
    assert "\n" not in text.strip(), text
    return text


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
    return tmp_path / "ws"


def test_initialize_names_the_version_and_lists_the_corpus_tools(workspace: Path, tmp_path: Path) -> None:
    async def script(session: Session) -> set[str]:
        return {tool.name for tool in (await session.list_tools()).tools}

    initialized, tools = run_session(workspace, tmp_path, script)
    assert initialized.server_info.version == package_version() and initialized.server_info.version
    assert tools >= WRITE_TOOLS | {"query", "retrieve", "list_methods"}


def test_add_text_is_found_by_a_query_and_its_source_replaces(workspace: Path, tmp_path: Path) -> None:
    notes: list[tuple[float, str | None]] = []

    async def script(session: Session) -> tuple[Any, ...]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            notes.append((progress, message))

        added = await session.call_tool("add_text", {"text": WOMBAT, "title": "Wombat", "source": "notes/wombat"},
                                        progress_callback=on_progress)
        found = await session.call_tool("retrieve", {"question": "Which marsupial has cube shaped droppings?",
                                                     "top_k": 1})
        again = await session.call_tool("add_text", {"text": OKAPI, "title": "Okapi", "source": "notes/wombat"})
        listed = await session.call_tool("list_documents", {"limit": 1000})
        empty = await session.call_tool("add_text", {"text": "   "})
        return added, found, again, listed, empty

    _, (added, found, again, listed, empty) = run_session(workspace, tmp_path, script)
    assert result(added)["documents_added"] == 1 and result(added)["chunks_added"] >= 1
    counts = [progress for progress, _ in notes]  # the index job's steps, as a count that only grows
    assert notes and counts == sorted(set(counts)) and all(message for _, message in notes)
    assert result(found)["context"][0]["source"] == "Wombat"
    assert result(again)["documents_added"] == 1 and result(again)["documents_removed"] == 1
    titles = {doc["title"]: doc for doc in result(listed)["documents"]}
    assert "Wombat" not in titles and titles["Okapi"]["sources"] == ["#notes/wombat"]
    assert "empty" in error_line(empty)


def test_add_files_inside_the_root_and_an_edited_file_replaces(workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "files"
    (root / "sub").mkdir(parents=True)
    note = root / "sub" / "wombat.txt"
    note.write_text(WOMBAT, encoding="utf-8")

    async def script(session: Session) -> tuple[Any, ...]:
        first = await session.call_tool("add_files", {"paths": ["sub/wombat.txt"]})
        note.write_text(OKAPI, encoding="utf-8")
        edited = await session.call_tool("add_files", {"paths": [str(note)]})
        same = await session.call_tool("add_files", {"paths": ["sub/wombat.txt"]})
        listed = await session.call_tool("list_documents", {"limit": 1000})
        return first, edited, same, listed

    _, (first, edited, same, listed) = run_session(workspace, root, script)
    assert result(first)["documents_added"] == 1
    assert result(edited)["documents_added"] == 1 and result(edited)["documents_removed"] == 1
    assert result(same)["documents_added"] == 0 and result(same)["already_indexed"] == 1
    recorded = [doc for doc in result(listed)["documents"] if str(note.resolve()) in doc["sources"]]
    assert len(recorded) == 1 and recorded[0]["sources"] == [str(note.resolve())]


def test_add_files_refuses_paths_outside_the_root(workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("a secret the agent must not read", encoding="utf-8")
    (root / "link.txt").symlink_to(outside)
    (root / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    (root / "here.txt").write_text(WOMBAT, encoding="utf-8")

    async def script(session: Session) -> list[Any]:
        calls = [await session.call_tool("add_files", {"paths": [path]})
                 for path in ("/etc/passwd", "../secret.txt", "link.txt", "linked_dir/secret.txt")]
        calls.append(await session.call_tool("add_files", {"paths": ["here.txt", "../secret.txt"]}))
        calls.append(await session.call_tool("add_files", {"paths": ["missing.txt"]}))
        calls.append(await session.call_tool("list_documents", {"limit": 1000}))
        return calls

    _, calls = run_session(workspace, root, script)
    *refused, missing, listed = calls
    for called in refused:
        assert "outside the files root" in error_line(called)
    assert "no such file" in error_line(missing)
    shown = json.dumps(result(listed))
    assert "secret" not in shown and "wombat" not in shown.lower()  # nothing of a refused call was added


def test_delete_documents_by_id_and_source_and_unknown(workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "okapi.txt").write_text(OKAPI, encoding="utf-8")

    async def script(session: Session) -> tuple[Any, ...]:
        await session.call_tool("add_text", {"text": WOMBAT, "title": "Wombat", "source": "wombat"})
        await session.call_tool("add_files", {"paths": ["okapi.txt"]})
        before = result(await session.call_tool("list_documents", {"limit": 1000}))
        unknown = await session.call_tool("delete_documents", {"targets": ["#wombat", "doc-nope"]})
        by_source = await session.call_tool("delete_documents", {"targets": ["#wombat", "okapi.txt"]})
        first = before["documents"][0]["id"]
        by_id = await session.call_tool("delete_documents", {"targets": [first]})
        after = result(await session.call_tool("list_documents", {"limit": 1000}))
        return before, unknown, by_source, by_id, after

    _, (before, unknown, by_source, by_id, after) = run_session(workspace, root, script)
    assert "doc-nope" in error_line(unknown)
    assert result(by_source)["documents_removed"] == 2
    assert result(by_id)["documents_removed"] == 1
    assert after["total"] == before["total"] - 3
    left = {doc["id"] for doc in after["documents"]}
    assert before["documents"][0]["id"] not in left
    assert not any(doc["title"] in {"Wombat", "okapi"} for doc in after["documents"])


def test_list_documents_pages_and_stats_count(workspace: Path, tmp_path: Path) -> None:
    with UniRAG(workspace, create=False) as rag:
        expected = [doc.to_json() for doc in rag.documents()]

    async def script(session: Session) -> tuple[Any, ...]:
        page = await session.call_tool("list_documents", {"limit": 2, "offset": 1})
        wrong = await session.call_tool("list_documents", {"limit": 0})
        stats = await session.call_tool("stats", {})
        return page, wrong, stats

    _, (page, wrong, stats) = run_session(workspace, tmp_path, script)
    assert result(page) == {"total": len(expected), "offset": 1, "documents": expected[1:3]}
    assert "limit" in error_line(wrong)
    assert result(stats)["documents"] == len(expected)


def test_a_write_while_another_process_writes_is_one_line(workspace: Path, tmp_path: Path) -> None:
    """Another process holding the workspace's write lock: the tool waits ``build_wait``, then says so."""
    with UniRAG(workspace, create=False) as holder, holder_lock(holder):
        async def script(session: Session) -> Any:
            return await session.call_tool("add_text", {"text": WOMBAT})

        _, busy = run_session(workspace, tmp_path, script, env={"UNIRAG_RETRIEVAL_BUILD_WAIT": "0.5"})
    assert "being written" in error_line(busy)


def holder_lock(rag: UniRAG) -> Any:
    """The workspace's write lock, as another ``unirag index`` holds it (a test's own reach)."""
    return rag.workspace.writing()


def test_the_cli_serves_the_tools_with_its_files_root(workspace: Path, tmp_path: Path) -> None:
    """``unirag mcp --files-root DIR`` itself (no model is called: nothing here indexes or asks)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root = tmp_path / "files"
    root.mkdir()

    async def main() -> tuple[Any, ...]:
        params = StdioServerParameters(command=sys.executable, cwd=str(tmp_path),
                                       args=["-m", "unirag", "mcp", "-w", str(workspace), "--files-root", str(root)],
                                       env={**os.environ, "PYTHONPATH": str(TESTS.parent)})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            refused = await session.call_tool("add_files", {"paths": [str(tmp_path / "ws" / "unirag.yaml")]})
            listed = await session.call_tool("list_documents", {})
            return initialized, tools, refused, listed

    initialized, tools, refused, listed = asyncio.run(main())
    assert initialized.server_info.version == package_version()
    assert WRITE_TOOLS <= tools
    assert "outside the files root" in error_line(refused)  # the workspace lies outside DIR
    assert result(listed)["total"] == len(result(listed)["documents"]) > 0
    missing = subprocess.run([sys.executable, "-m", "unirag", "mcp", "-w", str(workspace), "--files-root",
                              str(tmp_path / "nope")], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": str(TESTS.parent)}, timeout=120)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
