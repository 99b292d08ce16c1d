"""Community operators over a hand-made GraphRAG hierarchy on the hand-built graph.

    C0  curie (8)  = marie, pierre, radium, warsaw, poland   -> split
          C1  curies (9) = marie, pierre, radium             -> split
                C2  marie (7) = marie, radium                (leaf)
                C2  pierre (-) = pierre                      (leaf, singleton)
          C1  poland (5) = warsaw, poland                    (leaf)
    C0  paris (6)  = paris, france, sorbonne                 (leaf)
    C0  lone (-)   = lone island                             (leaf, singleton)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import fake_stack
from tests.graph_fixture import build_hand_graph, query_state
from unirag.errors import MethodError, WorkspaceError
from unirag.artifacts.registry import BuildContext, artifact_registry, community_text
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.communities import Community, HierarchyResult
from unirag.llm.base import UsageLedger
from unirag.operators.community import community_entity, community_layer, community_vdb
from unirag.operators.registry import operator_registry
from unirag.progress import Progress

# id: (level, parent, entities, rating)
HIERARCHY = {
    "c0-curie": (0, None, ["marie curie", "pierre curie", "radium", "warsaw", "poland"], 8.0),
    "c0-paris": (0, None, ["paris", "france", "sorbonne"], 6.0),
    "c0-lone": (0, None, ["lone island"], None),
    "c1-curies": (1, "c0-curie", ["marie curie", "pierre curie", "radium"], 9.0),
    "c1-poland": (1, "c0-curie", ["warsaw", "poland"], 5.0),
    "c2-marie": (2, "c1-curies", ["marie curie", "radium"], 7.0),
    "c2-pierre": (2, "c1-curies", ["pierre curie"], None),
}
REPORTS = {
    "c0-curie": ("The Curie family and Poland", "Marie and Pierre Curie, radium, and Warsaw in Poland."),
    "c0-paris": ("Paris and France", "Paris is the capital of France and home of the Sorbonne university."),
    "c0-lone": ("Lone Island", "A small island."),
    "c1-curies": ("The Curies", "Marie and Pierre Curie discovered radium together."),
    "c1-poland": ("Warsaw", "Warsaw is the capital of Poland."),
    "c2-marie": ("Marie Curie and radium", "Marie Curie discovered radium."),
    "c2-pierre": ("Pierre Curie", "Physicist."),
}


def _communities() -> list[Community]:
    out = []
    for cid, (level, parent, entities, rating) in HIERARCHY.items():
        children = [c for c, (_, p, _, _) in HIERARCHY.items() if p == cid] or list(entities)
        title, summary = REPORTS[cid]
        out.append(Community(cid, "graphrag", level, children, list(entities), title, summary, parent=parent,
                             rating=rating, payload={"singleton": len(entities) == 1}))
    return out


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    root: Path = tmp_path_factory.mktemp("community-ops") / "ws"
    ws, settings, embedder = build_hand_graph(root)
    result = HierarchyResult("graphrag", "top_down", _communities())
    CommunityStore(ws).save(result)
    ws.manifest.set_entry("communities:graphrag", {"config": {}, "inputs": "hand-made", "count": 7,
                                                   "level_order": "top_down"})
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    artifact_registry()["community_vectors:graphrag"].build(ctx)
    return ws, settings, embedder


def _state(hand, question: str = "Who discovered radium?"):
    ws, settings, embedder = hand
    return query_state(ws, settings, question, embedder)


def _ids(items):
    return [item.id for item in items]


def test_entity_ranks_containing_communities_by_rating(hand):
    state = _state(hand)
    state.entities = {"warsaw": 0.9, "radium": 0.5}
    items = community_entity(state, top_k=10)
    assert _ids(items) == ["c1-curies", "c0-curie", "c2-marie", "c1-poland"]
    assert [item.score for item in items] == [9.0, 8.0, 7.0, 5.0]
    assert state.communities == {"c1-curies": 9.0, "c0-curie": 8.0, "c2-marie": 7.0, "c1-poland": 5.0}
    first = items[0]
    assert first.kind == "community" and first.operator == "community.entity"
    assert first.provenance["level"] == 1 and first.provenance["rating"] == 9.0
    assert first.provenance["hierarchy"] == "graphrag"
    assert first.text.startswith("The Curies")
    assert _ids(community_entity(state, top_k=2)) == ["c1-curies", "c0-curie"]


def test_entity_level_limit_and_match_order(hand):
    state = _state(hand)
    state.entities = {"warsaw": 0.9, "radium": 0.5}
    assert _ids(community_entity(state, top_k=10, max_level=0)) == ["c0-curie"]
    assert _ids(community_entity(state, top_k=10, max_level=1)) == ["c1-curies", "c0-curie", "c1-poland"]
    items = community_entity(state, top_k=10, by="matches")  # c0-curie holds both candidates
    assert _ids(items) == ["c0-curie", "c1-curies", "c2-marie", "c1-poland"]
    assert [item.score for item in items] == [2.0, 1.0, 1.0, 1.0]


def test_entity_unrated_communities_rank_last(hand):
    state = _state(hand)
    state.entities = {"pierre curie": 1.0, "lone island": 0.5}
    items = community_entity(state, top_k=10, max_level=None)
    assert _ids(items) == ["c1-curies", "c0-curie", "c0-lone", "c2-pierre"]
    assert [item.score for item in items] == [9.0, 8.0, 0.0, 0.0]
    assert items[2].provenance["rating"] is None


def test_entity_without_candidates_or_with_bad_order(hand):
    state = _state(hand)
    assert community_entity(state) == []
    state.entities = {"radium": 1.0}
    with pytest.raises(MethodError):
        community_entity(state, by="size")


def test_layer_is_a_partition_of_the_level(hand):
    state = _state(hand)
    items = community_layer(state, level=2)
    # C2 communities plus the leaves of C0 and C1; the singletons c2-pierre and c0-lone are skipped
    assert _ids(items) == ["c2-marie", "c0-paris", "c1-poland"]
    assert [item.score for item in items] == [7.0, 6.0, 5.0]
    assert [item.provenance["level"] for item in items] == [2, 0, 1]
    assert all(item.operator == "community.layer" for item in items)
    assert state.communities == {"c2-marie": 7.0, "c0-paris": 6.0, "c1-poland": 5.0}
    assert _ids(community_layer(state, level=1)) == ["c1-curies", "c0-paris", "c1-poland"]
    assert _ids(community_layer(state, level=0)) == ["c0-curie", "c0-paris"]
    assert _ids(community_layer(state, level=0, skip_singletons=False)) == ["c0-curie", "c0-paris", "c0-lone"]
    assert _ids(community_layer(state, level=5)) == ["c2-marie", "c0-paris", "c1-poland"]  # every leaf


def test_layer_without_partition_takes_every_level_up_to(hand):
    state = _state(hand)
    items = community_layer(state, level=1, partition=False)
    assert _ids(items) == ["c1-curies", "c0-curie", "c0-paris", "c1-poland"]
    items = community_layer(state, level=2, partition=False, skip_singletons=False)
    assert _ids(items) == ["c1-curies", "c0-curie", "c2-marie", "c0-paris", "c1-poland", "c0-lone", "c2-pierre"]


def test_layer_missing_hierarchy_is_a_workspace_error(hand):
    with pytest.raises(WorkspaceError):
        community_layer(_state(hand), hierarchy="archrag")


def test_vdb_finds_the_community_whose_report_matches(hand):
    communities = {c.id: c for c in _communities()}
    state = _state(hand, community_text(communities["c0-paris"]))
    items = community_vdb(state, top_k=3)
    assert items[0].id == "c0-paris" and items[0].score == pytest.approx(1.0, abs=1e-5)
    assert len(items) == 3 and items[0].operator == "community.vdb"
    assert items[0].provenance["level"] == 0 and items[0].provenance["rating"] == 6.0
    assert next(iter(state.communities)) == "c0-paris"
    state.query_vector = None
    with pytest.raises(MethodError):
        community_vdb(state)


def test_registered_with_requirements():
    registry = operator_registry()
    assert registry["community.entity"].requires_for({}) == ("communities:graphrag",)
    assert registry["community.layer"].requires_for({}) == ("communities:graphrag",)
    assert registry["community.vdb"].requires_for({}) == ("communities:graphrag", "community_vectors:graphrag")
    assert registry["community.vdb"].requires_for({"hierarchy": "archrag"}) == (
        "communities:archrag", "community_vectors:archrag")
    assert registry["community.vdb"].needs == ("embedding",)
    assert dict(registry["community.layer"].params) == {"level": 2, "hierarchy": "graphrag",
                                                        "skip_singletons": True, "partition": True}
    assert dict(registry["community.entity"].params)["max_level"] == 2
