"""One end-to-end run with the real embedded models (MiniLM + SmolLM2), no fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from unirag.cli import app

PASSAGES = [
    {"title": "Eiffel Tower", "text": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France, completed in 1889."},
    {"title": "Great Barrier Reef", "text": "The Great Barrier Reef is the world's largest coral reef system, off Queensland, Australia."},
    {"title": "Mount Kilimanjaro", "text": "Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa."},
    {"title": "Amazon River", "text": "The Amazon River in South America is the largest river in the world by discharge volume."},
    {"title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in 1928 at St Mary's Hospital in London."},
]


@pytest.mark.slow
def test_embedded_models_index_and_query(tmp_path: Path) -> None:
    source = tmp_path / "passages.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES), encoding="utf-8")
    ws = tmp_path / "ws"
    runner = CliRunner()

    result = runner.invoke(app, ["index", str(source), "-w", str(ws), "-q", "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    report = json.loads(result.stdout)
    assert report["documents_added"] == 5 and report["chunks_added"] == 5
    assert report["embedding_calls"] >= 1

    args = ["query", "Who discovered penicillin?", "-w", str(ws), "-m", "vanilla", "--max-tokens", "32", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    data = json.loads(result.stdout)
    assert isinstance(data["answer"], str) and data["answer"].strip()
    assert data["context"][0]["source"] == "Penicillin"
    assert len(data["context"]) == 4
    assert data["usage"]["llm_calls"] == 1
    assert data["usage"]["completion_tokens"] <= 32

    again = runner.invoke(app, args)
    assert again.exit_code == 0, (again.stdout, again.stderr, again.exception)
    cached = json.loads(again.stdout)
    assert cached["usage"]["llm_calls"] == 0
    assert cached["usage"]["cache_hits"] == 1
    assert cached["answer"] == data["answer"]
