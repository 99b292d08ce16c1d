"""Issue 18: distributed indexing on Ray (``executor: ray``) against a local Ray instance.

One instance serves the module's tests (its start costs seconds): 2 CPUs, a 100 MB object
store, no dashboard. Workers build their own model clients from recipes (the scripted chat
model and the hash embedder of tests/fakes.py); :class:`~tests.fakes.LoggedChat` writes one
line per call it serves, in whichever process it runs, so the tests count every model call.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import FailsOnce, HashEmbedder, LoggedChat, ScriptedChat, fake_stack, make_settings, small_corpus
from unirag.api import UniRAG
from unirag.config import Settings
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.community_store import CommunityStore
from unirag.llm.factory import ModelStack
from unirag.llm.remote import ClientRecipe
from unirag.pipeline import run_index
from unirag.workspace import Workspace

pytestmark = pytest.mark.ray
ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ("What is the capital of France?", "Which prizes did Marie Curie win?")


@pytest.fixture(scope="module")
def ray_instance() -> Any:
    """A local Ray instance for this module's tests (started once; shut down before other modules
    run); the executor joins it instead of starting its own."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})  # workers import this checkout and tests.fakes
    yield ray
    ray.shutdown()


@pytest.fixture
def one_thread_hnsw(monkeypatch: pytest.MonkeyPatch) -> None:
    """HNSW indices built on one thread. A build on every thread is not deterministic (two local
    builds of the same vectors differ now and then, and so do their nearest entities): comparing
    retrieval across executors needs the same index graph from the same vectors."""
    import hnswlib

    class OneThread(hnswlib.Index):  # type: ignore[misc]
        def add_items(self, *args: Any, num_threads: int = -1, **options: Any) -> Any:
            return super().add_items(*args, num_threads=1, **options)

    monkeypatch.setattr(hnswlib, "Index", OneThread)


def stack_for(settings: Settings, workspace: Workspace, log: Path) -> ModelStack:
    """Scripted clients here, and recipes that make the same clients in a worker."""
    stack = fake_stack(settings, workspace, chat=LoggedChat(str(log)))
    return replace(stack, recipes=(ClientRecipe("chat", settings, build=partial(LoggedChat, str(log))),
                                   ClientRecipe("embedding", settings, build=HashEmbedder)))


def index(root: Path, corpus: Path, executor: str, log: Path, **overrides: Any) -> Workspace:
    settings = make_settings(None, executor=executor, ray__batch_size=2, **overrides)
    workspace = Workspace.init(root)
    run_index(workspace, [corpus], settings, stack_for(settings, workspace, log), graphs=["kg", "tree"],
              artifacts=["entity_vectors", "graphrag"])
    return workspace


def built(workspace: Workspace) -> dict[str, Any]:
    """What an index run leaves: chunks, extractions, the merged graph, vectors, tree, communities."""
    store = GraphStore(workspace)
    extractor = workspace.manifest.entry("graph")["config"]["extractor"]
    graph = store.load_graph()
    return {
        "chunks": workspace.corpus.chunk_ids(),
        "extractions": store.load_extractions(extractor, workspace.corpus.chunk_ids()),
        "entities": graph.entities, "relationships": graph.relationships,
        "chunk_vectors": np.load(workspace.artifact_path("chunk_vectors.npy")).tolist(),
        "entity_vectors": np.load(workspace.artifact_path("entity_vectors.npy")).tolist(),
        "tree": [(i, layer, text, children, vector.tolist()) for i, layer, text, children, vector in store.load_tree()],
        "communities": [(c.id, c.level, c.title, c.summary) for c in CommunityStore(workspace).load("graphrag")],
    }


def retrieved(root: Path, **overrides: Any) -> list[list[str]]:
    with UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=HashEmbedder(), **overrides) as rag:
        return [[item.id for item in rag.query(question, method, retrieve_only=True).context]
                for question in QUESTIONS for method in ("vanilla", "llightrag", "raptor")]


def calls(log: Path) -> Counter[str]:
    return Counter(log.read_text().split()) if log.exists() else Counter()


@pytest.mark.parametrize("extractor", ["llm", "nlp"])
def test_ray_builds_what_local_builds(ray_instance: Any, one_thread_hnsw: None, tmp_path: Path,
                                      extractor: str) -> None:
    corpus = small_corpus(tmp_path)
    options = {"graph__extractor": extractor, "index__summarizer": "llm"}
    local = index(tmp_path / "local", corpus, "local", tmp_path / "local.log", **options)
    remote = index(tmp_path / "ray", corpus, "ray", tmp_path / "ray.log", **options)
    assert built(remote) == built(local)
    assert retrieved(tmp_path / "ray", **{"graph.extractor": extractor}) == \
        retrieved(tmp_path / "local", **{"graph.extractor": extractor})
    # Every model call ran in a worker: the same calls as the local run, each once.
    assert calls(tmp_path / "ray.log") == calls(tmp_path / "local.log")
    assert max(calls(tmp_path / "ray.log").values()) == 1


def test_a_task_that_fails_once_is_retried(ray_instance: Any, tmp_path: Path) -> None:
    from unirag.executors import executor_for

    executor = executor_for(make_settings(None, executor="ray"))
    squares = dict(executor.map(FailsOnce(str(tmp_path / "raised"), 3), range(6), retries=1))
    assert squares == {i: i * i for i in range(6)}
    squares = dict(executor.map(FailsOnce(str(tmp_path / "died"), 4, how="die"), range(6), retries=1))
    assert squares == {i: i * i for i in range(6)}
    with pytest.raises(RuntimeError, match="task for item 2 failed once"):  # no retry left: its own error
        list(executor.map(FailsOnce(str(tmp_path / "spent"), 2), range(6), retries=0))


def test_a_killed_driver_resumes_without_repeating_a_model_call(ray_instance: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = small_corpus(tmp_path)
    log = tmp_path / "calls.log"
    options = {"graph__extractor": "llm", "graph__max_passages_per_call": 1, "graph__gleaning": 0, "concurrency": 1}
    save = GraphStore.save_extractions
    stored: list[int] = []

    def dies_after_two(store: GraphStore, extractor: str, extractions: list[Any]) -> None:
        if len(stored) == 2:
            raise KeyboardInterrupt  # the driver dies with groups in flight
        save(store, extractor, extractions)
        stored.append(len(extractions))

    monkeypatch.setattr(GraphStore, "save_extractions", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        index(tmp_path / "ws", corpus, "ray", log, **options)
    monkeypatch.setattr(GraphStore, "save_extractions", save)
    before = calls(log)
    assert 2 <= sum(before.values()) < 6  # some extractions ran, not all
    workspace = index(tmp_path / "ws", corpus, "ray", log, **options)
    assert max(calls(log).values()) == 1  # no call made twice, across both runs
    assert len(GraphStore(workspace).extracted_chunk_ids(workspace.manifest.entry("graph")["config"]["extractor"])) \
        == len(workspace.corpus.chunk_ids())
    assert os.path.getsize(log) > 0


def test_results_in_item_order_as_soon_as_those_before_are_in() -> None:
    from unirag.executors import LocalExecutor, in_order

    seen: list[str] = []

    def arrivals() -> Any:
        for index in (2, 0, 1, 4, 3):
            seen.append(f"arrived {index}")
            yield index, index * 10

    for value in in_order(arrivals()):
        seen.append(f"stored {value}")
    assert seen == ["arrived 2", "arrived 0", "stored 0", "arrived 1", "stored 10", "stored 20",
                    "arrived 4", "arrived 3", "stored 30", "stored 40"]
    assert list(LocalExecutor().map(len, ["a", "bb"])) == [(0, 1), (1, 2)]


def test_ray_results_go_to_the_shared_postgresql_store(ray_instance: Any, one_thread_hnsw: None, tmp_path: Path,
                                                       postgres_store: str) -> None:
    """Workers compute, the driver writes: a Ray build into a PostgreSQL store holds what a local
    build into SQLite holds."""
    corpus = small_corpus(tmp_path)
    options = {"graph__extractor": "nlp", "index__summarizer": "llm"}
    local = index(tmp_path / "local", corpus, "local", tmp_path / "local.log", **options)
    root = tmp_path / "ray-pg"
    root.mkdir()
    (root / "unirag.yaml").write_text(f"store: {postgres_store}\n", encoding="utf-8")
    remote = index(root, corpus, "ray", tmp_path / "ray.log", store=postgres_store, **options)
    assert remote.location.is_postgres and not (root / "store.sqlite").exists()
    assert built(remote) == built(local)
    assert calls(tmp_path / "ray.log") == calls(tmp_path / "local.log")
