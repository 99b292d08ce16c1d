"""The shared layered loop (unirag.hierarchy.layered) on a tiny hand-built layer: where it stops,
what it counts, and that every builder's stats carry the same keys."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from fakes import HashEmbedder, RecordingProgress

from unirag.hierarchy.layered import (COUNTERS, Ask, BuildModels, Clustering, HierarchyStats, Layer, LayeredAlgorithm,
                                  ProgressLabels, Summary, build_levels)
from unirag.llm.base import ChatRequest, ChatResponse


@dataclass
class Record:
    id: str
    level: int
    children: list[str]
    text: str


class ReplyByFirstChild:
    """Replies chosen by the group's first child id (``""`` when none is scripted); ``cached`` on request."""

    name = "scripted"

    def __init__(self, replies: dict[str, str], cached: frozenset[str] = frozenset()) -> None:
        self.replies, self.cached = replies, cached
        self.requests: list[ChatRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.requests.append(request)
        first = request.messages[0]["content"].split()[0]
        return ChatResponse(text=self.replies.get(first, ""), cached=first in self.cached)


def read(children: list[str], reply: str) -> Summary:
    if not reply.strip():
        return Summary("", " + ".join(children), "fallback", embed=" + ".join(children))
    source = "json" if reply.startswith("{") else "prose"
    return Summary("", reply, source, embed=reply)


class Pairs(LayeredAlgorithm[Layer, Clustering, Record]):
    """Rows (0, 1), (2, 3), ...: an odd last row stays alone; ``alone`` rows are asked nothing."""

    labels = ProgressLabels(summarising="toy level {level}: summarising", embedding="toy level {level}: {n} vectors")
    embed_stage = "toy.embed"
    summed = ("pairs",)

    def __init__(self, max_levels: int = 5, min_nodes: int = 1, alone: frozenset[str] = frozenset(),
                 no_groups_at: int | None = None) -> None:
        self.max_levels, self.min_nodes, self.alone, self.no_groups_at = max_levels, min_nodes, alone, no_groups_at

    def stop_before(self, layer: Layer, level: int) -> str:
        return "min_nodes" if len(layer) < self.min_nodes else ""

    def cluster(self, layer: Layer, level: int) -> Clustering:
        if level == self.no_groups_at:
            return Clustering([], {"pairs": 0})
        groups = [[i, i + 1] for i in range(0, len(layer) - 1, 2)]
        groups += [[i] for i in range(len(layer)) if layer.ids[i] in self.alone]
        return Clustering(groups, {"pairs": sum(len(g) == 2 for g in groups)})

    def asks(self, layer: Layer, clustering: Clustering, level: int) -> list[Ask]:
        out = []
        for group in clustering.groups:
            children = [layer.ids[i] for i in group]
            if len(group) == 1:
                out.append(Ask(None, lambda _, c=children[0]: Summary(c, c, "given")))
                continue
            request = ChatRequest(messages=({"role": "user", "content": " ".join(children)},), stage="toy")
            out.append(Ask(request, partial(read, children)))
        return out

    def records(self, layer: Layer, clustering: Clustering, summaries: list[Summary], vectors: np.ndarray,
                level: int, below: list[Record]) -> list[Record]:
        return [Record(f"L{level}-{'-'.join(layer.ids[i] for i in group)}", level, [layer.ids[i] for i in group],
                       summary.text) for group, summary in zip(clustering.groups, summaries)]

    def next_layer(self, layer: Layer, clustering: Clustering, records: list[Record], vectors: np.ndarray,
                   level: int) -> tuple[Layer, list[Any]]:
        rows = iter(vectors)
        kept = [next(rows) if len(group) > 1 else layer.vectors[group[0]] for group in clustering.groups]
        return Layer([r.id for r in records], [r.text for r in records], np.asarray(kept)), [(level, len(records))]


def leaves(n: int) -> Layer:
    ids = [f"n{i}" for i in range(n)]
    return Layer(ids, ids, HashEmbedder().embed(ids).vectors)


def run(n: int, algorithm: Pairs, chat: Any = None, **kwargs: Any) -> Any:
    return build_levels(algorithm, leaves(n), BuildModels(chat, HashEmbedder(), **kwargs))


def test_levels_pair_up_to_a_root() -> None:
    levels = run(5, Pairs())  # 5 -> 2 (+ n4 alone) -> 1: the root
    stats = levels.stats.to_dict()
    assert [r.level for r in levels.records] == [1, 1, 2]
    assert levels.records[-1].children == ["L1-n0-n1", "L1-n2-n3"]
    assert stats["stop_reason"] == "root" and stats["levels"] == 2
    assert [(s["level"], s["nodes"], s["communities"], s["singletons"]) for s in stats["per_level"]] == [
        (1, 5, 2, 1), (2, 2, 1, 0)]
    assert stats["links"] == 2 and levels.links == [(1, 2), (2, 1)]


def test_every_stop_rule() -> None:
    assert run(0, Pairs()).stats.stop_reason == "empty"
    assert run(8, Pairs(max_levels=2)).stats.stop_reason == "max_levels"  # 8 -> 4 -> 2, a third level not built
    capped = run(8, Pairs(min_nodes=3))  # 8 -> 4 -> 2: two nodes are too few
    assert capped.stats.stop_reason == "min_nodes" and capped.stats.levels == 2
    stuck = run(6, Pairs(no_groups_at=2))
    assert stuck.stats.stop_reason == "no_reduction" and stuck.stats.levels == 1
    assert stuck.stats.per_level[-1].singletons == 3 and stuck.stats.per_level[-1].communities == 0


def test_counters_fallbacks_and_cache_hits() -> None:
    chat = ReplyByFirstChild({"n0": '{"summary": "x"}', "n2": "plain words"}, cached=frozenset({"n0"}))
    levels = run(6, Pairs(max_levels=1), chat)  # n0-n1 json, n2-n3 prose, n4-n5 empty reply: fallback
    stats = levels.stats.to_dict()
    assert len(chat.requests) == 3
    assert (stats["summaries"], stats["llm_summaries"], stats["prose_summaries"], stats["fallback_summaries"],
            stats["summary_cache_hits"]) == (3, 1, 1, 1, 1)
    assert levels.records[2].text == "n4 + n5"
    offline = run(6, Pairs(max_levels=1)).stats.to_dict()  # chat=None: no call, every summary extractive
    assert offline["fallback_summaries"] == offline["summaries"] == 3 and offline["llm_summaries"] == 0


def test_a_group_asked_nothing_is_a_singleton_and_keeps_its_vector() -> None:
    embedder = HashEmbedder()
    layer = leaves(3)
    levels = build_levels(Pairs(max_levels=1, alone=frozenset({"n2"})), layer, BuildModels(None, embedder))
    level = levels.stats.per_level[0]
    assert (level.summaries, level.singletons, level.communities) == (1, 1, 2)
    assert embedder.batches == [["n0 + n1"]]  # the singleton is not embedded


def test_stats_keys_agree_and_totals_add_up() -> None:
    levels = run(9, Pairs(), ReplyByFirstChild({"n0": "{}"}))
    stats = levels.stats.to_dict()
    for key in COUNTERS:
        assert stats[key] == sum(level[key] for level in stats["per_level"])
        assert all(key in level for level in stats["per_level"])
    assert stats["pairs"] == sum(level["pairs"] for level in stats["per_level"])
    empty = HierarchyStats(stop_reason="empty").to_dict()
    assert set(COUNTERS) | {"levels", "stop_reason", "per_level"} <= set(empty)


def test_embedding_batches_and_progress_labels() -> None:
    embedder, progress = HashEmbedder(), RecordingProgress()
    algorithm = Pairs(max_levels=1)
    algorithm.embed_batch = 2
    build_levels(algorithm, leaves(8), BuildModels(ReplyByFirstChild({}), embedder, progress=progress))
    assert [len(batch) for batch in embedder.batches] == [2, 2]
    assert progress.tasks == [("toy level 1: summarising", 4), ("toy level 1: 4 vectors", 4)]


def test_every_builder_reports_the_same_keys() -> None:
    from unirag.hierarchy.tree import TreeConfig, build_tree
    from unirag.hierarchy.archrag import ArchragConfig, build_archrag_communities
    from unirag.hierarchy.graphrag import build_graphrag_communities
    from unirag.hierarchy.communities import EntityGraph
    from unirag.hierarchy.hygrag import HygragConfig, build_hygrag_index, hybrid_graph_from
    from unirag.hierarchy.leanrag import LeanragConfig, build_leanrag_hierarchy

    n = 12
    texts = [f"entity {i} of group {i % 3}" for i in range(n)]
    edges = [(i, (i + 3) % n) for i in range(n)]
    graph = EntityGraph(ids=[f"e{i}" for i in range(n)], names=[f"E{i}" for i in range(n)], types=["t"] * n,
                        descriptions=texts, chunk_ids=[[f"c{i % 4}"] for i in range(n)],
                        edges=np.array(edges), weights=np.ones(n), relation_texts=["r"] * n,
                        vectors=HashEmbedder().embed([f"E{i}: {t}" for i, t in enumerate(texts)]).vectors)
    chunks = [f"c{i}" for i in range(4)]
    models = BuildModels(None, HashEmbedder())
    hybrid = hybrid_graph_from(graph, chunks, chunks, HashEmbedder().embed(chunks).vectors)
    all_stats = [
        build_archrag_communities(graph, models, ArchragConfig(min_nodes=2)).stats,
        build_hygrag_index(hybrid, models, HygragConfig(s_min=2, s_max=4)).stats,
        build_leanrag_hierarchy(graph, models, LeanragConfig(cluster_size=4)).stats,
        build_graphrag_communities(graph, models).stats,
        build_tree([(f"e{i}", t, v) for i, (t, v) in enumerate(zip(texts, graph.vectors))], models,
                   TreeConfig(method="kmeans", cluster_size=4)).stats,
    ]
    for stats in all_stats:
        assert set(COUNTERS) | {"levels", "stop_reason", "per_level"} <= set(stats)
        assert stats["summaries"] > 0 and stats["fallback_summaries"] == stats["summaries"]  # no model
        assert all(set(COUNTERS) <= set(level) for level in stats["per_level"])
