"""What an indexing run will ask a paid chat model, said before it asks.

Why an estimate and not a count: the calls a build makes depend on what the
model replies (entities found, communities formed), so only the extraction is
known up front. The estimate counts, over exactly the chunks not yet extracted
by this extractor, one extraction call per group of passages and, with
gleaning, the first "anything missed?" check of each group (``upper_calls``
adds every further glean and check, the bound when the model always says yes).
Summaries of trees and hierarchies come from the expected structure: a level of
``n`` members forms ``n / s`` groups, ``s`` being the builder's *expected* group
size (not its cap), level after level, each group one summary (LeanRAG: about
2.6 calls per cluster, its entity and relation aggregates). Artifacts that are
up to date cost nothing; a hierarchy that a corpus change carries
(``index.update: attach``) re-summarises, per level, the groups the changed
leaves fall into (the expected number of distinct groups ``n`` random leaves
hit among ``g``: ``g * (1 - (1 - 1/g) ** n)``, their parents one level up), unless
the change takes it past ``index.rebuild_share``, where it is rebuilt. The chunks
a killed run stored but a hierarchy has not seen count as changed (each manifest
entry keeps the chunks it was built on). The extractive summarizer and the NLP
extractor cost nothing. Description summaries of merged entities are not counted
(rare: only descriptions over ``graph.description_max_tokens``).

Calibration (``bench/estimate_accuracy.py``, scripted model of tests/fakes.py:
every capitalised phrase an entity, the way an LLM extractor names people,
places and works): 40 HotpotQA passages of tests/data, 200 HotpotQA and 200
2Wiki passages gave one distinct entity per 12.1-14.6 chunk tokens
(``ENTITY_TOKENS`` 13, used until a graph built here gives the real count), and
per hierarchy the summaries per leaf entity below, whose level-by-level
grouping is the expected group size ``1 + 1 / rate`` (GraphRAG's Leiden
communities average 5-6 members, far under ``max_cluster_size``): GraphRAG
0.24 reports per entity, ArchRAG 0.15, HyGRAG 0.126 per leaf (entities and chunks), LeanRAG 0.14 (0.054
clusters), the RAPTOR tree 0.25 summaries per chunk; mean prompt tokens per
call as in ``EXPECTED``.
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
ENTITY_TOKENS = 13
#: Leaves of one changed chunk that fall into groups of their own on an insert (its entities
#: are linked, so most share a group): fitted on the killed-sync test and the 2Wiki 1 % insert.
CORRELATED_LEAVES = 2.0
#: How much longer a re-summarised group's prompt is than a build's mean one: the groups a change
#: reaches are picked by their members (so large ones, size-biased) and include every level's top,
#: whose prompts are the longest. Measured on the 1 % insert of 300 2Wiki passages: 1.2-2.5 by
#: hierarchy, about 2 overall.
INSERT_PROMPT_FACTOR = 2.0
#: Tokens of one entity name in a gleaning prompt's list of names already found ("Name, ").
FOUND_NAME_TOKENS = 4


@dataclass(frozen=True)
class Expected:
    """A builder's measured shape: members per summarised group, summary calls per group, mean
    prompt tokens per call (None: members times their tokens, the tree's chunks)."""

    group_size: float
    calls_per_group: float = 1.0
    tokens_per_call: int | None = None


#: Measured on the scripted model (see the module docstring), per hierarchy (spec name) and tree.
EXPECTED = {
    "graphrag": Expected(5.2, 1.0, 465),
    "archrag": Expected(7.7, 1.0, 262),
    "hygrag": Expected(8.9, 1.0, 325),
    "leanrag": Expected(19.5, 2.6, 550),
    "tree": Expected(5.0),
}
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
    #: the most calls it can make (every gleaning pass); ``calls`` where it is the same
    upper_calls: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "llm_calls": self.calls, "prompt_tokens": self.prompt_tokens,
                **({"upper_llm_calls": self.upper_calls} if self.upper_calls not in (None, self.calls) else {})}


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

    @property
    def upper_calls(self) -> int:
        """The most calls the run can make: every gleaning pass asked in full."""
        return sum(step.upper_calls if step.upper_calls is not None else step.calls for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "llm_calls": self.calls, "upper_llm_calls": self.upper_calls,
                "prompt_tokens": self.prompt_tokens,
                "chunks_to_extract": self.chunks_to_extract, "steps": [step.to_json() for step in self.steps]}

    def line(self) -> str:
        """One line for the terminal: totals, then each step."""
        parts = ", ".join(f"{step.step} {step.calls}" for step in self.steps)
        upper = f" (up to {self.upper_calls} if every gleaning pass finds more)" if self.upper_calls > self.calls else ""
        return (f"estimate: about {self.calls} LLM calls{upper} and {self.prompt_tokens} prompt tokens to {self.model}"
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
    calls = upper = tokens = 0
    for group in plan_groups(pending, settings.graph.share_call_below_tokens, settings.graph.max_passages_per_call):
        passage_tokens = sum(c.n_tokens + PASSAGE_LABEL_TOKENS for c in group)
        per_call = extractor.call_tokens(passage_tokens, count)
        found = passage_tokens // ENTITY_TOKENS * FOUND_NAME_TOKENS  # the names a check and a glean list
        expected = per_call[:2]  # the extraction and the first check; a glean only when it says yes
        calls += len(expected)
        upper += len(per_call)
        tokens += sum(expected) + found * (len(expected) - 1)
    return StepCost("extract", calls, tokens, upper), len(pending)


def _entity_count(workspace: Workspace | None, corpus: _Corpus, stored_chunks: int) -> int:
    """Distinct entities after the run: those of the graph built here (its real count), plus the
    new chunks' at its own rate per chunk; without a graph, one per ENTITY_TOKENS."""
    entry = workspace.manifest.entry("graph") if workspace is not None else None
    built_on = int((entry or {}).get("chunks") or stored_chunks)
    if entry and entry.get("entities") and built_on:
        return max(1, round(entry["entities"] / built_on * len(corpus.chunks)))
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


def _touched(groups: float, changed: float) -> float:
    """The expected number of distinct groups among ``groups`` that ``changed`` members fall into."""
    if groups <= 1:
        return min(1.0, changed)
    return groups * (1 - (1 - 1 / groups) ** changed)


def _summaries(name: str, settings: Settings, corpus: _Corpus, entities: int, carried: bool,
               changed_chunks: int) -> StepCost | None:
    """Summary calls of tree or hierarchy ``name`` (None for an artifact that summarises nothing);
    a ``carried`` one re-summarises for the ``changed_chunks`` only."""
    leaves, leaf_tokens, shape = _leaves_and_shape(name, settings, corpus, entities)
    if shape is None or leaves == 0:
        return None
    expected = _expected(name)
    size = max(2.0, expected.group_size if expected else float(shape.size))
    per_group = expected.calls_per_group if expected else shape.calls_per_group
    # A changed chunk's entities are linked to each other, so they mostly land in one group:
    # the leaves that scatter over groups are about CORRELATED_LEAVES per changed chunk.
    per_chunk = min(CORRELATED_LEAVES, leaves / len(corpus.chunks))
    changed = min(float(leaves), changed_chunks * per_chunk) if carried else float(leaves)
    calls = tokens = 0.0
    nodes, member_tokens = float(leaves), leaf_tokens
    for _ in range(shape.max_levels):
        if nodes < max(shape.min_nodes, 2):
            break
        groups = max(1.0, nodes / size)
        asked = _touched(groups, changed) if carried else groups  # a carried level re-summarises changed groups
        if expected and expected.tokens_per_call:
            per_prompt = expected.tokens_per_call
        elif expected:  # the tree: members of a chunk's length at every level, no long instructions
            per_prompt = min(shape.max_input, math.ceil(size * leaf_tokens))
        else:
            per_prompt = min(shape.max_input, math.ceil(size * member_tokens)) + SUMMARY_OVERHEAD
        if carried:  # a changed leaf most likely sits in a large group, and every change reaches the top
            per_prompt = min(shape.max_input + SUMMARY_OVERHEAD, per_prompt * INSERT_PROMPT_FACTOR)
        calls += asked * per_group
        tokens += asked * per_group * per_prompt
        if groups <= 1:
            break
        nodes, member_tokens, changed = groups, UPPER_MEMBER_TOKENS, asked
    return StepCost(name, round(calls), round(tokens))


def _expected(name: str) -> Expected | None:
    """The measured shape of artifact ``name`` (a tree variant as the tree; a hierarchy by its spec)."""
    if name == "tree" or name.startswith("tree:"):
        return EXPECTED["tree"]
    return EXPECTED.get(spec_of(name.partition(":")[2]).name) if name.startswith("communities:") else None


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
