"""Extend the merged graph by new chunks instead of re-merging every extraction.

A merge (:mod:`unirag.graph.merge`) is per key and in chunk order: when new chunks come
after every merged one, each key's accumulator after the insert is its accumulator before
it fed with the new chunks' mentions. What a stored row cannot give back (name, type and
relation vote counts, raw mention count, the unshortened descriptions) is kept per key as
its *merge state*, so an insert reads and re-merges only the keys the new chunks mention,
counts only their descriptions and writes only their rows. New keys come after every old
one, as in a whole merge, and every element keeps its place, so the result equals a whole
merge of all extractions (tests/test_merge_update.py).

A whole merge runs instead when there is no graph or no merge state, the merge config or
extractor changed, chunks were removed, reordered or extracted again, the stored graph does
not match its manifest entry, or any chunk holds claims (claim ids number every claim in key
order).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from unirag.graph.merge import (
    Accumulator, Accumulators, Entity, MergedGraph, Relationship, entity_of, relationship_of,
)
from unirag.graph.types import ChunkExtraction

#: the layout of the merge state; an entry recorded with another layout gets a whole merge
STATE_VERSION = 1


@dataclass(frozen=True)
class MergePlan:
    """How this refresh merges: ``full`` (and why) or ``extend`` by ``added`` chunks."""

    mode: str
    reason: str
    added: list[str] = field(default_factory=list)
    previous: str | None = None  # the fingerprint of the graph being extended

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "reason": self.reason}
        if self.mode == "extend":
            out.update(previous=self.previous, added=self.added)
        return out


def plan_merge(
    entry: dict[str, Any] | None, config: dict[str, Any], chunk_ids: list[str], extracted: Iterable[str],
    fingerprint: Callable[[list[str]], str],
) -> MergePlan:
    """Whether the stored graph (manifest ``entry``) can be extended: it must be the merge, with
    this ``config``, of the first ``entry["chunks"]`` of ``chunk_ids``, none of them among the
    chunks ``extracted`` in this refresh (a chunk extracted only now was not in that merge)."""
    if entry is None:
        return MergePlan("full", "no merged graph")
    merged = entry.get("chunks")
    if entry.get("state") != STATE_VERSION or not isinstance(merged, int):
        return MergePlan("full", "no merge state")
    if entry.get("config") != config:
        return MergePlan("full", "merge config changed")
    previous = chunk_ids[:merged]
    if fingerprint(previous) != entry.get("inputs"):
        return MergePlan("full", "chunks removed or reordered")
    if not set(extracted).isdisjoint(previous):
        return MergePlan("full", "merged chunks extracted again")
    added = chunk_ids[merged:]
    return MergePlan("extend", f"{len(added)} new chunks", added, entry["inputs"])


# -- merge state --------------------------------------------------------------------


def entity_state(acc: Accumulator, shortened: bool) -> str:
    """What entity_of drops: vote counts, raw mentions, the raw descriptions when the row's
    text is not their plain join (shortened, or more than one)."""
    raw = acc.descriptions if shortened or len(acc.descriptions) > 1 else None
    return json.dumps([acc.names, acc.types, acc.mentions, raw, int(shortened)], ensure_ascii=False)


def relationship_state(acc: Accumulator, shortened: bool) -> str:
    """What relationship_of drops: relation votes and the raw descriptions (as for entities)."""
    raw = acc.descriptions if shortened or len(acc.descriptions) > 1 else None
    return json.dumps([acc.relations, raw, int(shortened)], ensure_ascii=False)


def merge_states(accumulators: Accumulators, shortened: set[str]) -> Iterable[tuple[str, str]]:
    """(key, state) of every entity and relationship of a merge."""
    for key, acc in accumulators.entities.items():
        yield key, entity_state(acc, key in shortened)
    for key, acc in accumulators.relations.items():
        yield key, relationship_state(acc, key in shortened)


def _raw(description: str, stored: list[str] | None) -> list[str]:
    return list(stored) if stored is not None else ([description] if description else [])


def seed_entity(entity: Entity, state: list[Any]) -> Accumulator:
    """The accumulator that merged into ``entity``, from the row and its state."""
    names, types, mentions, raw, _ = state
    return Accumulator(names=Counter(names), types=Counter(types), descriptions=_raw(entity.description, raw),
                       chunk_ids=list(entity.chunk_ids), mentions=mentions)


def seed_relationship(rel: Relationship, state: list[Any]) -> Accumulator:
    """The accumulator that merged into ``rel``, from the row and its state."""
    relations, raw, _ = state
    return Accumulator(relations=Counter(relations), descriptions=_raw(rel.description, raw),
                       keywords=list(rel.keywords), chunk_ids=list(rel.chunk_ids), mentions=int(rel.weight),
                       strength=rel.strength, ends=(rel.source, rel.target))


# -- extending ----------------------------------------------------------------------


@dataclass
class Extension:
    """The touched keys of an extended graph and what shortening needs to know of them."""

    accumulators: Accumulators
    new_entities: list[str]
    new_relationships: list[str]
    was_shortened: int  # touched old elements whose stored description was shortened
    restored: dict[str, list[Any]]  # untouched relationships whose raw description was put back, their states

    def touched(self) -> list[str]:
        """Every key whose row and state are rewritten."""
        return [*self.accumulators.entities, *self.accumulators.relations, *self.restored]

    def states(self, shortened: set[str]) -> list[tuple[str, str]]:
        """(key, state) of every touched key after shortening (``shortened``: keys cut or summarised now)."""
        out = list(merge_states(self.accumulators, shortened))
        for key, (relations, raw, _) in self.restored.items():
            out.append((key, json.dumps([relations, raw, int(key in shortened)], ensure_ascii=False)))
        return out


def extend_graph(
    graph: MergedGraph, added: list[ChunkExtraction], load_states: Callable[[list[str]], dict[str, list[Any]]],
) -> Extension | None:
    """Fold the ``added`` chunks' extractions into ``graph`` in place; None when a touched key
    has no stored state (``graph`` may then be half changed: the caller merges whole). Touched
    descriptions are left unshortened."""
    probe = Accumulators()
    for extraction in added:
        probe.add(extraction)
    if probe.claims:
        return None
    old_entities = [key for key in probe.entities if key in graph.entities]
    old_relationships = [key for key in probe.relations if key in graph.relationships]
    states = load_states(old_entities + old_relationships)
    if len(states) != len(old_entities) + len(old_relationships):
        return None
    accumulators = Accumulators()
    for key in old_entities:
        accumulators.entities[key] = seed_entity(graph.entities[key], states[key])
    for key in old_relationships:
        accumulators.relations[key] = seed_relationship(graph.relationships[key], states[key])
    for extraction in added:
        accumulators.add(extraction)
    renamed = set()
    for key, acc in accumulators.entities.items():
        merged = entity_of(key, acc)
        if key in graph.entities and graph.entities[key].name != merged.name:
            renamed.add(key)
        graph.entities[key] = merged
    for key, acc in accumulators.relations.items():
        graph.relationships[key] = relationship_of(key, acc)
    restored = _restore_renamed(graph, renamed, set(accumulators.relations), load_states)
    if restored is None:
        return None
    return Extension(
        accumulators, [key for key in probe.entities if key not in states],
        [key for key in probe.relations if key not in states],
        sum(states[key][-1] for key in states) + len(restored), restored,
    )


def _restore_renamed(
    graph: MergedGraph, renamed: set[str], touched: set[str], load_states: Callable[[list[str]], dict[str, list[Any]]],
) -> dict[str, list[Any]] | None:
    """A shortened relationship's summary names its ends (``the relationship between A and B``):
    when an end's merged name changes, a whole merge would summarise it again, so its raw
    description is put back to be shortened again. Returns their states (None: a state missing)."""
    if not renamed:
        return {}
    ids = [key for key, rel in graph.relationships.items()
           if key not in touched and (rel.source in renamed or rel.target in renamed)]
    states = load_states(ids)
    if len(states) != len(ids):
        return None
    restored = {key: states[key] for key in ids if states[key][-1]}
    for key, (_, raw, _) in restored.items():
        graph.relationships[key].description = "\n".join(raw)
    return restored

