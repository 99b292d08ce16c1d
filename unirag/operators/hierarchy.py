"""Hierarchy operators: retrieval over the RAPTOR tree and the ArchRAG, HyGRAG and LeanRAG hierarchies.

* ``tree.collapsed`` (RAPTOR's collapsed-tree retrieval; survey §4 tree,
  Table 3 RAPTOR = node VDB over the tree): top-k over every tree node,
  leaves (chunks) and summaries alike.
* ``archrag.hierarchical`` (ArchRAG "Online retrieval", Algorithm 2): the
  top-k of every layer of the C-HNSW index; layer 0 gives entities plus the
  relationships among them (R0), higher layers attributed communities.
* ``hygrag.retrieve`` (HyGRAG §3.2-3.3, Algorithm 2): context-aware retrieval
  (communities + chunks, entities by structure-aware embeddings), then
  relation-aware retrieval (relations of the retrieved and expanded entities,
  filtered by similarity).
* ``leanrag.lca`` (LeanRAG "Structured Retrieval via Lowest Common Ancestor",
  appendix B.3): seed entities, their paths up to the lowest common
  ancestors, the relations on and between those paths, the top-C chunks.

Structures derived from artifacts (the C-HNSW index, parent links, vector
rows) are loaded once per process through ``Resources.derived``; a missing
artifact is a :class:`WorkspaceError` naming it. Every ranking breaks ties by
id. Items carry ``provenance["layer"]`` (0 = entities / chunks, i = level i)
so a per-layer generator (ArchRAG's adaptive filtering) can group them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import numpy as np

from unirag.artifacts.registry import chnsw_name, tree_names
from unirag.errors import MethodError, WorkspaceError
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.chnsw import CHnswIndex
from unirag.hierarchy.community_store import CommunityStore
from unirag.index.vector_artifacts import load_vectors
from unirag.index.vectors import embedding_mismatch
from unirag.operators.context import ContextItem, QueryState, Resources
from unirag.operators.node import rank
from unirag.operators.spec import Count, CountOrZero, Level, OperatorSpec

if TYPE_CHECKING:
    from unirag.index.vectors import VectorIndex
    from unirag.operators.graph_index import GraphIndex

T = TypeVar("T")

# -- shared helpers --------------------------------------------------------------


def loaded(resources: Resources, key: str, artifacts: tuple[str, ...], build: Callable[[], T]) -> T:
    """``build()`` once per process (``Resources.derived``), after checking that
    the workspace has every artifact it reads; a failure to read one is reported
    as a damaged artifact, like ``Resources`` does for its own loaders."""
    workspace = resources.workspace
    for artifact in artifacts:
        if workspace.manifest.entry(artifact) is None:
            raise WorkspaceError(
                f"{workspace.root} has no '{artifact}' artifact: run 'unirag index SOURCE -w {workspace.root}'"
            )
    try:
        return resources.derived(key, build)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise WorkspaceError(
            f"artifact '{'/'.join(artifacts)}' in {workspace.root} is damaged ({type(exc).__name__}): "
            "run 'unirag index' on the same sources to rebuild it"
        ) from None


def check_model(resources: Resources, artifact: str, model: str) -> None:
    """``Resources.check_embedding_model``, once per process for each (artifact, model)."""
    resources.derived(f"model_checked:{artifact}:{model}",
                      lambda: resources.check_embedding_model(artifact, model) or True)


def question_vector(state: QueryState, operator: str) -> np.ndarray | None:
    """The question's embedding as float32, or None when it is a zero vector
    (nothing to compare: the operator returns no items)."""
    if state.query_vector is None:
        raise MethodError(f"{operator} needs the 'embedding' question conversion")
    vector = np.asarray(state.query_vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(norm) or norm == 0.0:
        return None
    return vector / norm


def by_score(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Hits best first, ties broken by id."""
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))


def vector_top(index: VectorIndex, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Top-k (id, cosine) of a vector index, ties broken by id even at the cut:
    a few more than k are fetched, sorted, then cut."""
    if k <= 0 or not len(index):
        return []
    fetch = min(len(index), max(2 * k, k + 8))
    return by_score(index.search(query, fetch)[0])[:k]


def relationships_among(graph: GraphIndex, entity_rows: np.ndarray) -> np.ndarray:
    """Rows of the relationships whose two endpoints are both in ``entity_rows``
    (a sparse row selection of ``entity_rel``, not a scan of every relationship)."""
    entity_rows = np.unique(np.asarray(entity_rows, dtype=np.int64))
    if not entity_rows.size or not len(graph.rel_ids):
        return np.zeros(0, dtype=np.int64)
    touching = np.unique(graph.entity_rel[entity_rows].indices).astype(np.int64)
    inside = np.isin(graph.rel_src[touching], entity_rows) & np.isin(graph.rel_dst[touching], entity_rows)
    return touching[inside]


def endpoint_mean(graph: GraphIndex, rel_rows: np.ndarray, entity_scores: dict[str, float]) -> list[tuple[str, float]]:
    """(relationship id, mean of its endpoints' scores), best first, ties by id."""
    scored = []
    for row in rel_rows.tolist():
        a = entity_scores.get(graph.entity_ids[graph.rel_src[row]], 0.0)
        b = entity_scores.get(graph.entity_ids[graph.rel_dst[row]], 0.0)
        scored.append((graph.rel_ids[row], (a + b) / 2.0))
    return by_score(scored)


def with_layer(items: list[ContextItem], layer: int) -> list[ContextItem]:
    for item in items:
        item.provenance["layer"] = layer
    return items


@dataclass(frozen=True)
class VectorRows:
    """A vector artifact's stored rows (memory-mapped) and its id -> row map."""

    ids: list[str]
    row: dict[str, int]
    vectors: np.ndarray


def vector_rows(resources: Resources, key: str, file_stem: str | None = None) -> VectorRows:
    """The ``.npy`` rows of a vector artifact, for exact scores of a few
    candidates (one row selection and mat-vec), loaded once per process."""
    def build() -> VectorRows:
        ids, vectors = load_vectors(resources.workspace, key, file_stem or key.replace(":", "."))
        if vectors.ndim != 2 or vectors.shape[0] != len(ids):
            raise ValueError(f"{key}: {vectors.shape} vectors for {len(ids)} ids")
        return VectorRows(list(ids), {item: i for i, item in enumerate(ids)}, vectors)

    return loaded(resources, f"vector_rows:{key}", (key,), build)


def check_dim(vectors: np.ndarray, query: np.ndarray, artifact: str) -> None:
    """The question's vector must have the artifact's dimension (the same model name may not)."""
    if vectors.ndim == 2 and vectors.shape[0] and vectors.shape[1] != query.shape[0]:
        raise embedding_mismatch(artifact, f"{vectors.shape[1]}-dimension vectors",
                                 f"{query.shape[0]}-dimension vectors")


# -- tree.collapsed (RAPTOR) ------------------------------------------------------------


def _tree_nodes(resources: Resources, tree: str, ids: list[str]) -> dict[str, tuple[int, str, list[str]]]:
    """(layer, text, children) of the nodes ``ids`` of tree ``tree`` (a lookup of the few hits)."""
    if not ids:
        return {}
    store = loaded(resources, "graph_store", (tree,), lambda: GraphStore(resources.workspace))
    return store.tree_nodes(tree, ids)


def tree_collapsed(state: QueryState, top_k: Count = 4, tree: str = "") -> list[ContextItem]:
    """Top-k tree nodes by cosine similarity to the question over the whole
    tree at once (RAPTOR's collapsed-tree retrieval; survey §4 tree, Table 3).
    ``tree`` picks a tree variant: ``""`` the configured tree (GMM by default),
    ``kmeans`` the survey's RAPTOR-K tree.

    Reads ``state.query_vector``; searches ``tree_vectors`` (every node of
    the RAPTOR tree: leaves = chunks, summaries = clusters at layers >= 1).
    Leaves come back as chunk items (provenance ``layer: 0``), summaries as
    items of kind ``tree_node`` (provenance: ``layer``, ``children``), in one
    ranking best first. Writes ``state.chunks`` (the leaves among the hits).
    """
    query = question_vector(state, "tree.collapsed")
    if query is None or top_k <= 0:
        state.chunks = {}
        return []
    tree_name, vectors_name = tree_names(tree)
    index = state.resources.vectors(vectors_name, embedding_model=state.models.embedder.name)
    hits = vector_top(index, query, top_k)
    nodes = _tree_nodes(state.resources, tree_name, [node_id for node_id, _ in hits])
    leaves = [(node_id, score) for node_id, score in hits if nodes.get(node_id, (0,))[0] == 0]
    chunk_items = {item.id: item for item in state.resources.chunk_items(leaves, "tree.collapsed")}
    items: list[ContextItem] = []
    for node_id, score in hits:
        layer, text, children = nodes.get(node_id, (0, "", []))
        if layer == 0:
            if node_id in chunk_items:
                items.append(with_layer([chunk_items[node_id]], 0)[0])
            continue
        items.append(ContextItem("tree_node", node_id, text, score, f"tree layer {layer}",
                                 {"layer": layer, "children": children[:50], "n_children": len(children)},
                                 "tree.collapsed"))
    state.chunks = {node_id: score for node_id, score in leaves if node_id in chunk_items}
    return items


# -- archrag.hierarchical ------------------------------------------------------------------


def _chnsw(resources: Resources, hierarchy: str) -> CHnswIndex:
    key = chnsw_name(hierarchy)
    return loaded(resources, key, (key,),
                  lambda: CHnswIndex.load(resources.workspace.artifact_path(key.replace(":", "."))))


def archrag_hierarchical(
    state: QueryState, top_k: Count = 5, ef: Count = 100, max_level: Level | None = None, hierarchy: str = "archrag",
) -> list[ContextItem]:
    """The top-k nodes of every C-HNSW layer (ArchRAG "Hierarchical search",
    Algorithm 2: each layer's search starts at the inter-layer link of the
    nearest node found in the layer above).

    Layer 0 (entities): entity items, plus the relationships among the
    retrieved entities (ArchRAG's textual subgraph R0; a relationship scores
    the mean cosine of its two endpoints). Layers i >= 1: community items of
    hierarchy ``archrag`` (provenance ``level``/``layer``; layer-0 items carry
    ``hierarchy: archrag, level: 0``, so R0 is one group for ArchRAG's
    adaptive filtering). ``top_k`` is per
    layer (ArchRAG: k = 5); ``ef`` the beam width (at least k);
    ``max_level`` drops the layers above it (``0``: entities only, an
    ablation); scores are cosines. Items come layer by layer, 0 first.

    Reads ``state.query_vector``; writes ``state.entities``,
    ``state.relationships`` and ``state.communities`` (every layer's, best
    first). Requires ``chnsw``, ``communities:archrag``, ``graph``;
    ``hierarchy`` names an ArchRAG variant instead (``archrag-spectral``,
    ``archrag-spectral-noaug``, ``archrag-leiden``: the paper's ablations),
    searched through its own C-HNSW.
    """
    query = question_vector(state, "archrag.hierarchical")
    if ef < 1:
        raise MethodError(f"archrag.hierarchical: ef must be at least 1, not {ef}")
    if query is None or top_k <= 0:
        state.entities, state.relationships, state.communities = {}, {}, {}
        return []
    resources = state.resources
    check_model(resources, "entity_vectors", state.models.embedder.name)  # layer 0 = entity vectors
    index = _chnsw(resources, hierarchy)
    check_dim(index.vectors, query, chnsw_name(hierarchy))
    found = index.search(query, int(top_k), int(ef))
    graph = resources.graph()
    communities = resources.communities(hierarchy)

    entity_hits = by_score(found.get(0, []))
    entity_scores = dict(entity_hits)
    rel_hits = endpoint_mean(graph, relationships_among(graph, graph.rows_of(list(entity_scores))), entity_scores)
    items = with_layer(resources.entity_items(entity_hits, "archrag.hierarchical"), 0)
    items += with_layer(resources.relationship_items(rel_hits, "archrag.hierarchical"), 0)
    for item in items:  # R0 is one layer: the adaptive filter groups items by (hierarchy, level)
        item.provenance.update(hierarchy=hierarchy, level=0)

    community_hits: list[tuple[str, float]] = []
    for layer in range(1, index.n_layers):
        hits = [(cid, score) for cid, score in by_score(found.get(layer, [])) if cid in communities]
        if max_level is not None:
            hits = [(cid, score) for cid, score in hits if communities[cid].level <= max_level]
        community_hits += hits
        items += with_layer(resources.community_items(hierarchy, hits, "archrag.hierarchical"), layer)
    state.entities = entity_scores
    state.relationships = dict(rel_hits)
    state.communities = dict(by_score(community_hits))
    return items


# -- hygrag.retrieve ------------------------------------------------------------------------

HygragPool = Literal["joint", "separate"]
HygragRelations = Literal["either", "both"]
HYGRAG_POOLS: tuple[str, ...] = get_args(HygragPool)
HYGRAG_RELATIONS: tuple[str, ...] = get_args(HygragRelations)


def _hygrag_entities(state: QueryState, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Top-k entities by cosine to their structure-aware embedding z_e (Eq. 16).

    ``hygrag_node_vectors`` holds chunk and entity nodes in one HNSW index:
    over-fetch and keep the entities, widening until k are found (or the
    index is exhausted)."""
    graph = state.resources.graph()
    index = state.resources.vectors("hygrag_node_vectors", embedding_model=state.models.embedder.name)
    total = len(index)
    fetch = min(total, max(4 * k, 32))
    while True:
        hits = [(node, score) for node, score in index.search(query, fetch)[0] if node in graph.entity_row]
        if len(hits) >= k or fetch >= total:
            return by_score(hits)[:k]
        fetch = min(total, fetch * 4)


def _community_entity_rows(resources: Resources, hierarchy: str) -> dict[str, np.ndarray]:
    """Graph rows of the entities under each community of ``hierarchy``, built once per process."""

    def build() -> dict[str, np.ndarray]:
        graph = resources.graph()
        return {cid: graph.rows_of(c.entities) for cid, c in resources.communities(hierarchy).items()}

    return loaded(resources, f"community_entity_rows:{hierarchy}", (f"communities:{hierarchy}", "graph"), build)


def _relation_scores(state: QueryState, rel_rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of each relationship's stored embedding (``relation_vectors``:
    ``source relation target: description``) to the question (-inf where it has none)."""
    resources = state.resources
    check_model(resources, "relation_vectors", state.models.embedder.name)
    stored = vector_rows(resources, "relation_vectors")
    check_dim(stored.vectors, query, "relation_vectors")

    def build() -> np.ndarray:
        graph = resources.graph()
        return np.array([stored.row.get(rel_id, -1) for rel_id in graph.rel_ids], dtype=np.int64)

    vector_of = loaded(resources, "relation_vector_of_row", ("relation_vectors", "graph"), build)[rel_rows]
    scores = np.full(len(rel_rows), -np.inf)
    known = vector_of >= 0
    if known.any():
        order = np.argsort(vector_of[known])  # ascending rows: a sequential read of the memory map
        rows = vector_of[known][order]
        values = np.empty(len(rows))
        values[order] = np.asarray(stored.vectors[rows], dtype=np.float32) @ query
        scores[known] = values
    return scores


def joint_pool(community_hits: list[tuple[str, float]], chunk_hits: list[tuple[str, float]],
               top_k: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """HyGRAG's joint context pool (Algorithm 2 lines 3-6) with the authors' composition.

    Algorithm 2 takes one top-k over communities and chunks; the authors' code
    (Sunefei/HyGRAG ``HKGraphTreeRetriever._build_flat_search_results``) walks that pool
    best first but keeps at most ``max(1, k // 5)`` communities, giving the other places to
    chunks (and tops up with chunks when the pool runs short). Without the cap a summary,
    whose embedding sums up many passages, wins every place and the context holds no
    passage at all. Ties by id."""
    cap = max(1, top_k // 5)
    merged = sorted([(s, c, "community") for c, s in community_hits] + [(s, c, "chunk") for c, s in chunk_hits],
                    key=lambda hit: (-hit[0], hit[1]))
    communities: list[tuple[str, float]] = []
    chunks: list[tuple[str, float]] = []
    for score, node, kind in merged:
        if len(communities) + len(chunks) >= top_k:
            break
        if kind == "community" and len(communities) < cap:
            communities.append((node, score))
        elif kind == "chunk":
            chunks.append((node, score))
    return communities, chunks


def hygrag_retrieve(
    state: QueryState, top_k: Count = 4, pool: HygragPool = "joint", relations: HygragRelations = "either",
) -> list[ContextItem]:
    """HyGRAG's context- and relation-aware retrieval (HyGRAG §3.2, Algorithm 2; context §3.3, Eq. 20/23).

    1. Context-aware: the top-k of the pool of communities (every level,
       ``community_vectors:hygrag``, summary embeddings s_C) and chunks
       (``chunk_vectors``, e_c) by cosine to the question. ``pool: joint``
       (Algorithm 2 lines 3-6): one top-k over both, split by kind, with the
       authors' composition (:func:`joint_pool`: at most max(1, k // 5)
       communities, chunks in the other places); ``pool: separate``
       (Eq. 14-15): top-k of each. Entities: the top-k
       by cosine to their structure-aware embeddings z_e
       (``hygrag_node_vectors``, written with ``communities:hygrag``; Eq. 16).
    2. Relation-aware: E_all = those entities plus every entity node under
       the retrieved communities (Eq. 17); R_all = the relationships touching
       E_all (``relations: either``, Eq. 18 and the reference code) or with
       both ends in it (``both``, Algorithm 2 line 11); the top-k of R_all by
       cosine of the triplet embedding (``relation_vectors``, which embed
       ``source relation target: description``) to the question (Eq. 19).

    Items in the order of Algorithm 2 line 14, ``Prompt(P_ret, C_ret, E_ret, R_ret)``
    (and Eq. 20): communities (provenance ``level``/``layer``), chunks, entities,
    relationships; scores are cosines. Eq. 23 and the authors' context builder put the
    chunks last, but that builder cuts entity and relation texts to 150 and 100 characters
    and the whole context only at 40,000 characters; a context cut to a token budget (a
    prefix) would then lose every passage behind the entities and relations, so the
    chunks come right after the one community, as Algorithm 2 lists them.
    Writes ``state.communities``, ``state.entities`` (the retrieved E_ctx),
    ``state.relationships`` and ``state.chunks``. Table 8 has no retrieval
    parameter: k is the method's ``top_k``.
    """
    if pool not in HYGRAG_POOLS:
        raise MethodError(f"hygrag.retrieve: pool must be one of {', '.join(HYGRAG_POOLS)}, not {pool!r}")
    if relations not in HYGRAG_RELATIONS:
        raise MethodError(f"hygrag.retrieve: relations must be one of {', '.join(HYGRAG_RELATIONS)}, "
                          f"not {relations!r}")
    query = question_vector(state, "hygrag.retrieve")
    state.communities, state.entities, state.relationships, state.chunks = {}, {}, {}, {}
    if query is None or top_k <= 0:
        return []
    resources, model = state.resources, state.models.embedder.name
    communities = resources.communities("hygrag")
    graph = resources.graph()

    # Step 1: context-aware retrieval.
    community_index = resources.vectors("community_vectors:hygrag", embedding_model=model)
    community_hits = [(c, s) for c, s in vector_top(community_index, query, top_k) if c in communities]
    chunk_hits = vector_top(resources.chunk_hnsw(model), query, top_k)
    if pool == "joint":
        community_hits, chunk_hits = joint_pool(community_hits, chunk_hits, top_k)
    entity_hits = _hygrag_entities(state, query, top_k)

    # Step 2: relation-aware retrieval.
    under = _community_entity_rows(resources, "hygrag")
    e_all = np.unique(np.concatenate([graph.rows_of([e for e, _ in entity_hits])]
                                     + [under[cid] for cid, _ in community_hits]))
    if relations == "both":
        candidates = relationships_among(graph, e_all)
    else:
        candidates = (np.unique(graph.entity_rel[e_all].indices).astype(np.int64) if e_all.size
                      else np.zeros(0, dtype=np.int64))
    rel_hits: list[tuple[str, float]] = []
    if candidates.size:
        scores = _relation_scores(state, candidates, query)
        keep = np.isfinite(scores)
        rel_hits = rank(candidates[keep], scores[keep], graph.rel_ids, top_k)

    items: list[ContextItem] = []
    for cid, score in community_hits:
        items += with_layer(resources.community_items("hygrag", [(cid, score)], "hygrag.retrieve"),
                            communities[cid].level)
    items += with_layer(resources.chunk_items(chunk_hits, "hygrag.retrieve"), 0)
    items += with_layer(resources.entity_items(entity_hits, "hygrag.retrieve"), 0)
    items += with_layer(resources.relationship_items(rel_hits, "hygrag.retrieve"), 0)
    for item in items:
        if item.kind == "entity":
            item.provenance["expanded_entities"] = int(e_all.size)
    state.communities = dict(community_hits)
    state.entities = dict(entity_hits)
    state.relationships = dict(rel_hits)
    state.chunks = dict(chunk_hits)
    return items


# -- leanrag.lca --------------------------------------------------------------------------


@dataclass(frozen=True)
class LeanragTree:
    """LeanRAG's hierarchy as parent links (base entity -> level-1 aggregated
    entity -> level-2 ...) and its aggregated relations by unordered pair."""

    parent: dict[str, str]
    links: dict[str, list[Any]]  # aggregated entity -> its aggregated relations (each pair once, strongest)


def _leanrag_tree(resources: Resources) -> LeanragTree:
    def build() -> LeanragTree:
        parent = {child: c.id for c in resources.communities("leanrag").values() for child in c.children}
        pairs: dict[tuple[str, str], Any] = {}
        for link in CommunityStore(resources.workspace).load_links("leanrag"):
            key = (min(link.source, link.target), max(link.source, link.target))
            if key not in pairs or link.weight > pairs[key].weight:
                pairs[key] = link
        links: dict[str, list[Any]] = {}
        for (a, b), link in pairs.items():
            links.setdefault(a, []).append(link)
            links.setdefault(b, []).append(link)
        return LeanragTree(parent, links)

    return loaded(resources, "leanrag_tree", ("communities:leanrag",), build)


def ancestors(node: str, parent: dict[str, str]) -> list[str]:
    """``node`` and its ancestors, child first, up to the top (cycles cut)."""
    chain, seen = [node], {node}
    while chain[-1] in parent and parent[chain[-1]] not in seen:
        chain.append(parent[chain[-1]])
        seen.add(chain[-1])
    return chain


def lca_paths(seeds: list[str], parent: dict[str, str]) -> dict[str, set[str]]:
    """Every node on the LCA paths of the seeds -> the seeds whose path holds it (LeanRAG Eq. 7).

    For each pair of seeds, each seed's chain up to their lowest common
    ancestor (included) is on the path, as in LeanRAG's reference code; a
    pair without a common ancestor contributes both chains to their tops.
    A seed is always on its own path.
    """
    through: dict[str, set[str]] = {seed: {seed} for seed in seeds}
    chains = {seed: ancestors(seed, parent) for seed in seeds}
    for a, b in combinations(seeds, 2):
        chain_a, chain_b = chains[a], chains[b]
        position_b = {node: i for i, node in enumerate(chain_b)}
        lca = next((i for i, node in enumerate(chain_a) if node in position_b), None)
        if lca is None:
            path_a, path_b = chain_a, chain_b
        else:
            path_a, path_b = chain_a[: lca + 1], chain_b[: position_b[chain_a[lca]] + 1]
        for node in path_a:
            through.setdefault(node, set()).add(a)
        for node in path_b:
            through.setdefault(node, set()).add(b)
    return through


def leanrag_lca(state: QueryState, top_k: Count = 10, top_c: CountOrZero = 5) -> list[ContextItem]:
    """LeanRAG's structured retrieval via lowest common ancestors (LeanRAG
    "Structured Retrieval via LCA", Eq. 6-10; appendix B.3).

    1. Seeds: the top-k base entities by cosine to the question
       (``entity_vectors``, Eq. 6; Table 6: N = 10).
    2. Paths: for every pair of seeds, the chains of parent links from each
       up to their lowest common ancestor (:func:`lca_paths`). Retrieved:
       the seeds (entity items), the aggregated entities on the paths
       (community items of hierarchy ``leanrag``, scored by how many seeds'
       paths pass through them, then by level, then id), the relationships
       among the seeds (the base relations on the paths, scored by the mean
       cosine of their ends) and the aggregated inter-cluster relations
       between aggregated entities on the paths (items of kind
       ``relationship`` with provenance ``hierarchy: leanrag``, scored by
       their connectivity strength).
    3. Chunks (B.3.1): the seeds' chunks ranked by how many seeds they
       contain (ties: the chunk of the better seed, then id), the top-C
       (Table 6: C = 5 on Mix).

    Writes ``state.entities`` (seeds), ``state.communities`` (path nodes),
    ``state.relationships`` (base relationships only) and ``state.chunks``.
    Requires ``communities:leanrag``, ``entity_vectors``, ``graph``.
    """
    query = question_vector(state, "leanrag.lca")
    state.entities, state.communities, state.relationships, state.chunks = {}, {}, {}, {}
    if query is None or top_k <= 0:
        return []
    resources = state.resources
    graph = resources.graph()
    index = resources.vectors("entity_vectors", embedding_model=state.models.embedder.name)
    seeds = [(e, s) for e, s in vector_top(index, query, top_k) if e in graph.entity_row]
    if not seeds:
        return []
    communities = resources.communities("leanrag")
    tree = _leanrag_tree(resources)
    seed_ids = [e for e, _ in seeds]
    seed_scores = dict(seeds)
    through = lca_paths(seed_ids, tree.parent)

    aggregated = [node for node in through if node in communities]
    aggregated.sort(key=lambda node: (-len(through[node]), communities[node].level, node))
    community_hits = [(node, float(len(through[node]))) for node in aggregated]

    seed_rows = graph.rows_of(seed_ids)
    rel_hits = endpoint_mean(graph, relationships_among(graph, seed_rows), seed_scores)
    on_path = set(aggregated)
    links = list({id(link): link for node in on_path for link in tree.links.get(node, ())
                  if link.source in on_path and link.target in on_path}.values())
    links.sort(key=lambda link: (link.level, -link.weight, link.source, link.target))

    counts: dict[int, int] = {}  # chunk -> how many seeds it contains (the seeds' chunks only)
    first_seed: dict[int, int] = {}
    for rank, row in enumerate(seed_rows.tolist()):
        for chunk in graph.entity_chunks[row].indices.tolist():
            first_seed.setdefault(chunk, rank)
            counts[chunk] = counts.get(chunk, 0) + 1
    ranked = sorted(first_seed, key=lambda c: (-counts[c], first_seed[c], graph.chunk_ids[c]))[: max(top_c, 0)]
    chunk_hits = [(graph.chunk_ids[c], float(counts[c])) for c in ranked]

    items = with_layer(resources.entity_items(seeds, "leanrag.lca"), 0)
    for node, score in community_hits:
        item = resources.community_items("leanrag", [(node, score)], "leanrag.lca")
        items += with_layer(item, communities[node].level)
    items += with_layer(resources.relationship_items(rel_hits, "leanrag.lca"), 0)
    for link in links:
        a, b = communities[link.source], communities[link.target]
        text = " ".join(link.description.split()) or f"{a.title} and {b.title} are related"
        items.append(ContextItem(
            "relationship", f"leanrag-link:{link.source}:{link.target}", f"{a.title} / {b.title}: {text}",
            float(link.weight), f"{a.title} / {b.title}",
            {"hierarchy": "leanrag", "level": link.level, "layer": link.level, "source": link.source,
             "target": link.target, "weight": link.weight},
            "leanrag.lca",
        ))
    items += with_layer(resources.chunk_items(chunk_hits, "leanrag.lca"), 0)
    state.entities = seed_scores
    state.communities = dict(community_hits)
    state.relationships = dict(rel_hits)
    state.chunks = dict(chunk_hits)
    return items


OPERATORS = (
    OperatorSpec(
        "tree.collapsed", "tree", tree_collapsed,
        "top-k RAPTOR tree nodes (chunks and summaries) by vector similarity (collapsed tree)",
        needs=("embedding",),
        requires_fn=lambda params: tree_names(params["tree"])[1:],
    ),
    OperatorSpec(
        "archrag.hierarchical", "hierarchy", archrag_hierarchical,
        "ArchRAG hierarchical search on C-HNSW: top-k entities (+ their relationships) and communities per layer",
        requires=("communities:{hierarchy}", "graph"), needs=("embedding",),
        requires_fn=lambda params: (chnsw_name(params["hierarchy"]),),
    ),
    OperatorSpec(
        "hygrag.retrieve", "hierarchy", hygrag_retrieve,
        "HyGRAG context- and relation-aware retrieval: communities + chunks, entities, filtered relations",
        requires=("graph", "communities:hygrag", "community_vectors:hygrag", "hygrag_node_vectors", "chunk_vectors",
                  "relation_vectors"),
        needs=("embedding",),
    ),
    OperatorSpec(
        "leanrag.lca", "hierarchy", leanrag_lca,
        "LeanRAG: seed entities, their lowest-common-ancestor paths and relations, top-C chunks by seed count",
        requires=("graph", "entity_vectors", "communities:leanrag"), needs=("embedding",),
    ),
)
