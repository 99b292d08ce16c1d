"""HyGRAG's hierarchical index (HyGRAG §3.1, Algorithm 1, Table 8).

HyGRAG indexes a *hybrid* graph: chunk nodes and entity nodes, with three
kinds of edges (Eq. 2-6): chunk-chunk (the two chunks share more than
``l = 3`` entities), entity-entity (extracted relationships) and chunk-entity
membership (the entity was extracted from the chunk). The hierarchy is built
over **all** hybrid nodes, chunks and entities alike: the paper sets
``L_0 = V^c ∪ V^e`` (§3.1, Algorithm 1 line 14), so a layer-1 community can
hold both, and expanding a community yields its entities *and* its chunks.

Building one layer (Algorithm 1 lines 13-24):

1. **Structure-aware embeddings** (Eq. 7, Cleora with ``cleora_iterations =
   2``). Cleora is Markov propagation: each iteration multiplies the
   embeddings by the random-walk matrix ``D^-1 A`` and L2-normalises the rows.
   Two choices differ from vanilla Cleora, both on purpose:

   * the start vectors are the nodes' *text* embeddings, not random ones. The
     paper retrieves entities by ``sim(q, z_e)`` with a query embedded by the
     text model (Eq. 16), which only makes sense if ``z`` lives in that space;
   * each iteration keeps a self term, ``z <- normalise(a z + (1 - a) D^-1 A z)``
     with ``a = propagation_self_weight = 0.5``, i.e. "a node plus the mean of
     its neighbours" (pycleora's *residual* mixing). Without it two
     iterations would replace an entity's own text by its 2-hop
     neighbourhood. Isolated nodes keep their vector. ``a = 0`` is vanilla
     Cleora propagation.

   Edges are unweighted (0/1): the three edge kinds have no common weight
   scale (relationship strengths are LLM-rated, memberships are not).
2. **Hyperplane LSH** (Eq. 8): ``k = 16`` seeded Gaussian hyperplanes; a
   node's bucket is its sign pattern. Vectors are centred on the layer mean
   first (``center=True``, our addition): for anisotropic embeddings,
   hyperplanes through the origin give skewed bits, so fewer, unevenly
   sized buckets (HashEmbedder vectors, all in the positive orthant: 1,089
   codes for 3,000 nodes instead of 2,874). On MiniLM vectors, whose mean
   has norm 0.2, it changes little; ``center=False`` is the paper's Eq. 8.
3. **Size adjustment** (Eq. 9, ``S_min = 5``, ``S_max = 50``). The paper says
   only ``Merge(B, B_neighbor)`` below ``S_min`` and ``Split(B)`` above
   ``S_max``, and that "nodes with similar hash codes (small Hamming
   distance) are assigned to the same bucket". We

   * merge first: repeatedly, the smallest bucket under ``S_min`` joins the
     bucket whose code is nearest in Hamming distance (ties: highest centroid
     cosine, then lowest code), until no bucket is under ``S_min``;
   * then split every bucket over ``S_max`` into ``ceil(|B| / S_max)``
     near-equal parts by recursive bisection along the principal direction
     of its members (a PCA tree: balanced, deterministic, keeps neighbours
     together).

   ``merge_below`` (ours, default None = ``S_min``) merges up to a larger
   size instead: on real embeddings almost every node has its own 16-bit
   code (3,000 HotpotQA texts with MiniLM: 2,757 codes), so the paper's rule
   gives buckets of ~8 and one summary per ~8 nodes, while HyGRAG's Table 6
   reports roughly one community per ~46 nodes (there, ``merge_below=25``
   gives buckets of ~36).

   With ``S_max >= 2 S_min - 1`` (checked) every final bucket size is in
   ``[S_min, S_max]`` whenever the layer has at least ``S_min`` nodes: merged
   buckets are ``>= S_min`` and a split part of ``m > S_max`` nodes into
   ``k`` parts has at least ``floor(m / k) >= floor((S_max + 1) / 2)``. Edge
   case: a leaf layer with fewer than ``S_min`` nodes becomes one undersized
   bucket (so that a tiny corpus still gets a community layer; counted in
   ``stats["undersized_buckets"]``).
4. **Summaries** (Eq. 10-11): one LLM call per bucket (prompt
   ``hygrag_summary``, stage ``index.hygrag.summarize``) over the members'
   texts, fitted to ``max_input_tokens`` by water-filling (short texts are
   kept whole, long ones share the rest of the budget). The reply is JSON
   ``{"title", "summary"}``; plain prose is accepted as the summary
   (``prose_summaries``); an empty or unusable reply falls back to the
   members' first sentences (``fallback_summaries``). Summaries are embedded
   (stage ``index.hygrag.embed``).

The summaries are the next layer's nodes, up to ``L = 4`` layers
(Algorithm 1 line 15). Per Algorithm 1 line 22 (``Z(s_B) <- s_B``) the upper
layers are hashed on the summary embeddings themselves; Cleora runs once, on
the hybrid graph. ``propagate_upper_layers=True`` instead propagates them
over the links between buckets (two buckets are linked when any of their
members are); those links are returned as :class:`CommunityLink` either way.

Stopping: after ``max_layers`` layers; when a layer above the leaves has
fewer than ``S_min`` nodes (it would be one undersized bucket); when a layer
came out as one bucket (its summary is the root); when bucketing would not
reduce the node count (``stats["stop_reason"]``: ``max_levels``,
``small_layer``, ``root``, ``no_reduction``). The loop is the one every
layered hierarchy shares (:func:`unirag.hierarchy.layered.build_levels`).

Membership: ``Community.children`` are the member ids one level down (hybrid
node ids, chunk and entity, at level 1; community ids above);
``entities``/``chunks`` are all entity/chunk *nodes* beneath. Chunks that an
entity beneath was extracted from are not added: the paper expands a
community to its entities (Eq. 17) and retrieves chunks directly (Eq. 15),
and hub entities would otherwise pull much of the corpus into every
community above them (they remain reachable through ``EntityGraph.chunk_ids``).

Determinism: hyperplanes come from ``default_rng([seed, level])``, ties are
broken by code and position, and buckets and members are sorted, so a
rebuild sends the same summary requests (cache hits on resume).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, balanced_sizes, bisect
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
from unirag.config import config_hash
from unirag.hierarchy.spec import BuildInputs, CostShape, HierarchySpec, MakeCarrier, config_dict
from unirag.index.vector_artifacts import index_given_vectors, load_vectors
from unirag.llm.base import ChatRequest, normalise_rows
from unirag.text.replies import read_summary as parse_summary
from unirag.text.sentences import extractive_summary, first_sentence
from unirag.text.tokenizer import Tokenizer

HIERARCHY = "hygrag"
PROMPT = "hygrag_summary"
SUMMARY_STAGE = "index.hygrag.summarize"
EMBED_STAGE = "index.hygrag.embed"
EMBED_BATCH = 256
MIN_MEMBER_TOKENS = 8  # a member text never shrinks below this in a summary prompt
TABLE_BITS = 20  # merging looks codes up in a table of 2^k entries (8 MiB at k = 20), above that scans



@dataclass(frozen=True)
class HygragConfig:
    """HyGRAG's index parameters; defaults from HyGRAG Table 8 where it gives one."""

    hyperplanes: int = 16  # Table 8 lsh_num_hyperplanes k
    propagation_iterations: int = 2  # Table 8 cleora_iterations
    propagation_self_weight: float = 0.5  # ours: "node + mean of neighbours" (module docstring)
    s_min: int = 5  # Table 8 lsh_min_cluster_size
    s_max: int = 50  # Table 8 lsh_max_cluster_size
    merge_below: int | None = None  # ours: merge buckets under this size (None: s_min, the paper's rule)
    max_layers: int = 4  # Table 8 max_hierarchy_levels L
    summary_max_words: int = 300  # Table 8 community_summary_length
    summary_max_tokens: int = 512  # completion cap: 300 words plus the JSON wrapper
    max_input_tokens: int = 2000  # ours: member texts per summary prompt
    center: bool = True  # ours: centre each layer before hashing
    propagate_upper_layers: bool = False  # Algorithm 1 line 22 uses summary embeddings as they are
    attach_threshold: float = 0.65  # Table 8 update_th tau_attach: dynamic attachment on corpus updates (§3.4)
    seed: int = 224

    def validate(self) -> None:
        """Fail before any model call rather than half-way up the hierarchy."""
        for name in ("hyperplanes", "s_min", "s_max", "max_layers", "summary_max_words",
                     "summary_max_tokens", "max_input_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"hygrag {name} must be at least 1, not {getattr(self, name)}")
        if self.hyperplanes > 62:
            raise ValueError(f"hygrag hyperplanes must be at most 62 (codes are int64), not {self.hyperplanes}")
        if self.propagation_iterations < 0:
            raise ValueError(f"hygrag propagation_iterations must be >= 0, not {self.propagation_iterations}")
        if not 0.0 <= self.propagation_self_weight <= 1.0:
            raise ValueError(f"hygrag propagation_self_weight must be in [0, 1], not {self.propagation_self_weight}")
        if self.s_max < 2 * self.merge_size - 1:
            raise ValueError(
                f"hygrag s_max ({self.s_max}) must be at least 2 * s_min - 1 ({2 * self.merge_size - 1}, "
                "with merge_below for s_min when set), or split buckets could fall under s_min"
            )
        if self.merge_below is not None and self.merge_below < self.s_min:
            raise ValueError(f"hygrag merge_below ({self.merge_below}) must be at least s_min ({self.s_min})")

    @property
    def merge_size(self) -> int:
        """Buckets smaller than this are merged: ``merge_below`` when set, else ``s_min``."""
        return self.s_min if self.merge_below is None else self.merge_below


# -- the hybrid graph ------------------------------------------------------------


@dataclass
class HybridGraph:
    """HyGRAG's hybrid graph (Eq. 6) as arrays: what :func:`build_hygrag_index` reads.

    ``vectors`` are the nodes' text embeddings (chunk text; entity
    ``name: description``), rows following ``node_ids``. ``adjacency`` is
    made symmetric, unweighted (0/1) and loop-free on construction.
    ``edge_counts`` is informational (edges per kind, dropped references).
    """

    node_ids: list[str]
    node_kinds: list[str]  # "chunk" | "entity"
    texts: list[str]
    vectors: np.ndarray  # (n, d) float32, L2-normalised
    adjacency: Any  # scipy.sparse.csr_matrix (n, n)
    edge_counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.node_ids)
        if len(self.node_kinds) != n or len(self.texts) != n:
            raise ValueError(f"HybridGraph has {n} ids, {len(self.node_kinds)} kinds and {len(self.texts)} texts")
        bad = sorted(set(self.node_kinds) - {"chunk", "entity"})
        if bad:
            raise ValueError(f"HybridGraph node kinds must be 'chunk' or 'entity', not {bad[:3]}")
        if len(set(self.node_ids)) != n:
            raise ValueError("HybridGraph node ids are not unique (a chunk id equal to an entity id?)")
        vectors = np.asarray(self.vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != n:
            raise ValueError(f"HybridGraph has vectors of shape {vectors.shape} for {n} nodes")
        self.vectors = normalise_rows(vectors)
        self.adjacency = _binary_symmetric(self.adjacency, n)

    def __len__(self) -> int:
        return len(self.node_ids)


def _binary_symmetric(matrix: Any, n: int) -> Any:
    """``matrix`` as CSR float64 with 1 where either direction has a nonzero, 0 on the diagonal."""
    from scipy.sparse import csr_matrix

    matrix = csr_matrix(matrix, dtype=np.float64)
    if matrix.shape != (n, n):
        raise ValueError(f"HybridGraph adjacency has shape {matrix.shape} for {n} nodes")
    matrix = ((matrix != 0) + (matrix.T != 0)).astype(np.float64).tocsr()
    matrix.setdiag(0)
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


def _rows_of(ids: Sequence[str], known: Sequence[str]) -> np.ndarray:
    """Row of each id within ``known`` (-1 where absent), by binary search: no per-id Python loop."""
    out = np.full(len(ids), -1, dtype=np.int64)
    if not len(ids) or not len(known):
        return out
    known_arr = np.asarray(list(known), dtype=str)
    ids_arr = np.asarray(list(ids), dtype=str)
    order = np.argsort(known_arr, kind="stable")
    sorted_known = known_arr[order]
    pos = np.minimum(np.searchsorted(sorted_known, ids_arr), len(sorted_known) - 1)
    found = sorted_known[pos] == ids_arr
    out[found] = order[pos[found]]
    return out


def _memberships(entity_graph: EntityGraph, chunk_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """(entity rows, chunk rows) of every known chunk-entity membership, and how many were unknown."""
    lengths = np.fromiter((len(c) for c in entity_graph.chunk_ids), dtype=np.int64, count=len(entity_graph))
    entity_rows = np.repeat(np.arange(len(entity_graph), dtype=np.int64), lengths)
    flat = [chunk for chunks in entity_graph.chunk_ids for chunk in chunks]
    chunk_rows = _rows_of(flat, chunk_ids)
    known = chunk_rows >= 0
    pairs = np.unique(np.stack([entity_rows[known], chunk_rows[known]], axis=1), axis=0).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1], int((~known).sum())


def chunk_links_from(
    entity_graph: EntityGraph, chunk_ids: Sequence[str], threshold: int = 3
) -> list[tuple[str, str, int]]:
    """Chunk pairs sharing more than ``threshold`` entities (Eq. 2, Table 8 ``l = 3``), as ``(a, b, shared)``.

    One sparse product ``M M^T`` of the chunk-by-entity membership matrix.
    An entity mentioned in ``c`` chunks adds ``c^2`` products, so entities
    in very many chunks make this the expensive step on big corpora.
    """
    from scipy.sparse import coo_matrix, triu

    entity_rows, chunk_rows, _ = _memberships(entity_graph, chunk_ids)
    membership = coo_matrix(
        (np.ones(len(entity_rows)), (chunk_rows, entity_rows)), shape=(len(chunk_ids), len(entity_graph))
    ).tocsr()
    shared = triu(membership @ membership.T, k=1).tocoo()
    keep = shared.data > threshold
    order = np.lexsort((shared.col[keep], shared.row[keep]))
    rows, cols, counts = shared.row[keep][order], shared.col[keep][order], shared.data[keep][order]
    return [(chunk_ids[a], chunk_ids[b], int(c)) for a, b, c in zip(rows.tolist(), cols.tolist(), counts.tolist())]


def hybrid_graph_from(
    entity_graph: EntityGraph,
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    chunk_vectors: np.ndarray,
    chunk_links: Sequence[tuple[str, str, int]] | None = None,
    shared_entity_threshold: int = 3,
) -> HybridGraph:
    """The hybrid graph: chunk rows first, then entity rows.

    ``chunk_links`` are taken as given (the caller applied Eq. 2); when None
    they are computed with :func:`chunk_links_from` and
    ``shared_entity_threshold``. Membership edges come from
    ``entity_graph.chunk_ids``; references to chunks not in ``chunk_ids``
    are dropped and counted in ``edge_counts["dropped_memberships"]``.
    """
    from scipy.sparse import coo_matrix

    if entity_graph.vectors is None:
        raise ValueError("hybrid_graph_from needs entity vectors (EntityGraph.vectors is None)")
    chunk_vectors = np.asarray(chunk_vectors, dtype=np.float32)
    if chunk_vectors.ndim != 2 or chunk_vectors.shape[0] != len(chunk_ids):
        raise ValueError(f"chunk vectors of shape {chunk_vectors.shape} for {len(chunk_ids)} chunk ids")
    if len(chunk_texts) != len(chunk_ids):
        raise ValueError(f"{len(chunk_texts)} chunk texts for {len(chunk_ids)} chunk ids")
    if len(set(chunk_ids)) != len(chunk_ids):
        raise ValueError("duplicate chunk ids")
    n_chunks, n_entities = len(chunk_ids), len(entity_graph)
    if n_chunks and n_entities and chunk_vectors.shape[1] != entity_graph.vectors.shape[1]:
        raise ValueError(
            f"chunk vectors have {chunk_vectors.shape[1]} dimensions, entity vectors {entity_graph.vectors.shape[1]}"
        )
    entity_rows, chunk_rows, dropped = _memberships(entity_graph, chunk_ids)
    if chunk_links is None:
        chunk_links = chunk_links_from(entity_graph, chunk_ids, shared_entity_threshold)
    link_a = _rows_of([a for a, _, _ in chunk_links], chunk_ids)
    link_b = _rows_of([b for _, b, _ in chunk_links], chunk_ids)
    ok = (link_a >= 0) & (link_b >= 0) & (link_a != link_b)
    link_pairs = np.unique(np.sort(np.stack([link_a[ok], link_b[ok]], axis=1), axis=1), axis=0).reshape(-1, 2)
    rel = entity_graph.edges[entity_graph.edges[:, 0] != entity_graph.edges[:, 1]]
    rel_pairs = np.unique(np.sort(rel, axis=1), axis=0).reshape(-1, 2) + n_chunks
    rows = np.concatenate([link_pairs[:, 0], chunk_rows, rel_pairs[:, 0]])
    cols = np.concatenate([link_pairs[:, 1], entity_rows + n_chunks, rel_pairs[:, 1]])
    n = n_chunks + n_entities
    adjacency = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    vectors = np.asarray(entity_graph.vectors, dtype=np.float32)
    if n_chunks:  # chunk vectors may have any width when there are no entities, and vice versa
        vectors = np.concatenate([chunk_vectors, vectors]) if n_entities else chunk_vectors
    return HybridGraph(
        node_ids=list(chunk_ids) + list(entity_graph.ids),
        node_kinds=["chunk"] * n_chunks + ["entity"] * n_entities,
        texts=list(chunk_texts) + [entity_graph.text(row) for row in range(n_entities)],
        vectors=vectors,
        adjacency=adjacency,
        edge_counts={
            "chunk_chunk": len(link_pairs),
            "chunk_entity": len(entity_rows),
            "entity_entity": len(rel_pairs),
            "dropped_memberships": dropped,
            "dropped_chunk_links": int((~ok).sum()),
        },
    )


# -- structure-aware embeddings ----------------------------------------------------


def structure_aware_embeddings(
    vectors: np.ndarray, adjacency: Any, iterations: int = 2, self_weight: float = 0.5
) -> np.ndarray:
    """Cleora-style propagation: ``z <- normalise(a z + (1 - a) D^-1 A z)``, ``iterations`` times.

    ``adjacency`` is used as given (weights count); rows without neighbours
    keep their vector. Works in float32 (a corpus-sized float64 copy would
    double the memory); returns rows L2-normalised.
    """
    from scipy.sparse import csr_matrix, diags

    z = normalise_rows(vectors)
    if iterations <= 0 or len(z) == 0:
        return z
    adjacency = csr_matrix(adjacency, dtype=np.float32)
    degree = np.asarray(adjacency.sum(axis=1), dtype=np.float64).reshape(-1)
    isolated = degree == 0
    inverse = np.where(isolated, 0.0, 1.0 / np.where(isolated, 1.0, degree)).astype(np.float32)
    walk = (diags(inverse) @ adjacency).tocsr()
    for _ in range(iterations):
        mixed = self_weight * z + (1.0 - self_weight) * (walk @ z)
        mixed[isolated] = z[isolated]
        norms = np.linalg.norm(mixed, axis=1, keepdims=True)
        z = (mixed / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return z


# -- LSH bucketing --------------------------------------------------------------------


def lsh_codes(vectors: np.ndarray, hyperplanes: int, seed: int, level: int) -> np.ndarray:
    """Eq. 8: bit ``i`` of a row's int64 code is ``sign(z . h_i) > 0``, ``h_i ~ N(0, I)`` seeded by (seed, level)."""
    x = np.asarray(vectors, dtype=np.float32)
    planes = np.random.default_rng([seed, level]).standard_normal((hyperplanes, x.shape[1])).astype(np.float32)
    bits = (x @ planes.T) > 0
    return (bits.astype(np.int64) << np.arange(hyperplanes, dtype=np.int64)).sum(axis=1)


class _NearestCode:
    """The live bucket whose code is nearest in Hamming distance to a query code.

    With ``k <= TABLE_BITS`` hyperplanes it looks codes up in a table of all
    ``2^k`` codes, ring by ring (every code at distance 1, then 2, ...): a
    merge early on, when neighbours are near, costs a few dozen lookups
    instead of a pass over every bucket. With more hyperplanes it compares
    against every live code (``popcount(a ^ b)``).
    """

    def __init__(self, codes: np.ndarray, bits: int) -> None:
        self.codes = codes
        self.alive = np.ones(len(codes), dtype=bool)
        self.table: np.ndarray | None = None
        if bits <= TABLE_BITS:
            self.table = np.full(1 << bits, -1, dtype=np.int64)
            self.table[codes] = np.arange(len(codes))
            masks = np.arange(1 << bits, dtype=np.int64)
            weights = np.bitwise_count(masks)
            order = np.argsort(weights, kind="stable")
            self.rings = np.split(masks[order], np.cumsum(np.bincount(weights, minlength=bits + 1))[:-1])

    def remove(self, index: int) -> None:
        self.alive[index] = False
        if self.table is not None:
            self.table[self.codes[index]] = -1

    def nearest(self, index: int) -> np.ndarray:
        """Indices of the live buckets (other than ``index``) at the smallest Hamming distance, ascending."""
        code = self.codes[index]
        if self.table is not None:
            for ring in self.rings[1:]:
                owners = self.table[ring ^ code]
                owners = owners[owners >= 0]
                if len(owners):
                    return np.sort(owners)
            return np.zeros(0, dtype=np.int64)
        distance = np.bitwise_count(self.codes ^ code).astype(np.int64)
        distance[~self.alive] = np.iinfo(np.int64).max
        distance[index] = np.iinfo(np.int64).max
        return np.flatnonzero(distance == distance.min())


def _merge_small(
    codes: np.ndarray, groups: list[np.ndarray], sums: np.ndarray, min_size: int, bits: int
) -> tuple[list[np.ndarray], int]:
    """Merge buckets under ``min_size`` into their nearest bucket (Hamming, then centroid cosine, then code).

    ``codes`` are distinct and ascending; ``sums[i]`` is the vector sum of
    ``groups[i]``. The smallest undersized bucket goes first (a heap), so
    singletons pair up before they are absorbed into big buckets. A merged
    bucket keeps the code of the bucket it was merged into.
    """
    count = len(groups)
    members: list[list[np.ndarray]] = [[group] for group in groups]
    sizes = np.array([len(group) for group in groups], dtype=np.int64)
    sums = np.asarray(sums, dtype=np.float32)  # updated in place
    lookup = _NearestCode(codes, bits)
    merges = 0
    heap = [(int(sizes[i]), int(codes[i]), i) for i in range(count) if sizes[i] < min_size]
    heapq.heapify(heap)
    while heap and count - merges > 1:
        size, _, i = heapq.heappop(heap)
        if not lookup.alive[i] or sizes[i] != size:
            continue  # stale entry
        candidates = lookup.nearest(i)
        j = int(candidates[0])
        if len(candidates) > 1:
            centroids = sums[candidates]
            norms = np.linalg.norm(centroids, axis=1) * max(float(np.linalg.norm(sums[i])), 1e-12)
            cosine = centroids @ sums[i] / np.where(norms == 0, 1.0, norms)
            j = int(candidates[int(np.argmax(cosine))])  # ties: the first, i.e. lowest code
        members[j].extend(members[i])
        sizes[j] += sizes[i]
        sums[j] += sums[i]
        lookup.remove(i)
        members[i] = []
        merges += 1
        if sizes[j] < min_size:
            heapq.heappush(heap, (int(sizes[j]), int(codes[j]), j))
    out = [np.sort(np.concatenate(members[i])) for i in range(count) if lookup.alive[i]]
    return out, merges


def lsh_buckets(
    vectors: np.ndarray, config: HygragConfig, level: int = 1, stats: dict[str, int] | None = None
) -> list[np.ndarray]:
    """Buckets of one layer (Eq. 8-9): sorted arrays of row positions, ordered by their first row.

    Every bucket has between ``s_min`` and ``s_max`` rows when there are at
    least ``s_min`` rows; fewer rows give one bucket. ``stats`` (if given)
    receives ``initial_buckets``, ``merges`` and ``splits``.
    """
    from scipy.sparse import csr_matrix

    stats = stats if stats is not None else {}
    n = len(vectors)
    if n == 0:
        stats.update(initial_buckets=0, merges=0, splits=0)
        return []
    x = np.asarray(vectors, dtype=np.float32)
    if config.center:
        x = x - x.mean(axis=0, dtype=np.float64).astype(np.float32)
    codes = lsh_codes(x, config.hyperplanes, config.seed, level)
    unique, inverse = np.unique(codes, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    groups = np.split(order, np.cumsum(np.bincount(inverse))[:-1])
    stats["initial_buckets"] = len(groups)
    if n < config.s_min:
        stats.update(merges=0, splits=0)
        return [np.arange(n)]
    membership = csr_matrix((np.ones(n, dtype=np.float32), (inverse, np.arange(n))), shape=(len(unique), n))
    merged, stats["merges"] = _merge_small(
        unique, groups, np.asarray(membership @ x), config.merge_size, config.hyperplanes
    )
    out: list[np.ndarray] = []
    splits = 0
    for group in merged:
        if len(group) > config.s_max:
            splits += 1
            out.extend(bisect(group, x, balanced_sizes(len(group), config.s_max)))
        else:
            out.append(group)
    stats["splits"] = splits
    out.sort(key=lambda bucket: int(bucket[0]))
    return out


# -- summaries ------------------------------------------------------------------------


def _fit_budget(texts: list[str], counts: list[int], budget: int, tokenizer: Tokenizer) -> list[str]:
    """Cut texts to share ``budget`` tokens by water-filling: short texts whole, long ones an equal cap."""
    if sum(counts) <= budget:
        return texts
    cap, remaining = budget, budget
    order = np.argsort(counts, kind="stable")
    for position, index in enumerate(order.tolist()):
        share = remaining // (len(texts) - position)
        if counts[index] > share:
            cap = share
            break
        remaining -= counts[index]
    cap = max(cap, MIN_MEMBER_TOKENS)
    return [tokenizer.truncate(text, cap) if count > cap else text for text, count in zip(texts, counts)]


def _short_title(summary: str, words: int = 10) -> str:
    head = first_sentence(summary).split()
    return " ".join(head[:words]).rstrip(".,;:") if head else ""


@dataclass(kw_only=True)
class _HygragLayer(Layer):
    """A layer of hybrid nodes or bucket summaries: ``names`` are the prompt labels
    (``chunk``/``entity``/``summary``), ``chunks`` the chunk nodes beneath each node,
    ``adjacency`` the (symmetric, 0/1) links between nodes."""

    chunks: list[list[str]]
    adjacency: Any


@dataclass(kw_only=True)
class _HygragClustering(Clustering):
    buckets: list[np.ndarray]


def _one_line_texts(layer: Layer, rows: list[int]) -> list[str]:
    """The members' texts on one line each, as prompts quote them (made only for a bucket
    whose prompt is sent or reply read: an update keeps most buckets' summaries)."""
    return [" ".join(layer.texts[i].split()) for i in rows]


def _read_bucket(layer: Layer, rows: list[int], max_tokens: int, tokenizer: Tokenizer, reply: str) -> Summary:
    """:func:`_read_summary` of the bucket of ``rows`` (the members' texts as they are: the
    extractive fallback tells a title line from the text)."""
    return _read_summary([layer.texts[i] for i in rows], max_tokens, tokenizer, reply)


def _read_summary(texts: list[str], max_tokens: int, tokenizer: Tokenizer, reply: str) -> Summary:
    """The reply's title and summary; for an unusable reply (or none: the zero-LLM build) the
    members' lead sentences, each once and whole (:func:`~unirag.text.sentences.extractive_summary`)."""
    title, summary, status = parse_summary(reply)
    if status == "fallback":
        summary = extractive_summary(texts, max_tokens, tokenizer)
    return Summary(title or _short_title(summary) or f"Community of {len(texts)} nodes", summary, status,
                   embed=summary)


def _bucket_links(adjacency: Any, buckets: list[np.ndarray], n: int) -> Any:
    """Bucket-by-bucket CSR counting member edges between buckets (diagonal dropped)."""
    from scipy.sparse import csr_matrix

    rows = np.concatenate(buckets)
    cols = np.repeat(np.arange(len(buckets)), [len(b) for b in buckets])
    membership = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(buckets)))
    links = (membership.T @ adjacency @ membership).tocsr()
    links.setdiag(0)
    links.eliminate_zeros()
    return links


def _size_stats(buckets: list[np.ndarray]) -> dict[str, int | float]:
    sizes = [len(b) for b in buckets]
    return {"min_size": min(sizes), "max_size": max(sizes), "mean_size": round(float(np.mean(sizes)), 3)}


# -- the hierarchy ----------------------------------------------------------------------


class _Hygrag(LayeredAlgorithm[_HygragLayer, _HygragClustering, Community]):
    """HyGRAG's steps of the layered loop: Algorithm 1 lines 13-24 (module docstring, steps 2-4)."""

    labels = ProgressLabels(summarising="hygrag level {level}: summarising buckets",
                            embedding="hygrag level {level}: embedding summaries")
    embed_stage = EMBED_STAGE
    embed_batch = EMBED_BATCH
    summed = ("undersized_buckets",)

    def __init__(self, config: HygragConfig, models: BuildModels, carrier: LevelCarrier | None = None) -> None:
        self.config, self.models, self.max_levels, self.carrier = config, models, config.max_layers, carrier
        self.prompt = models.prompts.load(PROMPT)

    def stop_before(self, layer: _HygragLayer, level: int) -> str:
        return "small_layer" if level > 1 and len(layer) < self.config.s_min else ""

    def cluster(self, layer: _HygragLayer, level: int) -> _HygragClustering:
        """LSH buckets (Eq. 8-9); none when a layer above the leaves would not shrink."""
        config, vectors = self.config, layer.vectors
        if level > 1 and config.propagate_upper_layers:
            vectors = structure_aware_embeddings(
                vectors, layer.adjacency, config.propagation_iterations, config.propagation_self_weight
            )
        stats: dict[str, Any] = {}
        carried = self._attached(layer, level, vectors)
        buckets = lsh_buckets(vectors, config, level, stats) if carried is None else carried
        if level > 1 and len(buckets) >= len(layer):
            return _HygragClustering([], stats, buckets=[])
        stats.update(undersized_buckets=sum(len(b) < config.s_min for b in buckets), **_size_stats(buckets))
        return _HygragClustering([b.tolist() for b in buckets], stats, buckets=buckets)

    def _attached(self, layer: _HygragLayer, level: int, vectors: np.ndarray) -> list[np.ndarray] | None:
        """HyGRAG's dynamic attachment (§3.4, Eq. 28-31) for an incremental update: a new node
        joins the existing bucket whose summary embedding is closest when the cosine is at least
        ``attach_threshold`` (tau = 0.65); the others are bucketed among themselves by LSH; buckets
        above ``s_max`` split. None when this level did not exist before (bucket afresh)."""
        if self.carrier is None:
            return None
        config = self.config
        old = self.carrier.nodes(level)
        summary_vectors = None
        if old and self.models.embedder is not None:
            summary_vectors = normalise_rows(np.asarray(
                self.models.embedder.embed([node.text for node in old], stage=EMBED_STAGE).vectors, dtype=np.float32))

        def bucket_new(rows: np.ndarray) -> list[np.ndarray]:
            if not len(rows):
                return []
            return [rows[bucket] for bucket in lsh_buckets(vectors[rows], config, level)]

        policy = AttachPolicy(threshold=config.attach_threshold, max_size=config.s_max)
        grouping = self.carrier.grouping(level, layer.ids, vectors, policy, group_new=bucket_new,
                                         group_vectors=summary_vectors)
        return None if grouping is None else grouping.groups

    def asks(self, layer: _HygragLayer, clustering: _HygragClustering, level: int) -> list[Ask]:
        """One ``hygrag_summary`` prompt per bucket (Eq. 10-11), member texts fitted to the budget
        when the prompt is sent (:class:`Ask`: a bucket that keeps its summary counts no tokens)."""
        config, tokenizer = self.config, self.models.tokenizer
        asks = []
        for rows in clustering.groups:
            asks.append(Ask(None, partial(_read_bucket, layer, rows, config.summary_max_tokens, tokenizer),
                            partial(self._request, layer, rows)))
        return asks

    def _request(self, layer: _HygragLayer, rows: list[int]) -> ChatRequest:
        """One bucket's summary request: its members' one-line texts within the token budget."""
        config, tokenizer = self.config, self.models.tokenizer
        flat = _one_line_texts(layer, rows)
        texts = _fit_budget(flat, tokenizer.count_many(flat), config.max_input_tokens, tokenizer)
        members = "\n".join(f"- [{layer.names[i]}] {text}" for i, text in zip(rows, texts))
        return self.prompt.request(
            SUMMARY_STAGE, max_tokens=config.summary_max_tokens, temperature=self.models.temperature,
            json_mode=True, max_words=str(config.summary_max_words), members=members,
        )

    def records(self, layer: _HygragLayer, clustering: _HygragClustering, summaries: list[Summary],
                vectors: np.ndarray, level: int, below: list[Community]) -> list[Community]:
        built = level_communities(HIERARCHY, level, layer, clustering.groups, summaries, below)
        for community, rows, summary in zip(built, clustering.groups, summaries):
            community.chunks = [c for i in rows for c in layer.chunks[i]]
            community.payload = {"size": len(rows), "entities": len(community.entities),
                                 "chunks": len(community.chunks), "summary_source": summary.source}
        return built

    def next_layer(self, layer: _HygragLayer, clustering: _HygragClustering, records: list[Community],
                   vectors: np.ndarray, level: int) -> tuple[_HygragLayer, list[CommunityLink]]:
        """The summaries, linked where any of their members are."""
        from scipy.sparse import triu

        link_matrix = _bucket_links(layer.adjacency, clustering.buckets, len(layer))
        upper = triu(link_matrix, k=1).tocoo()
        order = np.lexsort((upper.data, upper.col, upper.row))  # (row, col) pairs are unique: one sort, in C
        ids = [c.id for c in records]
        links = [CommunityLink(HIERARCHY, level, ids[a], ids[b], weight)
                 for a, b, weight in zip(upper.row[order].tolist(), upper.col[order].tolist(),
                                         upper.data[order].astype(np.float64).tolist())]
        above = _HygragLayer(
            ids=ids,
            names=["summary"] * len(records),
            texts=[f"{c.title}: {c.summary}" if c.title else c.summary for c in records],
            entities=[c.entities for c in records],
            chunks=[c.chunks for c in records],
            vectors=vectors,
            adjacency=(link_matrix > 0).astype(np.float64).tocsr(),
        )
        return above, links


def build_hygrag_index(
    hybrid: HybridGraph, models: BuildModels, config: HygragConfig = HygragConfig(),
    carrier: LevelCarrier | None = None, propagated: np.ndarray | None = None,
) -> HierarchyResult:
    """HyGRAG's bottom-up hierarchy over every hybrid-graph node; see the module docstring.

    ``models.chat=None`` builds without a model: every summary is the
    extractive fallback (counted in ``fallback_summaries``). ``propagated``:
    :func:`structure_aware_embeddings` of ``hybrid`` under ``config``, where the
    caller has them (it indexes them too; on a big graph they cost a second).
    """
    config.validate()
    kinds = hybrid.node_kinds
    stats = HierarchyStats(extra={
        "nodes": len(hybrid),
        "chunk_nodes": kinds.count("chunk"),
        "entity_nodes": kinds.count("entity"),
        "hybrid_edges": int(hybrid.adjacency.nnz // 2),
        **{f"edges_{key}": int(value) for key, value in hybrid.edge_counts.items()},
    })
    layer = _HygragLayer(
        ids=list(hybrid.node_ids),
        names=list(kinds),
        texts=list(hybrid.texts),
        entities=[[node] if kind == "entity" else [] for node, kind in zip(hybrid.node_ids, kinds)],
        chunks=[[node] if kind == "chunk" else [] for node, kind in zip(hybrid.node_ids, kinds)],
        vectors=propagated if propagated is not None else structure_aware_embeddings(
            hybrid.vectors, hybrid.adjacency, config.propagation_iterations, config.propagation_self_weight
        ),
        adjacency=hybrid.adjacency,
    )
    return bottom_up_result(HIERARCHY, build_levels(_Hygrag(config, models, carrier), layer, models, stats))


# -- the spec ----------------------------------------------------------------------


def _build(inputs: BuildInputs, name: str, config: HygragConfig,
           make_carrier: MakeCarrier) -> tuple[HierarchyResult, list[str]]:
    """LSH buckets over the hybrid graph; also writes ``hygrag_node_vectors`` (its leaves' embeddings)."""
    workspace = inputs.workspace
    chunk_ids, chunk_vectors = load_vectors(workspace, "chunk_vectors", "chunk_vectors")
    texts = {chunk.id: chunk.indexed_text for chunk in workspace.corpus.iter_chunks()}
    hybrid = hybrid_graph_from(
        inputs.entity_graph(True), list(chunk_ids), [texts[c] for c in chunk_ids],
        np.asarray(chunk_vectors, dtype=np.float32), inputs.store.load_chunk_links("hybrid"),
    )
    # HyGRAG retrieves entities by their structure-aware embeddings (Eq. 16): the hierarchy's
    # leaves, computed once for both.
    z = structure_aware_embeddings(hybrid.vectors, hybrid.adjacency, config.propagation_iterations,
                                   config.propagation_self_weight)
    result = build_hygrag_index(hybrid, inputs.models, config, make_carrier(hybrid.node_ids), z)
    index_given_vectors(
        workspace, "hygrag_node_vectors", "hygrag_node_vectors", hybrid.node_ids, z,
        config_hash({"nodes": hybrid.node_ids, "config": config_dict(config),
                     **inputs.inputs_of("chunk_vectors", "entity_vectors")}),
        inputs.embedder, inputs.progress,
    )
    return result, hybrid.node_ids


SPEC = HierarchySpec(
    name=HIERARCHY,
    settings=HygragConfig,
    build=_build,
    prompts=(PROMPT,),
    needs=("graph", "entity_vectors", "chunk_vectors", "chunk_links:hybrid"),
    cost=lambda config: CostShape(max(2, round(math.sqrt(config.s_min * config.s_max))), config.s_min,
                                  config.max_layers, config.max_input_tokens),
    description="HyGRAG LSH bucket hierarchy over the hybrid graph with LLM summaries",
    operators=("hygrag.retrieve",),
    chunk_leaves=True,
    vector_text="summary",
)
