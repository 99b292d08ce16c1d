"""Community hierarchies as tables in the workspace store.

* ``communities``: one row per community of every hierarchy (GraphRAG,
  ArchRAG, HyGRAG, LeanRAG), with its level, members and summary/report.
* ``community_links``: edges between communities of one level.

A hierarchy is rewritten in one transaction when it is rebuilt, so a reader
never sees half of one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from unirag.index.hierarchy import Community, CommunityLink, HierarchyResult
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


#: the community tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "communities, community_links", _SCHEMA),
    Migration(2, "community_links.digest", _link_digests),
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

    def save(self, result: HierarchyResult) -> None:
        name = result.hierarchy
        with self.db:
            self.db.execute("DELETE FROM communities WHERE hierarchy = ?", (name,))
            self.db.execute("DELETE FROM community_links WHERE hierarchy = ?", (name,))
            self.db.executemany(
                "INSERT INTO communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(name, c.id, c.level, c.title, c.summary, json.dumps(c.children), json.dumps(c.entities),
                  json.dumps(c.chunks), c.parent, c.rating, json.dumps(c.payload, ensure_ascii=False))
                 for c in result.communities],
            )
            self.db.executemany(
                "INSERT INTO community_links (hierarchy, level, source, target, weight, description, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(name, link.level, link.source, link.target, link.weight, link.description, link.digest)
                 for link in result.links],
            )

    def clear(self) -> None:
        """Forget every hierarchy (an emptied corpus has no communities)."""
        with self.db:
            self.db.execute("DELETE FROM communities")
            self.db.execute("DELETE FROM community_links")

    def load(self, hierarchy: str) -> list[Community]:
        rows = self.db.execute(
            "SELECT id, level, title, summary, children, entities, chunks, parent, rating, payload "
            "FROM communities WHERE hierarchy = ? ORDER BY level, id",
            (hierarchy,),
        )
        return [
            Community(id=r[0], hierarchy=hierarchy, level=r[1], title=r[2], summary=r[3],
                      children=json.loads(r[4]), entities=json.loads(r[5]), chunks=json.loads(r[6]),
                      parent=r[7], rating=r[8], payload=json.loads(r[9]))
            for r in rows
        ]

    def heads(self, hierarchy: str) -> list[CommunityHead]:
        """Every community's id, level, title and summary, in :meth:`load`'s order, without
        parsing members and payloads (what community vectors and indices need)."""
        rows = self.db.execute(
            "SELECT id, level, title, summary FROM communities WHERE hierarchy = ? ORDER BY level, id", (hierarchy,))
        return [CommunityHead(*row) for row in rows]

    def load_links(self, hierarchy: str) -> list[CommunityLink]:
        rows = self.db.execute(
            "SELECT level, source, target, weight, description, COALESCE(digest, '') FROM community_links "
            f"WHERE hierarchy = ? ORDER BY level, {self.db.dialect.insertion_order}",
            (hierarchy,),
        )
        return [CommunityLink(hierarchy, *row) for row in rows]

    def level_counts(self) -> dict[str, dict[int, int]]:
        """Communities per level of every stored hierarchy."""
        out: dict[str, dict[int, int]] = {}
        for hierarchy, level, count in self.db.execute(
            "SELECT hierarchy, level, COUNT(*) FROM communities GROUP BY hierarchy, level ORDER BY hierarchy, level"
        ):
            out.setdefault(hierarchy, {})[level] = count
        return out
