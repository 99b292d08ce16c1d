"""Community operators (survey §6.1, community type; appendix B.1 for VDB).

* ``community.entity`` (GraphRAG local search): the communities that contain
  the candidate entities, by rating.
* ``community.layer`` (GraphRAG global search): every community report of
  one level of the hierarchy, for the map-reduce generator.
* ``community.vdb`` (the survey's new operator, CheapRAG): top-k communities
  by vector search over their reports.

Each writes ``state.communities`` (id -> score, best first) and returns
community items (provenance: hierarchy, level, rating, size, chunks).
Levels follow the hierarchy's own numbering; GraphRAG's is top-down (C0 =
the root communities, higher = finer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from unirag.errors import MethodError
from unirag.operators.context import ContextItem, QueryState, Resources
from unirag.operators.spec import Count, Level, OperatorSpec

if TYPE_CHECKING:
    from unirag.hierarchy.communities import Community


@dataclass(frozen=True)
class CommunityTable:
    """One hierarchy's communities as arrays, derived once per process.

    Rows follow the store's order (level, id). ``leaf``: no community of the
    hierarchy has it as parent (GraphRAG does not repeat an unsplit community
    at finer levels). ``by_entity``: entity id -> rows of the communities
    containing it (every level).
    """

    ids: list[str]
    levels: np.ndarray
    ratings: np.ndarray  # NaN where the community has no rating
    leaf: np.ndarray
    singleton: np.ndarray
    by_entity: dict[str, list[int]]
    level_order: str

    @classmethod
    def build(cls, communities: dict[str, Community], level_order: str) -> CommunityTable:
        values = list(communities.values())
        ids = [c.id for c in values]
        split = {c.parent for c in values if c.parent} | {
            c.id for c in values if any(child in communities for child in c.children)
        }
        by_entity: dict[str, list[int]] = {}
        for row, community in enumerate(values):
            for entity in community.entities:
                by_entity.setdefault(entity, []).append(row)
        return cls(
            ids=ids,
            levels=np.array([c.level for c in values], dtype=np.int64),
            ratings=np.array([np.nan if c.rating is None else float(c.rating) for c in values], dtype=np.float64),
            leaf=np.array([c.id not in split for c in values], dtype=bool),
            singleton=np.array([bool((c.payload or {}).get("singleton", len(c.entities) == 1)) for c in values],
                               dtype=bool),
            by_entity=by_entity,
            level_order=level_order,
        )

    def rating(self, row: int) -> float:
        value = self.ratings[row]
        return -np.inf if np.isnan(value) else float(value)


def community_table(resources: Resources, hierarchy: str) -> CommunityTable:
    """The :class:`CommunityTable` of a hierarchy, built on first use and kept
    with the process's loaded artifacts (it is derived from one of them)."""
    def build() -> CommunityTable:
        return CommunityTable.build(resources.communities(hierarchy), resources.level_order(hierarchy))

    return resources.derived(f"community_table:{hierarchy}", build)


def _emit(state: QueryState, hierarchy: str, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
    state.communities = dict(scored)
    return state.resources.community_items(hierarchy, scored, operator)


def community_entity(
    state: QueryState, top_k: Count = 4, hierarchy: str = "graphrag", max_level: Level | None = 2,
    by: Literal["rating", "matches"] = "rating",
) -> list[ContextItem]:
    """Top-k communities containing the candidate entities (GraphRAG local; survey §6.1 community ① Entity).

    Reads ``state.entities``; considers every community of ``hierarchy`` at
    a level <= ``max_level`` (GraphRAG's ``community_level``, default 2;
    ``null`` = all levels) that contains at least one of them. ``by: rating``
    (the survey): by the LLM's rating, then by how many candidate entities
    the community contains, then id; ``by: matches`` (Microsoft's code): by
    that count first, then rating. Unrated communities rank last. Score: the
    rating (0 when unrated), or the count for ``by: matches``.

    Requires ``communities:graphrag`` (``communities:<hierarchy>`` for another).
    """
    if by not in ("rating", "matches"):
        raise MethodError(f"community.entity: 'by' must be 'rating' or 'matches', not {by!r}")
    if not state.entities:
        return []
    table = community_table(state.resources, hierarchy)
    matches: dict[int, int] = {}
    for entity in state.entities:
        for row in table.by_entity.get(entity, ()):
            if max_level is None or table.levels[row] <= max_level:
                matches[row] = matches.get(row, 0) + 1
    if by == "rating":
        ranked = sorted(matches, key=lambda r: (-table.rating(r), -matches[r], table.ids[r]))
    else:
        ranked = sorted(matches, key=lambda r: (-matches[r], -table.rating(r), table.ids[r]))
    scored = [
        (table.ids[r], float(matches[r]) if by == "matches" else max(table.rating(r), 0.0))
        for r in ranked[: max(top_k, 0)]
    ]
    return _emit(state, hierarchy, scored, "community.entity")


def community_layer(
    state: QueryState, level: Level = 2, hierarchy: str = "graphrag", skip_singletons: bool = True,
    partition: bool = True,
) -> list[ContextItem]:
    """Every community of one level (GraphRAG global; survey §6.1 community ② Layer).

    Levels are top-down (C0 = roots). ``partition: true`` (GraphRAG's roll-up
    and :func:`~unirag.hierarchy.graphrag.level_partition`): the
    communities of ``level`` plus the leaves of coarser levels, so every
    entity is covered exactly once; ``partition: false``: every community at
    a level <= ``level`` (the survey's literal wording). ``skip_singletons``
    drops one-entity communities (unrated, no report; ``payload["singleton"]``).
    Order: rating (unrated last), then level, then id; score: the rating (0
    when unrated). No top-k: the map-reduce generator reads them all.

    Requires ``communities:graphrag`` (``communities:<hierarchy>`` for another
    top-down hierarchy); a bottom-up hierarchy is refused.
    """
    table = community_table(state.resources, hierarchy)
    if table.level_order != "top_down":
        raise MethodError(
            f"community.layer needs a top-down hierarchy (GraphRAG's); '{hierarchy}' is {table.level_order}"
        )
    if partition:
        mask = (table.levels == level) | ((table.levels < level) & table.leaf)
    else:
        mask = table.levels <= level
    if skip_singletons:
        mask &= ~table.singleton
    ranked = sorted(np.flatnonzero(mask).tolist(),
                    key=lambda r: (-table.rating(r), int(table.levels[r]), table.ids[r]))
    scored = [(table.ids[r], max(table.rating(r), 0.0)) for r in ranked]
    return _emit(state, hierarchy, scored, "community.layer")


def community_vdb(state: QueryState, top_k: Count = 4, hierarchy: str = "graphrag") -> list[ContextItem]:
    """Top-k communities by cosine similarity of their report to the question
    (survey appendix B.1, community VDB; CheapRAG).

    Reads ``state.query_vector``; searches ``community_vectors:<hierarchy>``
    (each vector embeds the community's title and report). Score: the cosine.
    Requires ``communities:graphrag`` and ``community_vectors:graphrag``
    (``:<hierarchy>`` for another).
    """
    if state.query_vector is None:
        raise MethodError("community.vdb needs the 'embedding' question conversion")
    index = state.resources.vectors(f"community_vectors:{hierarchy}", embedding_model=state.models.embedder.name)
    hits = index.search(state.query_vector, top_k)[0]
    return _emit(state, hierarchy, hits, "community.vdb")


OPERATORS = (
    OperatorSpec(
        "community.entity", "community", community_entity,
        "communities containing the candidate entities, by rating (GraphRAG local)",
        requires=("communities:{hierarchy}",),
    ),
    OperatorSpec(
        "community.layer", "community", community_layer,
        "every community of one level of the hierarchy (GraphRAG global)",
        requires=("communities:{hierarchy}",),
    ),
    OperatorSpec(
        "community.vdb", "community", community_vdb,
        "top-k communities by vector similarity of their reports",
        requires=("communities:{hierarchy}", "community_vectors:{hierarchy}"), needs=("embedding",),
    ),
)
