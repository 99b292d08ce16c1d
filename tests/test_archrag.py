"""ArchRAG attributed communities (unirag.hierarchy.archrag): augmentation, weights, clustering,
summaries, the layer-by-layer hierarchy, stopping, links and the quality metrics."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedChat

from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.archrag import (
    EMBED_STAGE,
    SUMMARY_STAGE,
    ArchragConfig,
    _structural_weights,
    archrag_partition,
    augment,
    average_degree,
    build_archrag_communities,
    canonical_labels,
    codicil_edges,
    community_quality,
    edge_weights,
    knn_edges,
    knn_neighbours,
    unique_edges,
)
from unirag.hierarchy.communities import EntityGraph
from unirag.llm.base import normalise_rows

pytestmark = pytest.mark.numeric  # kNN graphs and edge weights from BLAS products

THEMES = ("alpha", "beta")


def make_graph(
    clique_sizes: list[int],
    bridges: list[tuple[int, int]],
    themes: list[int] | None = None,
    dim: int = 16,
    seed: int = 0,
) -> EntityGraph:
    """Cliques (all pairs linked) joined by one edge per ``bridges`` pair (first nodes of each clique).

    Vectors: theme direction + clique direction + a little noise, so clique
    mates are most similar, then cliques of the same theme.
    """
    rng = np.random.default_rng(seed)
    themes = themes or [0] * len(clique_sizes)
    starts = np.concatenate([[0], np.cumsum(clique_sizes)[:-1]]).astype(int)
    edges, vectors, descriptions, names = [], [], [], []
    for c, (start, size) in enumerate(zip(starts, clique_sizes)):
        edges += [(start + i, start + j) for i in range(size) for j in range(i + 1, size)]
        for i in range(size):
            v = np.zeros(dim)
            v[themes[c]] = 1.0
            v[2 + c] = 1.0
            vectors.append(v + 0.05 * rng.standard_normal(dim))
            names.append(f"E{start + i}")
            descriptions.append(f"{THEMES[themes[c]]} thing of clique{c}")
    edges += [(int(starts[a]), int(starts[b])) for a, b in bridges]
    n = int(sum(clique_sizes))
    return EntityGraph(
        ids=[f"ent{i}" for i in range(n)],
        names=names,
        types=["concept"] * n,
        descriptions=descriptions,
        chunk_ids=[["chunk"]] * n,
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        weights=np.ones(len(edges)),
        relation_texts=[f"rel {a}-{b}" for a, b in edges],
        vectors=normalise_rows(np.array(vectors, dtype=np.float32).reshape(-1, dim)),
    )


def theme_summary(user: str) -> str:
    """A JSON summary naming the majority theme and clique words of the items: similar groups, similar summaries."""
    items = user.split("Items:", 1)[1].split("Relations between items:", 1)[0]
    words = Counter(re.findall(r"alpha|beta", items))
    theme = words.most_common(1)[0][0] if words else "none"
    return json.dumps({"title": f"{theme} group", "summary": f"Things about {theme} {theme} {theme}."})


def theme_chat(**kwargs: object) -> ScriptedChat:
    return ScriptedChat(answers={"archrag_summary": theme_summary}, **kwargs)  # type: ignore[arg-type]


TWO = ArchragConfig(min_nodes=2)


def groups_of(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels)}


# -- augmentation ---------------------------------------------------------------------


def circle(degrees: list[float]) -> np.ndarray:
    angles = np.radians(degrees)
    return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)


def test_knn_neighbours_known_answer() -> None:
    vectors = circle([0, 10, 30, 100, 105, 200])
    assert knn_neighbours(vectors, 1)[:, 0].tolist() == [1, 0, 1, 4, 3, 4]
    assert knn_neighbours(vectors, 2).tolist() == [[1, 2], [0, 2], [1, 0], [4, 2], [3, 2], [4, 3]]
    # union of each node's top-1: {0-1, 1-2, 3-4, 4-5}
    assert knn_edges(vectors, 1).tolist() == [[0, 1], [1, 2], [3, 4], [4, 5]]


def test_knn_augmentation_adds_the_k_most_similar_per_node() -> None:
    vectors = circle([0, 10, 30, 100, 105, 200])
    base = np.array([[0, 5], [2, 3]])  # two dissimilar pairs linked in the graph
    config = ArchragConfig(augment="knn", knn_k=2)
    edges, changes = augment(6, vectors, base, config)
    expected_knn = {(0, 1), (0, 2), (1, 2), (3, 4), (2, 4), (2, 3), (4, 5), (3, 5)}
    assert set(map(tuple, edges.tolist())) == expected_knn | {(0, 5), (2, 3)}
    assert changes == {"k": 2, "added_edges": len(expected_knn - {(2, 3)}), "removed_edges": 0}
    neighbours = knn_neighbours(vectors, 2)
    for u in range(6):  # every node is linked to its 2 most similar nodes
        for v in neighbours[u]:
            assert (min(u, v), max(u, v)) in set(map(tuple, edges.tolist()))


def test_knn_k_defaults_to_the_rounded_average_degree() -> None:
    vectors = circle([0, 10, 30, 100, 105, 200])
    ring = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5], [0, 1]])  # a duplicate counts once
    assert average_degree(6, ring) == 2.0
    _, changes = augment(6, vectors, ring, ArchragConfig())
    assert changes["k"] == 2
    sparse = np.array([[0, 1]])  # average degree 1/3 -> k is at least 1
    assert augment(6, vectors, sparse, ArchragConfig())[1]["k"] == 1


def test_augment_none_keeps_the_graph() -> None:
    edges, changes = augment(4, None, np.array([[1, 0], [2, 3], [0, 1]]), ArchragConfig(augment="none"))
    assert edges.tolist() == [[0, 1], [2, 3]]
    assert changes == {"k": 0, "added_edges": 0, "removed_edges": 0}


def test_exact_and_hnsw_knn_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    from unirag.hierarchy import archrag

    vectors = normalise_rows(np.random.default_rng(3).standard_normal((300, 8)).astype(np.float32))
    exact = knn_neighbours(vectors, 4)
    monkeypatch.setattr(archrag, "EXACT_KNN_MAX_NODES", 10)
    approximate = knn_neighbours(vectors, 4)
    assert approximate.shape == exact.shape
    assert (approximate != np.arange(300)[:, None]).all()
    agreement = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(exact, approximate)])
    assert agreement > 0.95
    assert np.array_equal(approximate, knn_neighbours(vectors, 4))  # the single-threaded build is repeatable


def test_codicil_adds_content_edges_then_sparsifies() -> None:
    graph = make_graph([4, 4], [(0, 1)], themes=[0, 1])
    n = len(graph)
    out = codicil_edges(graph.vectors, graph.edges, k=3, alpha=0.5, exponent=0.5)
    union = unique_edges(np.concatenate([graph.edges, knn_edges(graph.vectors, 3)]), n)
    union_set = set(map(tuple, union.tolist()))
    out_set = set(map(tuple, out.tolist()))
    assert out_set <= union_set and len(out_set) < len(union_set)
    degree = np.bincount(union.reshape(-1), minlength=n)
    kept_degree = np.bincount(out.reshape(-1), minlength=n)
    assert (kept_degree >= np.ceil(np.sqrt(degree))).all()  # each node keeps at least its own top edges
    # the bridge between the two unrelated cliques (low content, no shared neighbours) is dropped
    assert (0, 4) not in out_set
    edges, changes = augment(n, graph.vectors, graph.edges, ArchragConfig(augment="codicil", knn_k=3))
    assert np.array_equal(edges, out)
    assert changes["removed_edges"] >= 1
    assert archrag_partition(graph, ArchragConfig(augment="codicil")).tolist() == [0] * 4 + [1] * 4


# -- weights and clustering ---------------------------------------------------------------


def test_weights_are_similarities_floored() -> None:
    vectors = circle([0, 60, 90, 180])
    edges = np.array([[0, 1], [0, 2], [0, 3]])
    weights = edge_weights(vectors, edges, None, ArchragConfig())
    assert weights == pytest.approx([0.5, 1e-3, 1e-3])  # cos 60 = 0.5; cos 90 = 0 and cos 180 = -1 floored
    assert edge_weights(vectors, edges, np.array([2.0, 3.0, 4.0]), ArchragConfig(edge_weight="relation")).tolist() \
        == [2.0, 3.0, 4.0]
    assert edge_weights(vectors, edges, None, ArchragConfig(edge_weight="unit")).tolist() == [1.0, 1.0, 1.0]


def test_relation_weights_sum_duplicate_relations_and_give_added_edges_one() -> None:
    base = np.array([[1, 0], [0, 1], [2, 3]])  # the pair 0-1 twice
    edges = np.array([[0, 1], [0, 2], [2, 3]])
    assert _structural_weights(base, np.array([2.0, 3.0, 4.0]), edges, 4).tolist() == [5.0, 1.0, 4.0]
    assert _structural_weights(np.zeros((0, 2), dtype=np.int64), np.zeros(0), edges, 4).tolist() == [1.0] * 3


def test_similarity_weights_steer_leiden_to_attribute_groups() -> None:
    """A structure that plain Leiden splits one way and attributes another way.

    Nodes 0-5 form a ring; vectors put {0, 1, 2} and {3, 4, 5} together and
    the ring is dense enough (chords) that unit weights do not see it.
    """
    ring = [(i, (i + 1) % 6) for i in range(6)] + [(0, 3), (1, 4), (2, 5)]
    vectors = circle([0, 5, 10, 90, 95, 100])
    graph = EntityGraph(ids=[str(i) for i in range(6)], names=[str(i) for i in range(6)], types=[""] * 6,
                        descriptions=[""] * 6, chunk_ids=[[]] * 6, edges=np.array(ring), weights=np.ones(9),
                        relation_texts=[""] * 9, vectors=vectors)
    labels = archrag_partition(graph, ArchragConfig(augment="none"))
    assert groups_of(labels) == {frozenset({0, 1, 2}), frozenset({3, 4, 5})}


def test_two_cliques_give_two_partitions_in_every_variant() -> None:
    graph = make_graph([5, 5], [(0, 1)])
    expected = {frozenset(range(5)), frozenset(range(5, 10))}
    for config in (ArchragConfig(), ArchragConfig(augment="none", edge_weight="unit"),
                   ArchragConfig(augment="codicil"), ArchragConfig(clustering="spectral", spectral_cluster_size=5),
                   ArchragConfig(augment="none", clustering="spectral", spectral_cluster_size=5)):
        assert groups_of(archrag_partition(graph, config)) == expected, config


def test_spectral_k_follows_the_target_size() -> None:
    graph = make_graph([4, 4, 4, 4], [(0, 1), (1, 2), (2, 3)], themes=[0, 0, 1, 1])
    labels = archrag_partition(graph, ArchragConfig(clustering="spectral", spectral_cluster_size=8))
    assert len(np.unique(labels)) == 2
    assert groups_of(labels) == {frozenset(range(8)), frozenset(range(8, 16))}


def test_canonical_labels_number_clusters_by_first_member() -> None:
    assert canonical_labels(np.array([7, 7, 3, 9, 3])).tolist() == [0, 0, 1, 2, 1]


def test_partition_needs_vectors() -> None:
    graph = make_graph([3, 3], [(0, 1)])
    graph.vectors = None
    with pytest.raises(ValueError):
        archrag_partition(graph, ArchragConfig())
    assert groups_of(archrag_partition(graph, ArchragConfig(augment="none", edge_weight="unit"))) == {
        frozenset({0, 1, 2}), frozenset({3, 4, 5})}


# -- quality metrics ----------------------------------------------------------------------


def test_quality_matches_hand_computed_values() -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    quality = community_quality(x, np.array([0, 0, 1]))
    # centroids (0.5, 0.5) and (2, 0), overall (1, 1/3):
    # between = 2 * (0.25 + 1/36) + 1 * (1 + 1/9) = 5/3, within = 4 * 0.25 = 1
    assert quality["chi"] == pytest.approx((3 - 2) / (2 - 1) * (5 / 3) / 1.0)
    assert quality["cosine"] == pytest.approx((2 * math.sqrt(0.5) + 1.0) / 3)
    assert quality["cosine_multi"] == pytest.approx(math.sqrt(0.5))
    assert (quality["clusters"], quality["singletons"]) == (2, 1)
    square = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    assert community_quality(square, np.array([0, 0, 1, 1]))["chi"] == pytest.approx(8.0)  # 2/1 * 16/4


def test_chi_matches_sklearn() -> None:
    from sklearn.metrics import calinski_harabasz_score

    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 5))
    labels = rng.integers(0, 4, 60)
    assert community_quality(x, labels)["chi"] == pytest.approx(calinski_harabasz_score(x, labels))


def test_quality_degenerate_partitions() -> None:
    x = np.eye(3)
    assert community_quality(x, np.zeros(3, dtype=int))["chi"] is None  # one cluster
    everyone_alone = community_quality(x, np.arange(3))
    assert everyone_alone["chi"] is None and everyone_alone["cosine"] == 1.0
    assert everyone_alone["cosine_multi"] is None
    assert community_quality(np.zeros((0, 2)), np.zeros(0, dtype=int))["clusters"] == 0


def test_attributed_partition_beats_plain_leiden_on_noisy_structure() -> None:
    """Random links across groups fool structure-only Leiden; the attributes do not."""
    rng = np.random.default_rng(5)
    groups, size, dim = 6, 10, 12
    truth = np.repeat(np.arange(groups), size)
    vectors = normalise_rows(np.eye(dim)[truth] + 0.3 * rng.standard_normal((groups * size, dim)))
    pairs = rng.integers(0, groups * size, (120, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    n = groups * size
    graph = EntityGraph(ids=[str(i) for i in range(n)], names=[str(i) for i in range(n)], types=[""] * n,
                        descriptions=[""] * n, chunk_ids=[[]] * n, edges=pairs, weights=np.ones(len(pairs)),
                        relation_texts=[""] * len(pairs), vectors=vectors)
    ours = community_quality(vectors, archrag_partition(graph, ArchragConfig()))
    plain = community_quality(vectors, archrag_partition(graph, ArchragConfig(augment="none", edge_weight="unit")))
    assert ours["chi"] > plain["chi"] and ours["cosine"] > plain["cosine"]


# -- the hierarchy ------------------------------------------------------------------------


def test_two_cliques_make_two_level_one_communities() -> None:
    graph = make_graph([5, 5], [(0, 1)])
    chat = theme_chat()
    result = build_archrag_communities(graph, BuildModels(chat, HashEmbedder()), replace(TWO, max_levels=1))
    assert result.hierarchy == "archrag" and result.level_order == "bottom_up"
    level1 = [c for c in result.communities if c.level == 1]
    assert {frozenset(c.children) for c in level1} == {
        frozenset(f"ent{i}" for i in range(5)), frozenset(f"ent{i}" for i in range(5, 10))}
    assert all(c.children == c.entities for c in level1)
    assert all(c.title == "alpha group" and c.summary.startswith("Things about alpha") for c in level1)
    assert all(c.payload["size"] == 5 and 0.9 < c.payload["cosine"] <= 1.0 for c in level1)
    assert len(chat.requests) == 2
    assert {r.stage for r in chat.requests} == {SUMMARY_STAGE}
    assert all(r.prompt_version.startswith("archrag_summary@") and r.json_mode for r in chat.requests)
    assert result.stats["stop_reason"] == "max_levels"
    level_stats = result.stats["per_level"][0]
    assert level_stats["communities"] == 2 and level_stats["summaries"] == 2 and level_stats["fallback_summaries"] == 0
    assert level_stats["chi"] > 1 and 0.9 < level_stats["cosine"] <= 1.0
    json.dumps(result.stats)  # JSON-serialisable


def test_prompt_holds_members_and_their_relations() -> None:
    graph = make_graph([3, 3], [(0, 1)])
    chat = theme_chat()
    build_archrag_communities(graph, BuildModels(chat, HashEmbedder()), replace(TWO, max_levels=1, augment="none"))
    user = ScriptedChat.user_message(chat.requests[0])
    assert "- E0: alpha thing of clique0" in user
    assert "E0 -- E1: rel 0-1" in user
    assert "rel 0-3" not in user  # the bridge leaves the community


def ring_of_cliques() -> EntityGraph:
    """8 cliques of 4 in a ring, cliques 0-3 about alpha and 4-7 about beta."""
    return make_graph([4] * 8, [(c, (c + 1) % 8) for c in range(8)], themes=[0, 0, 0, 0, 1, 1, 1, 1])


def test_hierarchy_levels_links_entities_and_parents() -> None:
    graph = ring_of_cliques()
    result = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()), replace(TWO, augment="none"))
    by_level: dict[int, list] = {}
    for community in result.communities:
        by_level.setdefault(community.level, []).append(community)
    cliques = {frozenset(f"ent{c * 4 + i}" for i in range(4)) for c in range(8)}
    assert {frozenset(c.entities) for c in by_level[1]} == cliques
    assert len(by_level[2]) == 2  # the alpha cliques and the beta cliques
    assert {frozenset(c.entities) for c in by_level[2]} == {
        frozenset(f"ent{i}" for i in range(16)), frozenset(f"ent{i}" for i in range(16, 32))}
    ids = {c.id: c for c in result.communities}
    for community in result.communities:
        if community.level >= 2:
            children = [ids[child] for child in community.children]
            assert all(child.level == community.level - 1 for child in children)
            assert community.entities == sorted({e for child in children for e in child.entities})
            assert all(child.parent == community.id for child in children)
    top = max(by_level)
    assert all(c.parent is None for c in by_level[top])
    # level-1 links: E' = E here, so exactly the ring of bridges between cliques
    clique_of = {frozenset(c.entities): c.id for c in by_level[1]}
    ring = {frozenset({clique_of[frozenset(f"ent{a * 4 + i}" for i in range(4))],
                       clique_of[frozenset(f"ent{((a + 1) % 8) * 4 + i}" for i in range(4))]}) for a in range(8)}
    level1_links = [link for link in result.links if link.level == 1]
    assert {frozenset({link.source, link.target}) for link in level1_links} == ring
    assert all(link.weight == 1.0 and link.hierarchy == "archrag" for link in level1_links)
    level2_links = [link for link in result.links if link.level == 2]
    assert len(level2_links) == 1 and level2_links[0].weight == 2.0  # the ring crosses themes twice
    assert result.stats["levels"] == top
    assert result.stats["communities"] == len(result.communities)
    assert [s["nodes"] for s in result.stats["per_level"]][:2] == [32, 8]


def test_links_exist_exactly_where_members_are_linked_in_the_augmented_graph() -> None:
    graph = ring_of_cliques()
    config = replace(TWO, max_levels=1)
    result = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()), config)
    edges, _ = augment(len(graph), graph.vectors, graph.edges, config)
    owner = {}
    for community in result.communities:
        for entity in community.entities:
            owner[int(entity[3:])] = community.id
    expected: Counter[frozenset[str]] = Counter()
    for u, v in edges.tolist():
        if u in owner and v in owner and owner[u] != owner[v]:
            expected[frozenset({owner[u], owner[v]})] += 1
    got = {frozenset({link.source, link.target}): link.weight for link in result.links}
    assert got == {pair: float(count) for pair, count in expected.items()}
    assert result.stats["per_level"][0]["added_edges"] > 0


def test_stops_at_max_levels_and_min_nodes() -> None:
    graph = ring_of_cliques()
    one = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()),
                                    replace(TWO, max_levels=1, augment="none"))
    assert {c.level for c in one.communities} == {1} and one.stats["stop_reason"] == "max_levels"
    # 8 level-1 communities are fewer than min_nodes=9: level 2 is not built
    chat = theme_chat()
    capped = build_archrag_communities(graph, BuildModels(chat, HashEmbedder()),
                                       ArchragConfig(min_nodes=9, augment="none"))
    assert {c.level for c in capped.communities} == {1}
    assert capped.stats["stop_reason"] == "min_nodes" and capped.stats["levels"] == 1
    assert len(chat.requests) == 8
    # a graph smaller than min_nodes gets no communities and costs nothing
    chat = theme_chat()
    embedder = HashEmbedder()
    none = build_archrag_communities(make_graph([3, 3], [(0, 1)]), BuildModels(chat, embedder),
                                     ArchragConfig(min_nodes=10))
    assert none.communities == [] and none.stats["stop_reason"] == "min_nodes"
    assert chat.calls == 0 and embedder.calls == 0


def test_no_reduction_stops_without_model_calls() -> None:
    graph = make_graph([1] * 6, [])  # six isolated entities
    chat = theme_chat()
    result = build_archrag_communities(graph, BuildModels(chat, HashEmbedder()),
                                       ArchragConfig(min_nodes=2, augment="none"))
    assert result.communities == [] and result.stats["stop_reason"] == "no_reduction"
    assert result.stats["per_level"][0]["singletons"] == 6
    assert chat.calls == 0


def test_singletons_get_no_community_and_no_parent() -> None:
    graph = make_graph([4, 4, 1], [(0, 1)], themes=[0, 1, 0])  # entity 8 is isolated
    result = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()),
                                       replace(TWO, augment="none", max_levels=1))
    assert all("ent8" not in c.entities for c in result.communities)
    assert result.stats["singletons"] == 1 and len(result.communities) == 2


def test_next_layer_vectors_are_summary_embeddings() -> None:
    graph = ring_of_cliques()
    embedder = HashEmbedder()
    result = build_archrag_communities(graph, BuildModels(theme_chat(), embedder), replace(TWO, max_levels=1))
    assert embedder.batches == [[c.summary for c in result.communities]]
    graph.vectors = None  # without vectors the entities are embedded first
    embedder = HashEmbedder()
    build_archrag_communities(graph, BuildModels(theme_chat(), embedder), replace(TWO, max_levels=1, augment="none"))
    assert embedder.batches[0] == [graph.text(i) for i in range(len(graph))]


def test_embedding_stage_is_named() -> None:
    stages = []

    class StageEmbedder(HashEmbedder):
        def embed(self, texts, stage="embed"):  # type: ignore[no-untyped-def]
            stages.append(stage)
            return super().embed(texts, stage)

    build_archrag_communities(make_graph([3, 3], [(0, 1)]), BuildModels(theme_chat(), StageEmbedder()),
                              replace(TWO, max_levels=1))
    assert stages == [EMBED_STAGE]


def test_build_is_deterministic() -> None:
    graph = ring_of_cliques()
    runs = []
    for _ in range(2):
        chat = theme_chat(delay=0.001)
        result = build_archrag_communities(graph, BuildModels(chat, HashEmbedder(), concurrency=4), TWO)
        runs.append((sorted(json.dumps(r.messages) for r in chat.requests), [(c.id, c.children, c.summary) for c in
                                                                 result.communities],
                     [(link.source, link.target, link.weight) for link in result.links], result.stats))
    assert runs[0] == runs[1]


def test_spectral_hierarchy_builds() -> None:
    graph = ring_of_cliques()
    config = replace(TWO, clustering="spectral", spectral_cluster_size=4, max_levels=2)
    result = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()), config)
    level1 = [c for c in result.communities if c.level == 1]
    assert len(level1) == 8
    assert {c.level for c in result.communities} == {1, 2}


@pytest.mark.parametrize("reply", ["", "   ", "{{{", '{"title": 5}', '{"title": "T", "summary": ""}', "[1, 2]"])
def test_malformed_summaries_fall_back_and_are_counted(reply: str) -> None:
    graph = make_graph([3, 3], [(0, 1)])
    chat = ScriptedChat(answers={"archrag_summary": lambda user: reply})
    result = build_archrag_communities(graph, BuildModels(chat, HashEmbedder()), replace(TWO, max_levels=1))
    assert result.stats["fallback_summaries"] == 2 and result.stats["per_level"][0]["fallback_summaries"] == 2
    first = next(c for c in result.communities if "ent0" in c.entities)
    assert first.summary == "E0; E1; E2"  # member names, most connected first (E0 has the bridge)
    assert first.title == "E0 / E1 / E2"
    assert first.payload["summary_source"] == "fallback"


def test_prose_and_wrapped_json_replies_are_used() -> None:
    graph = make_graph([3, 3], [(0, 1)])
    prose = ScriptedChat(answers={"archrag_summary": lambda user: "These things are all about alpha."})
    result = build_archrag_communities(graph, BuildModels(prose, HashEmbedder()), replace(TWO, max_levels=1))
    assert result.stats["prose_summaries"] == 2 and result.stats["fallback_summaries"] == 0
    assert {c.summary for c in result.communities} == {"These things are all about alpha."}
    wrapped = ScriptedChat(answers={"archrag_summary": lambda user: 'Sure!\n```json\n{"title": "T", "summary": "S"'})
    result = build_archrag_communities(graph, BuildModels(wrapped, HashEmbedder()), replace(TWO, max_levels=1))
    assert {(c.title, c.summary) for c in result.communities} == {("T", "S")}
    assert result.stats["fallback_summaries"] == 0


def test_prompt_budget_keeps_the_most_connected_members() -> None:
    graph = make_graph([12], [])
    graph.descriptions = [("long words " * 40).strip()] * 12
    star = np.array([[0, i] for i in range(1, 12)])  # entity 0 is linked to everyone else
    graph.edges = np.concatenate([graph.edges, star])
    graph.weights = np.ones(len(graph.edges))
    graph.relation_texts = graph.relation_texts + ["hub"] * 11
    chat = theme_chat()
    config = ArchragConfig(min_nodes=2, max_levels=1, augment="none", max_input_tokens=300)
    result = build_archrag_communities(graph, BuildModels(chat, HashEmbedder()), config)
    user = ScriptedChat.user_message(chat.requests[0])
    items = user.split("Items:", 1)[1].split("Relations between items:", 1)[0]
    from unirag.text.tokenizer import get_tokenizer

    assert get_tokenizer().count(items) <= 320
    assert items.strip().startswith("- E0:")  # the hub first
    assert "more items omitted" in items
    assert result.stats["truncated_prompts"] == 1


def test_config_is_validated() -> None:
    for bad in (ArchragConfig(augment="magic"), ArchragConfig(clustering="kmeans"),  # type: ignore[arg-type]
                ArchragConfig(max_levels=0), ArchragConfig(knn_k=0), ArchragConfig(resolution=0),
                ArchragConfig(min_weight=0), ArchragConfig(edge_weight="cosine")):  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            build_archrag_communities(make_graph([3], []), BuildModels(theme_chat(), HashEmbedder()), bad)


def test_empty_graph() -> None:
    graph = make_graph([], [])
    result = build_archrag_communities(graph, BuildModels(theme_chat(), HashEmbedder()), TWO)
    assert result.communities == [] and result.stats["stop_reason"] == "empty"


def test_oversized_communities_are_split_until_they_fit() -> None:
    from unirag.hierarchy.archrag import split_oversized

    # four 6-cliques in a chain: one label for all 24 nodes must split into cliques of 6
    edges = []
    for block in range(4):
        nodes = range(6 * block, 6 * block + 6)
        edges += [(a, b) for a in nodes for b in nodes if a < b]
        if block:
            edges.append((6 * block - 1, 6 * block))
    edges_arr = np.array(edges, dtype=np.int64)
    labels = split_oversized(np.zeros(24, dtype=np.int64), edges_arr, np.ones(len(edges)), 6, 1.0, 1)
    assert sorted(np.bincount(labels).tolist()) == [6, 6, 6, 6]
    # a clique that cannot be split stays whole instead of looping forever
    clique = np.array([(a, b) for a in range(8) for b in range(8) if a < b], dtype=np.int64)
    kept = split_oversized(np.zeros(8, dtype=np.int64), clique, np.ones(len(clique)), 3, 1.0, 1)
    assert set(kept.tolist()) == {0}
