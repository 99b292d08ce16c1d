"""Concurrent queries that need a missing artifact: one builds it, the others wait, all answer.

Issue 17: seven of eight such queries failed at once with the workspace write-lock error.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings, small_corpus

from unirag.errors import WorkspaceError
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import resolve_method
from unirag.pipeline import prepare_query, run_index
from unirag.workspace import Workspace

N_QUERIES = 8
METHOD = "graphrag-er"  # needs the kg graph and entity_vectors, which plain indexing does not build


@pytest.fixture
def chunks_only(tmp_path: Path) -> Path:
    """A workspace with chunks and chunk indices only; the LLM extractor builds graphs."""
    root = tmp_path / "ws"
    Workspace.init(root, "graph:\n  extractor: llm\n").close()
    ws = Workspace.open(root)
    try:
        settings = make_settings(root)
        run_index(ws, [small_corpus(tmp_path)], settings, fake_stack(settings, ws))
    finally:
        ws.close()
    return root


def _query(root: Path, start: threading.Barrier, notes: list[str], out: dict[int, Any], number: int) -> None:
    ws = Workspace.open(root)
    try:
        settings = make_settings(root)
        stack = fake_stack(settings, ws, chat=ScriptedChat(delay=0.1), embedder=HashEmbedder())
        spec = resolve_method(METHOD)
        start.wait()
        built = prepare_query(ws, settings, stack, spec.requires(), note=notes.append)
        result = MethodRunner(ws, settings, stack).run(spec, "Where does the quokka live?")
        out[number] = (built, result.answer)
    except BaseException as exc:  # the test reports it
        out[number] = exc
    finally:
        ws.close()


def test_eight_concurrent_queries_build_once_and_all_answer(chunks_only: Path) -> None:
    start = threading.Barrier(N_QUERIES)
    notes: list[str] = []
    out: dict[int, Any] = {}
    threads = [threading.Thread(target=_query, args=(chunks_only, start, notes, out, n)) for n in range(N_QUERIES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    failures = {n: got for n, got in out.items() if isinstance(got, BaseException)}
    assert not failures, failures
    assert len(out) == N_QUERIES
    builders = [built for built, _ in out.values() if built]
    assert len(builders) == 1 and "entity_vectors" in builders[0]
    assert all(answer for _, answer in out.values())
    assert notes and all("waiting for it" in note and "retrieval.build_wait" in note for note in notes)
    ws = Workspace.open(chunks_only)
    try:
        assert ws.manifest.stale_artifacts() == {} and ws.manifest.entry("entity_vectors") is not None
    finally:
        ws.close()


@pytest.mark.parametrize("build_wait", [0.0, 0.3])
def test_a_query_waits_only_up_to_build_wait(chunks_only: Path, build_wait: float) -> None:
    holder, ws = Workspace.open(chunks_only), Workspace.open(chunks_only)
    notes: list[str] = []
    try:
        settings = make_settings(chunks_only, retrieval__build_wait=build_wait)
        stack = fake_stack(settings, ws)
        with holder.writing():
            tick = time.monotonic()
            with pytest.raises(WorkspaceError, match="being written by another unirag process") as info:
                prepare_query(ws, settings, stack, resolve_method(METHOD).requires(), note=notes.append)
            waited = time.monotonic() - tick
    finally:
        holder.close()
        ws.close()
    assert "\n" not in str(info.value)
    if build_wait:
        assert waited >= build_wait and len(notes) == 1 and "retrieval.build_wait" in str(info.value)
    else:
        assert waited < 0.3 and notes == []
