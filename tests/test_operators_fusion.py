"""Reciprocal rank fusion (``chunk.rrf``) and the ``hybrid`` method built on it.

The operator is checked on hand-built ranked lists whose RRF order is worked out by hand
(k = 60), ties included; the method end to end on the HotpotQA sample of tests/data, where its
context must be the fusion of what the dense and the BM25 steps found on their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
import pytest

from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import MethodSpec, builtin_methods, resolve_method
from unirag.operators.context import ContextItem
from unirag.operators.fusion import RRF_K, chunk_rrf, reciprocal_rank_fusion
from unirag.operators.registry import operator_registry
from unirag.pipeline import run_index
from unirag.workspace import Workspace

HOTPOT = SAMPLE_DATASETS / "hotpotqa"


def test_rrf_order_worked_out_by_hand() -> None:
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63 (k = 60, ranks from 1)
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]])
    assert [key for key, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62) and fused[3][1] == pytest.approx(1 / 63)
    assert RRF_K == 60


def test_rrf_ties_are_broken_by_best_rank_then_id_whatever_the_list_order() -> None:
    # x and y: 1/61 + 1/62 each, both best at rank 1 -> by id; q and s: 1/63 each, rank 3 -> by id.
    lists = [["y", "x", "q"], ["x", "y", "s"]]
    assert [key for key, _ in reciprocal_rank_fusion(lists)] == ["x", "y", "q", "s"]
    assert reciprocal_rank_fusion(lists) == reciprocal_rank_fusion(lists[::-1])
    # Equal scores from different ranks (k = 1): m and p at rank 1 once = 1/2, n at rank 3 twice =
    # 1/4 + 1/4 = 1/2: the better best rank goes first (m, p by id), then n.
    assert [key for key, _ in reciprocal_rank_fusion([["m", "o", "n"], ["p", "r", "n"]], k=1)][:3] == ["m", "p", "n"]


def test_rrf_counts_an_id_once_per_list_and_a_larger_k_flattens() -> None:
    assert reciprocal_rank_fusion([["a", "a", "b"]]) == [("a", pytest.approx(1 / 61)), ("b", pytest.approx(1 / 63))]
    # Agreement between lists beats one list's top hit: w (rank 2 twice) = 2/62 > z (rank 1 once) = 1/61.
    lists = [["z", "w"], ["v", "w"]]
    assert [key for key, _ in reciprocal_rank_fusion(lists, k=60)][0] == "w"


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    ws, settings, embedder = build_hand_graph(tmp_path_factory.mktemp("fusion-ops") / "ws")
    chunks = {title: chunk_id_of(ws, title) for title in ("Marie Curie", "Pierre Curie", "Warsaw", "Paris")}
    return ws, settings, embedder, chunks


def _listed(operator: str, ids: list[str]) -> tuple[str, list[ContextItem]]:
    return operator, [ContextItem("chunk", cid, "text", 1.0 / (i + 1), "src", operator=operator)
                      for i, cid in enumerate(ids)]


def test_chunk_rrf_fuses_the_earlier_chunk_lists(hand) -> None:
    ws, settings, embedder, chunks = hand
    marie, pierre, warsaw, paris = (chunks[t] for t in ("Marie Curie", "Pierre Curie", "Warsaw", "Paris"))
    state = query_state(ws, settings, "Who discovered radium?", embedder)
    state.ranked_lists = [
        _listed("chunk.vdb", [marie, pierre, warsaw]),
        ("relationship.vdb", [ContextItem("relationship", "r1", "t", 1.0, "s")]),  # not a chunk list: ignored
        _listed("chunk.bm25", [warsaw, marie, paris]),
    ]
    items = chunk_rrf(state, top_k=3)
    # marie 1/61 + 1/62, warsaw 1/63 + 1/61, pierre 1/62, paris 1/63
    assert [item.id for item in items] == [marie, warsaw, pierre]
    assert all(item.kind == "chunk" and item.operator == "chunk.rrf" for item in items)
    assert items[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert items[0].provenance["ranks"] == {"chunk.vdb": 1, "chunk.bm25": 2}
    assert list(state.chunks) == [marie, warsaw, pierre]
    assert [item.id for item in chunk_rrf(state, top_k=0)] == [marie, warsaw, pierre, paris]


def test_chunk_rrf_with_no_lists_returns_nothing(hand) -> None:
    ws, settings, embedder, _ = hand
    state = query_state(ws, settings, "Who discovered radium?", embedder)
    assert chunk_rrf(state) == [] and state.chunks == {}
    spec = operator_registry()["chunk.rrf"]
    assert spec.kind == "chunk" and dict(spec.params) == {"top_k": 4, "k": 60}


# -- the hybrid method on tests/data ---------------------------------------------------------


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, object, HashEmbedder]]:
    ws = Workspace.init(tmp_path_factory.mktemp("hybrid") / "ws")
    settings = make_settings(ws.root)
    embedder = HashEmbedder()
    run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, fake_stack(settings, ws, embedder=embedder),
              graphs=[])
    yield ws, settings, embedder
    ws.close()


def _run(hotpot, spec: MethodSpec, question: str):
    ws, settings, embedder = hotpot
    return MethodRunner(ws, settings, fake_stack(settings, ws, chat=ScriptedChat(), embedder=embedder)).run(
        spec, question)


def _single(op: str) -> MethodSpec:
    return MethodSpec.model_validate({"name": op, "title": op, "description": "one step", "source": "test",
                                      "question": ["embedding"], "operators": [{"op": op, "params": {"top_k": 20}}]})


def test_hybrid_is_the_rrf_of_dense_and_bm25_offline(hotpot) -> None:
    question = json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))[0]["question"]
    result = _run(hotpot, resolve_method("hybrid"), question)
    dense = [item.id for item in _run(hotpot, _single("chunk.vdb"), question).context]
    lexical = [item.id for item in _run(hotpot, _single("chunk.bm25"), question).context]
    expected = [key for key, _ in reciprocal_rank_fusion([dense, lexical])][:4]
    assert [item.id for item in result.context] == expected
    assert {item.operator for item in result.context} == {"chunk.rrf"}
    assert set(dense) != set(lexical)  # the two lists differ, so the fusion is not one of them
    assert result.answer.strip() and result.usage()["llm_calls"] == 1
    assert result.conversions == ["embedding"]  # no chat-model conversion: the zero-LLM path


def test_hybrid_is_a_shipped_method() -> None:
    spec = builtin_methods()["hybrid"]
    assert [call.op for call in spec.calls()] == ["chunk.vdb", "chunk.bm25", "chunk.rrf"]
    assert spec.requires() == ["chunk_vectors", "chunk_bm25"] and spec.group == "Passages"
    assert "Cormack" in spec.source


def test_unirag_methods_lists_hybrid_and_the_rerank_variants() -> None:
    from typer.testing import CliRunner

    import unirag.cli as cli

    listed = CliRunner().invoke(cli.app, ["methods"])
    assert listed.exit_code == 0, listed.stderr
    for name in ("hybrid", "hybrid-rerank", "vanilla-rerank", "hipporag2-rerank", "linearrag-rerank"):
        assert name in listed.stdout
