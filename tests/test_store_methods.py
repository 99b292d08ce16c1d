"""Every shipped method answers the same on the SQLite and the PostgreSQL store.

Two workspaces over the same 40 HotpotQA passages (tests/data), built the same way (the
scripted model extracts, every artifact through the registry): one in ``store.sqlite`` with
hnswlib files, one in a PostgreSQL schema with pgvector tables and artifact blobs. Each
method then answers the same question on both, and the context must hold the same items
in the same order: the store is a place to keep things, never a change of results.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import schema_url
from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, OverlapReranker, ScriptedChat, fake_stack, make_settings
from unirag.config import Settings
from unirag.artifacts.registry import BuildContext, ensure_artifacts
from unirag.llm.base import UsageLedger
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import builtin_methods
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

HOTPOT = SAMPLE_DATASETS / "hotpotqa"
Built = tuple[Workspace, Settings, HashEmbedder]


def _points(_: str) -> str:
    return json.dumps({"points": [{"description": "Scripted point from the context.", "score": 60}]})


def _chat() -> ScriptedChat:
    return ScriptedChat(answers={"map_answer": _points, "filter_points": _points})


def _build(root: object, store: str) -> Built:
    ws = Workspace.init(root, store=store)  # type: ignore[arg-type]
    settings = make_settings(ws.root, store=store, graph__extractor="llm", graph__gleaning=0,
                             index__summarizer="llm", index__archrag={"min_nodes": 5}, concurrency=2)
    embedder = HashEmbedder()
    stack = fake_stack(settings, ws, chat=_chat(), embedder=embedder)
    run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, stack, graphs=["kg", "tree", "pg", "hybrid"])
    needed = sorted({a for spec in builtin_methods().values() for a in spec.requires()})
    ensure_artifacts(BuildContext(ws, settings, stack.accounted(UsageLedger()), Progress()), needed)
    return ws, settings, embedder


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, postgres_server: str) -> Iterator[dict[str, Built]]:
    root = tmp_path_factory.mktemp("both-stores")
    built = {"sqlite": _build(root / "sqlite", "sqlite"),
             "postgresql": _build(root / "postgres", schema_url(postgres_server, f"m_{uuid.uuid4().hex[:10]}"))}
    yield built
    for ws, _, _ in built.values():
        ws.close()


@pytest.fixture(scope="module")
def question() -> str:
    return json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))[0]["question"]


def test_both_stores_hold_the_same_tables_and_artifacts(stores: dict[str, Built]) -> None:
    from unirag.graph.graph_store import GraphStore
    from unirag.hierarchy.community_store import CommunityStore

    sqlite_ws, postgres_ws = stores["sqlite"][0], stores["postgresql"][0]
    assert postgres_ws.location.is_postgres and not sqlite_ws.location.is_postgres
    assert sqlite_ws.corpus.counts() == postgres_ws.corpus.counts()
    assert GraphStore(sqlite_ws).graph_counts() == GraphStore(postgres_ws).graph_counts()
    assert CommunityStore(sqlite_ws).level_counts() == CommunityStore(postgres_ws).level_counts()
    inputs = {name: {k: entry.get("inputs") for k, entry in ws.manifest.entries().items()}
              for name, (ws, _, _) in stores.items()}
    assert inputs["sqlite"] == inputs["postgresql"]
    assert postgres_ws.manifest.entries()["chunk_vectors"]["config"]["index"] == "pgvector"
    assert not postgres_ws.manifest.stale_artifacts()


@pytest.mark.parametrize("method", sorted(builtin_methods()))
def test_method_answers_the_same_on_both_stores(stores: dict[str, Built], question: str, method: str) -> None:
    spec = builtin_methods()[method]
    contexts = {}
    for name, (ws, settings, embedder) in stores.items():
        stack = fake_stack(settings, ws, chat=_chat(), embedder=embedder, reranker=OverlapReranker())
        result = MethodRunner(ws, settings, stack).run(spec, question)
        assert result.answer.strip(), f"{method} on {name}: no answer"
        contexts[name] = [(item.kind, item.id, item.score) for item in result.context]
    postgres, sqlite = _modulo_ties(contexts["postgresql"]), _modulo_ties(contexts["sqlite"])
    assert [run for run, _ in postgres] == [run for run, _ in sqlite], method
    assert [score for _, score in postgres] == pytest.approx([score for _, score in sqlite], abs=TIE), method


# pgvector and hnswlib sum a cosine's products in another order, so equal scores may differ in
# the last float32 bits (~1e-7): runs are scores within TIE of the next (comparing scores
# rounded to 5 digits failed wherever a score sat on a rounding boundary).
TIE = 1e-5


def _modulo_ties(context: list[tuple[str, str, float]]) -> list[tuple[tuple[str, str | int], float]]:
    """Each run of one kind's equal scores (within ``TIE``): (kind, the item's id when it is
    alone, else how many share it), and the run's first score."""
    runs: list[list[tuple[str, str, float]]] = []
    for item in context:
        if runs and runs[-1][-1][0] == item[0] and abs(runs[-1][-1][2] - item[2]) <= TIE:
            runs[-1].append(item)
        else:
            runs.append([item])
    return [((run[0][0], run[0][1] if len(run) == 1 else len(run)), run[0][2]) for run in runs]
