"""HyGRAG's hierarchical index (unirag.hierarchy.hygrag): hybrid graph, propagation, LSH buckets, layers, summaries."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedChat
from scipy.sparse import csr_matrix

from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy import hygrag
from unirag.hierarchy.communities import EntityGraph
from unirag.hierarchy.hygrag import (
    EMBED_STAGE,
    SUMMARY_STAGE,
    HybridGraph,
    HygragConfig,
    balanced_sizes,
    build_hygrag_index,
    chunk_links_from,
    hybrid_graph_from,
    lsh_buckets,
    parse_summary,
    structure_aware_embeddings,
)
from unirag.llm.base import normalise_rows

pytestmark = pytest.mark.numeric  # hyperplane signs and propagated embeddings from BLAS products

FAST = HygragConfig(s_min=2, s_max=4, max_layers=4)


def json_summary(user: str) -> str:
    """A well-formed reply naming how many items the bucket had."""
    items = [line for line in user.splitlines() if line.startswith("- [")]
    return json.dumps({"title": f"Group of {len(items)}", "summary": f"This group holds {len(items)} items."})


def scripted(reply=json_summary) -> ScriptedChat:
    return ScriptedChat(answers={"hygrag_summary": reply})


def random_unit(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    return normalise_rows(np.random.default_rng(seed).standard_normal((n, dim)))


def toy_entity_graph(embedder: HashEmbedder) -> tuple[EntityGraph, list[str], list[str], np.ndarray]:
    """Six chunks and ten entities; chunks c0..c2 share 4 entities (linked), c3..c5 share 2 (not linked)."""
    names = [f"Entity{i}" for i in range(10)]
    chunk_ids = [f"chunk-{i}" for i in range(6)]
    chunk_of = {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2], 3: [0, 1, 2], 4: [3, 4], 5: [3, 4], 6: [5], 7: [5], 8: [], 9: []}
    graph = EntityGraph(
        ids=[name.lower() for name in names],
        names=names,
        types=["concept"] * 10,
        descriptions=[f"{name} is thing number {i}." for i, name in enumerate(names)],
        chunk_ids=[[chunk_ids[c] for c in chunk_of[i]] + (["chunk-missing"] if i == 9 else []) for i in range(10)],
        edges=np.array([[0, 1], [1, 2], [4, 5], [8, 9], [0, 1]]),
        weights=np.ones(5),
        relation_texts=["r"] * 5,
    )
    graph.vectors = embedder.embed([graph.text(i) for i in range(10)]).vectors
    texts = [f"Passage {i} mentions " + " ".join(names[e] for e in range(10) if i in chunk_of[e]) for i in range(6)]
    return graph, chunk_ids, texts, embedder.embed(texts).vectors


# -- hybrid graph ---------------------------------------------------------------------


def test_chunk_links_need_more_than_l_shared_entities() -> None:
    graph, chunk_ids, _, _ = toy_entity_graph(HashEmbedder())
    assert chunk_links_from(graph, chunk_ids, threshold=3) == [
        ("chunk-0", "chunk-1", 4), ("chunk-0", "chunk-2", 4), ("chunk-1", "chunk-2", 4)
    ]
    assert ("chunk-3", "chunk-4", 2) in chunk_links_from(graph, chunk_ids, threshold=1)


def test_hybrid_graph_has_three_edge_kinds() -> None:
    embedder = HashEmbedder()
    graph, chunk_ids, texts, vectors = toy_entity_graph(embedder)
    hybrid = hybrid_graph_from(graph, chunk_ids, texts, vectors)
    assert hybrid.node_ids[:6] == chunk_ids and hybrid.node_ids[6:] == graph.ids
    assert hybrid.node_kinds == ["chunk"] * 6 + ["entity"] * 10
    assert hybrid.texts[6] == graph.text(0)
    assert hybrid.edge_counts == {"chunk_chunk": 3, "chunk_entity": 18, "entity_entity": 4,
                                  "dropped_memberships": 1, "dropped_chunk_links": 0}
    a = hybrid.adjacency
    assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0 and set(np.unique(a.data)) == {1.0}
    assert a.nnz // 2 == 3 + 18 + 4  # the duplicate relationship counts once
    assert a[0, 1] == 1 and a[3, 4] == 0  # chunk-chunk only above l = 3 shared entities
    assert a[0, 6] == 1 and a[6, 7] == 1 and a[14, 15] == 1  # chunk-entity, entity-entity
    given = hybrid_graph_from(graph, chunk_ids, texts, vectors, chunk_links=[("chunk-3", "chunk-4", 2), ("x", "chunk-0", 9)])
    assert given.adjacency[3, 4] == 1 and given.adjacency[0, 1] == 0
    assert given.edge_counts["dropped_chunk_links"] == 1


def test_hybrid_graph_validates() -> None:
    with pytest.raises(ValueError, match="unique"):
        HybridGraph(["a", "a"], ["chunk", "entity"], ["x", "y"], np.eye(2), csr_matrix((2, 2)))
    with pytest.raises(ValueError, match="kinds"):
        HybridGraph(["a", "b"], ["chunk", "node"], ["x", "y"], np.eye(2), csr_matrix((2, 2)))
    graph, chunk_ids, texts, vectors = toy_entity_graph(HashEmbedder())
    graph.vectors = None
    with pytest.raises(ValueError, match="entity vectors"):
        hybrid_graph_from(graph, chunk_ids, texts, vectors)


# -- propagation ------------------------------------------------------------------------


def test_propagation_matches_hand_computation() -> None:
    # path 0 - 1 - 2 and an isolated node 3, unit basis vectors
    adjacency = csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=float))
    x = np.eye(4, dtype=np.float32)
    one = structure_aware_embeddings(x, adjacency, iterations=1)
    expected_one = np.array([[0.5, 0.5, 0, 0], [0.25, 0.5, 0.25, 0], [0, 0.5, 0.5, 0], [0, 0, 0, 1]])
    expected_one /= np.linalg.norm(expected_one, axis=1, keepdims=True)
    np.testing.assert_allclose(one, expected_one, atol=1e-6)
    # second iteration: z <- normalise(z / 2 + mean of neighbours / 2) on the normalised z
    z = expected_one
    mixed = 0.5 * z + 0.5 * np.stack([z[1], (z[0] + z[2]) / 2, z[1], np.zeros(4)])
    mixed[3] = z[3]
    np.testing.assert_allclose(structure_aware_embeddings(x, adjacency, iterations=2),
                               mixed / np.linalg.norm(mixed, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(structure_aware_embeddings(x, adjacency, iterations=0), x)
    # vanilla Cleora (no self term): node 0 becomes its neighbour
    np.testing.assert_allclose(structure_aware_embeddings(x, adjacency, 1, self_weight=0.0)[0], x[1], atol=1e-6)


# -- LSH buckets --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [7, 60, 500, 3000])
def test_bucket_sizes_stay_within_bounds(n: int) -> None:
    config = HygragConfig()
    buckets = lsh_buckets(random_unit(n, seed=n), config)
    assert np.array_equal(np.sort(np.concatenate(buckets)), np.arange(n))  # a partition
    sizes = [len(b) for b in buckets]
    assert min(sizes) >= config.s_min and max(sizes) <= config.s_max


def test_small_layers_and_splits() -> None:
    assert [b.tolist() for b in lsh_buckets(random_unit(3), HygragConfig())] == [[0, 1, 2]]  # undersized, documented
    assert lsh_buckets(np.zeros((0, 8)), HygragConfig()) == []
    # identical vectors share one code: the bucket must be split into balanced parts
    stats: dict[str, int] = {}
    same = np.tile(random_unit(1), (123, 1))
    sizes = sorted(len(b) for b in lsh_buckets(same, HygragConfig(), stats=stats))
    assert sizes == [41, 41, 41] and stats["initial_buckets"] == 1 and stats["splits"] == 1
    assert balanced_sizes(101, 50) == [34, 34, 33] and balanced_sizes(50, 50) == [50]
    # anisotropic data (one dominant direction) with and without centring
    skewed = normalise_rows(np.abs(np.random.default_rng(1).standard_normal((800, 16))) + 3.0)
    for config in (HygragConfig(), HygragConfig(center=False)):
        sizes = [len(b) for b in lsh_buckets(skewed, config)]
        assert min(sizes) >= 5 and max(sizes) <= 50


def test_merge_below_makes_bigger_buckets() -> None:
    x = random_unit(2000, seed=9)
    default = lsh_buckets(x, HygragConfig())
    bigger = lsh_buckets(x, HygragConfig(merge_below=20))
    assert min(len(b) for b in bigger) >= 20 and max(len(b) for b in bigger) <= 50
    assert len(bigger) < len(default) / 2
    with pytest.raises(ValueError, match="merge_below"):
        HygragConfig(merge_below=3).validate()
    with pytest.raises(ValueError, match="s_max"):
        HygragConfig(merge_below=30).validate()


def test_buckets_are_deterministic() -> None:
    x = random_unit(700, seed=3)
    first = lsh_buckets(x, HygragConfig())
    again = lsh_buckets(x.copy(), HygragConfig())
    assert [b.tolist() for b in first] == [b.tolist() for b in again]
    other = lsh_buckets(x, HygragConfig(seed=7))
    assert [b.tolist() for b in first] != [b.tolist() for b in other]


def test_table_and_scan_lookups_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    x = random_unit(900, seed=5)
    table = lsh_buckets(x, HygragConfig())
    monkeypatch.setattr(hygrag, "TABLE_BITS", 0)
    scan = lsh_buckets(x, HygragConfig())
    assert [b.tolist() for b in table] == [b.tolist() for b in scan]
    sizes = [len(b) for b in lsh_buckets(x, HygragConfig(hyperplanes=30))]
    assert min(sizes) >= 5 and max(sizes) <= 50


def test_similar_vectors_share_buckets() -> None:
    rng = np.random.default_rng(11)
    centres = random_unit(40, dim=64, seed=12)
    labels = np.repeat(np.arange(40), 10)
    x = normalise_rows(centres[labels] + 0.15 * rng.standard_normal((400, 64)) / 8)
    bucket_of = np.empty(400, dtype=int)
    for index, bucket in enumerate(lsh_buckets(x, HygragConfig())):
        bucket_of[bucket] = index
    same = bucket_of[:, None] == bucket_of[None, :]
    group = labels[:, None] == labels[None, :]
    off_diagonal = ~np.eye(400, dtype=bool)
    together = same[group & off_diagonal].mean()
    apart = same[~group].mean()
    assert together > 0.8 and apart < 0.1 and together > 10 * apart


# -- the hierarchy --------------------------------------------------------------------------


def random_hybrid(n_chunks: int, n_entities: int, seed: int = 0) -> HybridGraph:
    rng = np.random.default_rng(seed)
    n = n_chunks + n_entities
    pairs = rng.integers(0, n, size=(2 * n, 2))
    adjacency = csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return HybridGraph(
        node_ids=[f"chunk-{i}" for i in range(n_chunks)] + [f"ent-{i}" for i in range(n_entities)],
        node_kinds=["chunk"] * n_chunks + ["entity"] * n_entities,
        texts=[f"Chunk text {i} about topic {i % 7}." for i in range(n_chunks)]
        + [f"Entity{i}: a thing in group {i % 5}." for i in range(n_entities)],
        vectors=random_unit(n, seed=seed + 1),
        adjacency=adjacency,
    )


def test_hierarchy_levels_membership_and_links() -> None:
    hybrid = random_hybrid(40, 160)
    chat, embedder = scripted(), HashEmbedder()
    result = build_hygrag_index(hybrid, BuildModels(chat, embedder), FAST)
    assert result.hierarchy == "hygrag" and result.level_order == "bottom_up"
    levels = result.levels()
    assert list(levels) == [1, 2, 3, 4] and result.stats["levels"] == 4
    assert result.stats["stop_reason"] == "max_levels"
    assert all(levels[a] > levels[a + 1] for a in range(1, 4))
    by_id = {c.id: c for c in result.communities}
    for community in result.communities:
        assert 2 <= community.payload["size"] <= 4 == FAST.s_max
        assert community.id.startswith(f"hygrag-{community.level}-")
        if community.level > 1:
            kids = [by_id[child] for child in community.children]
            assert all(kid.parent == community.id and kid.level == community.level - 1 for kid in kids)
            assert community.entities == [e for kid in kids for e in kid.entities]
            assert community.chunks == [c for kid in kids for c in kid.chunks]
        else:
            assert set(community.children) == set(community.entities) | set(community.chunks)
    level_one = [c for c in result.communities if c.level == 1]
    assert sorted(child for c in level_one for child in c.children) == sorted(hybrid.node_ids)
    top = [c for c in result.communities if c.level == 4]
    assert all(c.parent is None for c in top)
    assert sorted(e for c in top for e in c.entities) == sorted(hybrid.node_ids[40:])
    assert sorted(ch for c in top for ch in c.chunks) == sorted(hybrid.node_ids[:40])
    # one summary request per community, on our prompt and stage; one embedding per summary
    assert len(chat.requests) == len(result.communities) == result.stats["summaries"]
    assert {r.stage for r in chat.requests} == {SUMMARY_STAGE}
    assert all(r.prompt_version.startswith("hygrag_summary@") for r in chat.requests)
    assert embedder.embedded_texts == len(result.communities)
    assert result.communities[0].title.startswith("Group of") and result.stats["fallback_summaries"] == 0
    # links join communities of one level whose members are linked
    assert result.links and all(by_id[link.source].level == by_id[link.target].level == link.level
                                for link in result.links)
    json.dumps(result.stats)


def test_layers_stop_at_root_or_small_layer() -> None:
    hybrid = random_hybrid(10, 50, seed=2)
    result = build_hygrag_index(hybrid, BuildModels(scripted(), HashEmbedder()), HygragConfig())
    assert result.stats["stop_reason"] in ("root", "small_layer")
    top_level = max(result.levels())
    assert top_level <= 2 and all(5 <= c.payload["size"] <= 50 for c in result.communities)
    if result.stats["stop_reason"] == "root":
        assert result.levels()[top_level] == 1
    capped = build_hygrag_index(random_hybrid(40, 160), BuildModels(scripted(), HashEmbedder()),
                                replace(FAST, max_layers=2))
    assert list(capped.levels()) == [1, 2] and capped.stats["stop_reason"] == "max_levels"
    tiny = build_hygrag_index(random_hybrid(1, 2), BuildModels(scripted(), HashEmbedder()), HygragConfig())
    assert tiny.levels() == {1: 1} and tiny.stats["undersized_buckets"] == 1
    assert sorted(tiny.communities[0].children) == ["chunk-0", "ent-0", "ent-1"]
    empty = build_hygrag_index(random_hybrid(0, 0), BuildModels(scripted(), HashEmbedder()), HygragConfig())
    assert empty.communities == [] and empty.stats["stop_reason"] == "empty"


def test_rebuild_sends_identical_requests() -> None:
    first_chat, second_chat = scripted(), scripted()
    first = build_hygrag_index(random_hybrid(30, 90, seed=4), BuildModels(first_chat, HashEmbedder(), concurrency=3),
                               FAST)
    second = build_hygrag_index(random_hybrid(30, 90, seed=4),
                                BuildModels(second_chat, HashEmbedder(), concurrency=1), FAST)
    assert [c.id for c in first.communities] == [c.id for c in second.communities]
    assert sorted(r.cache_key("m") for r in first_chat.requests) == sorted(r.cache_key("m") for r in second_chat.requests)


def test_embedding_stage_and_upper_propagation() -> None:
    class StageEmbedder(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.stages: list[str] = []

        def embed(self, texts, stage="embed"):  # type: ignore[no-untyped-def]
            self.stages.append(stage)
            return super().embed(texts, stage)

    embedder = StageEmbedder()
    result = build_hygrag_index(random_hybrid(20, 60), BuildModels(scripted(), embedder),
                                replace(FAST, propagate_upper_layers=True))
    assert set(embedder.stages) == {EMBED_STAGE} and result.stats["levels"] >= 2


def test_malformed_summaries_fall_back_and_are_counted() -> None:
    replies = iter(["", '{"title": "only a title"}', "[1, 2", "Plain prose about the group.",
                    '```json\n{"title": "T", "summary": "S is cut off'])

    def reply(user: str) -> str:
        return next(replies, "{{{")

    hybrid = random_hybrid(5, 20, seed=6)
    result = build_hygrag_index(hybrid, BuildModels(scripted(reply), HashEmbedder(), concurrency=1),
                                replace(FAST, max_layers=1))
    n = len(result.communities)
    assert n >= 6
    stats = result.stats
    assert stats["prose_summaries"] == 1 and stats["fallback_summaries"] == n - 2
    sources = [c.payload["summary_source"] for c in result.communities]
    assert sources.count("json") == 1 and sources.count("prose") == 1
    for community in result.communities:
        assert community.summary and community.title  # never empty, even after a fallback


def test_without_a_model_every_summary_is_extractive() -> None:
    result = build_hygrag_index(random_hybrid(10, 30, seed=7), BuildModels(None, HashEmbedder()), FAST)
    assert result.communities and result.stats["fallback_summaries"] == len(result.communities)
    assert all(c.summary and c.payload["summary_source"] == "fallback" for c in result.communities)


def test_parse_summary() -> None:
    assert parse_summary('{"title": "A", "summary": "B c."}') == ("A", "B c.", "json")
    assert parse_summary('<think>hmm {"x"}</think> {"title": "A", "summary": "B"}') == ("A", "B", "json")
    assert parse_summary('Sure! {"title": "A", "summary": "B"') == ("A", "B", "json")
    assert parse_summary('[{"name": "A", "description": "B"}]') == ("A", "B", "json")
    assert parse_summary("Title: Rivers\nSummary: The Nile flows north.") == ("Rivers", "The Nile flows north.", "prose")
    assert parse_summary('{"title": "A", "summary": ["B.", "C."]}') == ("A", "B. C.", "json")
    assert parse_summary('{"title": "A"}')[2] == "fallback"
    assert parse_summary("   ")[2] == "fallback"
    assert parse_summary("[[[")[2] == "fallback"


def test_prompt_fits_the_token_budget() -> None:
    from unirag.text.tokenizer import get_tokenizer

    hybrid = random_hybrid(10, 0, seed=8)
    hybrid.texts = [("long chunk text " * 400) if i % 2 else f"short chunk {i}" for i in range(10)]
    chat = scripted()
    build_hygrag_index(hybrid, BuildModels(chat, HashEmbedder()), HygragConfig(max_input_tokens=300, max_layers=1))
    assert chat.requests
    prompts = "".join(ScriptedChat.user_message(r).split("Items:", 1)[1] for r in chat.requests)
    for request in chat.requests:
        items = ScriptedChat.user_message(request).split("Items:", 1)[1]
        labels = 6 * items.count("- [")  # "- [chunk] " and the line break come on top of the budget
        assert get_tokenizer().count(items) <= 300 + labels
    assert all(f"short chunk {i}\n" in prompts + "\n" for i in range(0, 10, 2))  # short members are kept whole
    assert prompts.count("long chunk text") < 5 * 400


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="2 \\* s_min - 1"):
        build_hygrag_index(random_hybrid(3, 3), BuildModels(scripted(), HashEmbedder()),
                           HygragConfig(s_min=10, s_max=15))
    with pytest.raises(ValueError, match="hyperplanes"):
        HygragConfig(hyperplanes=0).validate()
