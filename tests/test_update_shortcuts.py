"""The shortcuts that make a hierarchy update cost what changed, each equal to the full computation:
prompts built only when sent, report elements counted on first use, LeanRAG's relation bases,
central order and truncation done in one pass, community heads read without parsing."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder
from test_graphrag_communities import make_graph, ring_of_cliques, words
from test_layered import Pairs, ReplyByFirstChild, leaves

from unirag.hierarchy.layered import Ask, BuildModels, Clustering, Layer, Summary, ask_all, build_levels
from unirag.hierarchy.graphrag import ReportElements, SubReport, build_report_context, hierarchical_leiden
from unirag.hierarchy.leanrag import LeanragConfig, _central_order, _Leanrag, _truncated, _unique_per_group
from unirag.llm.base import ChatRequest
from unirag.text.tokenizer import get_tokenizer

pytestmark = pytest.mark.numeric  # shortcuts' sums and orders compared with the full computations

# -- prompts built when sent -------------------------------------------------------------------


def _request(children: list[str], built: list[str]) -> ChatRequest:
    built.append(children[0])
    return ChatRequest(messages=({"role": "user", "content": " ".join(children)},), stage="toy")


class DeferredPairs(Pairs):
    """:class:`Pairs` whose requests are built when sent, recording which were built."""

    def __init__(self, built: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = built

    def asks(self, layer: Layer, clustering: Clustering, level: int) -> list[Ask]:
        eager = super().asks(layer, clustering, level)
        out = []
        for group, ask in zip(clustering.groups, eager):
            children = [layer.ids[i] for i in group]
            out.append(ask if ask.request is None else Ask(None, ask.read, partial(_request, children, self.built)))
        return out


class KeepFirstGroup:
    """A carrier that keeps the first group's summary of level 1 (as an update's unchanged group)."""

    def __init__(self) -> None:
        self.stats: dict[str, int] = {}

    def kept(self, level: int) -> list[Any]:
        return [Summary("kept", "kept text", "json", embed="kept text")] if level == 1 else []

    def annotate(self, level: int, records: Any) -> None:
        pass

    def built(self, level: int, ids: Any) -> None:
        pass


class KeepingPairs(DeferredPairs):
    def kept(self, record: Any) -> Summary:
        return Summary(record.title, record.text, "json", embed=record.text, kept=True)


def test_deferred_asks_send_what_eager_asks_send() -> None:
    replies = {"n0": "{}", "n2": "words"}
    chat_eager, chat_deferred = ReplyByFirstChild(replies), ReplyByFirstChild(replies)
    eager = build_levels(Pairs(), leaves(7), BuildModels(chat_eager, HashEmbedder()))
    built: list[str] = []
    deferred = build_levels(DeferredPairs(built), leaves(7), BuildModels(chat_deferred, HashEmbedder()))
    assert [r.text for r in deferred.records] == [r.text for r in eager.records]
    assert chat_deferred.requests == chat_eager.requests
    assert deferred.stats.to_dict() == eager.stats.to_dict()
    assert len(built) == len(chat_eager.requests)


def test_a_kept_group_builds_no_prompt() -> None:
    built: list[str] = []
    algorithm = KeepingPairs(built, max_levels=1)
    algorithm.carrier = KeepFirstGroup()  # type: ignore[assignment]
    chat = ReplyByFirstChild({})
    levels = build_levels(algorithm, leaves(6), BuildModels(chat, HashEmbedder()))
    assert built == ["n2", "n4"]  # n0-n1 keeps its summary: its prompt is never built
    assert levels.records[0].text == "kept text"
    assert [r.messages[0]["content"] for r in chat.requests] == ["n2 n3", "n4 n5"]


def test_ask_all_builds_deferred_requests_in_order() -> None:
    built: list[str] = []
    asks = [Ask(None, lambda reply: Summary("", reply, "json"), partial(_request, [name], built))
            for name in ("a", "b")]
    chat = ReplyByFirstChild({"a": "A", "b": "B"})
    assert [s.text for s in ask_all(asks, BuildModels(chat), "toy")] == ["A", "B"] and built == ["a", "b"]


# -- GraphRAG's elements, counted on first use -----------------------------------------------


def _counting(counter: list[int]) -> Any:
    def count(text: str) -> int:
        counter.append(1)
        return words(text)
    return count


@pytest.mark.parametrize("limit", [12, 40, 200, 5000])
def test_lazy_report_contexts_equal_fully_counted_ones(limit: int) -> None:
    graph = ring_of_cliques(6, 5)
    levels = hierarchical_leiden(graph, max_cluster_size=6)
    lazy_calls: list[int] = []
    lazy = ReportElements.from_graph(graph, _counting(lazy_calls))
    full = ReportElements.from_graph(graph, words)
    full.entity_tokens.tolist(), full.edge_tokens.tolist()  # every cost counted up front
    for depth, level in enumerate(levels):
        for community in level:
            subs = [SubReport(tuple(levels[depth + 1][c].rows), f"report {c} " * 3) for c in community.children]
            assert build_report_context(lazy, community.rows, limit, subs) == \
                build_report_context(full, community.rows, limit, subs)
    assert len(lazy_calls) <= len(graph) + len(graph.edges) + 3  # each line counted at most once
    assert lazy.entity_tokens.tolist() == full.entity_tokens.tolist()
    assert [lazy.edge_lines[e] for e in range(len(graph.edges))] == [full.edge_lines[e]
                                                                      for e in range(len(graph.edges))]


def test_a_leaf_over_the_limit_counts_only_what_it_shows() -> None:
    n = 40
    graph = make_graph(n, [(i, i + 1) for i in range(n - 1)])
    calls: list[int] = []
    elements = ReportElements.from_graph(graph, _counting(calls))
    headers = len(calls)
    context = build_report_context(elements, range(n), 30)
    assert context.truncated and len(calls) - headers < n  # not every line was counted


# -- LeanRAG ------------------------------------------------------------------------------------


def test_unique_per_group_is_numpy_unique_of_each_group() -> None:
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 6, size=50)
    values = rng.integers(0, 8, size=int(sizes.sum())).astype(np.uint64)
    expected = [np.unique(part) for part in np.split(values, np.cumsum(sizes)[:-1])]
    got = _unique_per_group(values, sizes)
    assert len(got) == len(expected)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, expected))


def test_bases_of_edge_groups_equal_per_group_unions() -> None:
    rng = np.random.default_rng(5)
    algorithm = _Leanrag(LeanragConfig(), BuildModels(None, HashEmbedder()),
                         base_hashes=rng.integers(0, 30, size=40).astype(np.uint64))
    layer = Layer([f"e{i}" for i in range(10)], [""] * 10, np.zeros((10, 2), np.float32),
                  edges=rng.integers(0, 10, size=(40, 2)))
    groups = np.array_split(rng.permutation(40), 9)
    def bases(of: Layer, groups: list[np.ndarray]) -> list[np.ndarray]:
        return algorithm._grouped_bases(of, np.concatenate(groups), np.array([len(g) for g in groups]))

    for got, group in zip(bases(layer, groups), groups):
        assert np.array_equal(got, np.unique(algorithm.base_hashes[group]))
    upper = Layer(["a", "b"], ["", ""], np.zeros((2, 2), np.float32), edges=np.zeros((5, 2), np.int64),
                  edge_bases=[np.unique(rng.integers(0, 9, size=int(k))).astype(np.uint64) for k in (3, 0, 4, 2, 5)])
    upper_groups = [np.array([0, 3]), np.array([1]), np.array([4, 2, 1])]
    for got, group in zip(bases(upper, upper_groups), upper_groups):
        assert np.array_equal(got, np.unique(np.concatenate([upper.edge_bases[e] for e in group])))


def test_central_order_equals_the_add_at_sums() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, 16)).astype(np.float32)
    labels = rng.integers(0, 25, size=300)
    sums = np.zeros((25, 16))
    np.add.at(sums, labels, vectors)
    closeness = np.einsum("ij,ij->i", vectors.astype(np.float64), sums[labels])
    order = np.lexsort((np.arange(300), -closeness, labels))
    expected = np.split(order, np.cumsum(np.bincount(labels, minlength=25))[:-1])
    assert all(np.array_equal(a, b) for a, b in zip(_central_order(vectors, labels, 25), expected))


@pytest.mark.parametrize("text", ["", "short", "a b " * 30, "é" * 7, "漢字" * 5, "word " * 3 + "🙂" * 4])
@pytest.mark.parametrize("budget", [0, 3, 9, 40])
def test_truncated_is_the_tokenizer_truncation(text: str, budget: int) -> None:
    tokenizer = get_tokenizer()
    assert _truncated(text, budget, tokenizer) == tokenizer.truncate(text, budget)


# -- GraphRAG's line token counts, kept across builds -------------------------------------------


def test_kept_line_counts_give_the_same_reports_and_count_only_new_lines(tmp_path) -> None:
    from test_graphrag_communities import chat, user_of

    from unirag.hierarchy.graphrag import GraphragCommunityConfig, build_graphrag_communities
    from unirag.index.line_tokens import LineTokens, load_line_tokens, save_line_tokens

    graph = ring_of_cliques(30, 4)
    config = GraphragCommunityConfig(max_cluster_size=10, max_context_tokens=120)
    plain_chat, memo_chat, again_chat = chat(), chat(), chat()
    plain = build_graphrag_communities(graph, BuildModels(plain_chat), config)
    memo = LineTokens("cl100k_base")
    with_memo = build_graphrag_communities(graph, BuildModels(memo_chat), config, line_tokens=memo)
    # the same prompts (reports of one level run concurrently, so compared regardless of order)
    assert sorted(user_of(r) for r in memo_chat.requests) == sorted(user_of(r) for r in plain_chat.requests)
    assert with_memo.communities == plain.communities and with_memo.stats == plain.stats
    save_line_tokens(tmp_path / "lines.npz", memo)
    kept = load_line_tokens(tmp_path / "lines.npz", "cl100k_base")
    assert kept.known == memo.known and load_line_tokens(tmp_path / "lines.npz", "o200k_base").known == {}
    assert load_line_tokens(tmp_path / "missing.npz", "cl100k_base").known == {}
    calls: list[str] = []

    class Counting:
        name = "cl100k_base"

        def count(self, text: str) -> int:
            calls.append(text)
            return get_tokenizer().count(text)

    again = build_graphrag_communities(graph, BuildModels(again_chat, tokenizer=Counting()), config,  # type: ignore[arg-type]
                                       line_tokens=kept)
    assert again.communities == plain.communities
    assert calls == []  # every line (and header) was counted by the build before


# -- hierarchy loops over whole arrays: each equal to the per-item computation ------------------


@pytest.mark.parametrize("size", [0, 1, 2, 50, 2000])
def test_unique_ints_is_numpy_unique(size: int) -> None:
    from unirag.index.unique_ints import unique_ints

    values = np.random.default_rng(size).integers(-40, 40, size=size)
    got = unique_ints(values)
    assert got.dtype == np.unique(values).dtype and np.array_equal(got, np.unique(values))
    with pytest.raises(TypeError):
        unique_ints(np.array([0.5, 1.0]))


def _lines(rng: np.random.Generator, count: int) -> list[str]:
    pieces = ["word", "é", "漢字", "🙂", "a b", "long " * 30]
    return ["".join(rng.choice(pieces, size=int(rng.integers(1, 6)))) for _ in range(count)]


@pytest.mark.parametrize("budget", [3, 40, 400])
def test_concatenations_are_the_truncated_joins(budget: int) -> None:
    from unirag.hierarchy.leanrag import _concatenations

    rng = np.random.default_rng(budget)
    lines = _lines(rng, 120)
    cuts = np.sort(rng.choice(np.arange(1, 120), size=30, replace=False))
    bounds = np.concatenate([[0], cuts, [120]]).tolist()
    spans = list(zip(bounds[:-1], bounds[1:]))
    tokenizer = get_tokenizer()
    expected = [_truncated("\n".join(lines[a:b]), budget, tokenizer) for a, b in spans]
    assert _concatenations(lines, spans, budget, tokenizer) == expected


def test_edge_groups_list_each_cluster_pair_with_its_edges() -> None:
    from unirag.hierarchy.leanrag import _edge_groups

    rng = np.random.default_rng(11)
    edges, labels = rng.integers(0, 30, size=(200, 2)), rng.integers(0, 6, size=30)
    groups = _edge_groups(edges, labels)
    expected: dict[tuple[int, int], list[int]] = {}
    for e, (u, v) in enumerate(edges.tolist()):
        a, b = sorted((int(labels[u]), int(labels[v])))
        expected.setdefault((a, b), []).append(e)
    assert [tuple(p) for p in groups.pairs.tolist()] == sorted(expected)
    assert [groups.group(i).tolist() for i in range(len(groups))] == [expected[k] for k in sorted(expected)]
    keep = groups.pairs[:, 0] != groups.pairs[:, 1]
    between = groups.subset(keep)
    assert [between.group(i).tolist() for i in range(len(between))] == \
        [expected[k] for k in sorted(expected) if k[0] != k[1]]


def test_link_digests_are_those_of_each_links_sorted_relation_keys() -> None:
    import hashlib

    from unirag.hierarchy.leanrag import _edge_keys, _group_digests

    layer = Layer(["b", "a", "c", "d"], [""] * 4, np.zeros((4, 2), np.float32),
                  edges=np.array([(0, 1), (2, 1), (3, 0), (2, 3)], dtype=np.int64))
    keys = _edge_keys(layer, np.array([3, 0, 1, 2]))
    assert keys == ["c\x00d", "a\x00b", "a\x00c", "b\x00d"]
    spans = [(0, 1), (1, 4)]

    def digest(part: list[str]) -> str:
        return hashlib.sha256("\x01".join(sorted(part)).encode("utf-8")).hexdigest()[:24]

    assert _group_digests(keys, spans) == [digest(keys[a:b]) for a, b in spans]


def test_archrag_relations_by_group_keep_each_groups_relations_in_order() -> None:
    from unirag.hierarchy.archrag import _Relations

    rng = np.random.default_rng(2)
    ends, weights = rng.integers(0, 40, size=(300, 2)), rng.random(300)
    labels = rng.integers(0, 7, size=40)
    relations = _Relations(ends, weights, lambda p: f"line {p}")
    expected: dict[int, list[tuple[int, int, float, str]]] = {}
    for p, ((u, v), w) in enumerate(zip(ends.tolist(), weights.tolist())):
        if labels[u] == labels[v]:
            expected.setdefault(int(labels[u]), []).append((u, v, w, f"line {p}"))
    by_group = relations.by_group(labels)
    assert sorted(by_group) == sorted(expected)
    assert all(relations.quoted(by_group[g]) == expected[g] for g in expected)


def test_archrag_knn_union_deduplicated_once_is_the_union_of_deduplicated_sides() -> None:
    from unirag.hierarchy.archrag import ArchragConfig, augment, knn_edges, unique_edges

    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((60, 8)).astype(np.float32)
    edges = rng.integers(0, 60, size=(90, 2))
    got, _ = augment(60, vectors, edges, ArchragConfig(augment="knn", knn_k=3))
    expected = unique_edges(np.concatenate([unique_edges(edges, 60), knn_edges(vectors, 3)]), 60)
    assert np.array_equal(got, expected)


def test_hygrag_given_propagated_vectors_builds_the_same_hierarchy() -> None:
    from test_hygrag import random_hybrid, scripted

    from unirag.hierarchy.hygrag import HygragConfig, build_hygrag_index, structure_aware_embeddings

    hybrid, config = random_hybrid(30, 90, seed=3), HygragConfig()
    z = structure_aware_embeddings(hybrid.vectors, hybrid.adjacency, config.propagation_iterations,
                                   config.propagation_self_weight)
    kept = z.copy()
    given = build_hygrag_index(hybrid, BuildModels(scripted(), HashEmbedder()), config, propagated=z)
    assert build_hygrag_index(hybrid, BuildModels(scripted(), HashEmbedder()), config) == given
    assert np.array_equal(z, kept)  # the caller indexes the same vectors afterwards


def test_a_copied_entity_graph_is_the_one_made_again() -> None:
    from unirag.hierarchy.entity_graph import copy_entity_graph

    ring = ring_of_cliques(3, 3)
    vectors = np.ones((len(ring), 4), np.float32)
    copy = copy_entity_graph(ring, vectors)
    assert copy.ids == ring.ids and copy.ids is not ring.ids and np.array_equal(copy.edges, ring.edges)
    assert copy.chunk_ids == ring.chunk_ids and copy.chunk_ids[0] is not ring.chunk_ids[0]
    assert (copy.names, copy.types, copy.descriptions, copy.relation_texts) == \
        (ring.names, ring.types, ring.descriptions, ring.relation_texts)
    assert np.array_equal(copy.weights, ring.weights) and np.array_equal(copy.vectors, vectors)


def test_carried_leiden_within_max_levels_is_the_unlimited_hierarchy_cut_there() -> None:
    from dataclasses import replace

    from test_graphrag_communities import _cliques

    from unirag.hierarchy.graphrag import GraphragCommunityConfig, build_graphrag_communities, carried_leiden

    config = GraphragCommunityConfig(max_cluster_size=3, max_levels=2)
    before = make_graph(24, _cliques([8, 8, 8], [(0, 8), (8, 16)]))
    previous = build_graphrag_communities(before, BuildModels(None), config).communities
    grown = make_graph(30, _cliques([8, 8, 8], [(0, 8), (8, 16)] + [(24 + i, i) for i in range(6)]
                                    + [(24 + i, 1 + i) for i in range(6)]))
    unlimited, _ = carried_leiden(grown, previous, config.max_cluster_size)
    limited, stats = carried_leiden(grown, previous, config.max_cluster_size, max_levels=config.max_levels)
    assert len(unlimited) > config.max_levels  # the deepest leaves were split, then cut off
    cut = unlimited[:config.max_levels]
    cut[-1] = [replace(c, children=()) for c in cut[-1]]
    assert limited[:-1] == cut[:-1] and [replace(c, children=()) for c in limited[-1]] == cut[-1]


def test_the_default_encoding_and_its_name_give_one_tokenizer() -> None:
    """``get_tokenizer()`` and ``get_tokenizer("cl100k_base")`` were two keys of one cache, so
    every index run loaded the same ranks twice (~0.2 CPU s, ~100 MB)."""
    assert get_tokenizer() is get_tokenizer("cl100k_base")
    assert get_tokenizer("o200k_base") is not get_tokenizer()
