"""What LeanRAG's aggregated relations are written from, so an update knows when to rewrite one.

An aggregated relation (a link between two aggregated entities of one level) is
an LLM summary of every entity-level relation with one end under each side
(Eq. 5). On a big graph the upper levels are nearly complete graphs of broad
aggregates (2Wiki, 6k passages: 93 level-2 entities joined by 4,269 pairs), and
adding 1 % of the passages adds a relation or two under about half of them.
Rewriting each of those is what made an insert cost 13 % of a full build's
calls, for summaries of hundreds of relations that barely moved.

So each link records its **basis**: the entity-level relations its description
was written from (8-byte hashes of their endpoint id pairs). On an update a
link whose current relations share all but ``relink_share`` of their union
with the basis of a previous link (the previous link they overlap most) keeps
that description and its basis, so drift accumulates against what was written,
never against the last update; past the share it is summarised anew. The
link's ``weight`` (the relation count) is always current. A link below ``tau``
is a concatenation of its relations, rebuilt every time at no cost.

Stored beside the hierarchy as ``artifacts/communities.<name>.link_bases.npz``
(by link digest); a missing or unreadable file only means no description is
kept unless its relations are exactly unchanged (the digest still matches).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from unirag.workspace import atomic_path


def relation_hashes(ids: Sequence[str], edges: np.ndarray) -> np.ndarray:
    """One uint64 per relation ``edges[i]`` (rows of ``ids``): a hash of its sorted endpoint ids,
    the same in every build while both entities exist."""
    out = np.empty(len(edges), dtype=np.uint64)
    for position, (u, v) in enumerate(edges.tolist()):
        a, b = sorted((ids[u], ids[v]))
        out[position] = int.from_bytes(hashlib.blake2b(f"{a}\x00{b}".encode("utf-8"), digest_size=8).digest(),
                                       "little")
    return out


@dataclass
class LinkBasis:
    """One link's record for the next update: the relations its description was written
    from (sorted unique hashes) and whether that description is an LLM summary."""

    digest: str
    basis: np.ndarray
    summarised: bool


@dataclass
class PreviousLinks:
    """The last build's links of one level: descriptions and bases, searchable by relation."""

    descriptions: list[str]
    bases: list[np.ndarray]
    summarised: np.ndarray
    by_digest: dict[str, int] = field(default_factory=dict)
    _hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    _owner: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.bases:
            hashes = np.concatenate(self.bases)
            owner = np.repeat(np.arange(len(self.bases)), [len(b) for b in self.bases])
            order = np.argsort(hashes, kind="stable")
            self._hashes, self._owner = hashes[order], owner[order]

    def closest(self, basis: np.ndarray) -> tuple[int, float]:
        """The previous link sharing most relations with ``basis`` and the share of the union
        that differs (1.0 and -1 when none shares any)."""
        if not len(basis) or not len(self._hashes):
            return -1, 1.0
        at = np.searchsorted(self._hashes, basis).clip(max=len(self._hashes) - 1)
        hit = self._hashes[at] == basis
        if not hit.any():
            return -1, 1.0
        votes = np.bincount(self._owner[at[hit]])
        best = int(votes.argmax())
        shared = int(votes[best])
        union = len(basis) + len(self.bases[best]) - shared
        return best, 1.0 - shared / union


def link_bases_name(hierarchy: str) -> str:
    """The file (under the workspace's artifacts) holding ``hierarchy``'s link records."""
    return f"communities.{hierarchy.replace(':', '.')}.link_bases.npz"


def save_link_bases(path: Path, records: dict[int, list[LinkBasis]]) -> None:
    """Write every level's link records (one file, atomically)."""
    levels, digests, summarised, sizes, parts = [], [], [], [], []
    for level, links in sorted(records.items()):
        for link in links:
            levels.append(level)
            digests.append(link.digest)
            summarised.append(link.summarised)
            sizes.append(len(link.basis))
            parts.append(np.asarray(link.basis, dtype=np.uint64))
    hashes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, levels=np.array(levels, dtype=np.int64), digests=np.array(digests, dtype="U64"),
                 summarised=np.array(summarised, dtype=bool), sizes=np.array(sizes, dtype=np.int64), hashes=hashes)


def load_link_bases(path: Path) -> dict[str, LinkBasis]:
    """The stored records by digest; empty when the file is missing or unreadable."""
    try:
        with np.load(path) as data:
            levels, digests, summarised = data["levels"], data["digests"], data["summarised"]
            sizes, hashes = data["sizes"], data["hashes"]
    except (OSError, ValueError, KeyError):
        return {}
    if not (len(levels) == len(digests) == len(summarised) == len(sizes)) or int(sizes.sum()) != len(hashes):
        return {}
    bases = np.split(hashes, np.cumsum(sizes)[:-1]) if len(sizes) else []
    # tolist(): Python str and bool in one C pass, not one numpy scalar per link
    return {d: LinkBasis(d, b, s) for d, b, s in zip(digests.tolist(), bases, summarised.tolist())}


def previous_link_levels(links: Sequence[Any], bases: Mapping[str, LinkBasis]) -> dict[int, PreviousLinks]:
    """The last build's links (``CommunityLink``: level, description, digest) by level, with
    the basis each was written from where ``bases`` has it (else only an exact digest match
    keeps its description)."""
    grouped: dict[int, list[Any]] = {}
    for link in links:
        if link.digest:
            grouped.setdefault(link.level, []).append(link)
    out = {}
    for level, group in grouped.items():
        known = [bases.get(link.digest) for link in group]
        out[level] = PreviousLinks(
            descriptions=[link.description for link in group],
            bases=[k.basis if k is not None else np.zeros(0, dtype=np.uint64) for k in known],
            summarised=np.array([k is None or k.summarised for k in known], dtype=bool),
            by_digest={link.digest: i for i, link in enumerate(group)},
        )
    return out
