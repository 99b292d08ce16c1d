"""A query embedder whose vectors do not fit the index is one clear line, as a changed model name is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from test_cli import assert_one_line_error, ok, run

import unirag.cli as cli
from unirag.llm.factory import build_stack


def _index_then_query_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query_embedder: HashEmbedder) -> Any:
    embedders = iter([HashEmbedder(), query_embedder])
    monkeypatch.setattr(cli, "_stack", lambda settings, ws: build_stack(
        settings, ws.cache(), chat=ScriptedChat(), embedder=next(embedders)))
    ws = tmp_path / "ws"
    ok("index", small_corpus(tmp_path), "-w", ws, "-q")
    return run("query", "Where does the quokka live?", "-w", ws, "-m", "vanilla")


def test_another_model_name_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _index_then_query_with(tmp_path, monkeypatch, HashEmbedder(name="hash-other"))
    assert_one_line_error(result, "'chunk_vectors' was embedded with hash-bow-64", "hash-other",
                          "unirag index --rebuild")


def test_same_model_name_other_dimension_is_the_same_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _index_then_query_with(tmp_path, monkeypatch, HashEmbedder(dim=32))
    assert_one_line_error(result, "'chunk_vectors' was embedded with", "64", "32", "unirag index --rebuild")
