"""ArchRAG's attributed communities (Wang et al. 2025, Algorithm 1 "LLM-based hierarchical clustering").

Each iteration builds one layer of communities above the previous one
(``level_order="bottom_up"``: level 1 is the first layer above the entities):

1. **Augment** the current graph G into G' (E' = E plus similarity edges):
   ``knn`` links every node to its k most similar nodes by embedding cosine,
   k = round(average degree of G) (the appendix: "we set the K value as the
   average degree of nodes in the KG"), at least 1, or ``knn_k``;
   ``codicil`` is the CODICIL variant below; ``none`` keeps E (ablations).
2. **Weight** every edge of E' by the attribute similarity of its ends.
3. **Cluster** G' with weighted Leiden (or spectral clustering).
4. **Summarise** every community of two or more members with the LLM
   (prompt ``archrag_summary``: title + summary, JSON).
5. **Next layer**: one node per community, its vector the embedding of its
   summary, and an edge between two communities whose members are linked in
   E' (weight = number of such links). Repeat until a stop condition holds.

Decisions:

* **Edge weight = similarity, not distance.** Algorithm 1 line 5 writes
  ``1 - cos(z_u, z_v)``, but the text says each linked pair gets "a weight
  denoting their attribute similarity value", and the authors' code weights
  edges with the cosine similarity. Leiden maximises the weight inside
  communities, so a distance weight would pull *dissimilar* nodes together.
  We use ``max(cos, min_weight)``: the floor keeps every edge (negative
  weights break modularity) while giving an unrelated pair almost no pull.
  ``edge_weight="relation"`` (relationship weights / link counts, 1 for
  added edges) and ``"unit"`` exist for ablations only.
* **kNN = union of each node's top-k.** An edge (u, v) is added when v is
  among u's k nearest or u among v's; pairs already in E are not added twice
  (so a node whose graph neighbours are already its most similar nodes gains
  fewer edges). The authors' code also drops candidates below the 70th
  percentile of the existing edges' similarities; the paper does not mention
  that filter and we do not apply it. The average degree is over all nodes
  (isolated ones included), as in the paper's wording.
* **kNN search** is exact (blocked matrix products, no n x n matrix) up to
  ``EXACT_KNN_MAX_NODES`` nodes, and hnswlib beyond, built single-threaded
  so that the same input always gives the same graph (hence the same
  communities and the same, cached, LLM requests).
* **CODICIL** (Ruan, Fuhry & Parthasarathy, WWW 2013), simplified: content
  edges = each node's top-k by embedding cosine (CODICIL uses TF-IDF; k as
  for ``knn``); union with E; every edge of the union scored
  ``alpha * topo + (1 - alpha) * content`` where ``topo`` is the cosine of
  the two closed neighbourhoods in the union graph and ``content`` the
  embedding cosine (clipped at 0); then CODICIL's local sparsification:
  each node keeps its ``ceil(degree ** exponent)`` best-scored edges and an
  edge survives if either end keeps it. Defaults ``alpha = 0.5``,
  ``exponent = 0.5`` (CODICIL's). Original edges can be dropped; the stats
  count both added and removed edges.
* **Leiden** is leidenalg's modularity (``RBConfigurationVertexPartition``)
  with ``resolution``, ``seed`` and leidenalg's default 2 iterations.
  Communities above ``max_community_size`` (15, the authors' code's cap; the
  paper gives none) are re-clustered by Leiden on their own subgraph until
  they fit or cannot be split. Without the cap, modularity on the
  kNN-augmented graph merges far too much: on MuSiQue's 11,720-entity nlp
  graph it gave 72 communities of up to 525 entities whose mean cosine to
  their centroid (0.40) fell *below* plain Leiden's (0.49); the figures
  with the cap are in the README. The prompt budget below still bounds the
  cost of any big community.
* **Spectral** (ablation "Spec."): sklearn ``SpectralClustering`` on the
  sparse weighted adjacency (``affinity="precomputed"``), with
  ``k = ceil(n / spectral_cluster_size)`` clusters (the authors' code uses
  n / max cluster size), at most ``SPECTRAL_MAX_COMPONENTS`` eigenvectors
  (sklearn's default of k eigenvectors is infeasible for thousands of
  clusters) and k-means label assignment. Meant for small graphs.
* **Singletons** (a node its community has alone) are not summarised (an
  LLM paraphrase of one item buys nothing) and not carried up: the node gets
  no parent and stays retrievable at its own level, as in our RAPTOR tree.
  With kNN augmentation every node has neighbours and singletons are rare;
  ``stats`` counts them.
* **Prompt budget.** A community's prompt holds at most
  ``max_input_tokens`` tokens of members and relations: members in order of
  degree in G' (then layer order), each ``name: description`` (entities) or
  ``title: summary`` (communities), until the budget is spent (a first
  member too long is cut); relations between included members (relation
  descriptions at level 1, "linked N times" above) fill what is left, at
  most a quarter of the budget while members remain.
* **Parsing.** The reply is read with json_repair; a dict with a non-empty
  ``summary`` is used as is (a missing title becomes the first members'
  names); a reply with no JSON at all but some prose is kept as the summary
  (``prose_summaries``); anything else (empty, broken JSON, wrong fields)
  falls back to "Name1; Name2; ..." of the members (``fallback_summaries``).
  The build never fails on a bad reply.
* **Next-layer edges come from E'** (Algorithm 1 line 9: "build a new graph
  using C and E'"), so kNN links also connect communities; the authors' code
  links communities through the original relationships only.
* **Embedding** the next layer embeds ``Community.summary`` exactly, so an
  index built later over summaries hits the embedding cache.
* **Stopping**: a layer with fewer than ``min_nodes`` nodes is not clustered;
  at most ``max_levels`` levels (default 4: the paper's hierarchies have "no
  more than 5" layers and its example three; the authors' code defaults to
  4); a clustering with no community of two or more members ends the build,
  and so does a level that is one community of every node (the root). The
  loop itself is the one every layered hierarchy shares
  (:func:`unirag.hierarchy.layered.build_levels`); this module supplies its steps.

:func:`archrag_partition` runs steps 1-3 on the entity graph only (no LLM),
and :func:`community_quality` computes the paper's two quality metrics
(CHI, eq. 3; mean cosine to the centroid, eqs. 4-5), so attributed
communities can be compared with plain Leiden (``augment="none",
edge_weight="unit"``) at no LLM cost.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, labels_of
from unirag.hierarchy.layered import (Ask, BuildModels, Clustering, HierarchyStats, Layer, LayeredAlgorithm,
                                      ProgressLabels, Summary, SummarySource, build_levels)
from unirag.hierarchy.communities import (
    Community,
    CommunityLink,
    EntityGraph,
    HierarchyResult,
    bottom_up_result,
    level_communities,
)
from unirag.hierarchy.spec import BuildInputs, CostShape, HierarchySpec, MakeCarrier
from unirag.index.knn_update import (NeighbourLists, exact_lists, load_neighbour_lists, nearest_lists,
                                     save_neighbour_lists)
from unirag.index.unique_ints import unique_ints
from unirag.llm.base import ChatRequest, normalise_rows
from unirag.text.replies import read_summary
from unirag.text.tokenizer import Tokenizer

HIERARCHY = "archrag"
PROMPT = "archrag_summary"
SUMMARY_STAGE = "index.archrag.summarize"
EMBED_STAGE = "index.archrag.embed"
EXACT_KNN_MAX_NODES = 50_000  # beyond this, kNN search uses hnswlib
KNN_BLOCK_ROWS = 256  # rows per block of the exact kNN product (256 x n float32)
SPECTRAL_MAX_COMPONENTS = 64
# leidenalg's default. Iterating until no improvement (-1) took 45x longer on a
# 10k-node sparse graph for a 2% better modularity.
LEIDEN_ITERATIONS = 2
WEIGHT_CHUNK = 65_536  # edges per chunk when computing similarity weights
TITLE_MAX_CHARS = 200


@dataclass(frozen=True)
class ArchragConfig:
    """How the attributed-community hierarchy is built (see the module docstring)."""

    augment: Literal["knn", "codicil", "none"] = "knn"
    knn_k: int | None = None  # None: round(average degree), at least 1
    clustering: Literal["leiden", "spectral"] = "leiden"
    resolution: float = 1.0  # Leiden (modularity) resolution
    max_community_size: int | None = 15  # Leiden: bigger communities are re-clustered (None: no cap)
    edge_weight: Literal["similarity", "relation", "unit"] = "similarity"  # relation/unit: ablations
    max_levels: int = 4
    min_nodes: int = 10  # a layer with fewer nodes is not clustered
    summary_max_tokens: int = 256
    summary_max_words: int = 120
    max_input_tokens: int = 2000
    seed: int = 42
    min_weight: float = 1e-3  # floor of similarity weights
    spectral_cluster_size: int = 10  # spectral: k = ceil(n / spectral_cluster_size)
    codicil_alpha: float = 0.5  # weight of topology in CODICIL's edge score
    codicil_exponent: float = 0.5  # CODICIL keeps ceil(degree ** exponent) edges per node

    def validate(self) -> None:
        """Fail before any model call rather than half-way up the hierarchy."""
        choices = {"augment": ("knn", "codicil", "none"), "clustering": ("leiden", "spectral"),
                   "edge_weight": ("similarity", "relation", "unit")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"archrag {name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        for name in ("max_levels", "min_nodes", "summary_max_tokens", "summary_max_words", "max_input_tokens",
                     "spectral_cluster_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"archrag {name} must be at least 1, not {getattr(self, name)}")
        if self.knn_k is not None and self.knn_k < 1:
            raise ValueError(f"archrag knn_k must be at least 1 (or None), not {self.knn_k}")
        if self.resolution <= 0:
            raise ValueError(f"archrag resolution must be positive, not {self.resolution}")
        if self.max_community_size is not None and self.max_community_size < 2:
            raise ValueError(f"archrag max_community_size must be at least 2, not {self.max_community_size}")
        if not 0.0 < self.min_weight <= 1.0:
            raise ValueError(f"archrag min_weight must be in (0, 1], not {self.min_weight}")
        if not 0.0 <= self.codicil_alpha <= 1.0 or not 0.0 < self.codicil_exponent <= 1.0:
            raise ValueError("archrag codicil_alpha must be in [0, 1] and codicil_exponent in (0, 1]")


# -- graph helpers -------------------------------------------------------------------


def unique_edges(edges: np.ndarray, n: int) -> np.ndarray:
    """Row pairs as sorted, de-duplicated ``(i, j)`` with ``i < j`` (self-loops dropped)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    keys = unique_ints(lo[lo != hi] * n + hi[lo != hi])
    return np.stack([keys // n, keys % n], axis=1) if len(keys) else np.zeros((0, 2), dtype=np.int64)


def average_degree(n: int, edges: np.ndarray) -> float:
    """2 |E| / n over the distinct edges (isolated nodes count)."""
    return 2.0 * len(unique_edges(edges, n)) / n if n else 0.0


def knn_k(n: int, edges: np.ndarray, config: ArchragConfig, distinct: bool = False) -> int:
    """``config.knn_k``, or round(average degree); at least 1 and at most n - 1.
    ``distinct``: ``edges`` are unique already (:func:`unique_edges`), not de-duplicated again."""
    degree = (2.0 * len(edges) / n if n else 0.0) if distinct else average_degree(n, edges)
    k = config.knn_k if config.knn_k is not None else max(1, round(degree))
    return max(0, min(k, n - 1))


def knn_neighbours(vectors: np.ndarray, k: int) -> np.ndarray:
    """``(n, k)`` indices of each row's k most cosine-similar other rows (best first, ties by row).

    Exact up to ``EXACT_KNN_MAX_NODES`` rows, by blocks of rows so that memory
    stays ~``256 * n`` floats; hnswlib (single-threaded build, so
    deterministic) beyond.
    """
    x = np.ascontiguousarray(normalise_rows(vectors), dtype=np.float32)
    n = len(x)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((n, 0), dtype=np.int64)
    if n > EXACT_KNN_MAX_NODES:
        return _hnsw_neighbours(x, k)
    return exact_lists(x, np.arange(n), k)[0]


def _full_lists(x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's ``width`` nearest other rows and their cosines, as a full build finds them."""
    if len(x) <= EXACT_KNN_MAX_NODES:
        return exact_lists(x, np.arange(len(x)), width)
    neighbours = knn_neighbours(x, width)
    sims = np.empty(neighbours.shape, dtype=np.float32)
    for start in range(0, len(x), KNN_BLOCK_ROWS):
        part = neighbours[start:start + KNN_BLOCK_ROWS]
        sims[start:start + len(part)] = np.einsum("ijk,ik->ij", x[part], x[start:start + len(part)])
    return neighbours, sims


def _hnsw_neighbours(x: np.ndarray, k: int) -> np.ndarray:
    import hnswlib

    n, dim = x.shape
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=n, ef_construction=200, M=32, random_seed=42)
    index.add_items(x, np.arange(n), num_threads=1)  # one thread: the same graph on every run
    index.set_ef(max(64, 2 * (k + 1)))
    labels, _ = index.knn_query(x, k=k + 1, num_threads=-1)  # queries are read-only: threads are safe
    labels = np.asarray(labels, dtype=np.int64)
    keep = labels != np.arange(n)[:, None]  # drop the row itself...
    keep[keep.all(axis=1), -1] = False  # ...or, where the search missed it, the last hit
    return labels[keep].reshape(n, k)


Neighbours = Callable[[np.ndarray, int], np.ndarray]  # (vectors, k) -> (n, k) rows, best first


def knn_edges(vectors: np.ndarray, k: int, neighbours_of: Neighbours | None = None) -> np.ndarray:
    """Undirected kNN graph: ``(u, v)`` when v is among u's k nearest or u among v's.
    ``neighbours_of`` replaces :func:`knn_neighbours` (an update continuing stored lists)."""
    return unique_edges(_knn_pairs(vectors, k, neighbours_of), len(vectors))


def _knn_pairs(vectors: np.ndarray, k: int, neighbours_of: Neighbours | None = None) -> np.ndarray:
    """``(u, v)`` for each v among u's k nearest, repeats and both directions kept: :func:`knn_edges`
    before de-duplication, for a caller that de-duplicates its union with other edges once."""
    n = len(vectors)
    neighbours = (neighbours_of or knn_neighbours)(vectors, k)
    if neighbours.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack([np.repeat(np.arange(n), neighbours.shape[1]), neighbours.reshape(-1)], axis=1)


def edge_cosines(vectors: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Cosine of the two ends of every edge (chunked: no (m, d) temporary)."""
    x = normalise_rows(vectors)
    out = np.empty(len(edges), dtype=np.float64)
    for start in range(0, len(edges), WEIGHT_CHUNK):
        part = edges[start : start + WEIGHT_CHUNK]
        out[start : start + len(part)] = np.einsum("ij,ij->i", x[part[:, 0]], x[part[:, 1]])
    return out


def _edge_set_difference(a: np.ndarray, b: np.ndarray, n: int) -> int:
    """How many edges of ``a`` are not in ``b`` (both unique, i < j)."""
    return len(np.setdiff1d(a[:, 0] * n + a[:, 1], b[:, 0] * n + b[:, 1], assume_unique=True))


def codicil_edges(vectors: np.ndarray, edges: np.ndarray, k: int, alpha: float, exponent: float,
                  neighbours_of: Neighbours | None = None) -> np.ndarray:
    """CODICIL-style augmentation + sparsification (see the module docstring)."""
    from scipy.sparse import coo_matrix, identity

    n = len(vectors)
    # one de-duplication of the union: the same edges as de-duplicating each side first
    union = unique_edges(np.concatenate([np.asarray(edges, dtype=np.int64).reshape(-1, 2),
                                         _knn_pairs(vectors, k, neighbours_of)]), n)
    if len(union) == 0:
        return union
    u, v = union[:, 0], union[:, 1]
    ones = np.ones(2 * len(union))
    adj = coo_matrix((ones, (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(n, n)).tocsr()
    closed = (adj + identity(n, format="csr")).tocsr()
    sizes = np.asarray(closed.sum(axis=1)).reshape(-1)
    common = np.asarray(closed[u].multiply(closed[v]).sum(axis=1)).reshape(-1)
    topo = common / np.sqrt(sizes[u] * sizes[v])
    content = np.clip(edge_cosines(vectors, union), 0.0, None)
    score = alpha * topo + (1.0 - alpha) * content
    # Local sparsification: every node ranks its incident edges by score.
    node = np.concatenate([u, v])
    edge = np.concatenate([np.arange(len(union)), np.arange(len(union))])
    both = np.concatenate([score, score])
    order = np.lexsort((edge, -both, node))  # by node, best score first, then edge index
    node_sorted = node[order]
    starts = np.searchsorted(node_sorted, node_sorted, side="left")
    rank = np.arange(len(order)) - starts
    degree = np.bincount(node, minlength=n)
    keep_per_node = np.ceil(degree.astype(np.float64) ** exponent).astype(np.int64)
    kept = np.zeros(len(union), dtype=bool)
    kept[edge[order][rank < keep_per_node[node_sorted]]] = True
    return union[kept]


def augment(
    n: int, vectors: np.ndarray | None, edges: np.ndarray, config: ArchragConfig,
    neighbours_of: Neighbours | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """E' of a graph of ``n`` nodes and what changed: ``(edges, {"k", "added_edges", "removed_edges"})``."""
    base = unique_edges(edges, max(n, 1))
    if config.augment == "none":
        return base, {"k": 0, "added_edges": 0, "removed_edges": 0}
    if vectors is None:
        raise ValueError(f"archrag augment={config.augment!r} needs vectors")
    k = knn_k(n, base, config, distinct=True)
    if config.augment == "knn":
        out = unique_edges(np.concatenate([base, _knn_pairs(vectors, k, neighbours_of)]), n)
    else:
        out = codicil_edges(vectors, base, k, config.codicil_alpha, config.codicil_exponent, neighbours_of)
    return out, {
        "k": int(k),
        "added_edges": _edge_set_difference(out, base, n),
        "removed_edges": _edge_set_difference(base, out, n),
    }


def edge_weights(
    vectors: np.ndarray | None, edges: np.ndarray, structural: np.ndarray | None, config: ArchragConfig
) -> np.ndarray:
    """Clustering weight of each edge of E' (Algorithm 1 lines 4-5).

    ``similarity``: ``max(cos, min_weight)`` (see the module docstring for why
    not ``1 - cos``). ``relation``: the structural weight (relationship
    weight at level 1, link count above; 1 for added edges). ``unit``: 1.
    """
    if config.edge_weight == "unit":
        return np.ones(len(edges))
    if config.edge_weight == "relation":
        return np.ones(len(edges)) if structural is None else np.asarray(structural, dtype=np.float64)
    if vectors is None:
        raise ValueError("archrag edge_weight='similarity' needs vectors")
    return np.maximum(edge_cosines(vectors, edges), config.min_weight)


def canonical_labels(labels: np.ndarray) -> np.ndarray:
    """Relabel clusters 0, 1, ... in order of their lowest node index (stable across runs)."""
    labels = np.asarray(labels).reshape(-1)
    if len(labels) == 0:
        return labels.astype(np.int64)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def leiden_labels(n: int, edges: np.ndarray, weights: np.ndarray, resolution: float, seed: int) -> np.ndarray:
    """Weighted modularity Leiden (leidenalg), seeded, ``LEIDEN_ITERATIONS`` iterations."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if len(edges) == 0:
        return np.arange(n, dtype=np.int64)
    import igraph as ig
    import leidenalg

    graph = ig.Graph(n=n, edges=edges.tolist(), directed=False)
    graph.es["weight"] = [float(w) for w in weights]
    partition = leidenalg.find_partition(
        graph,
        leidenalg.RBConfigurationVertexPartition,
        weights="weight",
        resolution_parameter=resolution,
        n_iterations=LEIDEN_ITERATIONS,
        seed=seed,
    )
    return canonical_labels(np.asarray(partition.membership, dtype=np.int64))


def spectral_labels(n: int, edges: np.ndarray, weights: np.ndarray, cluster_size: int, seed: int) -> np.ndarray:
    """sklearn SpectralClustering on the sparse weighted adjacency; k = ceil(n / cluster_size)."""
    k = math.ceil(n / cluster_size) if n else 0
    if k <= 1:
        return np.zeros(n, dtype=np.int64)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    from scipy.sparse import coo_matrix
    from sklearn.cluster import SpectralClustering

    rows, cols = np.concatenate([edges[:, 0], edges[:, 1]]), np.concatenate([edges[:, 1], edges[:, 0]])
    affinity = coo_matrix((np.concatenate([weights, weights]), (rows, cols)), shape=(n, n)).tocsr()
    model = SpectralClustering(
        n_clusters=k,
        n_components=min(k, SPECTRAL_MAX_COMPONENTS),
        affinity="precomputed",
        assign_labels="kmeans",
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Graph is not fully connected": expected without augmentation
        labels = model.fit_predict(affinity)
    return canonical_labels(labels)


def split_oversized(
    labels: np.ndarray, edges: np.ndarray, weights: np.ndarray, max_size: int, resolution: float, seed: int
) -> np.ndarray:
    """Re-cluster every community above ``max_size`` on its induced subgraph, recursively.

    A community Leiden cannot split (one label back) is kept as it is, so
    the loop ends. The loop runs over oversized communities, never nodes, and
    each one carries its own members and inside edges (cut once from the
    whole graph, then from its parent's), so a split costs the size of the
    community, not of the graph: on 2Wiki's 36,854 entities there are
    hundreds of oversized communities.
    """
    labels = labels.copy()
    next_label = int(labels.max()) + 1 if len(labels) else 0
    pending = [int(c) for c in np.flatnonzero(np.bincount(labels) > max_size)] if len(labels) else []
    if not pending:
        return canonical_labels(labels)
    work = _oversized_subgraphs(labels, edges, weights, pending)
    stack = [work[c] for c in pending]
    while stack:
        community, members, local_edges, local_weights = stack.pop()
        sub = leiden_labels(len(members), local_edges, local_weights, resolution, seed)
        parts = int(sub.max()) + 1 if len(sub) else 1
        if parts <= 1:
            continue
        for part in range(1, parts):  # part 0 keeps the old label
            inside = _part_subgraph(members, sub, part, local_edges, local_weights)
            labels[inside[0]] = next_label
            if len(inside[0]) > max_size:
                stack.append((next_label, *inside))
            next_label += 1
        if int((sub == 0).sum()) > max_size:
            stack.append((community, *_part_subgraph(members, sub, 0, local_edges, local_weights)))
    return canonical_labels(labels)


_Subgraph = tuple[int, np.ndarray, np.ndarray, np.ndarray]  # label, members (rows), local edges, their weights


def _oversized_subgraphs(labels: np.ndarray, edges: np.ndarray, weights: np.ndarray,
                         communities: list[int]) -> dict[int, _Subgraph]:
    """Members (ascending) and inside edges (in the order of ``edges``, renumbered 0..size-1)
    of each listed community: one stable sort of the inside edges by community."""
    out: dict[int, _Subgraph] = {}
    wanted = np.zeros(int(labels.max()) + 1, dtype=bool)
    wanted[communities] = True
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=len(wanted)))])
    local = np.empty(len(labels), dtype=np.int64)
    local[order] = np.arange(len(labels)) - bounds[labels[order]]
    if len(edges):
        a, b = labels[edges[:, 0]], labels[edges[:, 1]]
        keep = np.flatnonzero((a == b) & wanted[a])
        keep = keep[np.argsort(a[keep], kind="stable")]
        edge_bounds = np.searchsorted(a[keep], np.arange(len(wanted) + 1))
    else:
        keep, edge_bounds = np.zeros(0, dtype=np.int64), np.zeros(len(wanted) + 1, dtype=np.int64)
    for community in communities:
        members = order[bounds[community]:bounds[community + 1]]
        rows = keep[edge_bounds[community]:edge_bounds[community + 1]]
        out[community] = (community, members, local[edges[rows]].reshape(-1, 2), weights[rows])
    return out


def _part_subgraph(members: np.ndarray, sub: np.ndarray, part: int, local_edges: np.ndarray,
                   local_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members, renumbered inside edges and weights of part ``part`` of a split community."""
    mask = sub == part
    renumber = np.cumsum(mask) - 1
    inside = mask[local_edges[:, 0]] & mask[local_edges[:, 1]] if len(local_edges) else np.zeros(0, dtype=bool)
    return members[mask], renumber[local_edges[inside]].reshape(-1, 2), local_weights[inside]


def cluster_labels(n: int, edges: np.ndarray, weights: np.ndarray, config: ArchragConfig) -> np.ndarray:
    """Community label of every node, canonical (see :func:`canonical_labels`)."""
    if config.clustering == "spectral":
        return spectral_labels(n, edges, weights, config.spectral_cluster_size, config.seed)
    labels = leiden_labels(n, edges, weights, config.resolution, config.seed)
    if config.max_community_size is not None:
        labels = split_oversized(labels, edges, weights, config.max_community_size, config.resolution, config.seed)
    return labels


def _structural_weights(base_edges: np.ndarray, base_weights: np.ndarray, edges: np.ndarray, n: int) -> np.ndarray:
    """Weights of ``edges`` taken from ``base`` (summed over duplicates); 1 for edges not in ``base``."""
    out = np.ones(len(edges))
    if len(base_edges) == 0 or len(edges) == 0:
        return out
    lo = np.minimum(base_edges[:, 0], base_edges[:, 1])
    hi = np.maximum(base_edges[:, 0], base_edges[:, 1])
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    summed = np.bincount(inverse.reshape(-1), weights=base_weights, minlength=len(keys))
    query = edges[:, 0] * n + edges[:, 1]
    pos = np.searchsorted(keys, query)
    found = pos < len(keys)
    found[found] = keys[pos[found]] == query[found]
    out[found] = summed[pos[found]]
    return out


def archrag_partition(graph: EntityGraph, config: ArchragConfig = ArchragConfig()) -> np.ndarray:
    """Level-1 community labels of the entities (steps 1-3 only: no LLM, no embedding calls).

    ``ArchragConfig(augment="none", edge_weight="unit")`` is plain Leiden on
    the KG, the baseline of the paper's Table 7.
    """
    config.validate()
    n = len(graph)
    needs_vectors = config.augment != "none" or config.edge_weight == "similarity"
    if needs_vectors and graph.vectors is None:
        raise ValueError("archrag_partition needs EntityGraph.vectors for this config")
    edges, _ = augment(n, graph.vectors, graph.edges, config)
    structural = _structural_weights(graph.edges, graph.weights, edges, n)
    weights = edge_weights(graph.vectors, edges, structural, config)
    return cluster_labels(n, edges, weights, config)


# -- quality ---------------------------------------------------------------------------


def community_quality(vectors: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The paper's community-quality metrics of one partition of ``vectors``.

    * ``chi``: Calinski-Harabasz index, eq. 3:
      ``(N - C) / (C - 1) * sum_i n_i |c_i - c|^2 / sum_i sum_{x in C_i} |x - c_i|^2``
      (the same as sklearn's ``calinski_harabasz_score``; None when C < 2 or
      C = N, where it is undefined; sklearn's 1.0 when the within term is 0).
    * ``cosine``: eq. 4, the mean over all N nodes of the cosine between a
      node and its cluster's centroid (the mean of the raw vectors). A
      singleton scores 1, so ``cosine_multi`` also gives the mean over nodes
      in clusters of two or more (None when there are none).
    * ``clusters``, ``singletons``: counts.
    """
    return quality_and_cosines(vectors, labels)[0]


def quality_and_cosines(vectors: np.ndarray, labels: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`community_quality` and each node's cosine to its cluster's centroid (eq. 5; 0 where
    a vector is zero), from one float64 copy of the vectors and one set of centroids (a level can
    hold tens of thousands of nodes, and every update computes both)."""
    x = np.asarray(vectors, dtype=np.float64)
    labels = canonical_labels(labels)
    n = len(labels)
    if n == 0:
        return {"chi": None, "cosine": None, "cosine_multi": None, "clusters": 0, "singletons": 0}, np.zeros(0)
    counts = np.bincount(labels)
    c = len(counts)
    multi = counts[labels] >= 2
    centroids = _centroids(x, labels, counts)
    at_node = centroids[labels]
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(centroids, axis=1)[labels]
    dots = np.einsum("ij,ij->i", x, at_node)
    per_node = np.divide(dots, norms, out=np.zeros(n), where=norms > 0)
    chi: float | None = None
    if 1 < c < n:
        between = float((counts * ((centroids - x.mean(axis=0)) ** 2).sum(axis=1)).sum())
        within = float(((x - at_node) ** 2).sum())
        chi = 1.0 if within == 0.0 else between * (n - c) / (within * (c - 1))
    return {
        "chi": chi,
        "cosine": float(per_node.mean()),
        "cosine_multi": float(per_node[multi].mean()) if multi.any() else None,
        "clusters": int(c),
        "singletons": int((counts == 1).sum()),
    }, per_node


def _centroids(x: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    from scipy.sparse import coo_matrix

    member = coo_matrix((np.ones(len(labels)), (labels, np.arange(len(labels)))), shape=(len(counts), len(labels)))
    return np.asarray(member.tocsr() @ x) / counts[:, None]


# -- one layer -------------------------------------------------------------------------

Relation = tuple[int, int, float, str]  # (u, v, weight, line quoted in prompts)


def _no_line(position: int) -> str:
    return ""


@dataclass(frozen=True)
class _Relations:
    """A layer's relations as prompts quote them: row pairs, weights, and each one's line,
    written only when a prompt shows it (an update sends the prompts of few communities,
    and a layer above the entities has hundreds of thousands of relations)."""

    ends: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))  # (m, 2) rows
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (m,)
    line: Callable[[int], str] = _no_line  # the line quoted for relation ``position``

    def by_group(self, labels: np.ndarray) -> dict[int, np.ndarray]:
        """Per community label: the positions of the relations with both ends in it, in order."""
        if not len(self.ends):
            return {}
        a, b = labels[self.ends[:, 0]], labels[self.ends[:, 1]]
        inside = np.flatnonzero(a == b)
        owner = a[inside]
        order = np.argsort(owner, kind="stable")
        inside, owner = inside[order], owner[order]
        cuts = np.flatnonzero(np.diff(owner)) + 1
        firsts = owner[np.concatenate([[0], cuts])].tolist() if len(owner) else []
        return dict(zip(firsts, np.split(inside, cuts)))

    def quoted(self, positions: np.ndarray) -> list[Relation]:
        """``(u, v, weight, line)`` of the relations at ``positions``."""
        ends, weights = self.ends[positions].tolist(), self.weights[positions].tolist()
        return [(u, v, weight, self.line(p)) for p, (u, v), weight in zip(positions.tolist(), ends, weights)]


def _relation_line(names: Sequence[str], ends: np.ndarray, texts: Sequence[str], position: int) -> str:
    """An entity-level relation as prompts quote it: ``name -- name: description``."""
    u, v = ends[position].tolist()
    line = f"{names[u]} -- {names[v]}"
    text = texts[position].strip()
    return f"{line}: {text}" if text else line


def _link_line(titles: Sequence[str], ends: np.ndarray, weights: np.ndarray, position: int) -> str:
    """A link between two communities as the level above quotes it."""
    a, b = ends[position].tolist()
    return f"{titles[a]} -- {titles[b]}: linked {int(weights[position])} times"


@dataclass(kw_only=True)
class _ArchragLayer(Layer):
    """A layer whose ``edges`` are unique (i < j) with structural ``weights`` (relation
    weights at level 1, link counts above), plus the relations prompts quote."""

    relations: _Relations = field(default_factory=_Relations)


@dataclass(kw_only=True)
class _ArchragClustering(Clustering):
    labels: np.ndarray  # community label of every node (singletons included)
    edges: np.ndarray  # E': the augmented edges the labels came from
    cosine: np.ndarray  # per node, cosine to its community's centroid (the records' payload)


def _entity_layer(graph: EntityGraph, vectors: np.ndarray) -> _ArchragLayer:
    n = len(graph)
    edges = unique_edges(graph.edges, max(n, 1))
    weights = _structural_weights(graph.edges, graph.weights, edges, n)
    kept = np.flatnonzero(graph.edges[:, 0] != graph.edges[:, 1])  # a self-loop is quoted nowhere
    ends = graph.edges[kept]
    texts = [graph.relation_texts[i] for i in kept.tolist()]
    relations = _Relations(ends, graph.weights[kept], partial(_relation_line, graph.names, ends, texts))
    return _ArchragLayer(
        ids=list(graph.ids),
        names=list(graph.names),
        texts=[graph.text(i) for i in range(n)],
        entities=[[entity] for entity in graph.ids],
        vectors=vectors,
        edges=edges,
        weights=weights,
        relations=relations,
    )


@dataclass(frozen=True)
class _Prompt:
    members: str
    relations: str
    truncated: bool


def _build_prompt(
    group: Sequence[int],
    layer: _ArchragLayer,
    degree: np.ndarray,
    tokens: Mapping[int, int],
    relations: Sequence[Relation],
    config: ArchragConfig,
    tokenizer: Tokenizer,
) -> _Prompt:
    """Members by degree then relations between included members, within ``max_input_tokens``."""
    budget = config.max_input_tokens
    member_budget = budget - budget // 4 if relations else budget
    order = sorted(group, key=lambda i: (-int(degree[i]), i))
    lines: list[str] = []
    used = 0
    included: set[int] = set()
    for i in order:
        cost = tokens[i] + 3  # "- " and the newline
        if used + cost > member_budget:
            if not lines:  # the first member alone is too long: cut it
                lines.append("- " + tokenizer.truncate(layer.texts[i], max(1, member_budget - 3)))
                included.add(i)
                used = member_budget
            break
        lines.append("- " + layer.texts[i])
        included.add(i)
        used += cost
    omitted = len(group) - len(included)
    if omitted:
        lines.append(f"({omitted} more items omitted)")
    relation_lines: list[str] = []
    left = budget - used
    ranked = sorted((r for r in relations if r[0] in included and r[1] in included), key=lambda r: -r[2])
    dropped = 0
    for _, _, _, line in ranked:
        cost = tokenizer.count(line) + 3
        if cost > left:
            dropped += 1
            continue
        relation_lines.append("- " + line)
        left -= cost
    return _Prompt(
        members="\n".join(lines),
        relations="\n".join(relation_lines) if relation_lines else "(none listed)",
        truncated=bool(omitted or dropped),
    )


def _names_title(names: Sequence[str], limit: int = 3) -> str:
    head = " / ".join(names[:limit])
    return head + (" / ..." if len(names) > limit else "")


def _read_community(names: Sequence[str], group: list[int], degree: np.ndarray, reply: str) -> Summary:
    """:func:`_read_summary` with the members' names by degree (ties by row), listed only for a
    reply read (an update reads the replies of few communities)."""
    return _read_summary([names[i] for i in sorted(group, key=lambda i: (-int(degree[i]), i))], reply)


def _read_summary(member_names: list[str], reply: str) -> Summary:
    """The reply's title and summary; the members' names (by degree) stand in for what is missing."""
    title, summary, how = read_summary(reply)
    title = title[:TITLE_MAX_CHARS]
    if how == "fallback":  # a title without a summary is not kept: both come from the members
        title, summary = "", "; ".join(member_names)
    return Summary(title or _names_title(member_names), summary, how, embed=summary)


def _next_layer_edges(edges: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Community pairs whose members are linked in E', with the number of such links."""
    if len(edges) == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    a, b = owner[edges[:, 0]], owner[edges[:, 1]]
    keep = (a >= 0) & (b >= 0) & (a != b)
    lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    m = int(owner.max()) + 1
    keys, counts = np.unique(lo * m + hi, return_counts=True)
    return np.stack([keys // m, keys % m], axis=1), counts.astype(np.float64)


# -- the hierarchy ---------------------------------------------------------------------


class _Archrag(LayeredAlgorithm[_ArchragLayer, _ArchragClustering, Community]):
    """ArchRAG's steps of the layered loop: steps 1-5 of the module docstring."""

    labels = ProgressLabels(summarising="archrag level {level}: summarising",
                            clustering="archrag level {level}: clustering {n} nodes",
                            embedding="archrag level {level}: embedding {n} summaries")
    embed_stage = EMBED_STAGE
    summed = ("truncated_prompts",)

    def __init__(self, config: ArchragConfig, models: BuildModels, carrier: LevelCarrier | None = None,
                 previous_neighbours: dict[int, NeighbourLists] | None = None) -> None:
        self.config, self.models, self.max_levels, self.carrier = config, models, config.max_levels, carrier
        self.prompt = models.prompts.load(PROMPT)
        # kNN augmentation: the last build's lists per level (an update continues them) and this build's.
        self.previous_neighbours = previous_neighbours or {}
        self.neighbour_lists: dict[int, NeighbourLists] = {}
        self.knn_updates: dict[int, dict[str, Any]] = {}

    def _neighbours(self, layer: _ArchragLayer, level: int, vectors: np.ndarray, k: int) -> np.ndarray:
        """Each node's k nearest (see :mod:`unirag.index.knn_update`), kept for the next update."""
        previous = self.previous_neighbours.get(level) if self.carrier is not None else None
        lists, done = nearest_lists(layer.ids, normalise_rows(vectors), k, previous, _full_lists)
        self.neighbour_lists[level] = lists
        self.knn_updates[level] = done
        return lists.top(k)

    def stop_before(self, layer: _ArchragLayer, level: int) -> str:
        return "min_nodes" if len(layer) < self.config.min_nodes else ""

    def cluster(self, layer: _ArchragLayer, level: int) -> _ArchragClustering:
        """Steps 1-3: augment, weight, cluster; groups of two or more (singletons stay alone)."""
        n, config = len(layer), self.config
        edges, changes = augment(n, layer.vectors, layer.edges, config, partial(self._neighbours, layer, level))
        structural = _structural_weights(layer.edges, layer.weights, edges, n)
        carried = self._carried(layer, level, edges)
        if carried is None:
            labels = cluster_labels(n, edges, edge_weights(layer.vectors, edges, structural, config), config)
        else:
            labels = labels_of(carried, n)
        counts = np.bincount(labels)
        order = np.argsort(labels, kind="stable")
        groups = [g.tolist() for g in np.split(order, np.cumsum(counts)[:-1]) if len(g) >= 2]
        quality, per_node = quality_and_cosines(layer.vectors, labels)
        knn = self.knn_updates.get(level, {})
        stats = {"edges": len(layer.edges), "augmented_edges": len(edges), "knn_k": changes["k"],
                 "knn_lists": knn.get("mode", "none"), "knn_recomputed": knn.get("recomputed", 0),
                 "added_edges": changes["added_edges"], "removed_edges": changes["removed_edges"],
                 "chi": quality["chi"], "cosine": quality["cosine"], "cosine_multi": quality["cosine_multi"],
                 "truncated_prompts": 0}
        return _ArchragClustering(groups, stats, labels=labels, edges=edges, cosine=per_node)

    def _carried(self, layer: _ArchragLayer, level: int, edges: np.ndarray) -> list[np.ndarray] | None:
        """The previous build's communities of this level, new entities attached (incremental update):
        a new node joins the community holding most of its neighbours in G' (where Leiden would
        most likely put it), oversized communities are halved, groups of one dissolve."""
        if self.carrier is None:
            return None
        from scipy.sparse import coo_matrix

        n = len(layer)
        adjacency = coo_matrix((np.ones(2 * len(edges)), (np.concatenate([edges[:, 0], edges[:, 1]]),
                                                          np.concatenate([edges[:, 1], edges[:, 0]]))),
                               shape=(n, n)).tocsr()
        policy = AttachPolicy(by_neighbours=True, min_size=2, max_size=self.config.max_community_size)
        grouping = self.carrier.grouping(level, layer.ids, layer.vectors, policy, adjacency, entities=layer.entities)
        return None if grouping is None else grouping.groups

    def asks(self, layer: _ArchragLayer, clustering: _ArchragClustering, level: int) -> list[Ask]:
        """Step 4: one ``archrag_summary`` prompt per community, members by degree in G'.

        Prompts are built when sent (:class:`Ask`), so a community that keeps its summary on
        an update costs no token counting; ``truncated_prompts`` counts the prompts sent."""
        labels = clustering.labels
        degree = np.bincount(clustering.edges.reshape(-1), minlength=len(layer))
        relations = layer.relations.by_group(labels)
        none = np.zeros(0, dtype=np.int64)
        asks = []
        for group in clustering.groups:
            build = partial(self._request, layer, clustering, group, degree, relations.get(int(labels[group[0]]), none))
            asks.append(Ask(None, partial(_read_community, layer.names, group, degree), build))
        return asks

    def _request(self, layer: _ArchragLayer, clustering: _ArchragClustering, group: list[int], degree: np.ndarray,
                 relations: np.ndarray) -> ChatRequest:
        """The summary request of one community (counted in ``truncated_prompts`` when cut)
        quoting ``relations`` (positions in ``layer.relations``)."""
        config, tokenizer = self.config, self.models.tokenizer
        tokens = dict(zip(group, tokenizer.count_many([layer.texts[i] for i in group])))
        prompt = _build_prompt(group, layer, degree, tokens, layer.relations.quoted(relations), config, tokenizer)
        clustering.stats["truncated_prompts"] += int(prompt.truncated)
        return self.prompt.request(
            SUMMARY_STAGE, max_tokens=config.summary_max_tokens, temperature=self.models.temperature,
            json_mode=True, max_words=str(config.summary_max_words), members=prompt.members,
            relations=prompt.relations,
        )

    def records(self, layer: _ArchragLayer, clustering: _ArchragClustering, summaries: list[Summary],
                vectors: np.ndarray, level: int, below: list[Community]) -> list[Community]:
        built = level_communities(HIERARCHY, level, layer, clustering.groups, summaries, below, sort_entities=True)
        per_node_cosine = clustering.cosine
        for community, group, summary in zip(built, clustering.groups, summaries):
            community.payload = {"size": len(group), "entity_count": len(community.entities),
                                 "cosine": round(float(per_node_cosine[group].mean()), 6),
                                 "summary_source": summary.source}
        return built

    def next_layer(self, layer: _ArchragLayer, clustering: _ArchragClustering, records: list[Community],
                   vectors: np.ndarray, level: int) -> tuple[_ArchragLayer, list[CommunityLink]]:
        """Step 5: communities linked where their members are linked in E'."""
        owner = np.full(len(layer), -1, dtype=np.int64)
        sizes = [len(group) for group in clustering.groups]
        members = np.fromiter((row for group in clustering.groups for row in group), dtype=np.int64, count=sum(sizes))
        owner[members] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        edges, weights = _next_layer_edges(clustering.edges, owner)
        ids, titles = [c.id for c in records], [c.title for c in records]
        links = [CommunityLink(HIERARCHY, level, ids[a], ids[b], w)
                 for (a, b), w in zip(edges.tolist(), weights.tolist())]
        upper = _ArchragLayer(
            ids=ids,
            names=titles,
            texts=[f"{c.title}: {c.summary}" for c in records],
            entities=[c.entities for c in records],
            vectors=vectors,
            edges=edges,
            weights=weights,
            relations=_Relations(edges, weights, partial(_link_line, titles, edges, weights)),
        )
        return upper, links


def build_archrag(
    graph: EntityGraph, models: BuildModels, config: ArchragConfig = ArchragConfig(),
    carrier: LevelCarrier | None = None, previous_neighbours: dict[int, NeighbourLists] | None = None,
) -> tuple[HierarchyResult, dict[int, NeighbourLists]]:
    """ArchRAG's hierarchy of attributed communities over ``graph`` (Algorithm 1; see the module
    docstring), and each level's kNN lists (an update passes them back as ``previous_neighbours``).

    Entity vectors come from ``graph.vectors``; when absent, the entities'
    ``name: description`` texts are embedded (stage ``index.archrag.embed``).
    """
    config.validate()
    n = len(graph)
    vectors = graph.vectors
    if vectors is None and n:
        if models.embedder is None:
            raise ValueError("archrag needs an embedder when EntityGraph.vectors is None")
        vectors = models.embedder.embed([graph.text(i) for i in range(n)], stage=EMBED_STAGE).vectors
    layer = _entity_layer(graph, normalise_rows(vectors) if n else np.zeros((0, 1), dtype=np.float32))
    stats = HierarchyStats(extra={"entities": n, "config": asdict(config)})
    algorithm = _Archrag(config, models, carrier, previous_neighbours)
    return bottom_up_result(HIERARCHY, build_levels(algorithm, layer, models, stats)), algorithm.neighbour_lists


def build_archrag_communities(
    graph: EntityGraph, models: BuildModels, config: ArchragConfig = ArchragConfig(),
    carrier: LevelCarrier | None = None,
) -> HierarchyResult:
    """:func:`build_archrag`'s hierarchy alone."""
    return build_archrag(graph, models, config, carrier)[0]


# -- the spec ----------------------------------------------------------------------


def _build(inputs: BuildInputs, name: str, config: ArchragConfig,
           make_carrier: MakeCarrier) -> tuple[HierarchyResult, list[str]]:
    """Attributed communities over the merged graph with its entity vectors."""
    graph = inputs.entity_graph(True)
    carrier = make_carrier(graph.ids)
    # The kNN augmentation's lists: an update continues them (economy only: a lost file recomputes).
    lists_file = inputs.workspace.artifact_path(f"communities.{name}.knn.npz")
    previous = load_neighbour_lists(lists_file) if carrier is not None else None
    result, lists = build_archrag(graph, inputs.models, config, carrier, previous)
    if lists:
        save_neighbour_lists(lists_file, lists)
    return result, graph.ids


def _cost(config: ArchragConfig) -> CostShape:
    size = config.spectral_cluster_size if config.clustering == "spectral" else (config.max_community_size or 15)
    return CostShape(size, config.min_nodes, config.max_levels, config.max_input_tokens)


SPEC = HierarchySpec(
    name=HIERARCHY,
    settings=ArchragConfig,
    build=_build,
    prompts=(PROMPT,),
    needs=("graph", "entity_vectors"),
    cost=_cost,
    description="ArchRAG attributed communities (kNN-augmented weighted Leiden) with LLM summaries",
    operators=("archrag.hierarchical",),
    # the paper's ablations ("Ablation study"): "Spec.", "Spec. (No Aug)", "Leiden"
    variants=MappingProxyType({
        "archrag-spectral": MappingProxyType({"clustering": "spectral"}),
        "archrag-spectral-noaug": MappingProxyType({"clustering": "spectral", "augment": "none"}),
        "archrag-leiden": MappingProxyType({"augment": "none", "edge_weight": "relation"}),
    }),
    vector_text="summary",
)
