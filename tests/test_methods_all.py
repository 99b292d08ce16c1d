"""Every shipped method, end to end on HotpotQA dev passages with the scripted model.

One workspace (module scope) over the 40 real HotpotQA passages of tests/data (the contexts
of its 4 questions): extraction by the scripted model, every artifact built through the
registry (LLM summaries from the scripted model), then each method answers one of those
questions and must return context of the kinds it promises. The sample ships with the
repository, so a bare clone runs every method.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, OverlapReranker, ScriptedChat, fake_stack, make_settings
from unirag.artifacts.registry import BuildContext, ensure_artifacts
from unirag.llm.base import UsageLedger
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import builtin_methods
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

HOTPOT = SAMPLE_DATASETS / "hotpotqa"

# What each method promises to put in the context (survey Table 3 and each spec's source).
PROMISED: dict[str, set[str]] = {
    "zeroshot": set(), "cot": set(),
    "bm25": {"chunk"}, "vanilla": {"chunk"}, "hybrid": {"chunk"},
    "hybrid-rerank": {"chunk"}, "vanilla-rerank": {"chunk"},
    "hipporag": {"chunk"}, "fastgraphrag": {"relationship", "chunk"},
    "hipporag2": {"chunk"}, "linearrag": {"chunk"}, "hipporag2-rerank": {"chunk"}, "linearrag-rerank": {"chunk"},
    "g-retriever": {"subgraph"}, "tog": {"relationship", "entity"}, "dalk": {"path"},
    "lgraphrag": {"entity", "relationship", "chunk", "community"},
    "ggraphrag": {"community"}, "ggraphrag-c0": {"community"}, "ggraphrag-c1": {"community"},
    "ggraphrag-c3": {"community"},
    "llightrag": {"entity", "relationship", "chunk"}, "glightrag": {"relationship", "entity", "chunk"},
    "hlightrag": {"entity", "relationship", "chunk"},
    "graphrag-er": {"entity", "relationship"}, "graphrag-cc": {"community", "chunk"},
    "vgraphrag-cc": {"community", "chunk"}, "vgraphrag": {"entity", "relationship", "community", "chunk"},
    "cheaprag": {"community", "chunk"}, "graphrag-ac": {"entity", "relationship", "chunk", "community"},
    "kgp": {"chunk"}, "archrag": {"entity", "community"}, "archrag-direct": {"entity", "community"},
    "archrag-entity-only": {"entity"}, "archrag-single-layer": {"entity", "community"},
    "archrag-spectral": {"entity", "community"}, "archrag-spectral-noaug": {"entity", "community"},
    "archrag-leiden": {"entity", "community"},
    "hygrag": {"entity"},  # + communities and/or chunks: one joint top-k over both (Algorithm 2)
    "leanrag": {"community", "chunk"},
    "raptor": set(), "raptor-k": set(),  # chunks and/or tree summaries: at least one of them (below)
}
PROMISED_ANY = {"raptor": {"chunk", "tree_node"}, "raptor-k": {"chunk", "tree_node"},
                "hygrag": {"community", "chunk"}}


def _points(_: str) -> str:
    return json.dumps({"points": [{"description": "Scripted point from the context.", "score": 60}]})


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, object, HashEmbedder]]:
    root = tmp_path_factory.mktemp("all-methods")
    ws = Workspace.init(root / "ws")
    settings = make_settings(ws.root, graph__extractor="llm", graph__gleaning=0, index__summarizer="llm",
                             index__archrag={"min_nodes": 5}, concurrency=2)
    embedder = HashEmbedder()
    chat = ScriptedChat(answers={"map_answer": _points, "filter_points": _points})
    stack = fake_stack(settings, ws, chat=chat, embedder=embedder)
    run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, stack, graphs=["kg", "tree", "pg", "hybrid"])
    needed = sorted({a for spec in builtin_methods().values() for a in spec.requires()})
    ensure_artifacts(BuildContext(ws, settings, stack.accounted(UsageLedger()), Progress()), needed)
    yield ws, settings, embedder
    ws.close()


@pytest.fixture(scope="module")
def question() -> str:
    """The sample's first question: its supporting passages are in the workspace."""
    return json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))[0]["question"]


@pytest.mark.parametrize("method", sorted(builtin_methods()))
def test_method_answers_with_its_promised_context(workspace, question: str, method: str) -> None:
    ws, settings, embedder = workspace
    spec = builtin_methods()[method]
    chat = ScriptedChat(answers={"map_answer": _points, "filter_points": _points})
    reranker = OverlapReranker()
    runner = MethodRunner(ws, settings, fake_stack(settings, ws, chat=chat, embedder=embedder, reranker=reranker))
    result = runner.run(spec, question)
    assert result.answer.strip()
    kinds = {item.kind for item in result.context}
    promised = PROMISED.get(method)
    assert promised is not None, f"add {method} to PROMISED"
    assert promised <= kinds, f"{method}: promised {sorted(promised)}, got {sorted(kinds)}"
    if method in PROMISED_ANY:
        assert kinds & PROMISED_ANY[method], f"{method}: got {sorted(kinds)}"
    assert all(item.text.strip() for item in result.context)
    # A method that reranks asked the cross-encoder once, and its usage shows it.
    reranks = any(call.op == "context.rerank" for call in spec.calls())
    assert len(reranker.calls) == int(reranks) and result.usage()["rerank_calls"] == int(reranks)
    data = result.to_json()
    assert any(key.startswith("operator.") for key in data["timings"]) or not spec.operators
    # No chat endpoint configured: the LLM question conversions ran as their zero-LLM twins.
    assert not set(data["conversions"]) & {"entities", "keywords"}
    json.dumps(data)
