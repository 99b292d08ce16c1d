"""Merge per-chunk extractions into one graph (GraphRAG §3.1.3).

Entities are matched by normalised name (case, whitespace, punctuation);
types are voted; descriptions are merged and, when longer than a token limit,
summarised (by the LLM for the llm extractor, extractively otherwise).
Relationships are undirected pairs: weight = number of supporting mentions,
strength = summed strength. Every element keeps the ids of its chunks.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from unirag.graph.types import ChunkExtraction
from unirag.prompts.prompt import PromptLibrary
from unirag.llm.base import ChatModel
from unirag.progress import Progress

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """The matching key: NFKC, case-folded, punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _PUNCT.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


@dataclass
class Entity:
    id: str
    name: str
    type: str
    description: str
    chunk_ids: list[str]
    mentions: int


@dataclass
class Relationship:
    id: str
    source: str  # entity id
    target: str  # entity id
    relation: str  # the most frequent relation name
    description: str
    keywords: list[str]
    weight: float  # supporting mentions
    strength: float  # summed strength (1-10 per mention)
    chunk_ids: list[str]


@dataclass
class Claim:
    id: str
    subject: str  # entity id
    object: str
    type: str
    status: str
    date: str
    description: str
    chunk_ids: list[str]


@dataclass
class MergedGraph:
    entities: dict[str, Entity] = field(default_factory=dict)
    relationships: dict[str, Relationship] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)


@dataclass
class Accumulator:
    """Accumulates one element's mentions before they become an Entity/Relationship."""

    names: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    relations: Counter[str] = field(default_factory=Counter)
    descriptions: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    mentions: int = 0
    strength: float = 0.0
    ends: tuple[str, str] = ("", "")

    def add_description(self, text: str) -> None:
        text = text.strip()
        if text and text not in self.descriptions:
            self.descriptions.append(text)

    def add_chunk(self, chunk_id: str) -> None:
        if chunk_id not in self.chunk_ids:
            self.chunk_ids.append(chunk_id)


def _top(counter: Counter[str]) -> str:
    """Most common value; ties broken alphabetically so merges are deterministic."""
    if not counter:
        return ""
    best = max(counter.values())
    return min(value for value, count in counter.items() if count == best)


class Accumulators:
    """Every element's mentions so far, per matching key.

    A merge is per key and in chunk order, so the accumulators of keys that new chunks
    do not mention stay as they were; :mod:`unirag.graph.merge_update` seeds the touched
    ones from their stored state and feeds only the new chunks.
    """

    def __init__(self) -> None:
        self.entities: dict[str, Accumulator] = {}
        self.relations: dict[str, Accumulator] = {}
        self.claims: dict[str, Accumulator] = {}

    def add(self, extraction: ChunkExtraction) -> None:
        """Fold one chunk's mentions in (chunks must come in corpus order)."""
        entities, relations, claims = self.entities, self.relations, self.claims
        cid = extraction.chunk_id
        for mention in extraction.entities:
            key = normalize_name(mention.name)
            if not key:
                continue
            acc = entities.setdefault(key, Accumulator())
            acc.names[mention.name.strip()] += 1
            if mention.type:
                acc.types[mention.type.strip().lower()] += 1
            acc.add_description(mention.description)
            acc.add_chunk(cid)
            acc.mentions += 1
        for rel in extraction.relations:
            a, b = normalize_name(rel.source), normalize_name(rel.target)
            if not a or not b or a == b:
                continue
            for key, name in ((a, rel.source), (b, rel.target)):
                if key not in entities:  # endpoints always exist as nodes
                    entities[key] = Accumulator()
                    entities[key].names[name.strip()] += 1
                entities[key].add_chunk(cid)
            pair = "|".join(sorted((a, b)))
            acc = relations.setdefault(pair, Accumulator(ends=(a, b)))
            if rel.relation:
                acc.relations[rel.relation.strip().lower()] += 1
            acc.add_description(rel.description)
            for keyword in rel.keywords:
                keyword = keyword.strip().lower()
                if keyword and keyword not in acc.keywords:
                    acc.keywords.append(keyword)
            acc.add_chunk(cid)
            acc.mentions += 1
            acc.strength += rel.strength
        for claim in extraction.claims:
            subject = normalize_name(claim.subject)
            if not subject:
                continue
            key = "|".join((subject, normalize_name(claim.object), claim.type.lower(), claim.description.strip()))
            acc = claims.setdefault(key, Accumulator(ends=(subject, claim.object.strip())))
            acc.types[claim.type.strip().lower()] += 1
            acc.relations[claim.status.upper()] += 1
            acc.names[claim.date.strip()] += 1
            acc.add_description(claim.description)
            acc.add_chunk(cid)

    def graph(self) -> MergedGraph:
        """The merged elements, in the order their keys were first met."""
        graph = MergedGraph()
        for key, acc in self.entities.items():
            graph.entities[key] = entity_of(key, acc)
        for key, acc in self.relations.items():
            graph.relationships[key] = relationship_of(key, acc)
        for number, (key, acc) in enumerate(sorted(self.claims.items())):
            graph.claims[f"claim-{number}"] = Claim(
                f"claim-{number}", acc.ends[0], acc.ends[1], _top(acc.types), _top(acc.relations), _top(acc.names),
                "\n".join(acc.descriptions), acc.chunk_ids,
            )
        return graph


def entity_of(key: str, acc: Accumulator) -> Entity:
    """The merged entity of one key's accumulated mentions (description not yet shortened)."""
    return Entity(key, _top(acc.names), _top(acc.types), "\n".join(acc.descriptions), acc.chunk_ids,
                  max(acc.mentions, 1))


def relationship_of(key: str, acc: Accumulator) -> Relationship:
    """The merged relationship of one pair's accumulated mentions (description not yet shortened)."""
    return Relationship(key, acc.ends[0], acc.ends[1], _top(acc.relations), "\n".join(acc.descriptions),
                        acc.keywords, float(acc.mentions), acc.strength, acc.chunk_ids)


def accumulate(extractions: Iterable[ChunkExtraction]) -> Accumulators:
    """Every chunk's extraction added, in order: the merge's per-key state (its graph is
    :meth:`Accumulators.graph`; an extendable build also stores the state)."""
    accumulators = Accumulators()
    for extraction in extractions:
        accumulators.add(extraction)
    return accumulators


def merge_extractions(extractions: Iterable[ChunkExtraction]) -> MergedGraph:
    """One graph from many chunks' extractions (pure; no model calls)."""
    return accumulate(extractions).graph()


def long_descriptions(
    graph: MergedGraph, max_tokens: int, count_tokens: Callable[[str], int], ids: Collection[str] | None = None,
) -> list[tuple[str, Entity | Relationship]]:
    """(subject, element) of every merged description over ``max_tokens``, of the elements
    ``ids`` only when given (entity keys never hold ``|``, relationship keys always do)."""
    entities = graph.entities.values() if ids is None else [graph.entities[i] for i in ids if i in graph.entities]
    relationships = (graph.relationships.values() if ids is None
                     else [graph.relationships[i] for i in ids if i in graph.relationships])
    long_items: list[tuple[str, Entity | Relationship]] = []
    for entity in entities:
        if "\n" in entity.description and count_tokens(entity.description) > max_tokens:
            long_items.append((entity.name, entity))
    for rel in relationships:
        if "\n" in rel.description and count_tokens(rel.description) > max_tokens:
            subject = f"the relationship between {graph.entities[rel.source].name} and {graph.entities[rel.target].name}"
            long_items.append((subject, rel))
    return long_items


def shorten_descriptions(
    graph: MergedGraph, max_tokens: int, count_tokens: Callable[[str], int], truncate: Callable[[str, int], str],
    **options: Any,
) -> int:
    """Bring every description over ``max_tokens`` back under it; returns how many.
    ``options``: those of :func:`shorten_items` (chat, concurrency, progress, max_tokens_out, prompts)."""
    return shorten_items(long_descriptions(graph, max_tokens, count_tokens), max_tokens, truncate, **options)


def shorten_items(
    long_items: list[tuple[str, Entity | Relationship]],
    max_tokens: int,
    truncate: Callable[[str, int], str],
    chat: ChatModel | None = None,
    concurrency: int = 4,
    progress: Progress | None = None,
    max_tokens_out: int = 300,
    prompts: PromptLibrary | None = None,
) -> int:
    """Shorten the given (subject, element) descriptions in place; returns how many.

    With a chat model each is summarised (GraphRAG §3.1.3; cached, so reruns
    are free); without one (the zero-LLM path) the text is cut at the limit.
    """
    if not long_items:
        return 0
    if chat is None:
        for _, item in long_items:
            item.description = truncate(item.description, max_tokens)
        return len(long_items)
    prompt = (prompts or PromptLibrary()).load("summarize_descriptions")
    max_words = str(max(20, int(max_tokens * 0.7)))

    def summarise(pair: tuple[str, Entity | Relationship]) -> str:
        subject, item = pair
        descriptions = "\n".join(f"- {line}" for line in item.description.split("\n"))
        request = prompt.request("build.summarize_descriptions", max_tokens=max_tokens_out,
                                 subject=subject, max_words=max_words, descriptions=descriptions)
        return chat.complete(request).text.strip()

    progress = progress or Progress()
    with progress.task("summarising long descriptions", total=len(long_items)) as advance, ThreadPoolExecutor(
        max_workers=concurrency
    ) as pool:
        for (_, item), summary in zip(long_items, pool.map(summarise, long_items), strict=True):
            item.description = summary or truncate(item.description, max_tokens)
            advance(1)
    return len(long_items)
