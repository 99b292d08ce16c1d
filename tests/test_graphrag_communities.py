"""GraphRAG community hierarchy (hierarchical Leiden) and community reports, with a scripted model."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from fakes import ScriptedChat

from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.graphrag import (
    GraphragCommunityConfig,
    ReportElements,
    SubReport,
    build_graphrag_communities,
    build_report_context,
    hierarchical_leiden,
    level_partition,
    parse_report,
)
from unirag.hierarchy.communities import EntityGraph


def words(text: str) -> int:
    return len(text.split())


def make_graph(n: int, edges: list[tuple[int, int]], descriptions: list[str] | None = None,
               names: list[str] | None = None, types: list[str] | None = None) -> EntityGraph:
    edges = [tuple(sorted(e)) for e in edges]
    return EntityGraph(
        ids=[f"e{i}" for i in range(n)],
        names=names or [f"N{i}" for i in range(n)],
        types=types or ["thing"] * n,
        descriptions=descriptions or [f"entity {i} is described here" for i in range(n)],
        chunk_ids=[[f"c{i}"] for i in range(n)],
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
        weights=np.ones(len(edges)),
        relation_texts=[f"N{a} relates to N{b}" for a, b in edges],
    )


def cliques(sizes: list[int], bridges: list[tuple[int, int]] = ()) -> tuple[int, list[tuple[int, int]]]:
    edges, start = [], 0
    for size in sizes:
        edges += [(start + i, start + j) for i, j in itertools.combinations(range(size), 2)]
        start += size
    return start, edges + list(bridges)


def ring_of_cliques(count: int, size: int) -> EntityGraph:
    """Modularity's resolution limit merges neighbouring cliques at the top level."""
    n, edges = cliques([size] * count)
    edges += [(c * size + size - 1, ((c + 1) % count) * size) for c in range(count)]
    return make_graph(n, edges)


def data_lines(user: str) -> list[str]:
    return user.split("Data:", 1)[1].strip().splitlines()


def report_json(user: str) -> str:
    """A well-formed report naming the first entity (or sub-report) of the data."""
    lines = [line[2:] for line in data_lines(user) if line.startswith("- ")]
    first = lines[0].split(":")[0].split("\n")[0]
    return json.dumps({
        "title": f"About {first}",
        "summary": f"Summary of {len(lines)} items led by {first}.",
        "rating": 6.5,
        "rating_explanation": "Moderately important.",
        "findings": [{"summary": f"{first} matters", "explanation": "It is central."}],
    })


def chat(reply=report_json) -> ScriptedChat:
    return ScriptedChat(answers={"community_report": reply})


def user_of(request) -> str:
    return ScriptedChat.user_message(request)


# -- hierarchical Leiden -------------------------------------------------------------------


def test_two_cliques_joined_by_one_edge_are_two_root_communities():
    n, edges = cliques([5, 5], [(4, 5)])
    levels = hierarchical_leiden(make_graph(n, edges))
    assert len(levels) == 1
    assert sorted(c.rows for c in levels[0]) == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)]
    assert all(c.parent is None and not c.children for c in levels[0])


def test_communities_over_max_size_are_split_and_children_partition_parents():
    graph = ring_of_cliques(30, 4)
    levels = hierarchical_leiden(graph, max_cluster_size=10)
    assert len(levels) == 2
    big = [c for c in levels[0] if len(c.rows) > 10]
    assert big and all(c.children for c in big)
    assert all(not c.children for c in levels[0] if len(c.rows) <= 10)
    for parent in big:
        children = [levels[1][i] for i in parent.children]
        assert all(child.parent == parent.index and child.level == 1 for child in children)
        merged = sorted(r for child in children for r in child.rows)
        assert merged == sorted(parent.rows)  # a partition: no row lost, none repeated
        assert all(len(child.rows) == 4 for child in children)  # the cliques themselves
    for level in range(len(levels)):
        covered = sorted(r for c in level_partition(levels, level) for r in c.rows)
        assert covered == list(range(len(graph)))


def test_a_clique_larger_than_max_size_cannot_be_split_and_stays_a_leaf():
    n, edges = cliques([12])
    levels = hierarchical_leiden(make_graph(n, edges), max_cluster_size=5)
    assert len(levels) == 1 and len(levels[0]) == 1 and len(levels[0][0].rows) == 12


def test_isolated_entities_and_small_components_are_communities_too():
    n, edges = cliques([3, 2])
    graph = make_graph(n + 2, edges)  # rows 5 and 6 have no edge
    levels = hierarchical_leiden(graph)
    assert sorted(c.rows for c in levels[0]) == [(0, 1, 2), (3, 4), (5,), (6,)]


def test_max_levels_bounds_the_depth():
    graph = ring_of_cliques(30, 4)
    assert len(hierarchical_leiden(graph, max_cluster_size=10, max_levels=1)) == 1


def test_leiden_is_deterministic():
    graph = ring_of_cliques(30, 4)
    assert hierarchical_leiden(graph, max_cluster_size=6) == hierarchical_leiden(graph, max_cluster_size=6)


# -- report contexts (word counter: exact known answers) ---------------------------------


def star_graph() -> ReportElements:
    """A hub A with B, C, D; D-E. Degrees A3 B1 C1 D2 E1; combined degree of edges
    A-B 4, A-C 4, A-D 5, D-E 3. Entity lines cost 4 words, edge lines 6, headers 2."""
    graph = make_graph(
        5, [(0, 1), (0, 2), (0, 3), (3, 4)],
        names=["A", "B", "C", "D", "E"], types=[""] * 5,
        descriptions=[f"about {x}" for x in "abcde"],
    )
    graph.relation_texts[:] = ["ab link", "ac link", "ad link", "de link"]
    return ReportElements.from_graph(graph, words)


def test_star_costs_are_as_designed():
    elements = star_graph()
    assert elements.entity_lines[0] == "- A: about a"
    assert elements.edge_lines[2] == "- A -> D: ad link"
    assert elements.entity_tokens.tolist() == [4] * 5 and elements.edge_tokens.tolist() == [6] * 4
    assert elements.header_tokens == 2
    assert elements.by_priority(np.arange(4)).tolist() == [2, 0, 1, 3]


@pytest.mark.parametrize(
    ("limit", "entities", "edges", "truncated"),
    [
        (15, (), (), True),  # the first group (A, D, A-D) costs 14 on top of 2 for headers
        (16, (0, 3), (2,), True),
        (26, (0, 3, 1), (2, 0), True),
        (35, (0, 3, 1), (2, 0), True),  # A-C would make 36
        (36, (0, 3, 1, 2), (2, 0, 1), True),
        (46, (0, 3, 1, 2, 4), (2, 0, 1, 3), False),
    ],
)
def test_leaf_context_adds_edges_by_combined_degree_until_the_limit(limit, entities, edges, truncated):
    elements = star_graph()
    context = build_report_context(elements, range(5), limit)
    assert (context.entities, context.edges, context.truncated) == (entities, edges, truncated)
    assert context.tokens <= limit and context.tokens == words(context.text)
    assert context.substituted == ()


def test_leaf_context_renders_entities_then_relationships():
    context = build_report_context(star_graph(), range(5), 26)
    assert context.text.splitlines() == [
        "Entities:", "- A: about a", "- D: about d", "- B: about b",
        "Relationships:", "- A -> D: ad link", "- A -> B: ab link",
    ]


def test_entities_without_internal_edges_are_added_by_degree():
    elements = star_graph()
    context = build_report_context(elements, [1, 2, 4], 100)  # B, C, E: no edge among them
    assert context.edges == () and context.entities == (1, 2, 4) and not context.truncated


def test_parent_context_fits_whole_without_substitution():
    elements = star_graph()
    subs = [SubReport((0, 1, 2), "rx one two"), SubReport((3, 4), "ry")]
    context = build_report_context(elements, range(5), 46, subs)
    assert context.substituted == () and len(context.edges) == 4 and not context.truncated


def test_largest_sub_community_is_substituted_first_until_the_context_fits():
    # Children X = {A, B, C} (elements 3*4 + 2*6 = 24 words) and Y = {D, E} (14); A-D joins them.
    elements = star_graph()
    subs = [SubReport((3, 4), "ry"), SubReport((0, 1, 2), "rx one two")]
    context = build_report_context(elements, range(5), 40, subs)
    assert context.substituted == (1,)
    # headers 2 + report header 2 + "- rx one two" 4 + A-D group 14 + D-E group 10
    assert context.tokens == 32 == words(context.text) and not context.truncated
    assert context.edges == (2, 3) and context.entities == (0, 3, 4)
    assert context.text.splitlines()[:2] == ["Sub-community reports:", "- rx one two"]

    tighter = build_report_context(elements, range(5), 25, subs)
    assert tighter.substituted == (1, 0)  # X, then Y: reports + the A-D edge between them
    assert tighter.edges == (2,) and tighter.entities == (0, 3)
    assert tighter.tokens == 2 + 2 + 4 + 2 + 14 == words(tighter.text)
    assert "- ry" in tighter.text and "- rx one two" in tighter.text


def test_a_report_longer_than_its_elements_is_never_substituted():
    elements = star_graph()
    long_report = " ".join(["word"] * 30)
    subs = [SubReport((0, 1, 2), long_report), SubReport((3, 4), long_report)]
    context = build_report_context(elements, range(5), 40, subs)
    assert context.substituted == () and context.truncated and context.tokens <= 40


# -- report parsing ------------------------------------------------------------------------------


GOOD = {"title": "T", "summary": "S", "rating": 7, "rating_explanation": "why",
        "findings": [{"summary": "f1", "explanation": "e1"}]}


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD) + "\n```",
        "Here is the report you asked for:\n" + json.dumps(GOOD) + "\nI hope this helps.",
        json.dumps(GOOD)[:-3],  # cut by max_tokens
        "[" + json.dumps(GOOD) + "]",
    ],
)
def test_malformed_reports_are_salvaged(reply):
    report = parse_report(reply)
    assert report is not None and report.title == "T" and report.summary == "S"
    assert report.findings[0]["summary"] == "f1"
    assert report.repaired == (reply not in (json.dumps(GOOD), "[" + json.dumps(GOOD) + "]"))


def test_key_spellings_and_ratings_are_normalised():
    report = parse_report('{"Title": "T", "Summary": "S", "rating explanation": "x", "rating": "8/10",'
                          ' "findings": ["plain insight"]}')
    assert report.rating == 8.0 and report.rating_explanation == "x"
    assert report.findings == [{"summary": "plain insight", "explanation": ""}]
    assert parse_report('{"summary": "S", "rating": 42}').rating == 10.0
    assert parse_report('{"summary": "S", "rating": -3}').rating == 0.0
    assert parse_report('{"summary": "S", "rating": "high"}').rating is None


@pytest.mark.parametrize("reply", ["", "I cannot help with that.", '{"title": "only a title"}', "[1, 2]", "null"])
def test_replies_without_a_report_are_rejected(reply):
    assert parse_report(reply) is None


# -- the builder -----------------------------------------------------------------------------------


def test_builder_two_cliques_reports_and_community_fields():
    n, edges = cliques([5, 5], [(4, 5)])
    graph = make_graph(n, edges)
    model = chat()
    result = build_graphrag_communities(graph, BuildModels(model), GraphragCommunityConfig())
    assert result.hierarchy == "graphrag" and result.level_order == "top_down"
    assert result.levels() == {0: 2}
    assert model.calls == 2 and all(r.stage == "index.graphrag.report" and r.json_mode for r in model.requests)
    assert all(r.max_tokens == 800 for r in model.requests)
    for community in result.communities:
        assert community.parent is None and community.children == community.entities
        assert len(community.entities) == 5 and community.rating == 6.5
        assert community.title.startswith("About N")
        assert community.summary.startswith("Summary of") and "matters: It is central." in community.summary
        assert community.payload["findings"][0]["explanation"] == "It is central."
        assert community.payload["rating_explanation"] == "Moderately important."
        assert community.payload["report"]["title"] == community.title
        assert 0 < community.payload["context_tokens"] <= 4000
    stats = result.stats
    assert stats["levels"] == 1 and stats["summaries"] == 2 and stats["fallback_summaries"] == 0
    assert [(level["level"], level["communities"]) for level in stats["per_level"]] == [(0, 2)]
    json.dumps(stats)
    json.dumps([c.payload for c in result.communities])


def test_builder_hierarchy_parents_point_to_children_and_reports_go_bottom_up():
    graph = ring_of_cliques(30, 4)
    model = chat()
    config = GraphragCommunityConfig(max_cluster_size=10, max_context_tokens=120)
    result = build_graphrag_communities(graph, BuildModels(model), config)
    by_id = {c.id: c for c in result.communities}
    parents = [c for c in result.communities if c.level == 0 and len(c.entities) > 10]
    assert parents and result.stats["levels"] == 2
    for parent in parents:
        children = [by_id[i] for i in parent.children]
        assert all(child.parent == parent.id and child.level == 1 for child in children)
        assert sorted(e for child in children for e in child.entities) == sorted(parent.entities)
    users = [user_of(r) for r in model.requests]
    parent_calls = [i for i, u in enumerate(users) if "Sub-community reports:" in u]
    leaf_calls = [i for i, u in enumerate(users) if "Sub-community reports:" not in u]
    assert parent_calls and min(parent_calls) > max(leaf_calls)
    substituted = [p for p in parents if p.payload["substituted"]]
    assert len(substituted) == result.stats["substituted"] > 0
    for parent in substituted:
        child_texts = [by_id[i].summary for i in parent.children]
        assert any(text in users[i] for i in parent_calls for text in child_texts)
    assert all(c.payload["context_tokens"] <= 120 for c in result.communities)


def test_builder_is_deterministic():
    graph = ring_of_cliques(30, 4)
    config = GraphragCommunityConfig(max_context_tokens=150)
    first, second = chat(), chat()
    a = build_graphrag_communities(graph, BuildModels(first), config)
    b = build_graphrag_communities(graph, BuildModels(second, concurrency=2), config)
    assert [(c.id, c.parent, c.children, c.title) for c in a.communities] == \
        [(c.id, c.parent, c.children, c.title) for c in b.communities]
    assert sorted(r.cache_key("m") for r in first.requests) == sorted(r.cache_key("m") for r in second.requests)
    assert a.stats == b.stats


def test_builder_salvages_malformed_replies_and_falls_back_on_garbage():
    n, edges = cliques([5, 5, 4], [(4, 5), (9, 10)])
    graph = make_graph(n, edges)

    def reply(user: str) -> str:
        good = report_json(user)
        if "- N0 " in user:
            return "```json\n" + good + "\n```"
        if "- N5 " in user:
            return "Sure! " + good[: len(good) - 40]  # text before, cut near the end
        return "I am unable to produce JSON today."

    result = build_graphrag_communities(graph, BuildModels(chat(reply)), GraphragCommunityConfig())
    stats = result.stats
    assert stats["summaries"] == 3 and stats["fallback_summaries"] == 1 and stats["repaired_reports"] == 2
    by_first = {c.entities[0]: c for c in result.communities}
    assert by_first["e0"].title.startswith("About") and not by_first["e0"].payload["fallback"]
    assert by_first["e5"].summary.startswith("Summary of") and by_first["e5"].rating == 6.5
    fallback = by_first["e10"]
    assert fallback.payload["fallback"] and fallback.rating is None
    # title: the top-degree names (N10 has the bridge to N9, so degree 4)
    assert fallback.title.split(", ")[0] == "N10"
    assert fallback.summary.startswith("entity 10 is described here")


def test_rating_is_clamped():
    n, edges = cliques([4])
    model = chat(lambda u: '{"summary": "S", "rating": 99}')
    result = build_graphrag_communities(make_graph(n, edges), BuildModels(model))
    assert result.communities[0].rating == 10.0
    assert result.communities[0].title == "N0, N1, N2"  # missing title: top-degree names


def test_singletons_get_reports_without_the_model():
    n, edges = cliques([3])
    graph = make_graph(n + 2, edges)
    model = chat()
    result = build_graphrag_communities(graph, BuildModels(model))
    assert model.calls == 1 and result.stats["singletons"] == 2 and result.levels() == {0: 3}
    single = [c for c in result.communities if c.payload["singleton"]]
    assert {c.title for c in single} == {"N3", "N4"} and all(c.rating is None for c in single)
    assert {c.summary for c in single} == {"entity 3 is described here", "entity 4 is described here"}


def test_empty_graph_and_bad_config():
    result = build_graphrag_communities(make_graph(0, []), BuildModels(chat()))
    assert result.communities == [] and result.stats["communities"] == 0
    with pytest.raises(ValueError):
        build_graphrag_communities(make_graph(0, []), BuildModels(chat()), GraphragCommunityConfig(max_cluster_size=0))


def test_duplicate_edges_and_odd_weights_still_link():
    n, edges = cliques([4, 4], [(3, 4)])
    graph = make_graph(n, edges + [(0, 1), (0, 1)])  # the A-B relationship three times
    graph.weights[:] = 1.0
    graph.weights[-1], graph.weights[0] = np.nan, 0.0
    levels = hierarchical_leiden(graph)
    assert sorted(c.rows for c in levels[0]) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    elements = ReportElements.from_graph(graph, words)
    assert elements.degrees.tolist() == [3, 3, 3, 4, 4, 3, 3, 3]  # distinct neighbours
    context = build_report_context(elements, range(4), 1000)
    assert len(context.edges) == 8  # 6 clique edges + 2 repeated relationships, each with its own text


# -- carrying communities across a corpus change ------------------------------------------------


def _cliques(sizes: list[int], extra: list[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    edges, start = [], 0
    for size in sizes:
        edges += [(start + i, start + j) for i in range(size) for j in range(i + 1, size)]
        start += size
    return edges + list(extra)


def test_carried_leiden_attaches_new_entities_by_neighbours_and_keeps_the_rest() -> None:
    from unirag.hierarchy.graphrag import carried_leiden

    before = make_graph(8, _cliques([4, 4], [(0, 4)]))
    previous = build_graphrag_communities(before, BuildModels(None), GraphragCommunityConfig()).communities
    roots = sorted(sorted(c.entities) for c in previous if c.level == 0)
    assert roots == [["e0", "e1", "e2", "e3"], ["e4", "e5", "e6", "e7"]]
    # e8 joins the second clique; e9-e10 are a new component of their own; e3 is gone.
    after = EntityGraph(
        ids=[f"e{i}" for i in range(11) if i != 3], names=[f"N{i}" for i in range(11) if i != 3],
        types=["thing"] * 10, descriptions=["d"] * 10, chunk_ids=[["c"]] * 10,
        edges=np.array([(0, 1), (0, 2), (1, 2), (0, 3), (3, 4), (3, 5), (3, 6), (4, 5), (4, 6), (5, 6),
                        (7, 3), (7, 4), (8, 9)], dtype=np.int64),
        weights=np.ones(13), relation_texts=["r"] * 13,
    )
    levels, stats = carried_leiden(after, previous)
    groups = sorted(sorted(after.ids[r] for r in c.rows) for c in levels[0])
    assert groups == [["e0", "e1", "e2"], ["e10", "e9"], ["e4", "e5", "e6", "e7", "e8"]]
    assert stats == {"detached": 1, "attached": 1, "new_roots": 1, "splits": 0}


def test_carried_leiden_splits_a_root_that_grew_past_the_cap() -> None:
    from unirag.hierarchy.graphrag import carried_leiden

    before = make_graph(4, _cliques([4]))
    previous = build_graphrag_communities(before, BuildModels(None), GraphragCommunityConfig()).communities
    # four new entities, each tied to two members of the clique and not to each other: each joins it
    grown = make_graph(8, _cliques([4], [(4, 0), (4, 1), (5, 1), (5, 2), (6, 2), (6, 3), (7, 3), (7, 0)]))
    levels, stats = carried_leiden(grown, previous, max_cluster_size=5)
    assert len(levels[0]) == 1 and len(levels[0][0].rows) == 8
    assert stats["splits"] == 1 and sum(len(c.rows) for c in levels[1]) == 8
    assert all(len(c.rows) <= 5 for c in levels[1])


def test_a_new_clique_loosely_tied_to_a_community_is_a_community_of_its_own() -> None:
    """Modularity decides: four new entities linked to each other (6 links) and by two links to an
    old clique form their own root, as Leiden would; they do not dilute the old one."""
    from unirag.hierarchy.graphrag import carried_leiden

    before = make_graph(4, _cliques([4]))
    previous = build_graphrag_communities(before, BuildModels(None), GraphragCommunityConfig()).communities
    grown = make_graph(8, _cliques([4, 4], [(0, 4), (1, 5)]))
    levels, stats = carried_leiden(grown, previous, max_cluster_size=5)
    assert sorted(sorted(c.rows) for c in levels[0]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert stats["new_roots"] == 1 and stats["attached"] == 0

