"""What extraction yields, per chunk, before merging (survey §4, GraphRAG §3.1.2).

One extraction pass per chunk produces every field any graph type needs
(names, types, descriptions, relation names, keywords, strengths, claims); the
KG, TKG and RKG are projections of the merged result, so building all of them
costs no more model calls than the richest one alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class EntityMention:
    """An entity as one chunk mentions it."""

    name: str
    type: str = ""
    description: str = ""


@dataclass
class RelationMention:
    """A relationship as one chunk states it. ``strength`` is 1-10 (GraphRAG)."""

    source: str
    target: str
    relation: str = ""
    description: str = ""
    keywords: list[str] = field(default_factory=list)
    strength: float = 1.0


@dataclass
class ClaimMention:
    """A covariate: a factual claim about an entity (GraphRAG §3.1.2)."""

    subject: str
    object: str = ""
    type: str = ""
    status: str = ""  # TRUE | FALSE | SUSPECTED
    date: str = ""
    description: str = ""


@dataclass
class ChunkExtraction:
    """Everything extracted from one chunk, with what was dropped and why."""

    chunk_id: str
    entities: list[EntityMention] = field(default_factory=list)
    relations: list[RelationMention] = field(default_factory=list)
    claims: list[ClaimMention] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "entities": [asdict(e) for e in self.entities],
            "relations": [asdict(r) for r in self.relations],
            "claims": [asdict(c) for c in self.claims],
            "dropped": dict(self.dropped),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChunkExtraction:
        return cls(
            chunk_id=data["chunk_id"],
            entities=[EntityMention(**e) for e in data.get("entities", [])],
            relations=[RelationMention(**r) for r in data.get("relations", [])],
            claims=[ClaimMention(**c) for c in data.get("claims", [])],
            dropped=Counter(data.get("dropped", {})),
        )
