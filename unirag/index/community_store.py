"""Community hierarchies as tables in the workspace store.

* ``communities``: one row per community of every hierarchy (GraphRAG,
  ArchRAG, HyGRAG, LeanRAG), with its level, members and summary/report.
* ``community_links``: edges between communities of one level.

* ``community_link_levels``: per hierarchy and level, a digest of its links in order.

A hierarchy is saved in one transaction when it is rebuilt, so a reader never sees half of
one. An update rewrites only what changed (a 1 % insert leaves most communities and most
levels of links as they were): the community rows whose content differs, and the levels of
links whose digest differs. That gives what a whole rewrite gives: communities are read in
(level, id) order, links by level and then in insertion order, and a rewritten level keeps
the order it is given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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


_LEVEL_DIGESTS = """
CREATE TABLE IF NOT EXISTS community_link_levels (
    hierarchy TEXT, level INTEGER, links INTEGER, digest TEXT, PRIMARY KEY (hierarchy, level)
);
"""
_COMMUNITY_COLUMNS = "hierarchy, id, level, title, summary, children, entities, chunks, parent, rating, payload"
_LINK_COLUMNS = "hierarchy, level, source, target, weight, description, digest"


def _link_digests(db: Database) -> None:
    """Workspaces from before link digests lack the column."""
    if "digest" not in db.table_columns("community_links"):
        db.execute("ALTER TABLE community_links ADD COLUMN digest TEXT DEFAULT ''")


#: the community tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "communities, community_links", _SCHEMA),
    Migration(2, "community_links.digest", _link_digests),
    tables_migration(3, "community_link_levels", _LEVEL_DIGESTS),
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
        """Store ``result`` as hierarchy ``result.hierarchy``, in place of what was stored."""
        name = result.hierarchy
        with self.db:
            self._save_communities(name, [_community_row(name, c) for c in result.communities])
            self._save_links(name, result.links)

    def _save_communities(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        """Delete the stored rows that are gone or differ, insert the new and changed ones."""
        stored = {row[1]: tuple(row) for row in self.db.execute(
            f"SELECT {_COMMUNITY_COLUMNS} FROM communities WHERE hierarchy = ?", (name,))}
        written = [row for row in rows if stored.get(row[1]) != row]
        new_ids = {row[1] for row in rows}
        removed = [(name, item) for item in stored if item not in new_ids]
        removed += [(name, row[1]) for row in written if row[1] in stored]
        if removed:
            self.db.executemany("DELETE FROM communities WHERE hierarchy = ? AND id = ?", removed)
        if written:
            self.db.executemany(f"INSERT INTO communities ({_COMMUNITY_COLUMNS}) VALUES ({_marks(11)})", written)

    def _save_links(self, name: str, links: Sequence[CommunityLink]) -> None:
        """Rewrite the levels whose links (in order) differ from the stored ones, by digest."""
        by_level = _rows_by_level(name, links)
        digests = {level: _level_digest(rows) for level, rows in by_level.items()}
        recorded = dict(self.db.execute(
            "SELECT level, digest FROM community_link_levels WHERE hierarchy = ?", (name,)).fetchall())
        stored = recorded or self._stored_link_digests(name)
        changed = [level for level in sorted(by_level) if stored.get(level) != digests[level]]
        for level in sorted(set(stored) - set(by_level) | set(changed)):
            self.db.execute("DELETE FROM community_links WHERE hierarchy = ? AND level = ?", (name, level))
        for level in changed:
            self.db.executemany(f"INSERT INTO community_links ({_LINK_COLUMNS}) VALUES ({_marks(7)})",
                                by_level[level])
        self.db.execute("DELETE FROM community_link_levels WHERE hierarchy = ?", (name,))
        self.db.executemany("INSERT INTO community_link_levels (hierarchy, level, links, digest) VALUES (?, ?, ?, ?)",
                            [(name, level, len(rows), digests[level]) for level, rows in sorted(by_level.items())])

    def _stored_link_digests(self, name: str) -> dict[int, str]:
        """The digest of each stored level of links, read from the links themselves: a
        workspace from before the recorded digests (read once; the save records them)."""
        return {level: _level_digest(rows) for level, rows in _rows_by_level(name, self.load_links(name)).items()}

    def clear(self) -> None:
        """Forget every hierarchy (an emptied corpus has no communities)."""
        with self.db:
            self.db.execute("DELETE FROM communities")
            self.db.execute("DELETE FROM community_links")
            self.db.execute("DELETE FROM community_link_levels")

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


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _community_row(name: str, c: Community) -> tuple[Any, ...]:
    """A community as the ``communities`` table stores it (the JSON columns as text)."""
    return (name, c.id, c.level, c.title, c.summary, json.dumps(c.children), json.dumps(c.entities),
            json.dumps(c.chunks), c.parent, c.rating, json.dumps(c.payload, ensure_ascii=False))


def _rows_by_level(name: str, links: Iterable[CommunityLink]) -> dict[int, list[tuple[Any, ...]]]:
    """Links as the ``community_links`` table stores them, per level, in their order."""
    by_level: dict[int, list[tuple[Any, ...]]] = {}
    for link in links:
        by_level.setdefault(link.level, []).append(
            (name, link.level, link.source, link.target, link.weight, link.description, link.digest))
    return by_level


def _level_digest(rows: Iterable[tuple[Any, ...]]) -> str:
    """One level's links, in order, as one digest: equal exactly when the rows are (weights by
    their exact ``repr``, text with separators no id or description holds unescaped)."""
    return hashlib.sha256(json.dumps(list(rows), ensure_ascii=False).encode("utf-8")).hexdigest()
