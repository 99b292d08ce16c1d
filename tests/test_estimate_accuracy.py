"""Issue 32: the cost estimate of a build is within 30 % of what the build asks, and a query
never starts a paid build unasked (``build=None``), while free builds and ``build=True`` run.

The estimate is checked against the scripted model of tests/fakes.py (replies the way an
extractor names entities, tokens counted as a server reports them) on the HotpotQA and 2Wiki
cuts of tests/data; the 200-passage HotpotQA and 1,000-passage 2Wiki runs are
bench/estimate_accuracy.py (too slow for the suite on two cores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dev_sets import SAMPLE_DATASETS
from fakes import HashEmbedder, ScriptedChat, TokenCountedChat, make_settings
from typer.testing import CliRunner

import unirag.cli as cli
from unirag.api import UniRAG
from unirag.errors import PaidBuildError, WorkspaceError
from unirag.llm.factory import build_stack
from unirag.pipeline import estimate_index, run_index
from unirag.workspace import Workspace

HIERARCHIES = ["communities:graphrag", "communities:archrag", "communities:hygrag", "communities:leanrag", "tree"]
PAID = {"chat__base_url": "http://127.0.0.1:9/v1", "chat__model": "paid-model"}


def passages_file(tmp_path: Path, dataset: str) -> Path:
    """The dataset cut's passages as one JSON-lines file (one document per passage)."""
    path = SAMPLE_DATASETS / dataset / f"{dataset}_{'train_' if dataset == 'hotpotqa' else ''}corpus.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    records = ([{"title": title, "text": "".join(sentences)} for title, sentences in data.items()]
               if isinstance(data, dict) else [{"title": item["title"], "text": item["text"]} for item in data])
    out = tmp_path / f"{dataset}.jsonl"
    out.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return out


def within(estimated: float, actual: float, share: float = 0.3) -> bool:
    return (1 - share) * actual <= estimated <= (1 + share) * actual


@pytest.mark.parametrize("dataset", ["hotpotqa", "2wikimultihopqa"])
def test_a_full_build_costs_what_was_estimated(tmp_path: Path, dataset: str) -> None:
    # Every paid step kind: extraction with gleaning, GraphRAG reports per level, the
    # ArchRAG, HyGRAG, LeanRAG and RAPTOR-tree summaries of every level.
    source = passages_file(tmp_path, dataset)
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root, graph__extractor="llm", index__summarizer="llm", graph__gleaning=1)
    estimate = estimate_index(ws, [source], settings, TokenCountedChat(), graphs=["kg"], artifacts=HIERARCHIES)
    chat = TokenCountedChat()
    report = run_index(ws, [source], settings, build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder()),
                       graphs=["kg"], artifacts=HIERARCHIES)
    actual = report.ledger.total()
    assert actual.llm_calls == chat.calls > 0
    steps = {step.step: step for step in estimate.steps}
    assert set(steps) == {"extract", *HIERARCHIES}
    assert within(estimate.calls, actual.llm_calls), (estimate.to_json(), actual)
    assert within(estimate.prompt_tokens, actual.prompt_tokens), (estimate.to_json(), actual)
    by_stage: dict[str, int] = {}
    for request in chat.requests:
        by_stage[request.stage] = by_stage.get(request.stage, 0) + 1
    made = {"extract": by_stage["build.extract"] + by_stage["build.extract.glean_check"],
            "communities:graphrag": by_stage["index.graphrag.report"],
            "communities:archrag": by_stage["index.archrag.summarize"],
            "communities:hygrag": by_stage["index.hygrag.summarize"],
            "communities:leanrag": by_stage["index.leanrag.aggregate_entity"]
            + by_stage["index.leanrag.aggregate_relation"],
            "tree": by_stage["build.tree.summarize"]}
    for name, calls in made.items():  # each step, not only the sum
        assert within(steps[name].calls, calls, 0.4), (name, steps[name], calls)


def _paid_rag(tmp_path: Path, chat: ScriptedChat, **overrides: Any) -> UniRAG:
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root, graph__extractor="llm", index__summarizer="llm", **overrides)
    rag = UniRAG.attach(ws, settings, build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder()))
    rag.index(passages_file(tmp_path, "hotpotqa"))
    return rag


def test_a_query_never_starts_a_paid_build_unasked(tmp_path: Path) -> None:
    chat = ScriptedChat()
    with _paid_rag(tmp_path, chat, **PAID) as rag:
        before = chat.calls
        with pytest.raises(PaidBuildError) as refused:
            rag.query("Who designed Demon Dice?", "archrag")
        line = str(refused.value)
        assert "\n" not in line and "build=True" in line and "--for archrag" in line
        assert f"about {refused.value.estimate.calls} LLM calls" in line and refused.value.estimate.calls > 0
        assert chat.calls == before  # nothing was asked of the paid model
        with pytest.raises(WorkspaceError, match="no-build"):
            rag.query("Who designed Demon Dice?", "archrag", build=False)
        result = rag.query("Who designed Demon Dice?", "archrag", build=True)
        assert "communities:archrag" in result.refreshed and chat.calls > before
        rag.query("Who designed Demon Dice?", "archrag")  # built now: nothing to ask


def test_free_builds_run_without_asking(tmp_path: Path) -> None:
    chat = ScriptedChat()
    with _paid_rag(tmp_path, chat) as rag:  # no chat endpoint: the embedded/zero-LLM side is free
        assert rag.query("Who designed Demon Dice?", "archrag").refreshed
    with _paid_rag(tmp_path / "paid", ScriptedChat(), **PAID) as rag:  # a paid model, but a build that asks it nothing
        rag.index(graphs="kg")  # an index call is the explicit build
        assert "entity_vectors" in rag.query("Who designed Demon Dice?", "lightrag", build=None).refreshed


def test_index_for_builds_what_the_methods_need_after_its_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 cli_scripted_chats: list[ScriptedChat]) -> None:
    runner, ws = CliRunner(), tmp_path / "ws"
    paid = ["--chat-base-url", "http://127.0.0.1:9/v1", "--chat-model", "paid-model"]
    source = passages_file(tmp_path, "hotpotqa")
    assert runner.invoke(cli.app, ["index", str(source), "-w", str(ws), *paid, "-q"]).exit_code == 0
    refused = runner.invoke(cli.app, ["query", "Who designed Demon Dice?", "-w", str(ws), *paid, "-m", "archrag"])
    assert refused.exit_code != 0 and "--build" in refused.stderr and "LLM calls" in refused.stderr
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    declined = runner.invoke(cli.app, ["query", "Who designed Demon Dice?", "-w", str(ws), *paid, "-m", "archrag"],
                             input="n\n")
    assert declined.exit_code == 1 and "continue?" in declined.stderr and "LLM calls" in declined.stderr
    built = runner.invoke(cli.app, ["index", "-w", str(ws), *paid, "--for", "archrag,leanrag", "--yes", "-q",
                                    "--json"])
    assert built.exit_code == 0, built.stderr
    assert "estimate: about" in built.stderr
    assert {"communities:archrag", "communities:leanrag"} <= set(json.loads(built.stdout)["rebuilt"])
    answered = runner.invoke(cli.app, ["query", "Who designed Demon Dice?", "-w", str(ws), *paid, "-m", "archrag"])
    assert answered.exit_code == 0 and "continue?" not in answered.stderr, answered.stderr
