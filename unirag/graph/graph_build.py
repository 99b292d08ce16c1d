"""Build the requested graph types from one extraction pass.

Extraction runs once per chunk per extractor and is stored as it finishes;
the merged graph and the chunk links are rebuilt only when their
inputs' fingerprint changes. ``unirag.artifacts.registry`` calls these builders
in dependency order. Every graph type asked for in one run, or in
later runs, reuses the same extractions: building KG, TKG, RKG, PG and the
hybrid graph together costs the LLM calls of the richest alone.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from unirag.config import Settings, config_hash
from unirag.errors import ConfigError
from unirag.executors import executor_for
from unirag.executors.base import batched
from unirag.graph.extract_llm import LlmExtractor, plan_groups
from unirag.graph.extract_nlp import NlpBatch, NlpExtractor
from unirag.graph.graph_store import GraphStore
from unirag.graph.merge import MergedGraph, accumulate, long_descriptions, shorten_items
from unirag.graph.merge_update import STATE_VERSION, MergePlan, extend_graph, merge_states, plan_merge
from unirag.graph.projections import GRAPH_TYPES, new_chunk_links, shared_entity_links
from unirag.llm.base import ChatModel
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
        return NlpExtractor(batch_size=settings.graph.nlp_batch_size, n_process=settings.graph.resolved_nlp_processes())

    return LlmExtractor(models.chat, settings.graph, settings.chat.temperature, prompts)


def run_extraction(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress
) -> tuple[str, list[str]]:
    """Extract every chunk not yet extracted by this extractor; returns (name, ids of the chunks done now).

    Each group's or batch's extractions are stored as they finish, so a killed run resumes with
    the rest. Under a remote executor the nlp extractor runs as one task per ``ray.batch_size``
    chunks; the LLM extractor's calls go out through ``models`` (:func:`unirag.llm.factory.run_by`).
    """
    executor = executor_for(settings)
    extractor = make_extractor(settings, models, PromptLibrary.of_workspace(workspace.root))
    done = store.extracted_chunk_ids(extractor.name)
    # A title that is only a file name is no entity: extractors see the chunk without it.
    pending = [chunk.for_extraction() for chunk in workspace.corpus.iter_chunks() if chunk.id not in done]
    if not pending:
        return extractor.name, []
    with progress.task(f"extracting entities ({extractor.name.split(':')[0]})", total=len(pending)) as advance:
        if hasattr(extractor, "extract_groups"):
            groups = plan_groups(pending, settings.graph.share_call_below_tokens, settings.graph.max_passages_per_call)
            for extractions in extractor.extract_groups(groups, settings.concurrency):
                store.save_extractions(extractor.name, extractions)
                advance(len(extractions))
        elif executor.remote:
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
    return extractor.name, [chunk.id for chunk in pending]


def merge_config(workspace: Workspace, settings: Settings) -> dict[str, Any]:
    """The knobs a merge's result depends on besides its extractions."""
    config: dict[str, Any] = {"max_tokens": settings.graph.description_max_tokens,
                              "encoding": settings.chunking.encoding}
    prompts = PromptLibrary.of_workspace(workspace.root).overridden("summarize_descriptions")
    if prompts:
        config["prompts"] = prompts
    return config


def merge_fingerprint(chunk_ids: list[str], extractor: str, config: dict[str, Any]) -> str:
    """The merged graph's inputs: its chunks in order, the extractor and the merge knobs."""
    return config_hash({"chunks": chunk_ids, "extractor": extractor, "merge": config})


def build_merged_graph(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress
) -> bool:
    """Extract what is missing, then merge when the inputs changed; False when up to date.

    When only new chunks came, the stored graph is extended by them (:mod:`unirag.graph.merge_update`);
    otherwise every extraction is merged again. Both give the same graph."""
    extractor, extracted = run_extraction(workspace, store, settings, models, progress)
    config = merge_config(workspace, settings)
    chunk_ids = workspace.corpus.chunk_ids()
    inputs = merge_fingerprint(chunk_ids, extractor, config)
    if workspace.manifest.is_current("graph", inputs):
        return False
    tick = time.perf_counter()
    entry = workspace.manifest.entry("graph")
    plan = plan_merge(entry, {"extractor": extractor, **config}, chunk_ids, extracted,
                      lambda ids: merge_fingerprint(ids, extractor, config))
    shorten = _Shortener(settings, models, progress, PromptLibrary.of_workspace(workspace.root),
                         models.chat if extractor.startswith("llm:") else None)
    counts = _extend_graph(store, extractor, plan, entry, shorten) if plan.mode == "extend" else None
    if counts is None:
        if plan.mode == "extend":
            plan = MergePlan("full", "stored graph does not match its merge state")
        counts = _merge_whole(store, extractor, chunk_ids, shorten)
    workspace.manifest.set_entry("graph", {
        "config": {"extractor": extractor, **config}, "inputs": inputs, "chunks": len(chunk_ids), **counts,
        "seconds": round(time.perf_counter() - tick, 3), "update": plan.to_json(),
    })
    return True


@dataclass(frozen=True)
class _Shortener:
    """Shortens long merged descriptions as the settings say (LLM summary or cut)."""

    settings: Settings
    models: Models
    progress: Progress
    prompts: PromptLibrary
    chat: ChatModel | None

    def __call__(self, graph: MergedGraph, ids: Collection[str] | None = None) -> set[str]:
        """Shorten the long descriptions (of ``ids`` only, when given); returns their keys."""
        tokenizer = get_tokenizer(self.settings.chunking.encoding)
        max_tokens = self.settings.graph.description_max_tokens
        items = long_descriptions(graph, max_tokens, tokenizer.count, ids)
        shorten_items(items, max_tokens, tokenizer.truncate, self.chat, self.settings.concurrency, self.progress,
                      prompts=self.prompts)
        return {item.id for _, item in items}


def _merge_whole(store: GraphStore, extractor: str, chunk_ids: list[str], shorten: _Shortener) -> dict[str, Any]:
    """Merge every extraction and replace the stored graph; its manifest counts."""
    accumulators = accumulate(store.load_extractions(extractor, chunk_ids))
    graph = accumulators.graph()
    shortened = shorten(graph)
    # claim ids number every claim in key order: a graph with claims is always merged whole
    states = () if graph.claims else merge_states(accumulators, shortened)
    store.save_graph(graph, states)
    return {"entities": len(graph.entities), "relationships": len(graph.relationships),
            "claims": len(graph.claims), "descriptions_shortened": len(shortened),
            **({} if graph.claims else {"state": STATE_VERSION})}


def _extend_graph(store: GraphStore, extractor: str, plan: MergePlan, entry: dict[str, Any],
                  shorten: _Shortener) -> dict[str, Any] | None:
    """Extend the stored graph by the plan's new chunks; its manifest counts, or None when the
    stored graph or its merge state is not what the manifest says (then nothing was written)."""
    graph = store.shared_graph()
    if (len(graph.entities), len(graph.relationships), len(graph.claims)) != (
            entry.get("entities"), entry.get("relationships"), 0):
        store.forget_shared_graph()
        return None
    extension = extend_graph(graph, store.load_extractions(extractor, plan.added), store.load_merge_states)
    if extension is None:
        store.forget_shared_graph()
        return None
    try:
        shortened = shorten(graph, extension.touched())
        store.save_graph_changes(graph, extension.touched(), extension.new_entities, extension.new_relationships,
                                 extension.states(shortened))
    except BaseException:
        store.forget_shared_graph()
        raise
    return {"entities": len(graph.entities), "relationships": len(graph.relationships), "claims": 0,
            "descriptions_shortened": entry["descriptions_shortened"] - extension.was_shortened + len(shortened),
            "state": STATE_VERSION}


def build_chunk_links(workspace: Workspace, store: GraphStore, settings: Settings, kind: str) -> bool:
    """Passage-graph (``pg``) or hybrid chunk-chunk edges; False when up to date.

    After a graph extended by new chunks (which come last), the links among the old chunks
    stand as they were: only the new chunks' links are computed and added."""
    minimum = settings.graph.passage_threshold if kind == "pg" else settings.graph.hybrid_threshold + 1
    graph_entry = workspace.manifest.entry("graph")
    link_inputs = config_hash({"graph": graph_entry["inputs"], "minimum": minimum})
    if workspace.manifest.is_current(f"chunk_links:{kind}", link_inputs):
        return False
    update = graph_entry.get("update") or {}
    entry = workspace.manifest.entry(f"chunk_links:{kind}")
    extends = (update.get("mode") == "extend" and entry is not None
               and entry.get("inputs") == config_hash({"graph": update["previous"], "minimum": minimum}))
    if extends:
        links = new_chunk_links(store.shared_graph(), workspace.corpus.chunk_ids(), update["added"], minimum)
        store.add_chunk_links(kind, links)
        count = entry["count"] + len(links)
    else:
        links = shared_entity_links(store.shared_graph(), workspace.corpus.chunk_ids(), minimum)
        store.save_chunk_links(kind, links)
        count = len(links)
    workspace.manifest.set_entry(f"chunk_links:{kind}", {
        "config": {"min_shared_entities": minimum}, "inputs": link_inputs, "count": count,
        "update": {"mode": "extend" if extends else "full"},
    })
    return True
