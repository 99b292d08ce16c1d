"""LeanRAG hierarchy: GMM clusters, aggregated entities and relations, parents, stopping, fallbacks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.fakes import HashEmbedder, ScriptedChat
from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.communities import EntityGraph
from unirag.hierarchy.leanrag import (
    ENTITY_STAGE,
    RELATION_STAGE,
    LeanragConfig,
    build_leanrag_hierarchy,
    cluster_layer,
    parents,
    parse_aggregate,
    relation_counts,
)

pytestmark = pytest.mark.numeric  # mixture clusters fitted with BLAS products

_FIRST_ENTITY = re.compile(r"^- ([^:\n]+):", re.MULTILINE)


def entity_reply(user: str) -> str:
    """Aggregate named after the first (most central) member listed."""
    first = _FIRST_ENTITY.search(user.split("Entities:", 1)[1]).group(1)
    return json.dumps({"name": f"Group of {first}", "description": f"Things like {first}."})


def chat(**answers) -> ScriptedChat:
    replies = {"leanrag_aggregate_entity": entity_reply,
               "leanrag_aggregate_relation": lambda user: "The two groups are closely related."}
    replies.update(answers)
    return ScriptedChat(answers=replies)


def grouped_vectors(sizes: list[int], dim: int = 64, noise: float = 0.05, seed: int = 0) -> np.ndarray:
    """Well-separated groups: group g lies around basis vector g."""
    rng = np.random.default_rng(seed)
    rows = []
    for g, size in enumerate(sizes):
        centre = np.zeros(dim)
        centre[g] = 1.0
        rows.append(centre + noise * rng.normal(size=(size, dim)))
    x = np.vstack(rows).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_graph(sizes: list[int], edges: list[tuple[int, int]], vectors: np.ndarray | None = None) -> EntityGraph:
    n = sum(sizes)
    group = np.repeat(np.arange(len(sizes)), sizes)
    pairs = [tuple(sorted(e)) for e in edges]
    return EntityGraph(
        ids=[f"e{i}" for i in range(n)],
        names=[f"Entity {i}" for i in range(n)],
        types=["concept"] * n,
        descriptions=[f"Entity {i} belongs to group {group[i]}. It has details." for i in range(n)],
        chunk_ids=[[f"c{i}"] for i in range(n)],
        edges=np.array(pairs, dtype=np.int64).reshape(-1, 2),
        weights=np.ones(len(pairs)),
        relation_texts=[f"r{a}-{b}" for a, b in pairs],
        vectors=grouped_vectors(sizes) if vectors is None else vectors,
    )


# Three groups of 10 (rows 0-9, 10-19, 20-29). Between groups: 0-1 five relations
# (above tau=3: LLM), 0-2 two (concatenated), 1-2 three (= tau: concatenated).
INSIDE = [(0, 1), (1, 2), (10, 11), (20, 21), (22, 23)]
G01 = [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14)]
G02 = [(5, 20), (6, 21)]
G12 = [(15, 25), (16, 26), (17, 27)]
CONFIG = LeanragConfig(cluster_size=10)


def three_groups() -> EntityGraph:
    return make_graph([10, 10, 10], INSIDE + G01 + G02 + G12)


def level(result, number):
    return [c for c in result.communities if c.level == number]


def test_three_separated_groups_make_three_clusters_then_a_root() -> None:
    result = build_leanrag_hierarchy(three_groups(), BuildModels(chat(), HashEmbedder()), CONFIG)
    assert result.hierarchy == "leanrag" and result.level_order == "bottom_up"
    assert result.levels() == {1: 3, 2: 1}
    groups = sorted(sorted(c.entities) for c in level(result, 1))
    assert groups == sorted(sorted(f"e{i}" for i in range(g * 10, g * 10 + 10)) for g in range(3))
    first = level(result, 1)
    assert all(c.title.startswith("Group of Entity") and c.summary.startswith("Things like") for c in first)
    assert all(c.payload["size"] == 10 and not c.payload["singleton"] for c in first)
    assert result.stats["stop_reason"] == "root"
    assert result.stats["summaries"] == 4 and result.stats["fallback_summaries"] == 0
    json.dumps(result.stats)  # serialisable


def test_relation_counts_known_answer() -> None:
    labels = np.repeat(np.arange(3), 10)
    edges = np.array(INSIDE + G01 + G02 + G12)
    counts = relation_counts(edges, labels, 3).toarray()
    assert counts.tolist() == [[2, 5, 2], [5, 1, 3], [2, 3, 2]]


def test_links_weights_and_tau_rule() -> None:
    model = chat()
    result = build_leanrag_hierarchy(three_groups(), BuildModels(model, HashEmbedder()), CONFIG)
    by_members = {frozenset(c.entities): c.id for c in level(result, 1)}
    group_id = [by_members[frozenset(f"e{i}" for i in range(g * 10, g * 10 + 10))] for g in range(3)]
    links = {frozenset((link.source, link.target)): link for link in result.links if link.level == 1}
    assert len(links) == 3 and all(link.level == 1 for link in result.links)
    strong = links[frozenset((group_id[0], group_id[1]))]
    weak = links[frozenset((group_id[0], group_id[2]))]
    edge = links[frozenset((group_id[1], group_id[2]))]
    assert (strong.weight, weak.weight, edge.weight) == (5.0, 2.0, 3.0)
    assert strong.description == "The two groups are closely related."
    assert weak.description == "Entity 5 -- Entity 20: r5-20\nEntity 6 -- Entity 21: r6-21"
    assert edge.description.count("\n") == 2  # three relations concatenated: 3 is not above tau
    relation_calls = [r for r in model.requests if r.stage == RELATION_STAGE]
    assert len(relation_calls) == 1
    user = ScriptedChat.user_message(relation_calls[0])
    assert all(f"r{a}-{b}" in user for a, b in G01)
    assert result.stats["relation_calls"] == 1 and result.stats["concatenated_relations"] == 2
    # The root's prompt shows the aggregated relations among the level-1 entities.
    root_call = [r for r in model.requests
                 if r.stage == ENTITY_STAGE and "closely related" in ScriptedChat.user_message(r)]
    assert len(root_call) == 1


def test_tau_per_level_and_zero() -> None:
    model = chat()
    result = build_leanrag_hierarchy(three_groups(), BuildModels(model, HashEmbedder()),
                                     LeanragConfig(cluster_size=10, tau=(10,)))
    assert result.stats["relation_calls"] == 0 and result.stats["concatenated_relations"] == 3
    model = chat()
    result = build_leanrag_hierarchy(three_groups(), BuildModels(model, HashEmbedder()),
                                     LeanragConfig(cluster_size=10, tau=0))
    assert result.stats["relation_calls"] == 3


def test_parents_and_entities_are_unions() -> None:
    result = build_leanrag_hierarchy(three_groups(), BuildModels(chat(), HashEmbedder()), CONFIG)
    mapping = parents(result)
    first_ids = {c.id for c in level(result, 1)}
    for i in range(30):
        assert mapping[f"e{i}"] in first_ids
    assert sum(len(c.children) for c in level(result, 1)) == 30  # exactly one parent each
    (root,) = level(result, 2)
    assert root.parent is None
    assert all(c.parent == root.id for c in level(result, 1))
    assert sorted(root.children) == sorted(first_ids)
    by_id = {c.id: c for c in result.communities}
    assert sorted(root.entities) == sorted(e for child in root.children for e in by_id[child].entities)
    assert sorted(root.entities) == sorted(f"e{i}" for i in range(30))


def test_deeper_hierarchy_is_a_tree() -> None:
    sizes = [4] * 12
    n = sum(sizes)
    edges = [(i, i + 1) for i in range(n - 1)]
    graph = make_graph(sizes, edges, grouped_vectors(sizes))
    result = build_leanrag_hierarchy(graph, BuildModels(chat(), HashEmbedder()), LeanragConfig(cluster_size=4))
    assert result.stats["levels"] >= 3 and result.stats["stop_reason"] == "root"
    by_id = {c.id: c for c in result.communities}
    top = max(result.levels())
    assert len(level(result, top)) == 1
    mapping = parents(result)
    for community in result.communities:
        if community.level == 1:
            assert sorted(community.entities) == sorted(community.children)
        else:
            union = [e for child in community.children for e in by_id[child].entities]
            assert sorted(community.entities) == sorted(union) and len(set(union)) == len(union)
            assert all(by_id[child].level == community.level - 1 and by_id[child].parent == community.id
                       for child in community.children)
        assert (community.parent is None) == (community.level == top)
        if community.parent:
            assert mapping[community.id] == community.parent
    for lvl in result.levels():  # every level partitions the base entities
        assert sorted(e for c in level(result, lvl) for e in c.entities) == sorted(graph.ids)
    # Links join communities of the same level.
    for link in result.links:
        assert by_id[link.source].level == by_id[link.target].level == link.level


def test_stopping_rules() -> None:
    graph = three_groups()
    no_root = build_leanrag_hierarchy(graph, BuildModels(chat(), HashEmbedder()),
                                      LeanragConfig(cluster_size=10, root=False))
    assert no_root.levels() == {1: 3} and no_root.stats["stop_reason"] == "small_layer"
    assert all(c.parent is None for c in no_root.communities)
    capped = build_leanrag_hierarchy(graph, BuildModels(chat(), HashEmbedder()),
                                     LeanragConfig(cluster_size=10, max_layers=1))
    assert capped.levels() == {1: 3} and capped.stats["stop_reason"] == "max_levels"
    small = build_leanrag_hierarchy(make_graph([5], [(0, 1)]), BuildModels(chat(), HashEmbedder()), LeanragConfig())
    assert small.levels() == {1: 1} and small.stats["stop_reason"] == "root"
    assert small.communities[0].children == [f"e{i}" for i in range(5)]
    small_no_root = build_leanrag_hierarchy(make_graph([5], []), BuildModels(chat(), HashEmbedder()),
                                            LeanragConfig(root=False))
    assert small_no_root.communities == [] and small_no_root.stats["stop_reason"] == "small_layer"
    single = build_leanrag_hierarchy(make_graph([1], []), BuildModels(chat(), HashEmbedder()))
    assert single.communities == [] and single.stats["stop_reason"] == "single_node"
    empty = make_graph([0], [], np.zeros((0, 64), dtype=np.float32))
    assert build_leanrag_hierarchy(empty, BuildModels(chat(), HashEmbedder())).stats["stop_reason"] == "empty"


def test_deterministic_rebuild() -> None:
    graph = make_graph([6] * 8, [(i, i + 7) for i in range(40)])
    config = LeanragConfig(cluster_size=5)
    first_chat, second_chat = chat(), chat()
    first = build_leanrag_hierarchy(graph, BuildModels(first_chat, HashEmbedder(), concurrency=4), config)
    second = build_leanrag_hierarchy(graph, BuildModels(second_chat, HashEmbedder(), concurrency=2), config)
    assert [(c.id, c.parent, c.children, c.title) for c in first.communities] == \
        [(c.id, c.parent, c.children, c.title) for c in second.communities]
    assert [(x.source, x.target, x.weight, x.description) for x in first.links] == \
        [(x.source, x.target, x.weight, x.description) for x in second.links]
    keys = [sorted(r.cache_key("m") for r in model.requests) for model in (first_chat, second_chat)]
    assert keys[0] == keys[1]
    labels, _ = cluster_layer(graph.vectors, config)
    assert labels.tolist() == cluster_layer(graph.vectors, config)[0].tolist()
    assert labels[0] == 0 and set(labels.tolist()) == set(range(labels.max() + 1))


def test_malformed_replies_fall_back_and_are_counted() -> None:
    def bad_entity(user: str) -> str:
        first = _FIRST_ENTITY.search(user.split("Entities:", 1)[1]).group(1)
        if not re.fullmatch(r"Entity \d+", first):
            return entity_reply(user)  # the root
        number = int(first.split()[-1])
        if number < 10:
            return "I cannot produce JSON today."
        if number < 20:
            return 'Sure! {"name": "Second group", "description": "Partly written'  # repairable
        return '{"name": "Third group"}'  # no description

    model = chat(leanrag_aggregate_entity=bad_entity, leanrag_aggregate_relation=lambda user: "  ")
    result = build_leanrag_hierarchy(three_groups(), BuildModels(model, HashEmbedder()), CONFIG)
    first = sorted(level(result, 1), key=lambda c: min(int(e[1:]) for e in c.entities))
    assert first[0].title.endswith(" (group)") and first[0].payload["fallback"]
    assert first[0].title == f"Entity {first[0].payload['central'][1:]} (group)"  # most central member
    assert first[0].summary.startswith("Entity ") and "It has details" not in first[0].summary
    assert (first[1].title, first[1].summary, first[1].payload["fallback"]) == ("Second group", "Partly written", False)
    assert first[2].title == "Third group" and first[2].payload["fallback"]
    assert first[2].summary.startswith("Entity 2")
    assert result.stats["fallback_summaries"] == 2
    assert result.stats["relation_fallbacks"] == 1
    strong = max(result.links, key=lambda link: link.weight)
    assert strong.weight == 5 and strong.description.count("\n") == 4  # concatenation replaced the empty reply


def test_parse_aggregate_variants() -> None:
    assert parse_aggregate('```json\n{"name": "A", "description": "B"}\n```') == ("A", "B")
    assert parse_aggregate('{"entity_name": "A", "entity_description": "B"}') == ("A", "B")
    assert parse_aggregate('[{"name": "A", "description": "B"}]') == ("A", "B")
    assert parse_aggregate("no json") == ("", "")
    assert parse_aggregate('{"name": 3, "description": ["x"]}') == ("", "")


def test_singleton_cluster_needs_no_call() -> None:
    vectors = np.zeros((3, 64), dtype=np.float32)
    vectors[0, 0], vectors[1, :2], vectors[2, 2] = 1.0, (0.99, 0.1), 1.0
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    graph = make_graph([3], [(0, 1), (1, 2)], vectors)
    model = chat()
    result = build_leanrag_hierarchy(graph, BuildModels(model, HashEmbedder()),
                                     LeanragConfig(cluster_size=2, root=False))
    first = level(result, 1)
    assert sorted(len(c.children) for c in first) == [1, 2]
    single = next(c for c in first if len(c.children) == 1)
    assert single.title == "Entity 2" and single.payload["singleton"]
    assert result.stats["singletons"] == 1 and result.stats["summaries"] == 1


def test_prompt_respects_token_budget_and_missing_vectors_are_embedded() -> None:
    graph = make_graph([30], [(i, i + 1) for i in range(29)])
    graph.descriptions = [" ".join(["word"] * 300)] * 30
    graph.vectors = None
    embedder = HashEmbedder()
    model = chat()
    config = LeanragConfig(cluster_size=40, max_input_tokens=300)
    result = build_leanrag_hierarchy(graph, BuildModels(model, embedder), config)
    assert result.levels() == {1: 1}
    assert embedder.batches[0][0].startswith("Entity 0:")  # base vectors embedded from name: description
    from unirag.text.tokenizer import get_tokenizer

    user = ScriptedChat.user_message(model.requests[0])
    assert get_tokenizer().count(user) < 300 + 150  # budget plus the instructions


def test_big_layers_are_clustered_block_by_block() -> None:
    """Past gmm_block_size nodes a layer is split by k-means, then each block gets its own
    reduction and mixture: clusters stay within a block, sizes near cluster_size, reruns equal;
    a layer within one block is the single mixture it always was."""
    vectors = grouped_vectors([12] * 30, dim=48)
    config = LeanragConfig(cluster_size=6, gmm_block_size=90)
    labels, components = cluster_layer(vectors, config)
    assert labels.tolist() == cluster_layer(vectors, config)[0].tolist()
    assert set(labels.tolist()) == set(range(labels.max() + 1)) and components >= len(vectors) // 6
    assert 4 <= len(vectors) / (labels.max() + 1) <= 8
    small = vectors[:80]
    assert cluster_layer(small, config)[0].tolist() == \
        cluster_layer(small, LeanragConfig(cluster_size=6, gmm_block_size=0))[0].tolist()


def test_invalid_config_fails_early() -> None:
    with pytest.raises(ValueError):
        build_leanrag_hierarchy(three_groups(), BuildModels(chat(), HashEmbedder()), LeanragConfig(cluster_size=1))
    with pytest.raises(ValueError):
        bad = LeanragConfig(reducer="tsne")  # type: ignore[arg-type]
        build_leanrag_hierarchy(three_groups(), BuildModels(chat(), HashEmbedder()), bad)
    with pytest.raises(ValueError):
        LeanragConfig(cluster_size=20, gmm_block_size=30).validate()


def test_an_attached_update_keeps_what_did_not_change() -> None:
    """A new entity in group 2 changes that cluster (and the root) but not group 0-1's relations:
    the 0-1 link keeps its description, clusters 0 and 1 keep their aggregated entities."""
    from unirag.hierarchy.attach import LevelCarrier, PreviousNode

    first = build_leanrag_hierarchy(three_groups(), BuildModels(chat(), HashEmbedder()), CONFIG)
    previous: dict[int, list[PreviousNode]] = {}
    for community in first.communities:
        previous.setdefault(community.level, []).append(
            PreviousNode(community.id, tuple(community.children), community.summary, community))
    grown = make_graph([10, 10, 11], INSIDE + G01 + G02 + G12 + [(30, 29)])
    model = chat()
    carrier = LevelCarrier(previous, {f"e{i}" for i in range(30)})
    second = build_leanrag_hierarchy(grown, BuildModels(model, HashEmbedder()), CONFIG, carrier, first.links)
    assert second.stats["kept_summaries"] == 2 and second.stats["kept_relations"] == 1
    assert [r.stage for r in model.requests].count(RELATION_STAGE) == 0
    assert {c.id for c in level(first, 1)} & {c.id for c in level(second, 1)}  # two clusters kept their ids
    strong = [link for link in second.links if link.weight == 5.0]
    assert strong[0].description == "The two groups are closely related." and strong[0].digest


def _carrier_of(result, leaves: int):
    from unirag.hierarchy.attach import LevelCarrier, PreviousNode

    previous: dict[int, list[PreviousNode]] = {}
    for community in result.communities:
        previous.setdefault(community.level, []).append(
            PreviousNode(community.id, tuple(community.children), community.summary, community))
    return LevelCarrier(previous, {f"e{i}" for i in range(leaves)})


def _by_digest(records) -> dict:
    return {r.digest: r for level_records in records.values() for r in level_records}


def test_a_link_keeps_its_description_while_its_relations_drift_within_relink_share() -> None:
    """The 0-1 link was written from 5 relations. One more (1 of 6 differs: 0.17) is within a
    share of 0.2, so its description stays, recorded as written from the 5; a second one
    (2 of 7: 0.29) is measured against those 5 too, so the drift does not creep: rewritten."""
    from unirag.hierarchy.leanrag import build_leanrag
    from unirag.hierarchy.leanrag_links import previous_link_levels

    config = LeanragConfig(cluster_size=10, relink_share=0.2)
    first, records = build_leanrag(three_groups(), BuildModels(chat(), HashEmbedder()), config)
    one_more = make_graph([10, 10, 10], INSIDE + G01 + G02 + G12 + [(5, 15)])
    model = chat(leanrag_aggregate_relation=lambda user: "Rewritten.")
    second, records2 = build_leanrag(one_more, BuildModels(model, HashEmbedder()), config, _carrier_of(first, 30),
                                     previous_link_levels(first.links, _by_digest(records)))
    assert second.stats["kept_relations"] == 1 and second.stats["drifted_relations"] == 1
    assert [r.stage for r in model.requests].count(RELATION_STAGE) == 0
    strong = max(second.links, key=lambda link: link.weight)
    assert strong.weight == 6.0 and strong.description == "The two groups are closely related."
    assert len(_by_digest(records2)[strong.digest].basis) == 5  # what the description was written from

    two_more = make_graph([10, 10, 10], INSIDE + G01 + G02 + G12 + [(5, 15), (6, 16)])
    model = chat(leanrag_aggregate_relation=lambda user: "Rewritten.")
    third, records3 = build_leanrag(two_more, BuildModels(model, HashEmbedder()), config, _carrier_of(second, 30),
                                    previous_link_levels(second.links, _by_digest(records2)))
    assert third.stats["kept_relations"] == 0 and [r.stage for r in model.requests].count(RELATION_STAGE) == 1
    strong = max(third.links, key=lambda link: link.weight)
    assert strong.weight == 7.0 and strong.description == "Rewritten."
    assert len(_by_digest(records3)[strong.digest].basis) == 7


def test_relink_share_zero_rewrites_any_changed_link() -> None:
    from unirag.hierarchy.leanrag import build_leanrag
    from unirag.hierarchy.leanrag_links import previous_link_levels

    config = LeanragConfig(cluster_size=10, relink_share=0.0)
    first, records = build_leanrag(three_groups(), BuildModels(chat(), HashEmbedder()), config)
    one_more = make_graph([10, 10, 10], INSIDE + G01 + G02 + G12 + [(5, 15)])
    model = chat()
    second, _ = build_leanrag(one_more, BuildModels(model, HashEmbedder()), config, _carrier_of(first, 30),
                              previous_link_levels(first.links, _by_digest(records)))
    assert second.stats["kept_relations"] == 0 and [r.stage for r in model.requests].count(RELATION_STAGE) == 1
    with pytest.raises(ValueError, match="relink_share"):
        LeanragConfig(relink_share=1.5).validate()


def test_link_bases_round_trip_and_a_damaged_file_keeps_nothing(tmp_path) -> None:
    from unirag.hierarchy.leanrag_links import LinkBasis, PreviousLinks, load_link_bases, save_link_bases

    path = tmp_path / "bases.npz"
    hashes = np.array([5, 9, 11], dtype=np.uint64)
    save_link_bases(path, {1: [LinkBasis("a", hashes, True), LinkBasis("b", np.zeros(0, np.uint64), False)],
                           2: [LinkBasis("c", np.array([3], dtype=np.uint64), True)]})
    loaded = load_link_bases(path)
    assert sorted(loaded) == ["a", "b", "c"] and loaded["a"].basis.tolist() == [5, 9, 11]
    assert loaded["a"].summarised and not loaded["b"].summarised and loaded["b"].basis.size == 0
    previous = PreviousLinks(["x", "y"], [hashes, np.array([1, 2], dtype=np.uint64)], np.array([True, True]))
    assert previous.closest(np.array([5, 9, 11, 12], dtype=np.uint64)) == (0, 0.25)
    assert previous.closest(np.array([7], dtype=np.uint64)) == (-1, 1.0)
    path.write_bytes(b"not an npz")
    assert load_link_bases(path) == {}
    assert load_link_bases(tmp_path / "missing.npz") == {}


def test_after_a_full_build_an_untouched_link_keeps_its_description() -> None:
    """LeanRAG's mixture puts no cap on a cluster, so a full build may leave clusters past the
    update's ``2 * cluster_size`` (here: clusters of 10, cap 8). The first update must not split
    the ones it does not touch: the 0-1 link, whose relations did not change, keeps its
    description (no call), as after an update; only group 2, which grew, is split."""
    from unirag.hierarchy.leanrag import build_leanrag
    from unirag.hierarchy.leanrag_links import previous_link_levels

    first, records = build_leanrag(three_groups(), BuildModels(chat(), HashEmbedder()), CONFIG)
    assert sorted(c.payload["size"] for c in level(first, 1)) == [10, 10, 10]
    grown = make_graph([10, 10, 11], INSIDE + G01 + G02 + G12 + [(30, 29)])
    model = chat(leanrag_aggregate_relation=lambda user: "Rewritten.")
    second, _ = build_leanrag(grown, BuildModels(model, HashEmbedder()), LeanragConfig(cluster_size=4),
                              _carrier_of(first, 30), previous_link_levels(first.links, _by_digest(records)))
    assert second.stats["update"]["splits"] == 1
    assert [r.stage for r in model.requests].count(RELATION_STAGE) == 0
    assert second.stats["kept_relations"] == 1
    strong = max(second.links, key=lambda link: link.weight)
    assert strong.weight == 5.0 and strong.description == "The two groups are closely related."
    kept = {c.id for c in level(first, 1)} & {c.id for c in level(second, 1)}
    assert len(kept) == 2  # groups 0 and 1 keep their ids (and aggregated entities)
