"""LeanRAG's hierarchical knowledge-graph aggregation (LeanRAG, "Hierarchical
Knowledge Graph Aggregation"; appendix B.2).

The merged entity graph is layer 0. Each layer is turned into the next one,
bottom-up, in four steps:

1. **Cluster.** The layer's ``name: description`` embeddings are reduced and
   clustered by a Gaussian mixture with ``ceil(n / cluster_size)`` components
   (B.2: ``clustersize`` limits the nodes per cluster; 20 on every dataset,
   Table 6), each node going to its most likely component (hard assignment,
   so the hierarchy is a tree: the LCA retrieval walks child -> parent chains).
2. **Aggregate entities.** One LLM call per cluster (Eq. 4, ``F_entity(C_j,
   R_Cj)``): from the members' names and descriptions *and the relations among
   them* it writes an aggregated entity ``{name, description}``, the parent
   of every member.
3. **Aggregate relations.** For every pair of clusters joined by relations of
   the layer below, the connectivity strength ``lambda`` is the number of
   such relations. Above ``tau`` (3 in the paper's experiments, B.2) the LLM
   summarises them into one relation (Eq. 5, ``F_rel``); otherwise the
   relation is their concatenation. Counts come from one sparse product
   ``H^T A H`` (``H`` the node-to-cluster indicator, ``A`` the relations).
4. **Recurse.** The aggregated entities (embedded) and aggregated relations
   are the next layer's nodes and edges.

The loop is the one every layered hierarchy shares
(:func:`unirag.hierarchy.layered.build_levels`); this module supplies the steps.

Decisions the paper leaves open (documented where implemented):

* **Reduction.** The paper clusters "following RAPTOR" (which reduces with
  UMAP); its reference code reduces with UMAP to 2-d. We default to PCA to
  ``reduction_dim`` (10, RAPTOR's) because it is deterministic and fast and
  needs no numba compilation; ``reducer="umap"`` (seeded, single-threaded) or
  ``"none"`` are options.
* **Number of components** is ``ceil(n / cluster_size)``, so clusters hold
  about ``cluster_size`` nodes (the reference code takes the larger of
  ``n // cluster_size`` and a BIC search). Components that win no node under argmax are dropped, so a layer
  may have fewer clusters than components (``stats["empty_components"]``).
* **Singleton clusters** get no LLM call: the aggregated node repeats its
  only member's name, description and vector (the reference code does the
  same by making the node its own parent). It is still a community, so every
  node has exactly one parent one level up. Counted in ``stats["singletons"]``.
* **Stopping.** The paper gives no rule. A layer of one node is the top. A
  layer of ``n <= cluster_size`` nodes (one component) gets one root entity
  over all of them when ``root`` is on (the reference code also ends with a
  single root, which gives any two seed entities a common ancestor); with
  ``root=False`` such a layer is the top. ``max_layers`` caps the number of
  aggregated levels. The reason is ``stats["stop_reason"]``.
* **``tau`` counts relations**, as the paper defines ``lambda`` (the
  reference code instead compares the relations' token count with a
  layer-dependent budget). It may differ per level (the paper: "may vary with the layer
  index"): an int, or a tuple whose i-th value is for level i+1 (the last
  value repeats).
* **``lambda`` at level i >= 2** counts the aggregated relations of level
  i-1 between the two clusters (the paper counts relations of layer G_{i-1});
  it is the link's ``weight``.
* **Token budgets.** Entity prompts list members most-central first (cosine
  to the cluster's mean vector) within ``max_input_tokens``: entities get two
  thirds when there are relations to show, relations the rest.
* **Fallbacks.** An entity reply that is not JSON with a name and a
  description gets, for what is missing, the most central member's name plus
  " (group)" and the members' first sentences; an empty relation reply gets
  the concatenation. Both are counted, and the build never stops for them.
* **Determinism.** Seeded GMM/UMAP under a one-thread BLAS limit, clusters
  numbered by their first member, members and pairs in sorted order, so a
  rebuild sends identical requests (cache hits on resume).

* **Blocks (global, then local).** One mixture of ``n / 20`` components over
  a whole layer costs O(n^2 d^2 / 20) per EM step and holds an ``n x n/20``
  responsibility matrix: on 36,854 2Wiki entities (1,843 components) that was
  1,733 s and 3.7 GB. A layer of more than ``gmm_block_size`` nodes (1,000) is
  first split into ``ceil(n / gmm_block_size)`` blocks by seeded k-means on its
  reduced vectors, then each block is reduced again on its own (PCA fitted to
  the block) and clustered by its own mixture of ``ceil(n_b / cluster_size)``
  components: RAPTOR's global-then-local clustering, with k-means for the
  cheap global step. The cost falls to O(n * gmm_block_size * d^2 / 20) and the
  memory to one block's matrix; the clusters are *better* by the paper's own
  measures (MuSiQue's 11,528 entities: CHI 9.61 -> 11.57, mean cosine to
  centroid 0.591 -> 0.624, median size 19 both; ``bench/hierarchy_speed.py``),
  because the local reduction keeps the directions that separate nearby
  entities. ``gmm_block_size=0`` fits one mixture per layer (the former
  behaviour); a layer of at most ``gmm_block_size`` nodes is one block, which
  is that same single mixture.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Literal

import numpy as np

from unirag.hierarchy.attach import AttachPolicy, LevelCarrier, labels_of
from unirag.hierarchy.communities import (
    Community,
    CommunityLink,
    EntityGraph,
    HierarchyResult,
    bottom_up_result,
    level_communities,
)
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.jit_cache import cached_umap
from unirag.hierarchy.layered import (Ask, BuildModels, Clustering, HierarchyStats, Layer, LayeredAlgorithm,
                                      ProgressLabels, Summary, SummarySource, build_levels)
from unirag.hierarchy.leanrag_links import (LinkBasis, PreviousLinks, link_bases_name, load_link_bases,
                                            previous_link_levels, relation_hashes, save_link_bases)
from unirag.hierarchy.spec import BuildInputs, CostShape, HierarchySpec, MakeCarrier
from unirag.llm.base import ChatRequest, normalise_rows
from unirag.llm.batch import complete_all
from unirag.prompts.prompt import Prompt
from unirag.text.replies import first_object
from unirag.text.sentences import first_sentence
from unirag.text.tokenizer import Tokenizer

HIERARCHY = "leanrag"
ENTITY_PROMPT = "leanrag_aggregate_entity"
RELATION_PROMPT = "leanrag_aggregate_relation"
ENTITY_STAGE = "index.leanrag.aggregate_entity"
RELATION_STAGE = "index.leanrag.aggregate_relation"
EMBED_STAGE = "index.leanrag.embed"
UMAP_NEIGHBORS = 15  # umap-learn's default, as in LeanRAG's reference code
MAX_NAME_CHARS = 200

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


@dataclass(frozen=True)
class LeanragConfig:
    """How the hierarchy is built; defaults follow the paper where it gives a value.

    ``cluster_size`` 20 and ``tau`` 3 are the paper's (appendix B.2, Table 6).
    The rest are ours (see the module docstring): ``reducer``/``reduction_dim``
    (RAPTOR's 10 dimensions), ``covariance_type``/``n_init`` (scikit-learn's
    defaults), ``gmm_block_size`` (nodes per block of a big layer; 0 = one
    mixture per layer), ``root``, ``max_layers``, and the token budgets.
    """

    cluster_size: int = 20
    tau: int | tuple[int, ...] = 3
    max_layers: int = 10
    root: bool = True
    reducer: Literal["pca", "umap", "none"] = "pca"
    reduction_dim: int = 10
    covariance_type: Literal["full", "tied", "diag", "spherical"] = "full"
    n_init: int = 1
    gmm_block_size: int = 1000
    summary_max_words: int = 120
    summary_max_tokens: int = 256
    max_input_tokens: int = 2000
    seed: int = 224
    # An update keeps an aggregated relation's description while at most this share of the
    # relations it was written from changed (see unirag.hierarchy.leanrag_links); 0: only unchanged.
    relink_share: float = 0.1

    def tau_for(self, level: int) -> int:
        """``tau`` for aggregated level ``level`` (1-based)."""
        if isinstance(self.tau, int):
            return self.tau
        return self.tau[min(level, len(self.tau)) - 1]

    def validate(self) -> None:
        """Fail before any model call rather than half-way up the hierarchy."""
        if self.cluster_size < 2:
            raise ValueError(f"leanrag cluster_size must be at least 2, not {self.cluster_size}")
        taus = (self.tau,) if isinstance(self.tau, int) else tuple(self.tau)
        if not taus or any(not isinstance(t, int) or t < 0 for t in taus):
            raise ValueError(f"leanrag tau must be a non-negative int or a non-empty tuple of them, not {self.tau!r}")
        if self.reducer not in ("pca", "umap", "none"):
            raise ValueError(f"leanrag reducer must be 'pca', 'umap' or 'none', not {self.reducer!r}")
        if not 0.0 <= self.relink_share <= 1.0:
            raise ValueError(f"leanrag relink_share must be between 0 and 1, not {self.relink_share}")
        if self.covariance_type not in ("full", "tied", "diag", "spherical"):
            raise ValueError(f"leanrag covariance_type is not a GaussianMixture type: {self.covariance_type!r}")
        for name in ("max_layers", "reduction_dim", "n_init", "summary_max_words", "summary_max_tokens",
                     "max_input_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"leanrag {name} must be at least 1, not {getattr(self, name)}")
        if self.gmm_block_size and self.gmm_block_size < 2 * self.cluster_size:
            raise ValueError(f"leanrag gmm_block_size must be 0 (one mixture per layer) or at least twice "
                             f"cluster_size, not {self.gmm_block_size}")


# -- clustering ------------------------------------------------------------------


def _reduce(x: np.ndarray, config: LeanragConfig) -> np.ndarray:
    """PCA (default), UMAP or nothing, down to at most ``reduction_dim`` dimensions."""
    n, d = x.shape
    dims = min(config.reduction_dim, d, n - 1)
    if config.reducer == "none" or dims >= d or dims < 1:
        return x
    # UMAP's spectral initialisation needs n_components < n - 1; smaller layers use PCA.
    if config.reducer == "umap" and n > dims + 2:
        reducer = cached_umap().UMAP(n_neighbors=max(2, min(UMAP_NEIGHBORS, n - 1)), n_components=dims, metric="cosine",
                            random_state=config.seed, n_jobs=1)
        return np.asarray(reducer.fit_transform(x), dtype=np.float64)
    from sklearn.decomposition import PCA

    return PCA(n_components=dims, svd_solver="full").fit_transform(x)


def _canonical(raw: np.ndarray) -> np.ndarray:
    """Relabel clusters 0..k-1 in the order of their first member, dropping unused labels."""
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def cluster_layer(vectors: np.ndarray, config: LeanragConfig) -> tuple[np.ndarray, int]:
    """Hard GMM labels of the rows of ``vectors`` and the number of components fitted.

    Labels run 0..k-1 numbered by first member; ``k`` may be below the number
    of components when argmax leaves a component empty. One component (a layer
    of at most ``cluster_size`` nodes) means one cluster, without fitting. A
    layer of more than ``gmm_block_size`` nodes is clustered block by block
    (module docstring, "Blocks").
    """
    n = len(vectors)
    components = max(1, math.ceil(n / config.cluster_size))
    if components == 1:
        return np.zeros(n, dtype=np.int64), 1
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    if config.reducer == "umap":
        import umap  # noqa: F401 -- its numba/BLAS load before the thread limit below
    blocks = math.ceil(n / config.gmm_block_size) if config.gmm_block_size else 1
    # One BLAS/OpenMP thread: the matrices are small after reduction (threads
    # only add overhead there) and the floating-point results then do not
    # depend on the machine's core count, so clusters are reproducible.
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        x = np.asarray(vectors, dtype=np.float64)
        if blocks == 1:
            return _canonical(_mixture_labels(_reduce(x, config), components, config)), components
        raw, components = _blocked_labels(x, blocks, config)
    return _canonical(raw), components


def _mixture_labels(x: np.ndarray, components: int, config: LeanragConfig) -> np.ndarray:
    """Argmax labels of one seeded Gaussian mixture of ``components`` fitted to ``x`` (hard assignment)."""
    from sklearn.mixture import GaussianMixture

    model = GaussianMixture(n_components=components, covariance_type=config.covariance_type,
                            n_init=config.n_init, random_state=config.seed)
    return model.fit(x).predict(x)


def _blocked_labels(x: np.ndarray, blocks: int, config: LeanragConfig) -> tuple[np.ndarray, int]:
    """Global, then local: k-means splits the reduced layer into ``blocks``, then each block
    is reduced on its own and clustered by its own mixture. Returns raw labels (unique across
    blocks) and the number of components fitted in all."""
    from sklearn.cluster import KMeans

    coarse = KMeans(n_clusters=blocks, n_init=1, random_state=config.seed).fit_predict(_reduce(x, config))
    labels = np.empty(len(x), dtype=np.int64)
    offset = 0
    for block in range(blocks):
        rows = np.flatnonzero(coarse == block)
        components = math.ceil(len(rows) / config.cluster_size)
        if components == 0:
            continue
        labels[rows] = offset + (0 if components == 1 else
                                 _mixture_labels(_reduce(x[rows], config), components, config))
        offset += components
    return labels, offset


def relation_counts(edges: np.ndarray, labels: np.ndarray, n_clusters: int) -> Any:
    """``C[a, b]``: relations with one end in cluster ``a`` and the other in ``b``
    (symmetric scipy CSR; the diagonal counts relations inside a cluster).

    ``H^T A H`` with ``A`` the (directed, one entry per relation) adjacency and
    ``H`` the node-to-cluster indicator; then ``C = D + D^T`` off the diagonal.
    """
    from scipy.sparse import coo_matrix, diags

    n, m = len(labels), len(edges)
    adjacency = coo_matrix((np.ones(m), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    indicator = coo_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, n_clusters)).tocsr()
    directed = (indicator.T @ adjacency @ indicator).tocsr()
    counts = (directed + directed.T - diags(directed.diagonal())).tocsr()
    counts.eliminate_zeros()
    return counts


@dataclass(frozen=True)
class EdgeGroups:
    """A layer's edges grouped by the cluster pair ``(a, b)``, ``a <= b``, at their ends: pair
    ``i`` is ``pairs[i]`` and holds the edges ``edges[starts[i]:starts[i + 1]]`` (ascending).

    Flat arrays rather than one small array per pair: a big layer has ~100k pairs, and
    every step over them (digests, bases, concatenated texts) then runs over whole arrays
    or plain slices."""

    pairs: np.ndarray  # (p, 2) int64, sorted
    edges: np.ndarray  # edge indices, grouped by pair
    starts: np.ndarray  # (p + 1,) offsets into ``edges``

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.starts)

    def group(self, i: int) -> np.ndarray:
        return self.edges[self.starts[i]:self.starts[i + 1]]

    def subset(self, keep: np.ndarray) -> EdgeGroups:
        """The pairs where ``keep`` (a boolean mask over pairs) holds, in order."""
        sizes = self.sizes[keep]
        edges = self.edges[np.repeat(keep, self.sizes)]
        return EdgeGroups(self.pairs[keep], edges, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))


def _edge_groups(edges: np.ndarray, labels: np.ndarray) -> EdgeGroups:
    """The cluster pairs holding relations (``a <= b``, sorted) with their edges (see :class:`EdgeGroups`)."""
    if len(edges) == 0:
        return EdgeGroups(np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64))
    ends = labels[edges]
    lo, hi = ends.min(axis=1), ends.max(axis=1)
    order = np.lexsort((np.arange(len(edges)), hi, lo))
    lo, hi = lo[order], hi[order]
    cuts = np.flatnonzero((np.diff(lo) != 0) | (np.diff(hi) != 0)) + 1
    starts = np.concatenate([[0], cuts])
    pairs = np.stack([lo[starts], hi[starts]], axis=1).astype(np.int64)
    return EdgeGroups(pairs, order.astype(np.int64), np.concatenate([starts, [len(edges)]]).astype(np.int64))


def _central_order(vectors: np.ndarray, labels: np.ndarray, n_clusters: int) -> list[np.ndarray]:
    """Each cluster's rows, most central first (cosine to the cluster's mean vector; ties by row)."""
    from scipy.sparse import csr_matrix

    # One sparse product (members summed in row order, as np.add.at would, but in C).
    membership = csr_matrix((np.ones(len(labels)), (labels, np.arange(len(labels)))), shape=(n_clusters, len(labels)))
    sums = np.asarray(membership @ vectors.astype(np.float64))
    # Dot with the sum orders members like cosine with the mean (one positive scale per cluster).
    closeness = np.einsum("ij,ij->i", vectors.astype(np.float64), sums[labels])
    order = np.lexsort((np.arange(len(labels)), -closeness, labels))
    return np.split(order, np.cumsum(np.bincount(labels, minlength=n_clusters))[:-1])


# -- prompts and replies -----------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fit_lines(lines: Sequence[str], budget: int, tokenizer: Tokenizer) -> tuple[list[str], int]:
    """The leading lines that fit ``budget`` tokens (the first one that does not is truncated)."""
    out: list[str] = []
    used = 0
    for line in lines:
        if used >= budget:
            break
        count = tokenizer.count(line)
        if used + count > budget:
            out.append(tokenizer.truncate(line, budget - used))
            used = budget
            break
        out.append(line)
        used += count
    return out, used


def _relation_bodies(layer: Layer, edge_indices: np.ndarray) -> list[str]:
    """``name -- name: relation`` of each edge (a relation line without its bullet)."""
    out = []
    names, texts = layer.names, layer.edge_texts
    for e, (i, j) in zip(edge_indices.tolist(), layer.edges[edge_indices].tolist()):
        text = _one_line(texts[e])
        out.append(f"{names[i]} -- {names[j]}" + (f": {text}" if text else ""))
    return out


def _relation_lines(layer: Layer, edge_indices: np.ndarray) -> list[str]:
    return ["- " + body for body in _relation_bodies(layer, edge_indices)]


def _truncated(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """``tokenizer.truncate(text, budget)`` without encoding a text that cannot pass the budget:
    every token holds at least one byte, so a text of at most ``budget`` UTF-8 bytes fits."""
    if len(text) <= budget and (text.isascii() or len(text.encode("utf-8")) <= budget):
        return text
    return tokenizer.truncate(text, budget)


def _as_text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def parse_aggregate(reply: str) -> tuple[str, str]:
    """``(name, description)`` read from an entity reply; ``""`` for what cannot be read.

    Small models wrap JSON in prose or code fences, break its syntax, or use
    other key names; the outermost ``{...}`` is repaired with json_repair.
    """

    start, end = reply.find("{"), reply.rfind("}")
    if start < 0:
        return "", ""
    value = first_object(reply[start:end + 1] if end > start else reply[start:])
    if value is None:
        return "", ""
    name = _one_line(_as_text(value.get("name")) or _as_text(value.get("entity_name")))
    description = _as_text(value.get("description")) or _as_text(value.get("entity_description"))
    return name.strip("\"'")[:MAX_NAME_CHARS].strip(), description


def _clean_relation(reply: str) -> str:
    return _FENCE.sub("", reply.strip()).strip().strip("\"'").strip()


def _entity_request(prompt: Prompt, layer: Layer, members: np.ndarray, inside: np.ndarray, config: LeanragConfig,
                    temperature: float, tokenizer: Tokenizer) -> ChatRequest:
    """Eq. 4's request for the cluster of ``members`` with the relations ``inside`` it (edge indices)."""
    relations = _relation_lines(layer, inside)
    entity_lines = [f"- {_one_line(layer.names[r])}: {_one_line(layer.texts[r])}" for r in members.tolist()]
    budget = config.max_input_tokens * 2 // 3 if relations else config.max_input_tokens
    entities, used = _fit_lines(entity_lines, budget, tokenizer)
    shown, _ = _fit_lines(relations, config.max_input_tokens - used, tokenizer)
    return prompt.request(ENTITY_STAGE, max_tokens=config.summary_max_tokens, temperature=temperature,
                          json_mode=True, max_words=str(config.summary_max_words), entities="\n".join(entities),
                          relations="\n".join(shown) or "(none)")


def _fallback_entity(layer: Layer, members: np.ndarray, config: LeanragConfig, tokenizer: Tokenizer) -> tuple[str, str]:
    rows = members.tolist()
    sentences = [s for s in (first_sentence(layer.texts[r]) for r in rows) if s]
    description = tokenizer.truncate(" ".join(sentences), config.summary_max_tokens)
    return f"{layer.names[rows[0]]} (group)", description


# -- one layer up ------------------------------------------------------------------


def _read_entity(layer: Layer, members: np.ndarray, config: LeanragConfig, tokenizer: Tokenizer,
                 reply: str) -> Summary:
    """The aggregated entity of an entity reply; what it lacks comes from :func:`_fallback_entity`."""
    name, description = parse_aggregate(reply)
    source: SummarySource = "json"
    if not name or not description:
        source = "fallback"
        default_name, default_description = _fallback_entity(layer, members, config, tokenizer)
        name, description = name or default_name, description or default_description
    return Summary(name, description, source, embed=f"{name}: {description}")


def _itself(name: str, description: str, reply: str) -> Summary:
    """A singleton cluster: its only member, one level up (no call, and its vector is kept)."""
    return Summary(name, description, "given")


@dataclass(kw_only=True)
class _LeanragClustering(Clustering):
    labels: np.ndarray
    central: list[np.ndarray]  # each cluster's rows, most central first
    inside: dict[int, np.ndarray]  # cluster -> relations (edge indices) inside it
    between: EdgeGroups  # the relations joining two clusters, by pair


class _Leanrag(LayeredAlgorithm[Layer, _LeanragClustering, Community]):
    """LeanRAG's steps of the layered loop: steps 1-4 of the module docstring."""

    labels = ProgressLabels(summarising="leanrag level {level}: aggregating entities",
                            clustering="leanrag level {level}: clustering {n} nodes")
    embed_stage = EMBED_STAGE
    summed = ("empty_components", "relation_calls", "relation_cache_hits", "relation_fallbacks",
              "concatenated_relations", "kept_relations", "drifted_relations")

    def __init__(self, config: LeanragConfig, models: BuildModels, carrier: LevelCarrier | None = None,
                 previous: dict[int, PreviousLinks] | None = None, base_hashes: np.ndarray | None = None) -> None:
        self.config, self.models, self.max_levels, self.carrier = config, models, config.max_layers, carrier
        self.prompt = models.prompts.load(ENTITY_PROMPT)
        # An incremental update: the last build's links per level (descriptions and bases).
        self.previous = previous or {}
        # The entity-level relations' hashes (rows of the base layer's edges), and what this
        # build's links were written from, per level: stored for the next update.
        self.base_hashes = base_hashes if base_hashes is not None else np.zeros(0, dtype=np.uint64)
        self.link_records: dict[int, list[LinkBasis]] = {}

    def stop_before(self, layer: Layer, level: int) -> str:
        if len(layer) <= 1:
            return "single_node"
        return "small_layer" if len(layer) <= self.config.cluster_size and not self.config.root else ""

    def cluster(self, layer: Layer, level: int) -> _LeanragClustering:
        """Step 1: hard GMM clusters; every cluster is an aggregated entity, singletons too."""
        carried = self._attached(layer, level)
        if carried is None:
            labels, components = cluster_layer(layer.vectors, self.config)
        else:
            labels = labels_of(carried, len(layer))
            components = len(carried)
        k = int(labels.max()) + 1
        central = _central_order(layer.vectors, labels, k)
        edge_groups = _edge_groups(layer.edges, labels)
        same = edge_groups.pairs[:, 0] == edge_groups.pairs[:, 1]
        inside = edge_groups.subset(same)
        return _LeanragClustering(
            [np.sort(rows).tolist() for rows in central], {"empty_components": components - k},
            labels=labels, central=central,
            inside={a: inside.group(i) for i, a in enumerate(inside.pairs[:, 0].tolist())},
            between=edge_groups.subset(~same),
        )

    def kept(self, record: Community) -> Summary:
        """An aggregated entity of the last build whose cluster kept its members."""
        source: SummarySource = "fallback" if record.payload.get("fallback") else "json"
        return Summary(record.title, record.summary, source, embed=f"{record.title}: {record.summary}", kept=True)

    def _attached(self, layer: Layer, level: int) -> list[np.ndarray] | None:
        """The previous build's clusters of this level for an incremental update: a new node
        joins the cluster with the nearest mean vector (what the mixture's argmax would do for
        spherical components), clusters past twice ``cluster_size`` are halved. None when this
        level did not exist before (cluster afresh)."""
        if self.carrier is None:
            return None
        policy = AttachPolicy(max_size=2 * self.config.cluster_size, keep_built_size=True)
        grouping = self.carrier.grouping(level, layer.ids, layer.vectors, policy, entities=layer.entities)
        return None if grouping is None else grouping.groups

    def asks(self, layer: Layer, clustering: _LeanragClustering, level: int) -> list[Ask]:
        """Step 2 (Eq. 4): one call per cluster of two or more nodes; a singleton repeats its member."""
        config, tokenizer = self.config, self.models.tokenizer
        asks = []
        for c, rows in enumerate(clustering.central):
            if len(rows) == 1:
                asks.append(Ask(None, partial(_itself, layer.names[rows[0]], layer.texts[rows[0]])))
                continue
            build = partial(_entity_request, self.prompt, layer, rows, clustering.inside.get(c, np.zeros(0, np.int64)),
                            config, self.models.temperature, tokenizer)
            asks.append(Ask(None, partial(_read_entity, layer, rows, config, tokenizer), build))
        return asks

    def records(self, layer: Layer, clustering: _LeanragClustering, summaries: list[Summary],
                vectors: np.ndarray, level: int, below: list[Community]) -> list[Community]:
        built = level_communities(HIERARCHY, level, layer, clustering.groups, summaries, below)
        for community, rows, summary in zip(built, clustering.central, summaries):
            community.payload = {"size": len(rows), "entities": len(community.entities), "singleton": len(rows) == 1,
                                 "fallback": summary.source == "fallback", "central": layer.ids[int(rows[0])]}
        return built

    def next_layer(self, layer: Layer, clustering: _LeanragClustering, records: list[Community],
                   vectors: np.ndarray, level: int) -> tuple[Layer, list[CommunityLink]]:
        """Steps 3-4: aggregated relations between clusters; the aggregated entities, embedded
        (a singleton keeps its member's vector), are the next layer."""
        upper = layer.vectors[[int(rows[0]) for rows in clustering.central]].astype(np.float32)
        asked = [c for c, rows in enumerate(clustering.central) if len(rows) > 1]
        if asked:
            if vectors.shape[1] != upper.shape[1]:
                raise ValueError(f"embedder gives {vectors.shape[1]}-d vectors but the entity vectors are "
                                 f"{upper.shape[1]}-d: aggregate with the embedder that embedded the entities")
            upper[asked] = vectors
        names = [c.title for c in records]
        descriptions = [c.summary for c in records]
        previous = self.previous.get(level) if self.carrier is not None else None
        between = clustering.between
        bases = self._grouped_bases(layer, between.edges, between.sizes)
        strength, link_texts, digests, self.link_records[level] = _aggregate_relations(
            layer, clustering, names, descriptions, level, self.config, self.models, bases, previous)
        ids = [c.id for c in records]
        links = [
            CommunityLink(HIERARCHY, level, ids[a], ids[b], float(count), text, digest)
            for (a, b), count, text, digest in zip(between.pairs.tolist(), strength.tolist(), link_texts, digests)
        ]
        return Layer(ids=ids, texts=descriptions, vectors=upper, names=names,
                     entities=[c.entities for c in records], edges=between.pairs.copy(), edge_texts=link_texts,
                     edge_keys=digests, edge_bases=bases), links

    def _grouped_bases(self, layer: Layer, edges: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
        """Per group of ``sizes[i]`` consecutive ``edges`` of ``layer`` (each at least one): the
        entity-level relations under them (sorted unique hashes), for all groups in one sort
        rather than one ``np.unique`` per group."""
        if not len(sizes):
            return []
        if layer.edge_bases:
            parts = [layer.edge_bases[e] for e in edges.tolist()]
            part_sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
            # every group holds at least one edge, so no two offsets are equal
            group_sizes = np.add.reduceat(part_sizes, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
            return _unique_per_group(np.concatenate(parts), group_sizes)
        if not len(self.base_hashes):
            return [np.zeros(0, np.uint64) for _ in range(len(sizes))]
        return _unique_per_group(self.base_hashes[edges], np.asarray(sizes, dtype=np.int64))


def _unique_per_group(values: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """``np.unique`` of each run of ``sizes[i]`` consecutive ``values``, all runs in one sort."""
    group = np.repeat(np.arange(len(sizes)), sizes)
    order = np.lexsort((values, group))
    values, group = values[order], group[order]
    first = np.ones(len(values), dtype=bool)
    first[1:] = (values[1:] != values[:-1]) | (group[1:] != group[:-1])
    kept = np.bincount(group[first], minlength=len(sizes))
    return np.split(values[first], np.cumsum(kept)[:-1])


def _aggregate_relations(
    layer: Layer, clustering: _LeanragClustering, names: list[str], descriptions: list[str], level: int,
    config: LeanragConfig, models: BuildModels, bases: Sequence[np.ndarray],
    previous: PreviousLinks | None = None,
) -> tuple[np.ndarray, list[str], list[str], list[LinkBasis]]:
    """Connectivity strength, description, digest and basis record of each cluster pair joined
    by relations (Eq. 5).

    Above ``tau`` relations the LLM summarises them; otherwise (and when its
    reply is empty) the description is their concatenation. A pair's digest
    names the relations it aggregates; ``bases`` are the entity-level
    relations beneath each pair. ``previous`` (an incremental update: the last
    build's links of this level) keeps the description of a pair whose
    relations are unchanged, or changed by at most ``config.relink_share``
    since that description was written (:mod:`unirag.hierarchy.leanrag_links`),
    without a call, as communities whose members did not change keep their
    summaries.
    """
    tokenizer, between, stats = models.tokenizer, clustering.between, clustering.stats
    counts = relation_counts(layer.edges, clustering.labels, len(names))
    strength = (np.asarray(counts[between.pairs[:, 0], between.pairs[:, 1]]).reshape(-1)
                if len(between) else np.zeros(0)).astype(np.int64)
    tau = config.tau_for(level)
    prompt = models.prompts.load(RELATION_PROMPT)
    quote = max(1, config.max_input_tokens // 8)  # tokens of each aggregated description quoted
    starts = between.starts.tolist()
    digests = _group_digests(_edge_keys(layer, between.edges), list(zip(starts[:-1], starts[1:])))
    records = [LinkBasis(digest, basis, False) for digest, basis in zip(digests, bases)]
    texts = [""] * len(between)
    written = np.ones(len(between), dtype=bool)  # pairs written now: summarised or concatenated, not kept
    summarise: list[int] = []
    kept = drifted = 0
    for position in np.flatnonzero(strength > tau).tolist():
        if previous is not None:
            before, drift = _kept_link(previous, digests[position], bases[position], config.relink_share)
            if before >= 0:
                texts[position] = previous.descriptions[before]
                written_from = previous.bases[before]
                records[position] = LinkBasis(digests[position],
                                              written_from if len(written_from) else bases[position], True)
                written[position] = False
                kept += 1
                drifted += int(drift > 0)
                continue
        summarise.append(position)
    # Relation lines only under the pairs written now: a kept description needs none (on an
    # update's upper levels nearly all; there each line quotes a long description of the level below).
    positions = np.flatnonzero(written)
    shown_groups = between.subset(written)
    bodies = _relation_bodies(layer, shown_groups.edges)
    shown_starts = shown_groups.starts.tolist()
    spans = list(zip(shown_starts[:-1], shown_starts[1:]))
    requests: list[ChatRequest] = []
    pairs = between.pairs.tolist()
    for position, at in zip(summarise, np.searchsorted(positions, summarise).tolist()):
        a, b = pairs[position]
        lo, hi = spans[at]
        shown, _ = _fit_lines(["- " + line for line in bodies[lo:hi]], config.max_input_tokens, tokenizer)
        requests.append(prompt.request(
            RELATION_STAGE, max_tokens=config.summary_max_tokens, temperature=models.temperature,
            name_a=names[a], description_a=tokenizer.truncate(_one_line(descriptions[a]), quote),
            name_b=names[b], description_b=tokenizer.truncate(_one_line(descriptions[b]), quote),
            relations="\n".join(shown), max_words=str(config.summary_max_words),
        ))
        records[position].summarised = True
    # every pair written now has its concatenation (a summarised one keeps it should its reply be empty)
    for position, text in zip(positions.tolist(), _concatenations(bodies, spans, config.max_input_tokens, tokenizer)):
        texts[position] = text
    replies = complete_all(models.chat, requests, models.concurrency, models.progress,
                           f"leanrag level {level}: aggregating relations")
    stats.update(relation_calls=len(requests), relation_cache_hits=0, relation_fallbacks=0, kept_relations=kept,
                 drifted_relations=drifted, concatenated_relations=len(between) - len(requests) - kept)
    for position, reply in zip(summarise, replies):
        stats["relation_cache_hits"] += int(reply.cached)
        text = _clean_relation(reply.text)
        if text:
            texts[position] = text
        else:
            stats["relation_fallbacks"] += 1
            records[position].summarised = False
    return strength, texts, digests, records


def _concatenations(lines: list[str], spans: Sequence[tuple[int, int]], budget: int,
                    tokenizer: Tokenizer) -> list[str]:
    """Each span of ``lines`` (none empty) joined by newlines, as :func:`_truncated` cuts it
    to ``budget`` tokens.

    Lengths and ASCII-ness are summed per span over whole arrays, so only a span that
    might pass the budget goes through :func:`_truncated`."""
    if not spans:
        return []
    chars = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    ascii_ = np.fromiter(map(str.isascii, lines), dtype=bool, count=len(lines))
    bounds = np.array(spans, dtype=np.int64).reshape(-1, 2)
    first, last = bounds[:, 0], bounds[:, 1]
    cumulative = np.concatenate([[0], np.cumsum(chars)])
    not_ascii = np.concatenate([[0], np.cumsum(~ascii_)])
    # "\n".join adds a character between two lines; ASCII within ``budget`` characters fits
    fits = ((cumulative[last] - cumulative[first] + (last - first - 1)) <= budget) & \
        (not_ascii[last] == not_ascii[first])
    texts = []
    for (lo, hi), fit in zip(spans, fits.tolist()):
        text = "\n".join(lines[lo:hi])
        texts.append(text if fit else _truncated(text, budget, tokenizer))
    return texts


def _kept_link(previous: PreviousLinks, digest: str, basis: np.ndarray, share: float) -> tuple[int, float]:
    """The previous link whose description a pair keeps (-1: none) and how far its relations
    drifted from what that description was written from."""
    exact = previous.by_digest.get(digest)
    if exact is not None:
        return exact, 0.0
    best, drift = previous.closest(basis)
    if best >= 0 and bool(previous.summarised[best]) and drift <= share:
        return best, drift
    return -1, drift


def _edge_keys(layer: Layer, edge_indices: np.ndarray) -> list[str]:
    """What each of ``edge_indices`` (edges of ``layer``) stands for in a link's digest. At
    level 1 its edges are relations between entities: their sorted endpoint id pair. Above,
    its edges are the aggregated relations of the level below: their own digests, so a link
    whose underlying relations did not change keeps its digest even when a cluster at either
    end gained or lost a member elsewhere (the clusters' ids change then, the relations do not)."""
    if layer.edge_keys:
        keys = layer.edge_keys
        return [keys[e] for e in edge_indices.tolist()]
    ids = layer.ids
    ends = ((ids[u], ids[v]) for u, v in layer.edges[edge_indices].tolist())
    return [f"{a}\x00{b}" if a <= b else f"{b}\x00{a}" for a, b in ends]


def _group_digests(keys: list[str], spans: Sequence[tuple[int, int]]) -> list[str]:
    """Which entity-level relations each link aggregates: the digest of the sorted ``keys``
    (:func:`_edge_keys`) of its span of edges."""
    sha = hashlib.sha256
    return [sha("\x01".join(sorted(keys[lo:hi])).encode("utf-8")).hexdigest()[:24] for lo, hi in spans]


# -- the hierarchy -----------------------------------------------------------------


def _base_layer(graph: EntityGraph, models: BuildModels) -> Layer:
    if graph.vectors is None:
        texts = [graph.text(row) for row in range(len(graph))]
        if texts and models.embedder is None:
            raise ValueError("leanrag needs an embedder when EntityGraph.vectors is None")
        vectors = normalise_rows(models.embedder.embed(texts, stage=EMBED_STAGE).vectors) if texts else np.zeros((0, 1))
    else:
        vectors = normalise_rows(graph.vectors)
    return Layer(ids=list(graph.ids), texts=list(graph.descriptions), vectors=np.asarray(vectors, dtype=np.float32),
                 names=list(graph.names), entities=[[i] for i in graph.ids], edges=graph.edges,
                 edge_texts=list(graph.relation_texts))


def build_leanrag(
    graph: EntityGraph, models: BuildModels, config: LeanragConfig = LeanragConfig(),
    carrier: LevelCarrier | None = None, previous: dict[int, PreviousLinks] | None = None,
) -> tuple[HierarchyResult, dict[int, list[LinkBasis]]]:
    """LeanRAG's aggregated-entity hierarchy over ``graph`` (see the module docstring), and
    what each level's links were written from (for the next update's ``previous``).

    Level 1 holds the aggregated entities over the base entities (layer 0),
    each higher level aggregates the one below. ``links`` are the aggregated
    relations between entities of one level. ``stats`` counts calls, cache
    hits, fallbacks, singletons and says why building stopped.
    """
    config.validate()
    if len(set(graph.ids)) != len(graph.ids):
        raise ValueError("EntityGraph ids are not unique")
    stats = HierarchyStats(extra={
        "base_entities": len(graph),
        "config": {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(config).items()},
    })
    algorithm = _Leanrag(config, models, carrier, previous, relation_hashes(graph.ids, graph.edges))
    result = bottom_up_result(HIERARCHY, build_levels(algorithm, _base_layer(graph, models), models, stats))
    return result, algorithm.link_records


def build_leanrag_hierarchy(
    graph: EntityGraph, models: BuildModels, config: LeanragConfig = LeanragConfig(),
    carrier: LevelCarrier | None = None, previous_links: Sequence[CommunityLink] = (),
) -> HierarchyResult:
    """:func:`build_leanrag`'s hierarchy alone; ``previous_links`` (the last build's links) keep
    the descriptions of links whose relations are exactly unchanged."""
    return build_leanrag(graph, models, config, carrier, previous_link_levels(previous_links, {}))[0]


def parents(result: HierarchyResult) -> dict[str, str]:
    """Child id -> parent id over the whole hierarchy: base entity -> level-1
    aggregated entity, and level-i entity -> level-(i+1) entity (the top has none)."""
    return {child: community.id for community in result.communities for child in community.children}


# -- the spec ----------------------------------------------------------------------


def _build(inputs: BuildInputs, name: str, config: LeanragConfig,
           make_carrier: MakeCarrier) -> tuple[HierarchyResult, list[str]]:
    """GMM aggregation over the merged graph; an update re-writes only relations whose basis changed."""
    graph = inputs.entity_graph(True)
    carrier = make_carrier(graph.ids)
    bases_file = inputs.workspace.artifact_path(link_bases_name(HIERARCHY))
    previous = previous_link_levels(CommunityStore(inputs.workspace).load_links(HIERARCHY),
                                    load_link_bases(bases_file)) if carrier is not None else None
    result, records = build_leanrag(graph, inputs.models, config, carrier, previous)
    save_link_bases(bases_file, records)
    return result, graph.ids


SPEC = HierarchySpec(
    name=HIERARCHY,
    settings=LeanragConfig,
    build=_build,
    prompts=(ENTITY_PROMPT, RELATION_PROMPT),
    needs=("graph", "entity_vectors"),
    # an aggregated entity per cluster, and about as many inter-cluster relation summaries
    cost=lambda config: CostShape(config.cluster_size, 2, config.max_layers, config.max_input_tokens,
                                  calls_per_group=2),
    description="LeanRAG GMM aggregation: aggregated entities and inter-cluster relations",
    operators=("leanrag.lca",),
)
