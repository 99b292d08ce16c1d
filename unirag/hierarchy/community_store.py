"""Community hierarchies as tables in the workspace store.

* ``communities``: one row per community of every hierarchy (GraphRAG,
  ArchRAG, HyGRAG, LeanRAG), with its level, members and summary/report.
* ``community_link_levels``: the edges between communities of one level, one row per
  level of a hierarchy holding them all as JSON columns (source, target, weight and, where
  any is set, description and digest). ArchRAG's and HyGRAG's levels have 10^5 links each on
  a corpus of a few thousand passages; one row per link made every save of a hierarchy
  (each update rewrites it) delete and insert ~700k rows, seconds of an update's CPU.

A hierarchy is rewritten in one transaction when it is rebuilt, so a reader
never sees half of one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby

from unirag.graph.graph_store import json_values
from unirag.hierarchy.communities import Community, CommunityLink, HierarchyResult
from unirag.store.database import Database
from unirag.store.schema import Migration, ensure_schema, tables_migration
from unirag.workspace import Workspace

_SCHEMA = """
CREATE TABLE IF NOT EXISTS communities (
    hierarchy TEXT, id TEXT, level INTEGER, title TEXT, summary TEXT, children TEXT, entities TEXT,
    chunks TEXT, parent TEXT, rating REAL, payload TEXT, PRIMARY KEY (hierarchy, id)
);
CREATE TABLE IF NOT EXISTS community_links (
    hierarchy TEXT, level INTEGER, source TEXT, target TEXT, weight REAL, description TEXT, digest TEXT DEFAULT ''
);
CREATE INDEX IF NOT EXISTS community_links_by_hierarchy ON community_links (hierarchy, level);
"""


def _link_digests(db: Database) -> None:
    """Workspaces from before link digests lack the column."""
    if "digest" not in db.table_columns("community_links"):
        db.execute("ALTER TABLE community_links ADD COLUMN digest TEXT DEFAULT ''")


_COMMUNITY_COLUMNS = ("hierarchy", "id", "level", "title", "summary", "children", "entities", "chunks", "parent",
                      "rating", "payload")

_LINK_LEVELS = """
CREATE TABLE IF NOT EXISTS community_link_levels (
    hierarchy TEXT, level INTEGER, links TEXT, PRIMARY KEY (hierarchy, level)
);
CREATE INDEX IF NOT EXISTS communities_by_level ON communities (hierarchy, level, id);
"""


def _links_by_level(db: Database) -> None:
    """One row per level instead of one per link: the rows of ``community_links`` moved over
    in their order, then the table dropped (safe to run again: a crash before the drop
    rewrites the same level rows)."""
    db.executescript(_LINK_LEVELS)
    if not db.table_columns("community_links"):
        return
    rows = db.execute(
        "SELECT hierarchy, level, source, target, weight, description, COALESCE(digest, '') FROM community_links "
        f"ORDER BY hierarchy, level, {db.dialect.insertion_order}").fetchall()
    for hierarchy, group in groupby(rows, key=lambda row: row[0]):
        _write_levels(db, hierarchy, [CommunityLink(*row) for row in group])
    db.execute("DROP TABLE community_links")


#: the community tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "communities, community_links", _SCHEMA),
    Migration(2, "community_links.digest", _link_digests),
    # the index: load() and heads() read a hierarchy by level, which SQLite sorted in a temp file
    Migration(3, "community_link_levels: one row per level of links; communities_by_level", _links_by_level),
)


def encode_level(links: list[CommunityLink]) -> str:
    """One level's links as JSON columns (description and digest only when one is set)."""
    columns: dict[str, list[object]] = {
        "source": [link.source for link in links],
        "target": [link.target for link in links],
        "weight": [link.weight for link in links],
    }
    descriptions, digests = [link.description for link in links], [link.digest for link in links]
    if any(descriptions):
        columns["description"] = descriptions
    if any(digests):
        columns["digest"] = digests
    return json.dumps(columns, ensure_ascii=False)


def decode_level(hierarchy: str, level: int, text: str) -> Iterator[CommunityLink]:
    """The links of :func:`encode_level`'s text, in their order."""
    columns = json.loads(text)
    count = len(columns["source"])
    descriptions = columns.get("description") or [""] * count
    digests = columns.get("digest") or [""] * count
    for source, target, weight, description, digest in zip(
            columns["source"], columns["target"], columns["weight"], descriptions, digests, strict=True):
        yield CommunityLink(hierarchy, level, source, target, weight, description, digest)


def _write_levels(db: Database, hierarchy: str, links: Iterable[CommunityLink]) -> None:
    """Each level's links as one row of ``hierarchy``; ``links`` grouped by level."""
    db.executemany(
        db.dialect.replace_into("community_link_levels", ("hierarchy", "level", "links"), ("hierarchy", "level")),
        [(hierarchy, level, encode_level(list(group))) for level, group in groupby(links, key=lambda link: link.level)],
    )


@dataclass(frozen=True)
class CommunityHead:
    """A stored community's id, level, title and summary (:meth:`CommunityStore.heads`)."""

    id: str
    level: int
    title: str
    summary: str


class CommunityStore:
    """Reads and writes the community tables of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.db = workspace.db
        ensure_schema(self.db, "communities", MIGRATIONS)

    def save(self, result: HierarchyResult, stored: Iterable[Community] | None = None) -> None:
        """Replace the hierarchy's communities and links with ``result``'s.

        ``stored``: the hierarchy's communities as :meth:`load` read them before this build (an
        update knows them): then only the communities that are new or differ are written and
        only the gone ones deleted -- an update of 1 % of a corpus changes a few thousand of
        tens of thousands, and encoding and writing them all again was most of a save."""
        name = result.hierarchy
        with self.db:
            if stored is None:
                self.db.execute("DELETE FROM communities WHERE hierarchy = ?", (name,))
                changed = result.communities
            else:
                before = {c.id: c for c in stored}
                now = {c.id for c in result.communities}
                self.db.executemany("DELETE FROM communities WHERE hierarchy = ? AND id = ?",
                                    [(name, key) for key in before if key not in now])
                # a stored object handed back is written: it may have been changed in place
                changed = [c for c in result.communities
                           if (old := before.get(c.id)) is None or old is c or old != c]
            self.db.execute("DELETE FROM community_link_levels WHERE hierarchy = ?", (name,))
            self.db.executemany(
                self.db.dialect.replace_into("communities", _COMMUNITY_COLUMNS, ("hierarchy", "id")),
                [(name, c.id, c.level, c.title, c.summary, json.dumps(c.children), json.dumps(c.entities),
                  json.dumps(c.chunks), c.parent, c.rating, json.dumps(c.payload, ensure_ascii=False))
                 for c in changed],
            )
            # sorted stably: each level keeps its links' order
            _write_levels(self.db, name, sorted(result.links, key=lambda link: link.level))

    def clear(self) -> None:
        """Forget every hierarchy (an emptied corpus has no communities)."""
        with self.db:
            self.db.execute("DELETE FROM communities")
            self.db.execute("DELETE FROM community_link_levels")

    def load(self, hierarchy: str) -> list[Community]:
        """Every community of ``hierarchy`` by level and id; each JSON column decoded in one call
        for all rows (an update loads ~24,000 communities, four columns each)."""
        rows = self.db.execute(
            "SELECT id, level, title, summary, children, entities, chunks, parent, rating, payload "
            "FROM communities WHERE hierarchy = ? ORDER BY level, id",
            (hierarchy,),
        ).fetchall()
        children, entities, chunks, payloads = (json_values([r[column] for r in rows]) for column in (4, 5, 6, 9))
        return [
            Community(id=r[0], hierarchy=hierarchy, level=r[1], title=r[2], summary=r[3], children=kids,
                      entities=members, chunks=passages, parent=r[7], rating=r[8], payload=payload)
            for r, kids, members, passages, payload in zip(rows, children, entities, chunks, payloads, strict=True)
        ]

    def heads(self, hierarchy: str) -> list[CommunityHead]:
        """Every community's id, level, title and summary, in :meth:`load`'s order, without
        parsing members and payloads (what community vectors and indices need)."""
        rows = self.db.execute(
            "SELECT id, level, title, summary FROM communities WHERE hierarchy = ? ORDER BY level, id", (hierarchy,))
        return [CommunityHead(*row) for row in rows]

    def load_links(self, hierarchy: str) -> list[CommunityLink]:
        """Every link of ``hierarchy``, level by level, each level in the order it was saved."""
        rows = self.db.execute(
            "SELECT level, links FROM community_link_levels WHERE hierarchy = ? ORDER BY level", (hierarchy,))
        return [link for level, text in rows.fetchall() for link in decode_level(hierarchy, level, text)]

    def level_counts(self) -> dict[str, dict[int, int]]:
        """Communities per level of every stored hierarchy."""
        out: dict[str, dict[int, int]] = {}
        for hierarchy, level, count in self.db.execute(
            "SELECT hierarchy, level, COUNT(*) FROM communities GROUP BY hierarchy, level ORDER BY hierarchy, level"
        ):
            out.setdefault(hierarchy, {})[level] = count
        return out
