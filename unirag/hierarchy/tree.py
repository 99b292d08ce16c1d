"""The RAPTOR tree (survey §4 ②; Sarthi et al. 2024): chunks summarised upward, layer by layer.

Leaves are the chunks. At each layer the nodes' embeddings are clustered, the
LLM writes one summary per cluster of two or more nodes, and those summaries
(embedded) are the next layer's nodes. Two clustering methods:

* ``gmm`` (RAPTOR): UMAP reduction, a Gaussian mixture whose number of
  components is chosen by BIC, *soft* assignment (a node joins every
  component whose posterior exceeds ``threshold``, so it can have several
  parents), then RAPTOR's local pass: every global cluster too big for one
  reduction is reduced and clustered again on its own.
* ``kmeans`` (RAPTOR-K, survey Table 6): K-means on the raw embeddings with
  ``k = ceil(n / cluster_size)``, hard assignment. The survey finds it as good
  as GMM and it is far cheaper on big corpora.

Decisions worth knowing (each one documented where it is implemented):

* **Determinism.** A rerun must yield the same clusters, so that every
  summary request (whose messages hold the children's texts) has the same
  cache key and a resumed build repeats no LLM call. Every estimator gets
  ``random_state=config.seed``; UMAP runs single-threaded (it is only
  reproducible that way); clusters are sorted tuples of layer positions and
  the cluster list is sorted; children keep their layer order.
* **Singletons get no parent.** The survey: "for each cluster with more than
  two nodes, the LLM generates a virtual parent". A one-node cluster is not
  summarised (that would be a paraphrase of a single chunk, paid for with an
  LLM call) and is not carried up: it stays retrievable at its own layer. The
  count goes into ``stats["singletons"]``.
* **Tiny layers are one cluster.** With ``n < 4`` or ``n <= n_components + 1``
  nodes, UMAP cannot reduce meaningfully (its spectral init needs
  ``n_components < n - 1``) and a full-covariance GMM on raw embeddings would
  pick one component by BIC anyway, so the layer (or, in the local pass, the
  global cluster, exactly as RAPTOR does) is kept as one cluster. The token
  budget below still splits it when the summary prompt would be too long.
* **Token budget.** A cluster whose texts total more than
  ``max_cluster_tokens`` is re-clustered on its own, recursively, until the
  parts fit or have one or two nodes (RAPTOR's ``max_length_in_cluster``).
  When re-clustering makes no progress (a tiny cluster is one cluster, a
  K-means ``k`` of 1) the cluster is halved along its first principal
  component, so the recursion always ends. The budget applies to both
  methods: it protects the prompt, whatever made the cluster.
* **Stopping.** A layer with fewer than ``min_layer_size`` nodes is not
  clustered; ``max_layers`` layers are built at most; a layer whose
  clustering is one cluster holding every node produces the root and ends the
  tree; so does a layer where no cluster has two nodes. One or two leaves
  (below the default ``min_layer_size`` of 3) yield just the leaves.
* ``reducer="pca"`` swaps UMAP for PCA (deterministic, no numba JIT). UMAP is
  the default because RAPTOR uses it; its first call in a process compiles
  numba kernels, which umap-learn does not ask numba to cache;
  :func:`unirag.hierarchy.jit_cache.cached_umap` turns numba's on-disk cache on
  for them, so only the first process ever pays.
* **Small layers over-split with GMM.** BIC with full covariances rewards
  components of a handful of points in 10-d (their near-singular covariances
  have huge likelihoods), so on a few dozen nodes RAPTOR's GMM finds pure but
  finer clusters than the true groups (e.g. a group of 8 split 4 + 4). That
  is RAPTOR's behaviour and is kept; ``kmeans`` has no such effect.
* **Threads.** Clustering runs with BLAS/OpenMP limited to one thread (except
  K-means on big layers); see :func:`cluster_layer`. The limit is process-wide
  while it lasts, which is harmless for tiny matrices but worth knowing.

``build_tree`` returns a :class:`TreeResult`: all nodes (leaves first, then
each layer in order) and ``stats``. The layer-by-layer loop is the one every
summary hierarchy shares (:func:`unirag.hierarchy.layered.build_levels`); this
module supplies RAPTOR's steps (:class:`_Raptor`). A layer has no edges and a
node may have several parents, so tree nodes keep only their children.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import numpy as np

from unirag.hierarchy.attach import AttachPolicy, LevelCarrier
from unirag.hierarchy.jit_cache import cached_umap
from unirag.hierarchy.layered import (Ask, BuildModels, Clustering, HierarchyStats, Layer, LayeredAlgorithm,
                                      ProgressLabels, Summary, SummarySource, build_levels)
from unirag.llm.base import normalise_rows
from unirag.text.sentences import first_sentence

SUMMARY_STAGE = "build.tree.summarize"
EMBED_STAGE = "build.tree.embed"
LOCAL_NEIGHBORS = 10  # RAPTOR's local UMAP n_neighbors
PARALLEL_MIN_VALUES = 1_000_000  # K-means on fewer embedding values runs single-threaded

Cluster = tuple[int, ...]  # sorted positions of nodes within one layer



@dataclass(frozen=True)
class TreeConfig:
    """How the tree is built. Defaults are RAPTOR's (reduction to 10-d, 0.1 threshold, 3500-token clusters)."""

    method: Literal["gmm", "kmeans"] = "gmm"
    max_layers: int = 4  # layers above the leaves
    min_layer_size: int = 3  # a layer with fewer nodes is not clustered
    threshold: float = 0.1  # GMM soft-assignment probability
    max_clusters: int = 50  # GMM: BIC searches 1..min(max_clusters, n-1) components
    bic_patience: int = 10  # GMM: ...and stops once this many k in a row did not improve BIC (0: never)
    cluster_size: int = 8  # kmeans: k = ceil(n / cluster_size)
    reduction_dim: int = 10
    max_cluster_tokens: int = 3500
    summary_max_words: int = 120
    summary_max_tokens: int = 256
    seed: int = 224
    reducer: Literal["umap", "pca"] = "umap"  # gmm only; see the module docstring

    def validate(self) -> None:
        """Fail before any model call rather than half-way up the tree."""
        if self.method not in ("gmm", "kmeans"):
            raise ValueError(f"tree method must be 'gmm' or 'kmeans', not {self.method!r}")
        if self.reducer not in ("umap", "pca"):
            raise ValueError(f"tree reducer must be 'umap' or 'pca', not {self.reducer!r}")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"tree threshold must be in (0, 1), not {self.threshold}")
        for name in ("max_layers", "min_layer_size", "max_clusters", "cluster_size", "reduction_dim",
                     "max_cluster_tokens", "summary_max_words", "summary_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"tree {name} must be at least 1, not {getattr(self, name)}")
        if self.bic_patience < 0:
            raise ValueError(f"tree bic_patience must be 0 (sweep every k) or more, not {self.bic_patience}")


@dataclass
class TreeNode:
    """One tree node. Leaves (layer 0) are chunks and keep the chunk id.

    Summary ids are ``tree-<layer>-<sha256 of the sorted child ids>[:12]``:
    derived from content, so a rebuild that finds the same clusters gives the
    same ids.
    """

    id: str
    layer: int
    text: str
    children: list[str]
    vector: np.ndarray  # L2-normalised float32
    # What an incremental update keeps beside the text: ``written_from``, the leaves a summary
    # kept across updates was written from (upper-level drift is measured against it).
    payload: dict[str, Any] = field(default_factory=dict)


def leaves_beneath(nodes: Sequence[tuple[str, int, Sequence[str]]]) -> dict[str, tuple[str, ...]]:
    """The sorted leaf (chunk) ids beneath every summary node, given ``(id, layer, children)`` of
    the whole tree: what the tree's upper-level drift is measured in (a node may have several
    parents, so a leaf can lie beneath several nodes of one layer)."""
    beneath: dict[str, tuple[str, ...]] = {}
    for node_id, layer, children in sorted(nodes, key=lambda node: node[1]):
        if layer == 0:
            beneath[node_id] = (node_id,)
        else:
            beneath[node_id] = tuple(sorted({leaf for child in children for leaf in beneath.get(child, ())}))
    return beneath


@dataclass
class TreeResult:
    """All nodes (leaves first, then layer 1, 2, ...) and counters of what happened.

    ``stats``: the counters every layered build keeps
    (:class:`~unirag.hierarchy.layered.HierarchyStats`: ``levels`` built above the
    leaves, ``summaries``, ``fallback_summaries`` (empty LLM answers replaced by
    the children's first sentences), ``singletons`` (nodes that clustering left
    alone, so with no parent at the next layer), ``stop_reason``, ``per_level``,
    ...), plus ``leaves``, ``oversize_splits`` (clusters re-clustered for the
    token budget) and ``forced_bisections`` (of those, halved by PCA).
    """

    nodes: list[TreeNode]
    stats: dict[str, Any] = field(default_factory=dict)

    def layer(self, number: int) -> list[TreeNode]:
        return [node for node in self.nodes if node.layer == number]

    @property
    def depth(self) -> int:
        """The highest layer number (0 when there are only leaves)."""
        return max((node.layer for node in self.nodes), default=0)


def node_id(layer: int, child_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\x00".join(sorted(child_ids)).encode("utf-8")).hexdigest()
    return f"tree-{layer}-{digest[:12]}"


# -- clustering ----------------------------------------------------------------


def _n_components(config: TreeConfig, dim: int) -> int:
    return max(1, min(config.reduction_dim, dim))


def _too_small_to_reduce(n: int, n_components: int) -> bool:
    return n < 4 or n <= n_components + 1


def _reduce(x: np.ndarray, n_neighbors: int, n_components: int, config: TreeConfig) -> np.ndarray:
    """UMAP (cosine, seeded, single-threaded) or PCA down to ``n_components``."""
    if config.reducer == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=n_components, svd_solver="full").fit_transform(x)
    umap = cached_umap()
    reducer = umap.UMAP(
        n_neighbors=max(2, min(n_neighbors, len(x) - 1)),
        n_components=n_components,
        metric="cosine",
        random_state=config.seed,
        n_jobs=1,  # seeded UMAP is single-threaded anyway; saying so avoids its warning
    )
    return np.asarray(reducer.fit_transform(x), dtype=np.float64)


def _gmm_soft(x: np.ndarray, config: TreeConfig) -> list[list[int]]:
    """GMM with BIC-chosen size; members of each component by posterior > threshold.

    RAPTOR drops a node whose posteriors are all below the threshold (possible
    once there are more than 1/threshold components); we keep every node in
    its most likely component so that no node silently loses its parent.

    The sweep stops after ``bic_patience`` sizes in a row without a better BIC
    (RAPTOR sweeps every k up to ``max_clusters``). On real chunk embeddings
    BIC falls to its minimum at a few to twenty components and then rises
    with every k (the penalty grows by a whole covariance per component):
    on 1,000 MuSiQue chunks no sweep's choice changed at patience 3 to 10,
    while the sweep fitted 55 % fewer mixtures at 10, the larger ones. The
    RAPTOR tree's shape before and after is in the README.
    """
    from sklearn.mixture import GaussianMixture

    n = len(x)
    best, best_bic, since_best = None, math.inf, 0
    for k in range(1, max(1, min(config.max_clusters, n - 1)) + 1):
        model = GaussianMixture(n_components=k, random_state=config.seed).fit(x)
        bic = model.bic(x)
        if bic < best_bic:  # strict: ties keep the smaller k
            best, best_bic, since_best = model, bic, 0
            continue
        since_best += 1
        if config.bic_patience and since_best >= config.bic_patience:
            break
    assert best is not None
    probs = best.predict_proba(x)
    member = probs > config.threshold
    member[np.arange(n), probs.argmax(axis=1)] = True
    return [np.flatnonzero(member[:, j]).tolist() for j in range(member.shape[1]) if member[:, j].any()]


def _gmm_clusters(x: np.ndarray, config: TreeConfig) -> list[list[int]]:
    """RAPTOR's global pass then local pass, on rows of ``x``; returns lists of row positions."""
    n = len(x)
    n_components = _n_components(config, x.shape[1])
    if _too_small_to_reduce(n, n_components):
        return [list(range(n))]
    reduced = _reduce(x, int(math.sqrt(n - 1)), n_components, config)
    out: list[list[int]] = []
    for members in _gmm_soft(reduced, config):
        if _too_small_to_reduce(len(members), n_components):
            out.append(members)
            continue
        local = _reduce(x[members], LOCAL_NEIGHBORS, n_components, config)
        out.extend([members[i] for i in local_members] for local_members in _gmm_soft(local, config))
    return out


def _kmeans_labels(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x)


def _kmeans_clusters(x: np.ndarray, config: TreeConfig) -> list[list[int]]:
    k = math.ceil(len(x) / config.cluster_size)
    if k <= 1:
        return [list(range(len(x)))]
    labels = _kmeans_labels(x, k, config.seed)
    return [np.flatnonzero(labels == j).tolist() for j in range(k) if (labels == j).any()]


def _partition(cluster: Cluster, vectors: np.ndarray, config: TreeConfig) -> list[Cluster]:
    """Cluster the nodes at layer positions ``cluster`` with the configured method."""
    x = vectors[list(cluster)]
    groups = _gmm_clusters(x, config) if config.method == "gmm" else _kmeans_clusters(x, config)
    return [tuple(sorted(cluster[i] for i in group)) for group in groups if group]


def _bisect(cluster: Cluster, vectors: np.ndarray) -> list[Cluster]:
    """Halve ``cluster`` at the median of its first principal component.

    Used when re-clustering cannot split an oversize cluster, i.e. when the
    method sees no structure in it. Halving along the main direction of
    variation keeps similar nodes together, and unlike 2-means (which on
    structureless data peels off one outlier at a time, each left without a
    parent) it always makes balanced parts. Identical vectors (projection 0)
    are halved in layer order.
    """
    x = vectors[list(cluster)]
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    direction = vt[0] * (1.0 if vt[0][np.argmax(np.abs(vt[0]))] >= 0 else -1.0)  # fix the SVD sign
    order = np.argsort(x @ direction, kind="stable")
    half = len(cluster) // 2
    return [tuple(sorted(cluster[i] for i in order[:half])), tuple(sorted(cluster[i] for i in order[half:]))]


def _fit_budget(
    cluster: Cluster, vectors: np.ndarray, tokens: Sequence[int], config: TreeConfig, stats: Counter[str]
) -> list[Cluster]:
    """Split ``cluster`` until every part's texts fit ``max_cluster_tokens`` or has <= 2 nodes."""
    if len(cluster) <= 2 or sum(tokens[i] for i in cluster) <= config.max_cluster_tokens:
        return [cluster]
    stats["oversize_splits"] += 1
    parts = _partition(cluster, vectors, config)
    if not parts or any(len(part) >= len(cluster) for part in parts):
        stats["forced_bisections"] += 1
        parts = _bisect(cluster, vectors)
    out: list[Cluster] = []
    for part in parts:
        out.extend(_fit_budget(part, vectors, tokens, config, stats))
    return out


def _import_backends(config: TreeConfig) -> None:
    """Load scipy/sklearn (and UMAP) now, so that their BLAS exists when the thread limit is set."""

    if config.method == "gmm":
        import sklearn.mixture  # noqa: F401 -- loads scipy's and sklearn's BLAS before the limit

        if config.reducer == "umap":
            import umap  # noqa: F401
    else:
        import sklearn.cluster  # noqa: F401


def cluster_layer(
    vectors: np.ndarray, tokens: Sequence[int], config: TreeConfig, stats: Counter[str] | None = None
) -> list[Cluster]:
    """The clusters of one layer: sorted, de-duplicated tuples of node positions (singletons included).

    With ``gmm`` a node may appear in several clusters (soft assignment).
    ``tokens[i]`` is node i's text length; clusters above the budget are split.
    """
    from threadpoolctl import threadpool_limits

    stats = stats if stats is not None else Counter()
    if len(vectors) == 0:
        return []
    vectors = np.asarray(vectors, dtype=np.float64)
    clusters: set[Cluster] = set()
    # GMM works on tiny matrices (10-d after reduction), and small layers are
    # small matrices too: there, threaded BLAS/OpenMP only adds start-up and
    # synchronisation, so it is slower than one thread. One thread also makes
    # the floating-point results independent of the core count.
    # Only K-means on a big layer (raw embeddings of many chunks) gets threads.
    # The limit only reaches libraries already loaded, hence the imports first.
    single_thread = config.method == "gmm" or vectors.size < PARALLEL_MIN_VALUES
    _import_backends(config)
    with threadpool_limits(limits=1 if single_thread else None):
        for cluster in _partition(tuple(range(len(vectors))), vectors, config):
            clusters.update(_fit_budget(cluster, vectors, tokens, config, stats))
    return sorted(clusters)


# -- the tree --------------------------------------------------------------------


def _read_summary(child_texts: list[str], reply: str) -> Summary:
    """The reply as the summary; the children's first sentences when it is empty."""
    text = reply.strip()
    source: SummarySource = "json" if text else "fallback"
    if not text:
        text = " ".join(s for s in (first_sentence(child) for child in child_texts) if s)
    return Summary("", text, source, embed=text)


class _Raptor(LayeredAlgorithm[Layer, Clustering, TreeNode]):
    """RAPTOR's steps of the layered loop. A layer is chunk or summary nodes (no edges):
    clustering is its algorithm (module docstring), a summary is plain text, and a
    node may have several parents (soft clustering), so records keep only their children."""

    labels = ProgressLabels(summarising="tree layer {level}: summarising clusters")
    embed_stage = EMBED_STAGE
    summed = ("oversize_splits", "forced_bisections")

    def __init__(self, config: TreeConfig, models: BuildModels, carrier: LevelCarrier | None = None) -> None:
        self.config, self.models, self.max_levels, self.carrier = config, models, config.max_layers, carrier
        self.prompt = models.prompts.load("summarize_cluster")

    def stop_before(self, layer: Layer, level: int) -> str:
        return "small_layer" if len(layer) < self.config.min_layer_size else ""

    def kept(self, record: TreeNode) -> Summary:
        """A stored tree node whose cluster kept its members (or drifted within the share)."""
        return Summary("", record.text, "json", embed=record.text, kept=True)

    def cluster(self, layer: Layer, level: int) -> Clustering:
        """Clusters of two or more nodes (a node alone gets no parent)."""
        stats: Counter[str] = Counter(oversize_splits=0, forced_bisections=0)
        tokens = self.models.tokenizer.count_many(layer.texts)
        carried = self._attached(layer, level, tokens)
        if carried is not None:
            return Clustering([group.tolist() for group in carried], dict(stats))
        clusters = cluster_layer(layer.vectors, tokens, self.config, stats)
        return Clustering([list(cluster) for cluster in clusters if len(cluster) >= 2], dict(stats))

    def _attached(self, layer: Layer, level: int, tokens: Sequence[int]) -> list[np.ndarray] | None:
        """The previous tree's clusters of this layer for an incremental update: a new node joins
        the cluster with the nearest mean vector (RAPTOR assigns a node to the components near it);
        a cluster past the token budget is halved until it fits; clusters of one lose their parent.
        None when this layer did not exist before (cluster afresh)."""
        if self.carrier is None:
            return None
        counts = np.asarray(tokens, dtype=np.int64)
        budget = self.config.max_cluster_tokens
        policy = AttachPolicy(min_size=2, oversized=lambda group: int(counts[group].sum()) > budget)
        grouping = self.carrier.grouping(level, layer.ids, layer.vectors, policy, entities=layer.entities)
        return None if grouping is None else grouping.groups

    def asks(self, layer: Layer, clustering: Clustering, level: int) -> list[Ask]:
        asks = []
        for group in clustering.groups:
            texts = [layer.texts[i] for i in group]
            request = self.prompt.request(
                SUMMARY_STAGE, max_tokens=self.config.summary_max_tokens, temperature=self.models.temperature,
                max_words=str(self.config.summary_max_words),
                texts="\n\n".join("- " + text.strip() for text in texts),
            )
            asks.append(Ask(request, partial(_read_summary, texts)))
        return asks

    def records(self, layer: Layer, clustering: Clustering, summaries: list[Summary], vectors: np.ndarray,
                level: int, below: list[TreeNode]) -> list[TreeNode]:
        out = []
        for i, (group, summary) in enumerate(zip(clustering.groups, summaries)):
            children = [layer.ids[row] for row in group]
            out.append(TreeNode(id=node_id(level, children), layer=level, text=summary.text, children=children,
                                vector=vectors[i]))
        return out

    def next_layer(self, layer: Layer, clustering: Clustering, records: list[TreeNode], vectors: np.ndarray,
                   level: int) -> tuple[Layer, list[Any]]:
        beneath = [sorted({leaf for row in group for leaf in layer.entities[row]}) for group in clustering.groups]
        return Layer(ids=[node.id for node in records], texts=[node.text for node in records], vectors=vectors,
                     entities=beneath), []


def build_tree(
    leaves: Sequence[tuple[str, str, np.ndarray]], models: BuildModels, config: TreeConfig = TreeConfig(),
    carrier: LevelCarrier | None = None,
) -> TreeResult:
    """Build the RAPTOR tree over ``leaves`` = ``(chunk_id, text, vector)``; see the module docstring.

    ``models.chat=None`` (the zero-LLM path) makes every summary extractive:
    the children's first sentences, counted in ``fallback_summaries``.
    """
    config.validate()
    ids = [chunk_id for chunk_id, _, _ in leaves]
    if len(set(ids)) != len(ids):
        duplicated = sorted(i for i, count in Counter(ids).items() if count > 1)
        raise ValueError(f"duplicate leaf ids: {', '.join(duplicated[:5])}")
    leaf_vectors = (
        normalise_rows(np.stack([np.asarray(vector, dtype=np.float32) for _, _, vector in leaves]))
        if leaves
        else np.zeros((0, 0), dtype=np.float32)
    )
    nodes = [
        TreeNode(id=chunk_id, layer=0, text=text, children=[], vector=leaf_vectors[i])
        for i, (chunk_id, text, _) in enumerate(leaves)
    ]
    layer = Layer(ids=ids, texts=[text for _, text, _ in leaves], vectors=leaf_vectors,
                  entities=[[chunk_id] for chunk_id in ids])
    levels = build_levels(_Raptor(config, models, carrier), layer, models, HierarchyStats(extra={"leaves": len(nodes)}))
    return TreeResult(nodes=nodes + levels.records, stats=levels.stats.to_dict())
