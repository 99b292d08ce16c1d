"""Hierarchy operators on the hand-built graph (tests/graph_fixture.py) with hand-made hierarchies.

Hierarchies (the same grouping for ArchRAG, HyGRAG and LeanRAG, bottom-up levels):

    level 1  curies = marie curie, pierre curie, radium      places-pl = warsaw, poland
             places-fr = paris, france, sorbonne             lone = lone island
    level 2  east = curies + places-pl                       west = places-fr + lone
    level 3  root = east + west                              (LeanRAG only)

HyGRAG's level-1 communities also hold the chunks of their entities (hybrid
nodes). The RAPTOR tree: the five chunks, two layer-1 summaries and a root.
Every artifact is written by the real builders (tree_vectors,
community_vectors, chnsw) from these hand-made inputs; the HyGRAG node
vectors are the plain text vectors (the operator only searches them).
Expected rankings are checked against brute-force cosines over the stored
vectors, and the structural answers (R0, paths, relations, chunks) by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fakes import ScriptedChat, fake_stack
from tests.graph_fixture import build_hand_graph, chunk_id_of, query_state
from unirag.graph.graph_store import GraphStore
from unirag.errors import MethodError, WorkspaceError
from unirag.artifacts.registry import BuildContext, artifact_registry
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.communities import Community, CommunityLink, HierarchyResult
from unirag.index.vector_artifacts import index_given_vectors, load_vectors
from unirag.llm.base import UsageLedger
from unirag.operators.hierarchy import (
    archrag_hierarchical,
    hygrag_retrieve,
    lca_paths,
    leanrag_lca,
    tree_collapsed,
)
from unirag.operators.registry import operator_registry
from unirag.progress import Progress

pytestmark = pytest.mark.numeric  # index rankings compared with a brute-force BLAS oracle

GROUPS = {
    "curies": ["marie curie", "pierre curie", "radium"],
    "places-pl": ["warsaw", "poland"],
    "places-fr": ["paris", "france", "sorbonne"],
    "lone": ["lone island"],
}
SUMMARIES = {
    "curies": ("The Curies", "Marie Curie and Pierre Curie discovered radium together."),
    "places-pl": ("Warsaw and Poland", "Warsaw is the capital of Poland."),
    "places-fr": ("Paris and France", "Paris is the capital of France and home of the Sorbonne."),
    "lone": ("Lone Island", "Lone Island is a small island with no famous people."),
    "east": ("Curies and Poland", "Marie Curie was born in Warsaw, Poland; with Pierre she discovered radium."),
    "west": ("France and islands", "Paris, France, the Sorbonne and a lone island."),
    "root": ("Everything", "Scientists, cities and an island."),
}
UPPER = {"east": ["curies", "places-pl"], "west": ["places-fr", "lone"], "root": ["east", "west"]}
LEVEL = {"curies": 1, "places-pl": 1, "places-fr": 1, "lone": 1, "east": 2, "west": 2, "root": 3}
CHUNK_OF_GROUP = {"curies": ["Marie Curie", "Pierre Curie"], "places-pl": ["Warsaw"], "places-fr": ["Paris"],
                  "lone": ["Lone Island"]}


def _members(name: str) -> list[str]:
    return GROUPS[name] if name in GROUPS else [e for child in UPPER[name] for e in _members(child)]


def _members_of(name: str) -> list[str]:
    """The level-1 groups under ``name``."""
    return [name] if name in GROUPS else [g for child in UPPER[name] for g in _members_of(child)]


def _communities(hierarchy: str, names: list[str], chunks: dict[str, list[str]] | None = None) -> list[Community]:
    parent = {child: f"{hierarchy}-{up}" for up, children in UPPER.items() for child in children if up in names}
    out = []
    for name in names:
        own_chunks = (chunks or {}).get(name, [])
        if name in GROUPS:
            children = list(GROUPS[name]) + own_chunks
        else:
            children = [f"{hierarchy}-{child}" for child in UPPER[name]]
        title, summary = SUMMARIES[name]
        all_chunks = own_chunks if name in GROUPS else [c for g in GROUPS if g in _members_of(name) for c in
                                                         (chunks or {}).get(g, [])]
        out.append(Community(f"{hierarchy}-{name}", hierarchy, LEVEL[name], children, _members(name), title, summary,
                             chunks=all_chunks, parent=parent.get(name)))
    return out


def _save_hierarchy(ws, hierarchy: str, communities: list[Community], links: list[CommunityLink] = ()) -> None:
    CommunityStore(ws).save(HierarchyResult(hierarchy, "bottom_up", communities, list(links)))
    ws.manifest.set_entry(f"communities:{hierarchy}", {"config": {}, "inputs": f"hand-made {hierarchy}",
                                                       "count": len(communities), "level_order": "bottom_up"})


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    root: Path = tmp_path_factory.mktemp("hierarchy-ops") / "ws"
    ws, settings, embedder = build_hand_graph(root)
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    registry = artifact_registry()
    chunk = {title: chunk_id_of(ws, title) for titles in CHUNK_OF_GROUP.values() for title in titles}
    chunk_ids, chunk_vectors = load_vectors(ws, "chunk_vectors", "chunk_vectors")
    chunk_vectors = np.asarray(chunk_vectors)

    # RAPTOR tree: leaves are the chunks (their own vectors), summaries embedded by hand.
    texts = {c.id: c.indexed_text for c in ws.corpus.iter_chunks()}
    summaries = {
        "tree-1-curies": (1, "Marie Curie and Pierre Curie discovered radium together in Paris.",
                          [chunk["Marie Curie"], chunk["Pierre Curie"]]),
        "tree-1-places": (1, "Warsaw is the capital of Poland and Paris the capital of France.",
                          [chunk["Warsaw"], chunk["Paris"], chunk["Lone Island"]]),
        "tree-2-root": (2, "Scientists and capital cities.", ["tree-1-curies", "tree-1-places"]),
    }
    nodes = [(cid, 0, texts[cid], [], chunk_vectors[i]) for i, cid in enumerate(chunk_ids)]
    nodes += [(nid, layer, text, children, embedder.embed([text]).vectors[0])
              for nid, (layer, text, children) in summaries.items()]
    GraphStore(ws).save_tree(nodes)
    ws.manifest.set_entry("tree", {"config": {}, "inputs": "hand-made tree", "count": len(nodes)})
    registry["tree_vectors"].build(ctx)

    # ArchRAG: two community levels, C-HNSW by the real builder.
    two_levels = ["curies", "places-pl", "places-fr", "lone", "east", "west"]
    _save_hierarchy(ws, "archrag", _communities("archrag", two_levels))
    registry["community_vectors:archrag"].build(ctx)
    registry["chnsw"].build(ctx)

    # HyGRAG: level-1 communities hold entity and chunk nodes; node vectors = text vectors.
    group_chunks = {name: [chunk[t] for t in titles] for name, titles in CHUNK_OF_GROUP.items()}
    _save_hierarchy(ws, "hygrag", _communities("hygrag", two_levels, group_chunks))
    registry["community_vectors:hygrag"].build(ctx)
    entity_ids, entity_vectors = load_vectors(ws, "entity_vectors", "entity_vectors")
    index_given_vectors(ws, "hygrag_node_vectors", "hygrag_node_vectors", list(chunk_ids) + list(entity_ids),
                        np.concatenate([chunk_vectors, np.asarray(entity_vectors)]), "hand-made", embedder.name,
                        Progress())

    # LeanRAG: three levels up to a root, aggregated relations on levels 1 and 2.
    links = [
        CommunityLink("leanrag", 1, "leanrag-curies", "leanrag-places-pl", 1.0, "Marie Curie was born in Warsaw."),
        CommunityLink("leanrag", 1, "leanrag-curies", "leanrag-places-fr", 1.0, "Pierre Curie worked in Paris."),
        CommunityLink("leanrag", 2, "leanrag-east", "leanrag-west", 1.0, "The Curies worked in Paris."),
    ]
    _save_hierarchy(ws, "leanrag", _communities("leanrag", list(LEVEL)), links)
    return ws, settings, embedder, chunk


def _state(hand, question: str, chat=None):
    ws, settings, embedder, _ = hand
    return query_state(ws, settings, question, embedder, chat)


def _ids(items):
    return [item.id for item in items]


def _oracle(ws, key: str, question_vector: np.ndarray, keep=None) -> list[tuple[str, float]]:
    """Brute-force cosine ranking over a stored vector artifact (ties by id: scores equal to 5
    digits). In float64, so that no BLAS kernel's float32 rounding (OpenBLAS picks it by CPU) can
    put two equal cosines on either side of a 5-digit rounding boundary."""
    ids, vectors = load_vectors(ws, key, key.replace(":", "."))
    scores = np.asarray(vectors, dtype=np.float64) @ np.asarray(question_vector, dtype=np.float64)
    pairs = [(i, float(s)) for i, s in zip(ids, scores, strict=True) if keep is None or i in keep]
    return sorted(pairs, key=lambda p: (-round(p[1], 5), p[0]))


# -- tree.collapsed ------------------------------------------------------------------------


def test_tree_collapsed_ranks_leaves_and_summaries_together(hand):
    ws, _, _, chunk = hand
    state = _state(hand, "Who discovered radium together?")
    items = tree_collapsed(state, top_k=8)
    oracle = _oracle(ws, "tree_vectors", state.query_vector)
    assert _ids(items) == [node for node, _ in oracle]  # all 8 nodes, one ranking
    assert [i.score for i in items] == pytest.approx([s for _, s in oracle], abs=1e-5)  # float32 index
    assert items[0].id == "tree-1-curies"
    top = items[0]
    assert top.kind == "tree_node" and top.operator == "tree.collapsed"
    assert top.provenance["layer"] == 1
    assert top.provenance["children"] == [chunk["Marie Curie"], chunk["Pierre Curie"]]
    assert top.text.startswith("Marie Curie and Pierre Curie discovered radium")
    leaves = [i for i in items if i.kind == "chunk"]
    assert len(leaves) == 5 and all(i.provenance["layer"] == 0 for i in leaves)
    assert {i.kind for i in items} == {"chunk", "tree_node"}
    assert list(state.chunks) == [i.id for i in leaves]


def test_tree_collapsed_top_k_and_empty(hand):
    state = _state(hand, "Who discovered radium together?")
    full = _ids(tree_collapsed(state, top_k=8))
    assert _ids(tree_collapsed(state, top_k=3)) == full[:3]
    assert tree_collapsed(state, top_k=0) == [] and state.chunks == {}
    state = _state(hand, "")  # a zero question vector: nothing to compare
    assert tree_collapsed(state, top_k=3) == []
    state.query_vector = None
    with pytest.raises(MethodError):
        tree_collapsed(state)


# -- archrag.hierarchical ------------------------------------------------------------------


def test_archrag_returns_top_k_of_every_layer(hand):
    ws = hand[0]
    state = _state(hand, "Marie Curie and Warsaw")
    items = archrag_hierarchical(state, top_k=2)
    q = state.query_vector
    communities = CommunityStore(ws).load("archrag")
    level1 = {c.id for c in communities if c.level == 1}
    level2 = {c.id for c in communities if c.level == 2}
    entities = _oracle(ws, "entity_vectors", q)[:2]
    layer1 = _oracle(ws, "community_vectors:archrag", q, level1)[:2]
    layer2 = _oracle(ws, "community_vectors:archrag", q, level2)[:2]
    assert [e for e, _ in entities] == ["marie curie", "warsaw"]
    assert state.entities == pytest.approx(dict(entities), abs=1e-5)
    by_layer: dict[int, list[str]] = {}
    for item in items:
        by_layer.setdefault(item.provenance["layer"], []).append((item.kind, item.id))
    # Layer 0: the entities and R0, the relationships among them (marie curie born in warsaw).
    assert by_layer[0] == [("entity", "marie curie"), ("entity", "warsaw"), ("relationship", "marie curie|warsaw")]
    assert by_layer[1] == [("community", c) for c, _ in layer1]
    assert by_layer[2] == [("community", c) for c, _ in layer2]
    assert "archrag-curies" in dict(layer1) and "archrag-east" == layer2[0][0]
    rel = next(i for i in items if i.kind == "relationship")
    assert rel.score == pytest.approx(sum(s for _, s in entities) / 2, abs=1e-5)
    assert state.relationships == {"marie curie|warsaw": pytest.approx(rel.score)}
    assert {(i.provenance["hierarchy"], i.provenance["level"]) for i in items if i.provenance["layer"] == 0} == {
        ("archrag", 0)}  # R0 is one group for the adaptive filter
    assert set(state.communities) == {c for c, _ in layer1 + layer2}
    community = next(i for i in items if i.kind == "community")
    assert community.provenance["hierarchy"] == "archrag" and community.provenance["level"] == 1
    assert community.operator == "archrag.hierarchical"


def test_archrag_max_level_and_relationships_only_among_retrieved(hand):
    state = _state(hand, "Marie Curie and Warsaw")
    items = archrag_hierarchical(state, top_k=2, max_level=0)  # the entity-only ablation
    assert {i.kind for i in items} == {"entity", "relationship"} and state.communities == {}
    items = archrag_hierarchical(state, top_k=2, max_level=1)
    assert {i.provenance["layer"] for i in items} == {0, 1}
    items = archrag_hierarchical(state, top_k=1)
    assert [i.kind for i in items if i.provenance["layer"] == 0] == ["entity"]  # one entity: no relationship
    with pytest.raises(MethodError):
        archrag_hierarchical(state, ef=0)


# -- hygrag.retrieve ------------------------------------------------------------------------


def _hygrag_expected(hand, state, k: int, pool: str, relations: str):
    ws = hand[0]
    q = state.query_vector
    graph = state.resources.graph()
    communities = {c.id: c for c in CommunityStore(ws).load("hygrag")}
    comm = _oracle(ws, "community_vectors:hygrag", q)[:k]
    chunks = _oracle(ws, "chunk_vectors", q)[:k]
    if pool == "joint":  # the authors' composition: at most max(1, k // 5) communities, chunks elsewhere
        merged = sorted([(c, s, "community") for c, s in comm] + [(c, s, "chunk") for c, s in chunks],
                        key=lambda h: (-round(h[1], 5), h[0]))
        comm, chunks = [], []
        for c, s, kind in merged:
            if len(comm) + len(chunks) < k and (kind == "chunk" or len(comm) < max(1, k // 5)):
                (comm if kind == "community" else chunks).append((c, s))
    entities = _oracle(ws, "hygrag_node_vectors", q, set(graph.entity_ids))[:k]
    e_all = {e for e, _ in entities} | {e for c, _ in comm for e in communities[c].entities}
    rels = {r for r, (a, b) in zip(graph.rel_ids, zip(graph.rel_src, graph.rel_dst, strict=True), strict=True)
            if (graph.entity_ids[a] in e_all or graph.entity_ids[b] in e_all) if relations == "either"
            or (graph.entity_ids[a] in e_all and graph.entity_ids[b] in e_all)}
    rel_hits = _oracle(ws, "relation_vectors", q, rels)[:k]
    return comm, chunks, entities, rel_hits


@pytest.mark.parametrize("pool", ["joint", "separate"])
@pytest.mark.parametrize("relations", ["either", "both"])
def test_hygrag_matches_brute_force(hand, pool, relations):
    state = _state(hand, "Marie Curie discovered radium")
    items = hygrag_retrieve(state, top_k=3, pool=pool, relations=relations)
    comm, chunks, entities, rels = _hygrag_expected(hand, state, 3, pool, relations)
    assert [(i.kind, i.id) for i in items] == (
        [("community", c) for c, _ in comm] + [("chunk", c) for c, _ in chunks]
        + [("entity", e) for e, _ in entities] + [("relationship", r) for r, _ in rels]
    )
    assert list(state.communities) == [c for c, _ in comm]
    assert list(state.chunks) == [c for c, _ in chunks]
    assert list(state.entities) == [e for e, _ in entities]
    assert list(state.relationships) == [r for r, _ in rels]
    if pool == "separate":
        assert len(comm) == 3 and len(chunks) == 3
    else:
        assert len(comm) <= 1 and len(comm) + len(chunks) == 3


def test_hygrag_known_answer(hand):
    chunk = hand[3]
    state = _state(hand, "Marie Curie discovered radium")
    items = hygrag_retrieve(state, top_k=2)
    # Pool (communities + chunks), best two, at most max(1, k // 5) = 1 community: the Curies'
    # summary, then the Pierre Curie passage (it names radium); entities by z_e; relations of
    # E_all = {paris, marie curie} + the community's members, best two by triplet similarity.
    assert [(i.kind, i.id) for i in items] == [
        ("community", "hygrag-curies"), ("chunk", chunk["Pierre Curie"]), ("entity", "paris"),
        ("entity", "marie curie"), ("relationship", "marie curie|radium"), ("relationship", "pierre curie|radium"),
    ]
    community = items[0]
    assert community.provenance["layer"] == community.provenance["level"] == 1
    assert community.provenance["hierarchy"] == "hygrag" and community.operator == "hygrag.retrieve"
    assert items[1].provenance["layer"] == 0


def test_hygrag_relations_both_ends_is_stricter(hand):
    # E_all = {lone island, france} (+ the lone community's lone island): lone island has no
    # relationship; france's one relationship (france|paris) has only one end in E_all.
    either = _state(hand, "Lone Island")
    hygrag_retrieve(either, top_k=2, relations="either")
    assert list(either.entities) == ["lone island", "france"]
    assert list(either.communities) == ["hygrag-lone"]
    assert list(either.relationships) == ["france|paris"]
    both = _state(hand, "Lone Island")
    items = hygrag_retrieve(both, top_k=2, relations="both")
    assert both.relationships == {} and not [i for i in items if i.kind == "relationship"]


def test_hygrag_bad_params(hand):
    state = _state(hand, "Marie Curie")
    with pytest.raises(MethodError):
        hygrag_retrieve(state, pool="all")
    with pytest.raises(MethodError):
        hygrag_retrieve(state, relations="any")
    assert hygrag_retrieve(state, top_k=0) == []


# -- leanrag.lca --------------------------------------------------------------------------

PARENT = {
    "marie curie": "L1a", "pierre curie": "L1a", "radium": "L1a", "warsaw": "L1b", "poland": "L1b",
    "paris": "L1c", "france": "L1c", "L1a": "L2a", "L1b": "L2a", "L1c": "L2b", "L2a": "R", "L2b": "R",
}


def test_lca_paths_by_hand():
    assert lca_paths(["marie curie"], PARENT) == {"marie curie": {"marie curie"}}
    assert lca_paths(["marie curie", "radium"], PARENT) == {
        "marie curie": {"marie curie"}, "radium": {"radium"}, "L1a": {"marie curie", "radium"}}
    assert lca_paths(["marie curie", "warsaw"], PARENT) == {
        "marie curie": {"marie curie"}, "warsaw": {"warsaw"}, "L1a": {"marie curie"}, "L1b": {"warsaw"},
        "L2a": {"marie curie", "warsaw"}}
    three = lca_paths(["marie curie", "radium", "warsaw"], PARENT)
    assert three["L1a"] == {"marie curie", "radium"} and three["L2a"] == {"marie curie", "radium", "warsaw"}
    assert "R" not in three
    assert lca_paths(["marie curie", "paris"], PARENT)["R"] == {"marie curie", "paris"}
    # No common ancestor: both chains up to their tops.
    split = {k: v for k, v in PARENT.items() if v != "R"}
    assert set(lca_paths(["marie curie", "paris"], split)) == {"marie curie", "L1a", "L2a", "paris", "L1c", "L2b"}


def test_leanrag_lca_known_answer(hand):
    chunk = hand[3]
    state = _state(hand, "Marie Curie and Warsaw")
    items = leanrag_lca(state, top_k=2, top_c=5)
    assert list(state.entities) == ["marie curie", "warsaw"]
    # Paths: marie curie -> curies -> east <- places-pl <- warsaw; east holds both seeds' paths.
    assert state.communities == {"leanrag-east": 2.0, "leanrag-curies": 1.0, "leanrag-places-pl": 1.0}
    assert list(state.relationships) == ["marie curie|warsaw"]
    link = [i for i in items if i.id.startswith("leanrag-link:")]
    assert _ids(link) == ["leanrag-link:leanrag-curies:leanrag-places-pl"]  # not curies-places-fr: off the path
    assert link[0].kind == "relationship" and "born in Warsaw" in link[0].text
    assert link[0].provenance["hierarchy"] == "leanrag" and link[0].provenance["level"] == 1
    # Chunks by seed count: Marie Curie (both), then Pierre Curie (marie, the first seed), then Warsaw.
    assert state.chunks == {chunk["Marie Curie"]: 2.0, chunk["Pierre Curie"]: 1.0, chunk["Warsaw"]: 1.0}
    assert [(i.kind, i.id) for i in items] == (
        [("entity", "marie curie"), ("entity", "warsaw"), ("community", "leanrag-east"),
         ("community", "leanrag-curies"), ("community", "leanrag-places-pl"), ("relationship", "marie curie|warsaw"),
         ("relationship", "leanrag-link:leanrag-curies:leanrag-places-pl")]
        + [("chunk", c) for c in (chunk["Marie Curie"], chunk["Pierre Curie"], chunk["Warsaw"])]
    )
    east = next(i for i in items if i.id == "leanrag-east")
    assert east.provenance["layer"] == 2 and east.provenance["hierarchy"] == "leanrag"
    assert _ids(leanrag_lca(state, top_k=2, top_c=1))[-1] == chunk["Marie Curie"]


def test_leanrag_far_seeds_meet_at_the_root(hand):
    state = _state(hand, "Marie Curie Paris")
    leanrag_lca(state, top_k=2, top_c=0)
    assert list(state.entities) == ["paris", "marie curie"]
    assert state.communities == {"leanrag-root": 2.0, "leanrag-curies": 1.0, "leanrag-places-fr": 1.0,
                                 "leanrag-east": 1.0, "leanrag-west": 1.0}
    assert state.chunks == {}
    items = leanrag_lca(state, top_k=2, top_c=0)
    links = [i.id for i in items if i.id.startswith("leanrag-link:")]
    assert links == ["leanrag-link:leanrag-curies:leanrag-places-fr", "leanrag-link:leanrag-east:leanrag-west"]


# -- errors and registry ---------------------------------------------------------------------


def test_missing_artifacts_are_workspace_errors(tmp_path):
    ws, settings, embedder = build_hand_graph(tmp_path / "bare")
    state = query_state(ws, settings, "Marie Curie", embedder)
    for call in (lambda: tree_collapsed(state), lambda: archrag_hierarchical(state),
                 lambda: hygrag_retrieve(state), lambda: leanrag_lca(state)):
        with pytest.raises(WorkspaceError):
            call()


def test_registered_with_requirements():
    registry = operator_registry()
    assert registry["tree.collapsed"].requires_for({}) == ("tree_vectors",)
    assert registry["tree.collapsed"].requires_for({"tree": "kmeans"}) == ("tree_vectors:kmeans",)
    archrag = registry["archrag.hierarchical"]
    assert set(archrag.requires_for({})) == {"chnsw", "communities:archrag", "graph"}
    assert set(archrag.requires_for({"hierarchy": "archrag-leiden"})) == {
        "chnsw:archrag-leiden", "communities:archrag-leiden", "graph"}
    assert dict(archrag.params) == {"top_k": 5, "ef": 100, "max_level": None, "hierarchy": "archrag"}
    assert set(registry["hygrag.retrieve"].requires) == {
        "graph", "communities:hygrag", "community_vectors:hygrag", "hygrag_node_vectors", "chunk_vectors",
        "relation_vectors"}
    assert set(registry["leanrag.lca"].requires) == {"communities:leanrag", "entity_vectors", "graph"}
    assert dict(registry["leanrag.lca"].params) == {"top_k": 10, "top_c": 5}
    artifacts = artifact_registry()
    for name in ("tree.collapsed", "archrag.hierarchical", "hygrag.retrieve", "leanrag.lca"):
        assert registry[name].needs == ("embedding",)
        assert set(registry[name].requires_for({})) <= set(artifacts)  # each one buildable on demand
    assert ScriptedChat().calls == 0  # no operator here asks the model


def test_other_embedding_model_is_refused(hand):
    from tests.fakes import HashEmbedder

    ws, settings, _, _ = hand
    other = HashEmbedder(name="another-model")
    for call in (tree_collapsed, archrag_hierarchical, hygrag_retrieve, leanrag_lca):
        with pytest.raises(WorkspaceError, match="another-model"):
            call(query_state(ws, settings, "Marie Curie", other))
