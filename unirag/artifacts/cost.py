"""What an indexing run will ask a paid chat model, said before it asks.

Why an estimate and not a count: the calls a build makes depend on what the
model replies (entities found, communities formed), so only the extraction is
known up front, and even it stops its gleaning passes early when the model says
nothing was missed. The estimate therefore counts the extraction as an upper
bound (every gleaning pass) over exactly the chunks not yet extracted by this
extractor, and the summaries of trees and hierarchies from entity counts and
each builder's config (groups of its typical size per level, prompts capped at
its input limit). Artifacts that are up to date cost nothing; a hierarchy that a
corpus change carries (``index.update: attach``) re-summarises at most one group
per level for each new leaf, counting the chunks a killed run stored but the
hierarchy has not seen (each manifest entry keeps the chunks it was built on). The extractive summarizer and the NLP extractor cost
nothing. Description summaries of merged entities are not counted (rare: only
descriptions over ``graph.description_max_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from unirag.artifacts.registry import TREE_VARIANTS, build_order
from unirag.config import Settings
from unirag.graph.extract_llm import LlmExtractor, plan_groups
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.registry import hierarchy_variants, spec_of
from unirag.hierarchy.spec import CostShape, hierarchy_config
from unirag.hierarchy.tree import TreeConfig
from unirag.llm.base import ChatModel
from unirag.prompts.prompt import PromptLibrary
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

#: One distinct entity per this many chunk tokens, until a graph built here gives the real rate.
ENTITY_TOKENS = 75
#: Tokens of one member in a summary prompt: an entity's merged description (the first level),
#: a summary of the level below (every level above it).
LEAF_MEMBER_TOKENS = 40
UPPER_MEMBER_TOKENS = 150
#: A summary prompt's own instructions.
SUMMARY_OVERHEAD = 250
#: "[P1] " and the line break around each passage of an extraction call.
PASSAGE_LABEL_TOKENS = 4


@dataclass(frozen=True)
class StepCost:
    """The model calls of one build step."""

    step: str
    calls: int
    prompt_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "llm_calls": self.calls, "prompt_tokens": self.prompt_tokens}


@dataclass
class CostEstimate:
    """The estimate of one indexing run on ``model`` (steps that cost nothing are left out)."""

    model: str
    steps: list[StepCost] = field(default_factory=list)
    chunks_to_extract: int = 0

    @property
    def calls(self) -> int:
        return sum(step.calls for step in self.steps)

    @property
    def prompt_tokens(self) -> int:
        return sum(step.prompt_tokens for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "llm_calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "chunks_to_extract": self.chunks_to_extract, "steps": [step.to_json() for step in self.steps]}

    def line(self) -> str:
        """One line for the terminal: totals, then each step."""
        parts = ", ".join(f"{step.step} {step.calls}" for step in self.steps)
        return (f"estimate: about {self.calls} LLM calls and {self.prompt_tokens} prompt tokens to {self.model}"
                + (f" ({parts}; {self.chunks_to_extract} chunks to extract)" if self.steps else ""))


@dataclass(frozen=True)
class _Corpus:
    """The chunks the run will build on: ``(id, tokens)`` of each, and which of them are new."""

    chunks: list[tuple[str, int]]
    new: int

    @property
    def tokens(self) -> int:
        return sum(tokens for _, tokens in self.chunks)


@dataclass(frozen=True)
class _Sized:
    n_tokens: int


def estimate_index_cost(
    workspace: Workspace | None,
    settings: Settings,
    chat: ChatModel,
    names: Sequence[str],
    incoming: Sequence[tuple[str, int]],
    rebuild: bool = False,
) -> CostEstimate:
    """The LLM calls and prompt tokens of building ``names`` (with what they need) after the
    ``incoming`` chunks (``(id, tokens)``, not stored yet) join the stored corpus of
    ``workspace`` (None: a workspace not created yet); ``rebuild`` replaces that corpus."""
    stored = [] if workspace is None or rebuild else workspace.corpus.chunk_sizes()
    known = {chunk_id for chunk_id, _ in stored}
    corpus = _Corpus(stored + [item for item in incoming if item[0] not in known],
                     sum(1 for chunk_id, _ in incoming if chunk_id not in known))
    estimate = CostEstimate(model=chat.name)
    if not corpus.chunks:
        return estimate
    prompts = PromptLibrary.of_workspace(workspace.root) if workspace is not None else PromptLibrary()
    order = build_order(list(names))
    if "graph" in order and settings.graph.resolved_extractor(settings.chat) == "llm":
        extraction, estimate.chunks_to_extract = _extraction(workspace, settings, chat, prompts, corpus)
        if extraction.calls:
            estimate.steps.append(extraction)
    if settings.index.resolved_summarizer(settings.chat) != "llm":
        return estimate
    changed = corpus.new > 0 or rebuild or estimate.chunks_to_extract > 0
    entities = _entity_count(workspace, corpus, len(stored))
    for name in order:
        built = workspace is not None and workspace.manifest.entry(name) is not None
        if built and not changed and workspace.manifest.artifact_problem(name) is None:
            continue  # up to date: its builder returns at once
        carried = built and not rebuild and settings.index.update == "attach"
        changed_chunks = corpus.new + (_behind(workspace, name) if carried and workspace is not None else 0)
        step = _summaries(name, settings, corpus, entities, carried, changed_chunks)
        if step is not None and step.calls:
            estimate.steps.append(step)
    return estimate


def _extraction(workspace: Workspace | None, settings: Settings, chat: ChatModel, prompts: PromptLibrary,
                corpus: _Corpus) -> tuple[StepCost, int]:
    """The extraction calls over the chunks this extractor has not extracted (an upper bound)."""
    extractor = LlmExtractor(chat, settings.graph, settings.chat.temperature, prompts)
    done = GraphStore(workspace).extracted_chunk_ids(extractor.name) if workspace is not None else set()
    pending = [_Sized(tokens) for chunk_id, tokens in corpus.chunks if chunk_id not in done]
    count = get_tokenizer(settings.chunking.encoding).count
    calls = tokens = 0
    for group in plan_groups(pending, settings.graph.share_call_below_tokens, settings.graph.max_passages_per_call):
        per_call = extractor.call_tokens(sum(c.n_tokens + PASSAGE_LABEL_TOKENS for c in group), count)
        calls += len(per_call)
        tokens += sum(per_call)
    return StepCost("extract", calls, tokens), len(pending)


def _entity_count(workspace: Workspace | None, corpus: _Corpus, stored_chunks: int) -> int:
    """Distinct entities after the run: the rate of the graph built here, else one per ENTITY_TOKENS."""
    entry = workspace.manifest.entry("graph") if workspace is not None else None
    if entry and entry.get("entities") and stored_chunks:
        return max(1, round(entry["entities"] / stored_chunks * len(corpus.chunks)))
    return max(1, corpus.tokens // ENTITY_TOKENS)


def _behind(workspace: Workspace, name: str) -> int:
    """Chunks the stored artifact ``name`` has not seen yet (added or removed since its build):
    after a killed run (a sync, a delete) they are stored already, so they are not incoming,
    yet the resumed run re-summarises for them. 0 for an artifact up to date or from before
    the manifest kept its chunk mark."""
    entry = workspace.manifest.entry(name)
    if entry is None or workspace.manifest.artifact_problem(name) is None:
        return 0
    return workspace.manifest.chunks_changed_since(entry) or 0


def _summaries(name: str, settings: Settings, corpus: _Corpus, entities: int, carried: bool,
               changed_chunks: int) -> StepCost | None:
    """Summary calls of tree or hierarchy ``name`` (None for an artifact that summarises nothing);
    a ``carried`` one re-summarises for the ``changed_chunks`` only."""
    leaves, leaf_tokens, shape = _leaves_and_shape(name, settings, corpus, entities)
    if shape is None or leaves == 0:
        return None
    new_leaves = math.ceil(leaves * min(1.0, changed_chunks / len(corpus.chunks))) if carried else leaves
    calls = tokens = 0
    nodes, member_tokens = leaves, leaf_tokens
    for _ in range(shape.max_levels):
        if nodes < max(shape.min_nodes, 2):
            break
        groups = max(1, math.ceil(nodes / shape.size))
        asked = min(groups, new_leaves) if carried else groups  # a carried level re-summarises changed groups
        per_prompt = min(shape.max_input, math.ceil(nodes / groups) * member_tokens) + SUMMARY_OVERHEAD
        calls += asked * shape.calls_per_group
        tokens += asked * shape.calls_per_group * per_prompt
        if groups == 1:
            break
        nodes, member_tokens = groups, UPPER_MEMBER_TOKENS
    return StepCost(name, calls, tokens)


def _leaves_and_shape(name: str, settings: Settings, corpus: _Corpus,
                      entities: int) -> tuple[int, int, CostShape | None]:
    """(leaves, tokens of a leaf in a prompt, grouping shape) of artifact ``name``."""
    if name == "tree" or name.startswith("tree:"):
        tree = settings.graph.tree.model_copy(update=TREE_VARIANTS.get(name.partition(":")[2], {}))
        average = corpus.tokens // max(1, len(corpus.chunks))
        return len(corpus.chunks), average, CostShape(tree.cluster_size, tree.min_layer_size, tree.max_layers,
                                                   TreeConfig().max_cluster_tokens)
    if not name.startswith("communities:"):
        return 0, 0, None
    variant = name.partition(":")[2]
    spec = spec_of(variant)
    preset = hierarchy_variants().get(variant, ("", {}))[1]
    shape = spec.cost(hierarchy_config(settings, spec.name, spec.settings, preset))
    leaves = entities + len(corpus.chunks) if spec.chunk_leaves else entities
    return leaves, LEAF_MEMBER_TOKENS, shape
