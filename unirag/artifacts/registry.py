"""Every workspace artifact, what it needs, and how to bring it up to date.

One registry of :class:`ArtifactSpec` (survey stages 1-2: graphs, then
indices). ``ensure_artifacts`` expands the requested names with their
dependencies, orders them, and calls each builder; a builder compares the
fingerprint of its inputs (which include its dependencies' fingerprints) with
the manifest and returns ``False`` without work when they match. So asking for
an artifact is always cheap when nothing changed, a change upstream rebuilds
exactly what depends on it, and methods can ask lazily for what they need.

Every LLM call a builder makes goes through the cached, accounted stack: a
killed build resumes without repeating finished calls, because every builder
is deterministic (same clusters -> same prompts -> cache hits).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from unirag.artifacts.tree import build_tree_artifact
from unirag.config import Settings, config_hash
from unirag.errors import ConfigError, WorkspaceError
from unirag.executors import model_call_parallelism
from unirag.graph.graph_build import build_chunk_links, build_merged_graph
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy import entity_graph
from unirag.hierarchy.attach import PreviousNode
from unirag.hierarchy.chnsw import CHnswConfig, CHnswIndex
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.entity_graph import copy_entity_graph, to_entity_graph
from unirag.hierarchy.incremental import UpdatePlan, plan_update, record_leaves
from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.registry import hierarchy_registry, hierarchy_variants, spec_of
from unirag.hierarchy.spec import BuildInputs, config_dict, hierarchy_config
from unirag.index.chunks import build_chunk_bm25, build_chunk_tfidf, build_chunk_vectors
from unirag.index.survivors import survivors_frozen
from unirag.index.synonyms import build_synonym_edges
from unirag.index.tri_graph import build_tri_graph
from unirag.index.vector_artifacts import build_text_vectors, index_given_vectors, load_vectors, vector_files
from unirag.llm.factory import Models
from unirag.llm.sentence_mean import long_text_embedder
from unirag.progress import Progress
from unirag.prompts.prompt import PromptLibrary
from unirag.workspace import Workspace

TREE_VARIANTS: dict[str, dict[str, Any]] = {
    "kmeans": {"method": "kmeans"},  # RAPTOR-K (survey §7, Table 6): K-means instead of GMM
}


#: hierarchies whose community vectors no shipped method reads (LeanRAG retrieves through the
#: entity vectors and its own aggregation graph): ``all`` does not build them
UNREAD_COMMUNITY_VECTORS = frozenset({"leanrag"})


def chnsw_name(hierarchy: str) -> str:
    """The C-HNSW artifact over ``hierarchy``: ``chnsw`` for ArchRAG's own, ``chnsw:<variant>`` else."""
    return "chnsw" if hierarchy == "archrag" else f"chnsw:{hierarchy}"


def tree_names(tree: str) -> tuple[str, str]:
    """(tree artifact, tree vector artifact) of a tree variant; ``""`` is the default tree."""
    return ("tree", "tree_vectors") if tree in ("", "tree") else (f"tree:{tree}", f"tree_vectors:{tree}")


@dataclass
class BuildContext:
    """What builders share during one ``ensure_artifacts`` run."""

    workspace: Workspace
    settings: Settings
    models: Models
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    rebuilt: list[str] = field(default_factory=list)
    #: Told each artifact's name as its step starts (a benchmark's per-stage CPU and memory).
    on_stage: Callable[[str], None] | None = None
    _store: Any = None
    # the merged graph as the hierarchy builders read it, made once per graph (see _load_entity_graph)
    _entity_graph: tuple[Any, Any] | None = None

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = GraphStore(self.workspace)
        return self._store

    def inputs_of(self, *names: str) -> dict[str, Any]:
        """The manifest fingerprints of built artifacts (a dependent's inputs)."""
        return {name: (self.workspace.manifest.entry(name) or {}).get("inputs") for name in names}


@dataclass(frozen=True)
class ArtifactSpec:
    name: str
    summary: str
    requires: tuple[str, ...]
    build: Callable[[BuildContext], bool]  # True when (re)built, False when up to date
    variant: bool = False  # an ablation's artifact: built on request, not by ``all``
    #: read by no shipped method (a test checks it against their ``requires``): built when named,
    #: not by ``all``, so ``--index all`` embeds nothing no method reads (issue 34)
    on_request: bool = False


# -- builders ---------------------------------------------------------------------


def _chunk_vectors(ctx: BuildContext) -> bool:
    return build_chunk_vectors(ctx.workspace, ctx.models.embedder, ctx.settings, ctx.progress)


def _chunk_bm25(ctx: BuildContext) -> bool:
    return build_chunk_bm25(ctx.workspace, ctx.progress)


def _chunk_tfidf(ctx: BuildContext) -> bool:
    return build_chunk_tfidf(ctx.workspace, ctx.progress)


def _graph(ctx: BuildContext) -> bool:
    return build_merged_graph(ctx.workspace, ctx.store, ctx.settings, ctx.models, ctx.progress)


def _chunk_links(kind: str) -> Callable[[BuildContext], bool]:
    def build(ctx: BuildContext) -> bool:
        return build_chunk_links(ctx.workspace, ctx.store, ctx.settings, kind)

    return build


def _tree(variant: str) -> Callable[[BuildContext], bool]:
    def build(ctx: BuildContext) -> bool:
        return build_tree_artifact(ctx.workspace, ctx.store, ctx.settings, ctx.models, ctx.progress,
                                   name=tree_names(variant)[0], preset=TREE_VARIANTS.get(variant))

    return build


def _graph_texts(kind: str) -> Callable[[BuildContext], bool]:
    """Entity (name, or name + description) and relationship vector indices.

    The fingerprint is the merged graph's (texts are a function of it) plus the
    model, so an unchanged graph is skipped without loading it.
    """
    labels = {"entity_vectors": "embedding entities", "entity_name_vectors": "embedding entity names",
              "relation_vectors": "embedding relationships"}

    def build(ctx: BuildContext) -> bool:
        embedder = ctx.models.embedder if kind == "entity_name_vectors" else long_text_embedder(
            ctx.models, ctx.settings)
        fingerprint = config_hash({**ctx.inputs_of("graph"), "model": embedder.name, "kind": kind})
        if ctx.workspace.manifest.is_current(kind, fingerprint, vector_files(ctx.workspace, kind)):
            return False
        make = {"entity_vectors": entity_graph.entity_full_texts,
                "entity_name_vectors": entity_graph.entity_name_texts,
                "relation_vectors": entity_graph.relationship_texts}[kind]
        ids, texts = make(ctx.store.shared_graph())
        return build_text_vectors(
            ctx.workspace, embedder, kind, kind, ids, texts, ctx.settings.embedding.resolved_batch_size,
            ctx.progress, f"index.{kind}", labels[kind], fingerprint=fingerprint,
            parallel=model_call_parallelism(ctx.settings),
        )

    return build


def _synonym_edges(ctx: BuildContext) -> bool:
    return build_synonym_edges(ctx.workspace, ctx.store.shared_graph, ctx.inputs_of("entity_name_vectors"),
                               ctx.progress)


def _tri_graph(ctx: BuildContext) -> bool:
    return build_tri_graph(ctx.workspace, ctx.store, ctx.settings, ctx.models, ctx.progress)


def _tree_vectors(variant: str) -> Callable[[BuildContext], bool]:
    def build(ctx: BuildContext) -> bool:
        tree, key = tree_names(variant)
        stem = key.replace(":", ".")
        inputs = config_hash(ctx.inputs_of(tree))
        if ctx.workspace.manifest.is_current(key, inputs, vector_files(ctx.workspace, stem)):
            return False
        nodes = ctx.store.load_tree(tree)
        vectors = np.stack([node[4] for node in nodes]) if nodes else np.zeros((0, 1), np.float32)
        model = (ctx.workspace.manifest.entry("chunk_vectors") or {}).get("config", {}).get("model", "")
        return index_given_vectors(ctx.workspace, key, stem, [n[0] for n in nodes], vectors, inputs, model,
                                   ctx.progress)

    return build


def summary_chat(ctx: BuildContext) -> Any:
    """The chat model for community summaries, or None on the zero-LLM path."""
    if ctx.settings.index.resolved_summarizer(ctx.settings.chat) == "extractive":
        return None
    return ctx.models.chat


def summary_models(ctx: BuildContext) -> Any:
    """What a hierarchy builder calls: the summary chat model (or None), the embedder, the run's settings."""
    return BuildModels(summary_chat(ctx), long_text_embedder(ctx.models, ctx.settings), ctx.settings.concurrency,
                       ctx.settings.chat.temperature, ctx.progress,
                       prompts=PromptLibrary.of_workspace(ctx.workspace.root))


def _load_entity_graph(ctx: BuildContext, with_vectors: bool) -> Any:
    """The merged graph as an ``EntityGraph`` (with the entity vectors when asked). Made once
    per merged graph and copied for each hierarchy (four read it in one build), so a builder
    that changed its copy could not change another's."""
    merged = ctx.store.shared_graph()
    cached = ctx._entity_graph
    if cached is None or cached[0] is not merged or len(cached[1].ids) != len(merged.entities) \
            or len(cached[1].edges) != len(merged.relationships):
        ctx._entity_graph = (merged, to_entity_graph(merged))
    vectors = None
    if with_vectors:
        ids, stored = load_vectors(ctx.workspace, "entity_vectors", "entity_vectors")
        if ids != ctx._entity_graph[1].ids:
            raise WorkspaceError("entity vectors do not match the graph: run 'unirag index' again to rebuild them")
        vectors = np.asarray(stored, dtype=np.float32)
    return copy_entity_graph(ctx._entity_graph[1], vectors)


def _previous_nodes(communities: list[Any]) -> dict[int, list[PreviousNode]]:
    """The last build's communities of a hierarchy by level, as the attach step reads them."""
    nodes: dict[int, list[PreviousNode]] = {}
    for community in communities:
        nodes.setdefault(community.level, []).append(
            PreviousNode(community.id, tuple(community.children), community.summary, community))
    return nodes


def _renamed(result: Any, name: str) -> Any:
    """A variant's hierarchy stored under its own name (ids stay unique per hierarchy)."""
    return replace(result, hierarchy=name,
                   communities=[replace(c, hierarchy=name) for c in result.communities],
                   links=[replace(link, hierarchy=name) for link in result.links])


def _build_inputs(ctx: BuildContext) -> BuildInputs:
    """What a hierarchy's builder reads, from this run's context."""
    return BuildInputs(ctx.workspace, ctx.store, ctx.settings, summary_models(ctx), ctx.models.embedder.name,
                       ctx.progress, lambda with_vectors: _load_entity_graph(ctx, with_vectors), ctx.inputs_of)


def _hierarchy(name: str) -> Callable[[BuildContext], bool]:
    return lambda ctx: build_hierarchy(ctx, name)


def build_hierarchy(ctx: BuildContext, name: str) -> bool:
    """Build (or carry through a corpus change) hierarchy ``name``, one of the registered
    hierarchies or a variant; False when its inputs are unchanged."""
    spec = spec_of(name)
    config = hierarchy_config(ctx.settings, spec.name, spec.settings, hierarchy_variants().get(name, ("", {}))[1])
    key = f"communities:{name}"
    chat = getattr(summary_chat(ctx), "name", "extractive")
    identity = {"config": config_dict(config), "chat": chat,
                "embedder": long_text_embedder(ctx.models, ctx.settings).name}
    fingerprint = {"needs": ctx.inputs_of(*spec.needs), **identity}
    prompts = (PromptLibrary.of_workspace(ctx.workspace.root).overridden(*spec.prompts)
               if summary_chat(ctx) is not None else {})
    if prompts:  # a workspace's own summary prompt: its edits rebuild the hierarchy
        fingerprint["prompts"] = prompts
    inputs = config_hash(fingerprint)
    if ctx.workspace.manifest.is_current(key, inputs):
        return False
    started = time.perf_counter()
    store = CommunityStore(ctx.workspace)
    plans: list[UpdatePlan] = []
    stored: list[Any] = []  # the last build's communities, when an update read them

    def previous() -> dict[int, list[PreviousNode]]:
        stored[:] = store.load(name)
        return _previous_nodes(stored)

    def make_carrier(leaves: list[str]) -> Any:
        plans.append(plan_update(ctx.workspace, ctx.settings, key, identity, leaves, previous))
        return plans[-1].carrier

    result, leaves = spec.build(_build_inputs(ctx), name, config, make_carrier)
    store.save(_renamed(result, name) if name != spec.name else result, stored if stored else None)
    entry = {
        "config": config_dict(config), "inputs": inputs, "count": len(result.communities),
        "level_order": result.level_order, "levels": {str(k): v for k, v in result.levels().items()},
        "links": len(result.links), "stats": result.stats, "identity": identity,
        "update": plans[-1].to_json() if plans else None,
    }
    files = [record_leaves(ctx.workspace, key, leaves)]
    ctx.workspace.manifest.set_entry(key, {**entry, "seconds": round(time.perf_counter() - started, 3)},
                                     files=files)
    return True


def _hygrag_node_vectors(ctx: BuildContext) -> bool:
    """Written by the ``communities:hygrag`` builder; when missing, that builder runs again
    (its summaries come from the cache, so a rebuild costs no model call)."""
    entry = ctx.workspace.manifest.entry("hygrag_node_vectors")
    if entry and ctx.workspace.manifest.is_current("hygrag_node_vectors", entry.get("inputs", ""),
                                          vector_files(ctx.workspace, "hygrag_node_vectors")):
        return False  # current with whatever the hierarchy built it from (that builder checks its inputs)
    ctx.workspace.manifest.drop_entry("communities:hygrag")
    return _hierarchy("hygrag")(ctx)


def community_text(community: Any, vector_text: str = "title_summary") -> str:
    """What a community's vector embeds: its title and summary, or (``vector_text: summary``,
    HyGRAG and ArchRAG) the summary alone, the very text their build embedded for the next
    layer, so the community vectors are cache hits instead of a second embedding of it."""
    if vector_text == "summary" and community.summary:
        return community.summary
    title = (community.title or "").strip()
    summary = (community.summary or "").strip()
    return f"{title}: {summary}" if title and summary else title or summary


def _community_vectors(name: str) -> Callable[[BuildContext], bool]:
    def build(ctx: BuildContext) -> bool:
        communities = CommunityStore(ctx.workspace).heads(name)
        vector_text = spec_of(name).vector_text
        return build_text_vectors(
            ctx.workspace, long_text_embedder(ctx.models, ctx.settings), f"community_vectors:{name}",
            f"community_vectors.{name}",
            [c.id for c in communities], [community_text(c, vector_text) for c in communities],
            ctx.settings.embedding.resolved_batch_size, ctx.progress, f"index.{name}.embed_reports",
            f"embedding {name} communities", parallel=model_call_parallelism(ctx.settings),
        )

    return build


def _chnsw_needs(hierarchy: str) -> tuple[str, ...]:
    return (f"communities:{hierarchy}", "entity_vectors", f"community_vectors:{hierarchy}")


def _chnsw(hierarchy: str) -> Callable[[BuildContext], bool]:
    return lambda ctx: _build_chnsw(ctx, hierarchy)


def _build_chnsw(ctx: BuildContext, hierarchy: str) -> bool:
    key = chnsw_name(hierarchy)
    config = hierarchy_config(ctx.settings, "chnsw", CHnswConfig)
    inputs = config_hash({"needs": ctx.inputs_of(*_chnsw_needs(hierarchy)), "config": config_dict(config)})
    directory = ctx.workspace.artifact_path(key.replace(":", "."))
    if ctx.workspace.manifest.is_current(key, inputs, (directory,)):
        return False
    started = time.perf_counter()
    entity_ids, entity_vectors = load_vectors(ctx.workspace, "entity_vectors", "entity_vectors")
    ids, vectors = load_vectors(ctx.workspace, f"community_vectors:{hierarchy}", f"community_vectors.{hierarchy}")
    row = {community_id: i for i, community_id in enumerate(ids)}
    layers = [(list(entity_ids), np.asarray(entity_vectors, dtype=np.float32))]
    by_level: dict[int, list[str]] = {}
    for community in CommunityStore(ctx.workspace).heads(hierarchy):
        by_level.setdefault(community.level, []).append(community.id)
    for level in sorted(by_level):
        members = by_level[level]
        layers.append((members, np.asarray(vectors[[row[m] for m in members]], dtype=np.float32)))
    previous = _previous_chnsw(ctx, key, config, directory)
    with ctx.progress.task("building C-HNSW" if previous is None else "updating C-HNSW"):
        if previous is None:
            index = CHnswIndex.build(layers, m=config.m, ef_construction=config.ef_construction, seed=config.seed)
            update = {"mode": "full", "reason": "no previous index with this config"}
        else:  # an insert or delete: unchanged nodes keep their links, the rest are inserted
            index, update = CHnswIndex.updated(previous, layers)
    index.save(directory)
    ctx.workspace.manifest.set_entry(key, {
        "config": config_dict(config), "inputs": inputs, "stats": index.stats(), "update": update,
        "seconds": round(time.perf_counter() - started, 3),
    }, files=(directory,))
    return True


def _previous_chnsw(ctx: BuildContext, key: str, config: CHnswConfig, directory: Any) -> Any:
    """The last C-HNSW of ``key`` to continue, when it was built whole with this config and
    ``index.update`` is ``attach``; None otherwise (or when its files are damaged)."""
    entry = ctx.workspace.manifest.entry(key)
    if ctx.settings.index.update != "attach" or not entry or entry.get("config") != config_dict(config):
        return None
    if (ctx.workspace.manifest.artifact_problem(key) or "").startswith("damaged"):
        return None
    try:
        return CHnswIndex.load(directory)
    except (OSError, ValueError, KeyError):
        return None


def _specs() -> list[ArtifactSpec]:
    specs = [
        ArtifactSpec("chunk_vectors", "chunk embeddings + HNSW (VanillaRAG, Chunk VDB)", (), _chunk_vectors),
        ArtifactSpec("chunk_bm25", "BM25 over chunks", (), _chunk_bm25),
        ArtifactSpec("chunk_tfidf", "sparse TF-IDF matrix over chunks (KGP)", (), _chunk_tfidf),
        ArtifactSpec("graph", "extraction + merged entities/relationships (KG, TKG, RKG)", (), _graph),
        ArtifactSpec("chunk_links:pg", "passage graph: chunks sharing >= t entities", ("graph",), _chunk_links("pg")),
        ArtifactSpec("chunk_links:hybrid", "HyGRAG hybrid graph chunk-chunk edges (> l shared entities)",
                     ("graph",), _chunk_links("hybrid")),
        ArtifactSpec("tree", "RAPTOR tree: clustered chunk summaries", ("chunk_vectors",), _tree("")),
        ArtifactSpec("entity_vectors", "entity name + description embeddings + HNSW (TKG/RKG node VDB)",
                     ("graph",), _graph_texts("entity_vectors")),
        ArtifactSpec("entity_name_vectors", "entity name embeddings + HNSW (KG node VDB)", ("graph",),
                     _graph_texts("entity_name_vectors")),
        ArtifactSpec("relation_vectors", "relationship embeddings + HNSW (relationship VDB)", ("graph",),
                     _graph_texts("relation_vectors")),
        ArtifactSpec("tree_vectors", "HNSW over every RAPTOR tree node", ("tree",), _tree_vectors("")),
    ]
    for variant, preset in TREE_VARIANTS.items():
        tree, vectors = tree_names(variant)
        specs.append(ArtifactSpec(tree, f"RAPTOR tree variant {preset}", ("chunk_vectors",), _tree(variant),
                                  variant=True))
        specs.append(ArtifactSpec(vectors, f"HNSW over every node of {tree}", (tree,), _tree_vectors(variant),
                                  variant=True))
    hierarchies = hierarchy_registry()
    for name, spec in hierarchies.items():
        specs.append(ArtifactSpec(f"communities:{name}", spec.description, spec.needs, _hierarchy(name)))
        specs.append(ArtifactSpec(f"community_vectors:{name}", f"embeddings + HNSW of {name} community summaries",
                                  (f"communities:{name}",), _community_vectors(name),
                                  on_request=name in UNREAD_COMMUNITY_VECTORS))
    specs.append(ArtifactSpec("hygrag_node_vectors",
                              "HyGRAG structure-aware embeddings of chunks and entities (Eq. 16), built with its hierarchy",
                              ("communities:hygrag",), _hygrag_node_vectors))
    specs.append(ArtifactSpec("chnsw", "ArchRAG C-HNSW: entities + every community layer in one index",
                              _chnsw_needs("archrag"), _chnsw("archrag")))
    specs.append(ArtifactSpec("synonym_edges", "HippoRAG 2 synonym edges: entity names at least 0.8 similar",
                              ("graph", "entity_name_vectors"), _synonym_edges))
    specs.append(ArtifactSpec("tri_graph", "LinearRAG Tri-Graph: entities, sentences, passages (spaCy NER + "
                              "embeddings, zero LLM calls)", ("chunk_vectors",), _tri_graph))
    for name, (base, preset) in hierarchy_variants().items():
        specs.append(ArtifactSpec(f"communities:{name}", f"{hierarchies[base].description}, variant {preset}",
                                  hierarchies[base].needs, _hierarchy(name), variant=True))
        specs.append(ArtifactSpec(f"community_vectors:{name}", f"embeddings + HNSW of {name} community summaries",
                                  (f"communities:{name}",), _community_vectors(name), variant=True))
        if base == "archrag":
            specs.append(ArtifactSpec(chnsw_name(name), f"C-HNSW over entities + the {name} layers",
                                      _chnsw_needs(name), _chnsw(name), variant=True))
    return specs


def artifact_registry() -> dict[str, ArtifactSpec]:
    return {spec.name: spec for spec in _specs()}


GRAPH_ALIASES = {"kg": "graph", "tkg": "graph", "rkg": "graph", "pg": "chunk_links:pg", "hybrid": "chunk_links:hybrid"}


def aliases() -> dict[str, str]:
    """Short names of artifacts: the graph types, and each hierarchy (or variant) by its name."""
    return {**GRAPH_ALIASES,
            **{name: f"communities:{name}" for name in (*hierarchy_registry(), *hierarchy_variants())}}


def resolve_names(names: list[str]) -> list[str]:
    """Aliases (kg, pg, graphrag, ...) to artifact names; ``all`` is every artifact but the variants
    and those no shipped method reads (``on_request``)."""
    registry = artifact_registry()
    if names == ["all"]:
        return [name for name, spec in registry.items() if not spec.variant and not spec.on_request]
    short = aliases()
    out = []
    for name in names:
        resolved = short.get(name, name)
        if resolved not in registry:
            known = ", ".join(sorted(set(registry) | set(short)))
            raise ConfigError(f"unknown artifact '{name}' (known: {known}, all)")
        if resolved not in out:
            out.append(resolved)
    return out


def build_order(names: list[str]) -> list[str]:
    """``names`` and their dependencies, dependencies first."""
    registry = artifact_registry()
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for dependency in registry[name].requires:
            visit(dependency)
        ordered.append(name)

    for name in resolve_names(names):
        visit(name)
    return ordered


def ensure_artifacts(ctx: BuildContext, names: list[str], *, index_job: bool = False) -> list[str]:
    """Bring ``names`` (and what they need) up to date; returns what was rebuilt. An index job
    (not a query's refresh) keeps what each step leaves alive out of the collector's reach
    (:mod:`unirag.index.survivors`)."""
    registry = artifact_registry()
    with survivors_frozen(index_job) as after_step:
        for name in build_order(names):
            if ctx.on_stage is not None:
                ctx.on_stage(name)
            tick = time.perf_counter()
            if registry[name].build(ctx):
                ctx.rebuilt.append(name)
            ctx.workspace.manifest.stamp_artifact(name)  # up to date with the corpus it was just checked against
            ctx.timings[f"index.{name}"] = ctx.timings.get(f"index.{name}", 0.0) + time.perf_counter() - tick
            after_step()
    return ctx.rebuilt


def built_artifacts(workspace: Workspace) -> list[str]:
    """The registry's artifacts this workspace has built (what a corpus change must refresh)."""
    registry = artifact_registry()
    return [name for name in workspace.manifest.entries() if name in registry]


def outdated(workspace: Workspace, names: list[str]) -> dict[str, str]:
    """Of ``names`` and what they need: each artifact that is missing, built on an older
    corpus or damaged, with why (see ``Manifest.artifact_problem``)."""
    return {name: why for name in build_order(names) if (why := workspace.manifest.artifact_problem(name))}
