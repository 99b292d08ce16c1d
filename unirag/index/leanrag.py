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
  aggregated levels. The reason is ``stats["stopped_by"]``.
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

The GMM is the costly part on big graphs: with full covariances, fitting
``n / 20`` components to ``n`` points costs about O(n^2 d^2 / 20) per EM step
(5,000 entities: ~10 s on one core). ``covariance_type="diag"`` is ~4x
cheaper.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from unirag.index.hierarchy import (
    Community,
    CommunityLink,
    EntityGraph,
    HierarchyResult,
    community_id,
)
from unirag.llm.base import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    EmbeddingModel,
    normalise_rows,
)
from unirag.progress import Progress
from unirag.text.json_reply import first_object
from unirag.text.sentences import first_sentence

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
    defaults), ``root``, ``max_layers``, and the token budgets.
    """

    cluster_size: int = 20
    tau: int | tuple[int, ...] = 3
    max_layers: int = 10
    root: bool = True
    reducer: Literal["pca", "umap", "none"] = "pca"
    reduction_dim: int = 10
    covariance_type: Literal["full", "tied", "diag", "spherical"] = "full"
    n_init: int = 1
    summary_max_words: int = 120
    summary_max_tokens: int = 256
    max_input_tokens: int = 2000
    seed: int = 224

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
        if self.covariance_type not in ("full", "tied", "diag", "spherical"):
            raise ValueError(f"leanrag covariance_type is not a GaussianMixture type: {self.covariance_type!r}")
        for name in ("max_layers", "reduction_dim", "n_init", "summary_max_words", "summary_max_tokens",
                     "max_input_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"leanrag {name} must be at least 1, not {getattr(self, name)}")


@dataclass
class _Layer:
    """One layer G_i as arrays: nodes (rows), their vectors, and relations between rows."""

    ids: list[str]
    names: list[str]
    descriptions: list[str]
    vectors: np.ndarray  # (n, d) float32, L2-normalised
    edges: np.ndarray  # (m, 2) int64 row pairs
    edge_texts: list[str]
    entities: list[list[str]]  # base entity ids under each node

    def __len__(self) -> int:
        return len(self.ids)


# -- clustering ------------------------------------------------------------------


def _reduce(x: np.ndarray, config: LeanragConfig) -> np.ndarray:
    """PCA (default), UMAP or nothing, down to at most ``reduction_dim`` dimensions."""
    n, d = x.shape
    dims = min(config.reduction_dim, d, n - 1)
    if config.reducer == "none" or dims >= d or dims < 1:
        return x
    # UMAP's spectral initialisation needs n_components < n - 1; smaller layers use PCA.
    if config.reducer == "umap" and n > dims + 2:
        import umap

        reducer = umap.UMAP(n_neighbors=max(2, min(UMAP_NEIGHBORS, n - 1)), n_components=dims, metric="cosine",
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
    of at most ``cluster_size`` nodes) means one cluster, without fitting.
    """
    n = len(vectors)
    components = max(1, math.ceil(n / config.cluster_size))
    if components == 1:
        return np.zeros(n, dtype=np.int64), 1
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    if config.reducer == "umap":
        pass
    # One BLAS/OpenMP thread: the matrices are small after reduction (threads
    # only add overhead there) and the floating-point results then do not
    # depend on the machine's core count, so clusters are reproducible.
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        x = _reduce(np.asarray(vectors, dtype=np.float64), config)
        model = GaussianMixture(n_components=components, covariance_type=config.covariance_type,
                                n_init=config.n_init, random_state=config.seed)
        raw = model.fit(x).predict(x)  # argmax of the posteriors: hard assignment
    return _canonical(raw), components


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


def _edge_groups(edges: np.ndarray, labels: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """``(a, b, edge indices)`` with ``a <= b`` for each cluster pair holding relations, sorted."""
    if len(edges) == 0:
        return []
    ends = labels[edges]
    lo, hi = ends.min(axis=1), ends.max(axis=1)
    order = np.lexsort((np.arange(len(edges)), hi, lo))
    lo, hi = lo[order], hi[order]
    cuts = np.flatnonzero((np.diff(lo) != 0) | (np.diff(hi) != 0)) + 1
    starts = np.concatenate([[0], cuts])
    return [(int(lo[s]), int(hi[s]), part) for s, part in zip(starts, np.split(order, cuts))]


def _central_order(vectors: np.ndarray, labels: np.ndarray, n_clusters: int) -> list[np.ndarray]:
    """Each cluster's rows, most central first (cosine to the cluster's mean vector; ties by row)."""
    sums = np.zeros((n_clusters, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, vectors)
    # Dot with the sum orders members like cosine with the mean (one positive scale per cluster).
    closeness = np.einsum("ij,ij->i", vectors.astype(np.float64), sums[labels])
    order = np.lexsort((np.arange(len(labels)), -closeness, labels))
    return np.split(order, np.cumsum(np.bincount(labels, minlength=n_clusters))[:-1])


# -- prompts and replies -----------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fit_lines(lines: Sequence[str], budget: int, tokenizer: Any) -> tuple[list[str], int]:
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


def _relation_lines(layer: _Layer, edge_indices: np.ndarray) -> list[str]:
    out = []
    for e in edge_indices.tolist():
        i, j = layer.edges[e]
        text = _one_line(layer.edge_texts[e])
        out.append(f"- {layer.names[i]} -- {layer.names[j]}" + (f": {text}" if text else ""))
    return out




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


def _entity_request(prompt: Any, layer: _Layer, members: np.ndarray, relations: list[str], config: LeanragConfig,
                    temperature: float, tokenizer: Any) -> ChatRequest:
    entity_lines = [f"- {_one_line(layer.names[r])}: {_one_line(layer.descriptions[r])}" for r in members.tolist()]
    budget = config.max_input_tokens * 2 // 3 if relations else config.max_input_tokens
    entities, used = _fit_lines(entity_lines, budget, tokenizer)
    shown, _ = _fit_lines(relations, config.max_input_tokens - used, tokenizer)
    return ChatRequest(
        messages=prompt.messages(max_words=str(config.summary_max_words), entities="\n".join(entities),
                                 relations="\n".join(shown) or "(none)"),
        stage=ENTITY_STAGE, prompt_version=prompt.cache_version, temperature=temperature,
        max_tokens=config.summary_max_tokens, json_mode=True,
    )


def _fallback_entity(layer: _Layer, members: np.ndarray, config: LeanragConfig, tokenizer: Any) -> tuple[str, str]:
    rows = members.tolist()
    sentences = [s for s in (first_sentence(layer.descriptions[r]) for r in rows) if s]
    description = tokenizer.truncate(" ".join(sentences), config.summary_max_tokens)
    return f"{layer.names[rows[0]]} (group)", description


# -- one layer up ------------------------------------------------------------------


def _aggregate_entities(
    layer: _Layer, central: list[np.ndarray], inside: dict[int, np.ndarray], level: int, chat: ChatModel,
    config: LeanragConfig, concurrency: int, progress: Progress, temperature: float, stats: Counter[str],
) -> tuple[list[str], list[str], list[bool], list[int]]:
    """Names, descriptions and fallback flags of the clusters, and which clusters the LLM aggregated.

    One call per cluster of two or more nodes (Eq. 4); a singleton repeats its member.
    """
    from unirag.prompts.prompt import load_prompt
    from unirag.llm.batch import complete_all
    from unirag.text.tokenizer import get_tokenizer

    tokenizer = get_tokenizer()
    prompt = load_prompt(ENTITY_PROMPT)
    asked = [c for c in range(len(central)) if len(central[c]) > 1]
    requests = [
        _entity_request(prompt, layer, central[c], _relation_lines(layer, inside.get(c, np.zeros(0, np.int64))),
                        config, temperature, tokenizer)
        for c in asked
    ]
    replies = dict(zip(asked, complete_all(chat, requests, concurrency, progress,
                                           f"leanrag level {level}: aggregating entities")))
    names: list[str] = []
    descriptions: list[str] = []
    fallback = [False] * len(central)
    for c, rows in enumerate(central):
        if c not in replies:  # singleton: the node itself, one level up
            names.append(layer.names[rows[0]])
            descriptions.append(layer.descriptions[rows[0]])
            continue
        name, description = parse_aggregate(replies[c].text)
        stats["entity_cache_hits"] += int(replies[c].cached)
        if not name or not description:
            fallback[c] = True
            stats["entity_fallbacks"] += 1
            default_name, default_description = _fallback_entity(layer, rows, config, tokenizer)
            name, description = name or default_name, description or default_description
        names.append(name)
        descriptions.append(description)
    stats["entity_calls"] += len(requests)
    stats["singletons"] += len(central) - len(asked)
    return names, descriptions, fallback, asked


def _aggregate_relations(
    layer: _Layer, labels: np.ndarray, between: list[tuple[int, int, np.ndarray]], names: list[str],
    descriptions: list[str], level: int, chat: ChatModel, config: LeanragConfig, concurrency: int,
    progress: Progress, temperature: float, stats: Counter[str],
) -> tuple[np.ndarray, list[str]]:
    """Connectivity strength and description of each cluster pair in ``between`` (Eq. 5).

    Above ``tau`` relations the LLM summarises them; otherwise (and when its
    reply is empty) the description is their concatenation.
    """
    from unirag.prompts.prompt import load_prompt
    from unirag.llm.batch import complete_all
    from unirag.text.tokenizer import get_tokenizer

    tokenizer = get_tokenizer()
    counts = relation_counts(layer.edges, labels, len(names))
    strength = (np.asarray(counts[[a for a, _, _ in between], [b for _, b, _ in between]]).reshape(-1)
                if between else np.zeros(0)).astype(np.int64)
    tau = config.tau_for(level)
    prompt = load_prompt(RELATION_PROMPT)
    quote = max(1, config.max_input_tokens // 8)  # tokens of each aggregated description quoted
    texts: list[str] = []
    summarised: list[int] = []
    requests: list[ChatRequest] = []
    for position, (a, b, idx) in enumerate(between):
        lines = _relation_lines(layer, idx)
        if strength[position] > tau:
            shown, _ = _fit_lines(lines, config.max_input_tokens, tokenizer)
            requests.append(ChatRequest(
                messages=prompt.messages(
                    name_a=names[a], description_a=tokenizer.truncate(_one_line(descriptions[a]), quote),
                    name_b=names[b], description_b=tokenizer.truncate(_one_line(descriptions[b]), quote),
                    relations="\n".join(shown), max_words=str(config.summary_max_words)),
                stage=RELATION_STAGE, prompt_version=prompt.cache_version, temperature=temperature,
                max_tokens=config.summary_max_tokens,
            ))
            summarised.append(position)
        texts.append(tokenizer.truncate("\n".join(line[2:] for line in lines), config.max_input_tokens))
    replies: list[ChatResponse] = complete_all(chat, requests, concurrency, progress,
                                               f"leanrag level {level}: aggregating relations")
    for position, reply in zip(summarised, replies):
        stats["relation_cache_hits"] += int(reply.cached)
        text = _clean_relation(reply.text)
        if text:
            texts[position] = text
        else:
            stats["relation_fallbacks"] += 1
    stats["relation_calls"] += len(requests)
    stats["concatenated_relations"] += len(between) - len(requests)
    return strength, texts


def _aggregate_level(
    layer: _Layer, labels: np.ndarray, level: int, chat: ChatModel, embedder: EmbeddingModel,
    config: LeanragConfig, concurrency: int, progress: Progress, temperature: float, stats: Counter[str],
) -> tuple[list[Community], list[CommunityLink], _Layer]:
    """The level-``level`` communities over ``layer``, their links, and the next layer."""
    k = int(labels.max()) + 1
    central = _central_order(layer.vectors, labels, k)
    groups = _edge_groups(layer.edges, labels)
    inside = {a: idx for a, b, idx in groups if a == b}
    between = [(a, b, idx) for a, b, idx in groups if a != b]
    names, descriptions, fallback, asked = _aggregate_entities(
        layer, central, inside, level, chat, config, concurrency, progress, temperature, stats)

    # Vectors of the next layer: embed what the LLM wrote; a singleton keeps its member's vector.
    vectors = layer.vectors[[int(rows[0]) for rows in central]].astype(np.float32)
    if asked:
        texts = [f"{names[c]}: {descriptions[c]}" for c in asked]
        batch = embedder.embed(texts, stage=EMBED_STAGE)
        if len(batch.vectors) != len(texts):
            raise ValueError(f"embedder returned {len(batch.vectors)} vectors for {len(texts)} aggregated entities")
        if batch.vectors.shape[1] != vectors.shape[1]:
            raise ValueError(f"embedder gives {batch.vectors.shape[1]}-d vectors but the entity vectors are "
                             f"{vectors.shape[1]}-d: aggregate with the embedder that embedded the entities")
        vectors[asked] = normalise_rows(batch.vectors)

    members = [np.sort(rows) for rows in central]
    children = [[layer.ids[r] for r in rows.tolist()] for rows in members]
    ids = [community_id(HIERARCHY, level, child_ids) for child_ids in children]
    entities = [[e for r in rows.tolist() for e in layer.entities[r]] for rows in members]
    communities = [
        Community(
            id=ids[c], hierarchy=HIERARCHY, level=level, children=children[c], entities=entities[c],
            title=names[c], summary=descriptions[c],
            payload={"size": len(children[c]), "entities": len(entities[c]), "singleton": len(children[c]) == 1,
                     "fallback": fallback[c], "central": layer.ids[int(central[c][0])]},
        )
        for c in range(k)
    ]

    strength, link_texts = _aggregate_relations(layer, labels, between, names, descriptions, level, chat, config,
                                                concurrency, progress, temperature, stats)
    links = [
        CommunityLink(hierarchy=HIERARCHY, level=level, source=ids[a], target=ids[b], weight=float(count),
                      description=text)
        for (a, b, _), count, text in zip(between, strength, link_texts)
    ]
    stats["links"] += len(links)
    edges = np.array([(a, b) for a, b, _ in between], dtype=np.int64).reshape(-1, 2)
    upper = _Layer(ids=ids, names=names, descriptions=descriptions, vectors=vectors, edges=edges,
                   edge_texts=link_texts, entities=entities)
    return communities, links, upper


# -- the hierarchy -----------------------------------------------------------------


def _base_layer(graph: EntityGraph, embedder: EmbeddingModel) -> _Layer:
    if graph.vectors is None:
        texts = [graph.text(row) for row in range(len(graph))]
        vectors = normalise_rows(embedder.embed(texts, stage=EMBED_STAGE).vectors) if texts else np.zeros((0, 1))
    else:
        vectors = normalise_rows(graph.vectors)
    return _Layer(ids=list(graph.ids), names=list(graph.names), descriptions=list(graph.descriptions),
                  vectors=np.asarray(vectors, dtype=np.float32), edges=graph.edges,
                  edge_texts=list(graph.relation_texts), entities=[[i] for i in graph.ids])


def build_leanrag_hierarchy(
    graph: EntityGraph,
    chat: ChatModel,
    embedder: EmbeddingModel,
    config: LeanragConfig = LeanragConfig(),
    concurrency: int = 4,
    progress: Progress | None = None,
    temperature: float = 0.0,
) -> HierarchyResult:
    """LeanRAG's aggregated-entity hierarchy over ``graph`` (see the module docstring).

    Level 1 holds the aggregated entities over the base entities (layer 0),
    each higher level aggregates the one below. ``links`` are the aggregated
    relations between entities of one level. ``stats`` counts calls, cache
    hits, fallbacks, singletons and says why building stopped.
    """
    config.validate()
    progress = progress or Progress(enabled=False)
    if len(set(graph.ids)) != len(graph.ids):
        raise ValueError("EntityGraph ids are not unique")
    stats: Counter[str] = Counter()
    communities: list[Community] = []
    links: list[CommunityLink] = []
    layer = _base_layer(graph, embedder)
    below: list[Community] | None = None  # the communities that are the current layer's nodes
    level = 0
    stopped_by = "empty" if len(layer) == 0 else ""
    while not stopped_by:
        if len(layer) <= 1:
            stopped_by = "single_node"
            break
        if level >= config.max_layers:
            stopped_by = "max_layers"
            break
        if len(layer) <= config.cluster_size and not config.root:
            stopped_by = "small_layer"
            break
        level += 1
        with progress.task(f"leanrag level {level}: clustering {len(layer)} nodes"):
            labels, components = cluster_layer(layer.vectors, config)
        stats["empty_components"] += components - (int(labels.max()) + 1)
        built, level_links, upper = _aggregate_level(layer, labels, level, chat, embedder, config, concurrency,
                                                     progress, temperature, stats)
        if below is not None:
            for row, community in enumerate(below):
                community.parent = built[labels[row]].id
        communities.extend(built)
        links.extend(level_links)
        below, layer = built, upper
        if len(built) == 1:
            stopped_by = "root"
    for key in ("entity_calls", "entity_cache_hits", "entity_fallbacks", "singletons", "empty_components",
                "relation_calls", "relation_cache_hits", "relation_fallbacks", "concatenated_relations", "links"):
        stats.setdefault(key, 0)
    result = HierarchyResult(hierarchy=HIERARCHY, level_order="bottom_up", communities=communities, links=links)
    result.stats = {
        **dict(stats),
        "base_entities": len(graph),
        "layers": level,
        "levels": {str(lvl): count for lvl, count in result.levels().items()},
        "stopped_by": stopped_by,
        "config": {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(config).items()},
    }
    return result


def parents(result: HierarchyResult) -> dict[str, str]:
    """Child id -> parent id over the whole hierarchy: base entity -> level-1
    aggregated entity, and level-i entity -> level-(i+1) entity (the top has none)."""
    return {child: community.id for community in result.communities for child in community.children}
