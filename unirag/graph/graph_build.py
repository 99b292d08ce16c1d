"""Build the requested graph types from one extraction pass.

Extraction runs once per chunk per extractor and is stored as it finishes;
the merged graph, the chunk links and the tree are rebuilt only when their
inputs' fingerprint changes. ``unirag.index.artifacts`` calls these builders
in dependency order. Every graph type asked for in one run, or in
later runs, reuses the same extractions: building KG, TKG, RKG, PG and the
hybrid graph together costs the LLM calls of the richest alone.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from unirag.graph.graph_store import GraphStore
from unirag.graph.projections import GRAPH_TYPES, shared_entity_links
from unirag.graph.merge import merge_extractions, shorten_descriptions
from unirag.config import Settings, config_hash
from unirag.errors import ConfigError
from unirag.executors import executor_for
from unirag.llm.factory import Models
from unirag.progress import Progress
from unirag.prompts.prompt import PromptLibrary
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace


def parse_graph_list(text: str | None) -> list[str]:
    """``"kg,tkg"`` -> ["kg", "tkg"]; ``all`` -> every type; unknown names are an error."""
    if not text:
        return []
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    if names == ["all"]:
        return list(GRAPH_TYPES)
    unknown = [name for name in names if name not in GRAPH_TYPES]
    if unknown:
        raise ConfigError(f"unknown graph type {', '.join(unknown)} (known: {', '.join(GRAPH_TYPES)}, all)")
    return names


def make_extractor(settings: Settings, models: Models, prompts: PromptLibrary | None = None) -> Any:
    """The extractor the settings name; an LLM extractor asks ``prompts`` (a workspace's own files first)."""
    kind = settings.graph.resolved_extractor(settings.chat)
    if kind == "nlp":
        from unirag.graph.extract_nlp import NlpExtractor

        return NlpExtractor(batch_size=settings.graph.nlp_batch_size, n_process=settings.graph.resolved_nlp_processes())
    from unirag.graph.extract_llm import LlmExtractor

    return LlmExtractor(models.chat, settings.graph, settings.chat.temperature, prompts)


def run_extraction(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress
) -> tuple[str, int]:
    """Extract every chunk not yet extracted by this extractor; returns (name, chunks done now).

    Each group's or batch's extractions are stored as they finish, so a killed run resumes with
    the rest. Under a remote executor the nlp extractor runs as one task per ``ray.batch_size``
    chunks; the LLM extractor's calls go out through ``models`` (:func:`unirag.llm.factory.run_by`).
    """
    executor = executor_for(settings)
    extractor = make_extractor(settings, models, PromptLibrary.of_workspace(workspace.root))
    done = store.extracted_chunk_ids(extractor.name)
    # A title that is only a file name is no entity: extractors see the chunk without it.
    pending = [chunk.for_extraction() for chunk in workspace.iter_chunks() if chunk.id not in done]
    if not pending:
        return extractor.name, 0
    with progress.task(f"extracting entities ({extractor.name.split(':')[0]})", total=len(pending)) as advance:
        if hasattr(extractor, "extract_groups"):
            from unirag.graph.extract_llm import plan_groups

            groups = plan_groups(pending, settings.graph.share_call_below_tokens, settings.graph.max_passages_per_call)
            for extractions in extractor.extract_groups(groups, settings.concurrency):
                store.save_extractions(extractor.name, extractions)
                advance(len(extractions))
        elif executor.remote:
            from unirag.executors.base import batched
            from unirag.graph.extract_nlp import NlpBatch

            batches = batched(pending, settings.ray.batch_size)
            for _, extractions in executor.map(NlpBatch.of(extractor), batches, retries=settings.ray.max_retries,
                                               desc="extract entities (nlp)"):
                store.save_extractions(extractor.name, extractions)
                advance(len(extractions))
        else:
            batch = []
            for extraction in extractor.extract(pending):
                batch.append(extraction)
                if len(batch) >= 256:
                    store.save_extractions(extractor.name, batch)
                    advance(len(batch))
                    batch = []
            store.save_extractions(extractor.name, batch)
            advance(len(batch))
    return extractor.name, len(pending)


def merge_inputs(workspace: Workspace, settings: Settings, extractor: str) -> tuple[str, dict[str, Any]]:
    """(fingerprint, config) of the merged graph: chunks, extractor and merge knobs."""
    config: dict[str, Any] = {"max_tokens": settings.graph.description_max_tokens,
                              "encoding": settings.chunking.encoding}
    prompts = PromptLibrary.of_workspace(workspace.root).overridden("summarize_descriptions")
    if prompts:
        config["prompts"] = prompts
    return config_hash({"chunks": workspace.chunk_ids(), "extractor": extractor, "merge": config}), config


def build_merged_graph(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress
) -> bool:
    """Extract what is missing, then merge when the inputs changed; False when up to date."""
    extractor, _ = run_extraction(workspace, store, settings, models, progress)
    inputs, merge_config = merge_inputs(workspace, settings, extractor)
    if workspace.is_current("graph", inputs):
        return False
    tick = time.perf_counter()
    graph = merge_extractions(store.load_extractions(extractor, workspace.chunk_ids()))
    tokenizer = get_tokenizer(settings.chunking.encoding)
    chat = models.chat if extractor.startswith("llm:") else None
    shortened = shorten_descriptions(
        graph, settings.graph.description_max_tokens, tokenizer.count, tokenizer.truncate, chat,
        settings.concurrency, progress, prompts=PromptLibrary.of_workspace(workspace.root),
    )
    store.save_graph(graph)
    workspace.set_manifest_entry("graph", {
        "config": {"extractor": extractor, **merge_config}, "inputs": inputs,
        "entities": len(graph.entities), "relationships": len(graph.relationships),
        "claims": len(graph.claims), "descriptions_shortened": shortened,
        "seconds": round(time.perf_counter() - tick, 3),
    })
    return True


def build_chunk_links(workspace: Workspace, store: GraphStore, settings: Settings, kind: str) -> bool:
    """Passage-graph (``pg``) or hybrid chunk-chunk edges; False when up to date."""
    minimum = settings.graph.passage_threshold if kind == "pg" else settings.graph.hybrid_threshold + 1
    link_inputs = config_hash({"graph": workspace.manifest_entry("graph")["inputs"], "minimum": minimum})
    if workspace.is_current(f"chunk_links:{kind}", link_inputs):
        return False
    links = shared_entity_links(store.shared_graph(), workspace.chunk_ids(), minimum)
    store.save_chunk_links(kind, links)
    workspace.set_manifest_entry(
        f"chunk_links:{kind}", {"config": {"min_shared_entities": minimum}, "inputs": link_inputs, "count": len(links)}
    )
    return True


def build_tree_artifact(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress,
    name: str = "tree", preset: dict[str, Any] | None = None,
) -> bool:
    """RAPTOR tree ``name`` over the chunk vectors; returns False when up to date.

    ``preset`` fixes tree settings for a variant built beside the default tree
    (``tree:kmeans`` is the survey's RAPTOR-K: K-means instead of the Gaussian
    mixture); it wins over ``graph.tree`` for the keys it names.
    """
    from unirag.graph.layered import BuildModels
    from unirag.graph.tree import TreeConfig, build_tree

    ts = settings.graph.tree.model_copy(update=preset or {})
    config = TreeConfig(
        method=ts.method, max_layers=ts.max_layers, min_layer_size=ts.min_layer_size, threshold=ts.threshold,
        cluster_size=ts.cluster_size, summary_max_tokens=ts.summary_max_tokens, bic_patience=ts.bic_patience,
    )
    vectors_entry = workspace.manifest_entry("chunk_vectors") or {}
    # Cluster summaries follow ``index.summarizer``: the chat model, or (without a chat
    # endpoint, by default) extractive summaries from the children's first sentences.
    chat = models.chat if settings.index.resolved_summarizer(settings.chat) == "llm" else None
    fingerprint = {"vectors": vectors_entry.get("inputs"), "config": ts.model_dump(),
                   "chat": chat.name if chat is not None else "extractive"}
    prompts = PromptLibrary.of_workspace(workspace.root).overridden("summarize_cluster") if chat is not None else {}
    if prompts:
        fingerprint["prompts"] = prompts
    inputs = config_hash(fingerprint)
    if workspace.is_current(name, inputs):
        return False
    from unirag.graph.attach import PreviousNode
    from unirag.graph.incremental import plan_update

    workspace.checkout("chunk_vectors")
    vectors = np.load(workspace.artifact_path("chunk_vectors.npy"))
    leaves = [(chunk.id, chunk.indexed_text, vectors[i]) for i, chunk in enumerate(workspace.iter_chunks())]
    stored = store.load_tree(name) if workspace.manifest_entry(name) else []
    previous: dict[int, list[PreviousNode]] = {}
    for node in stored:
        node_id, layer, text, children, _ = node
        if layer > 0:
            previous.setdefault(layer, []).append(PreviousNode(node_id, tuple(children), text, node))
    identity = {"config": ts.model_dump(), "chat": chat.name if chat is not None else "extractive",
                "embedder": models.embedder.name}
    plan = plan_update(workspace, settings, name, identity, [leaf[0] for leaf in leaves], lambda: previous,
                       known=[node_id for node_id, layer, *_ in stored if layer == 0])
    result = build_tree(leaves, BuildModels(chat, models.embedder, settings.concurrency, settings.chat.temperature,
                                            progress, prompts=PromptLibrary.of_workspace(workspace.root)),
                        config, plan.carrier)
    store.save_tree(((n.id, n.layer, n.text, n.children, n.vector) for n in result.nodes), tree=name)
    layers: dict[int, int] = {}
    for node in result.nodes:
        layers[node.layer] = layers.get(node.layer, 0) + 1
    workspace.set_manifest_entry(name, {
        "config": ts.model_dump(), "inputs": inputs, "count": len(result.nodes),
        "layers": {str(k): v for k, v in sorted(layers.items())}, "stats": result.stats, "identity": identity,
        "update": plan.to_json(),
    })
    return True
