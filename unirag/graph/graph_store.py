"""Graph artifacts as tables in the workspace store.

* ``extractions``: one row per (chunk, extractor) — the parsed extraction,
  written as each call finishes, so a killed build resumes where it stopped.
* ``entities``, ``relationships``, ``claims``: the merged graph (rewritten
  in one transaction when the extractions change).
* ``merge_state``: per entity/relationship key what its row cannot give back to a merge
  (:mod:`unirag.graph.merge_update`), written with the rows so an insert extends the graph.
* ``chunk_links``: passage-graph and hybrid chunk-chunk edges.
* ``tree_nodes``: the RAPTOR tree.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from unirag.graph.merge import Claim, Entity, MergedGraph, Relationship
from unirag.graph.types import ChunkExtraction
from unirag.store.database import Database
from unirag.store.schema import Migration, ensure_schema, tables_migration
from unirag.workspace import Workspace

_SCHEMA = """
CREATE TABLE IF NOT EXISTS extractions (
    chunk_id TEXT, extractor TEXT, payload TEXT, PRIMARY KEY (chunk_id, extractor)
);
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY, name TEXT, type TEXT, description TEXT, chunk_ids TEXT, mentions INTEGER
);
CREATE TABLE IF NOT EXISTS relationships (
    id TEXT PRIMARY KEY, source TEXT, target TEXT, relation TEXT, description TEXT, keywords TEXT,
    weight REAL, strength REAL, chunk_ids TEXT
);
CREATE TABLE IF NOT EXISTS claims (
    id TEXT PRIMARY KEY, subject TEXT, object TEXT, type TEXT, status TEXT, date TEXT, description TEXT,
    chunk_ids TEXT
);
CREATE TABLE IF NOT EXISTS chunk_links (kind TEXT, a TEXT, b TEXT, shared INTEGER, PRIMARY KEY (kind, a, b));
"""
_TREE_TABLE = """CREATE TABLE IF NOT EXISTS tree_nodes (
    tree TEXT NOT NULL DEFAULT 'tree', id TEXT, layer INTEGER, text TEXT, children TEXT, vector BLOB,
    PRIMARY KEY (tree, id)
)"""

_TREE_COLUMNS = ("tree", "id", "layer", "text", "children", "vector")

DEFAULT_TREE = "tree"
#: up to this many chunks, load_extractions looks each up by key rather than scanning all rows
_LOOKUP_AT_MOST = 2000


def json_values(texts: Sequence[str]) -> list[Any]:
    """Many stored JSON texts decoded in one ``json.loads``: a query's graph load decoded
    ~75,000 of them one call each (a third of its time on MuSiQue)."""
    return json.loads("[" + ",".join(texts) + "]") if texts else []


@dataclass
class GraphColumns:
    """The merged graph's entities and relationships as parallel columns, rows in the order
    :meth:`GraphStore.save_graph` wrote them: what a query's sparse graph
    (:class:`~unirag.operators.graph_index.GraphIndex`) is made of, read without an
    object per element (and without the claims and mention counts no query reads)."""

    entity_ids: list[str]
    names: list[str]
    types: list[str]
    descriptions: list[str]
    entity_chunks: list[list[str]]
    rel_ids: list[str]
    rel_sources: list[str]  # entity ids
    rel_targets: list[str]
    relations: list[str]
    rel_descriptions: list[str]
    rel_keywords: list[list[str]]
    rel_weights: list[float]
    rel_chunks: list[list[str]]

    @classmethod
    def of_graph(cls, graph: MergedGraph) -> GraphColumns:
        """The columns of a graph held in memory (a build's, a test's)."""
        entities = list(graph.entities.values())
        rels = list(graph.relationships.values())
        return cls(
            entity_ids=list(graph.entities), names=[e.name for e in entities], types=[e.type for e in entities],
            descriptions=[e.description for e in entities], entity_chunks=[e.chunk_ids for e in entities],
            rel_ids=[r.id for r in rels], rel_sources=[r.source for r in rels], rel_targets=[r.target for r in rels],
            relations=[r.relation for r in rels], rel_descriptions=[r.description for r in rels],
            rel_keywords=[list(r.keywords) for r in rels], rel_weights=[float(r.weight) for r in rels],
            rel_chunks=[r.chunk_ids for r in rels],
        )


def _tree_variants(db: Database) -> None:
    """Workspaces from before tree variants (RAPTOR-K beside RAPTOR) kept one
    tree in ``tree_nodes`` keyed by node id; move it under the default tree name."""
    columns = db.table_columns("tree_nodes")
    if columns and "tree" not in columns:
        db.execute("SAVEPOINT migrate_tree_nodes")  # DDL included: all or nothing
        try:
            db.execute("ALTER TABLE tree_nodes RENAME TO tree_nodes_v1")
            db.execute(_TREE_TABLE)  # the old layout is SQLite's only: its DDL as is, inside the savepoint
            db.execute("INSERT INTO tree_nodes SELECT ?, id, layer, text, children, vector FROM tree_nodes_v1",
                       (DEFAULT_TREE,))
            db.execute("DROP TABLE tree_nodes_v1")
        except BaseException:
            db.execute("ROLLBACK TO migrate_tree_nodes")
            db.execute("RELEASE migrate_tree_nodes")
            raise
        db.execute("RELEASE migrate_tree_nodes")
    db.executescript(_TREE_TABLE)


_MERGE_STATE = "CREATE TABLE IF NOT EXISTS merge_state (id TEXT PRIMARY KEY, state TEXT);"

_ENTITY_UPDATE = "UPDATE entities SET name = ?, type = ?, description = ?, chunk_ids = ?, mentions = ? WHERE id = ?"
_RELATIONSHIP_UPDATE = ("UPDATE relationships SET source = ?, target = ?, relation = ?, description = ?, keywords = ?, "
                        "weight = ?, strength = ?, chunk_ids = ? WHERE id = ?")


def _entity_row(e: Entity) -> tuple[str, str, str, str, str, int]:
    return (e.id, e.name, e.type, e.description, json.dumps(e.chunk_ids), e.mentions)


def _relationship_row(r: Relationship) -> tuple[str, str, str, str, str, str, float, float, str]:
    return (r.id, r.source, r.target, r.relation, r.description, json.dumps(r.keywords), r.weight, r.strength,
            json.dumps(r.chunk_ids))


#: the graph tables' schema, step by step (:mod:`unirag.store.schema`)
MIGRATIONS: tuple[Migration, ...] = (
    tables_migration(1, "extractions, entities, relationships, claims, chunk_links", _SCHEMA),
    Migration(2, "tree_nodes keyed by (tree, id): tree variants", _tree_variants),
    tables_migration(3, "merge_state: what extending the merged graph needs per key", _MERGE_STATE),
)


class GraphStore:
    """Reads and writes the graph tables of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db
        self._graph: MergedGraph | None = None  # what shared_graph() read; save_graph/clear_derived drop it
        ensure_schema(self.db, "graph", MIGRATIONS)

    # -- extractions -------------------------------------------------------
    def extracted_chunk_ids(self, extractor: str) -> set[str]:
        rows = self.db.execute("SELECT chunk_id FROM extractions WHERE extractor = ?", (extractor,))
        return {row[0] for row in rows}

    def save_extractions(self, extractor: str, extractions: Iterable[ChunkExtraction]) -> None:
        with self.db:
            self.db.executemany(
                self.db.dialect.replace_into("extractions", ("chunk_id", "extractor", "payload"),
                                             ("chunk_id", "extractor")),
                [(ex.chunk_id, extractor, json.dumps(ex.to_json(), ensure_ascii=False)) for ex in extractions],
            )

    def forget_chunks(self, chunk_ids: list[str]) -> None:
        """Drop every extractor's extraction of deleted chunks: what a deleted document
        said must not survive it (the merged graph is rebuilt from what remains)."""
        with self.db:
            for start in range(0, len(chunk_ids), 500):
                part = chunk_ids[start:start + 500]
                self.db.execute(f"DELETE FROM extractions WHERE chunk_id IN ({','.join('?' * len(part))})", part)

    def clear_derived(self) -> None:
        """Empty the merged graph, chunk links and trees (an emptied corpus has none)."""
        self._graph = None
        with self.db:
            for table in ("entities", "relationships", "claims", "merge_state", "chunk_links", "tree_nodes"):
                self.db.execute(f"DELETE FROM {table}")

    def load_extractions(self, extractor: str, chunk_ids: list[str]) -> list[ChunkExtraction]:
        """Extractions in ``chunk_ids`` order (chunks without one are skipped); a few chunks
        (an insert's) are looked up by key instead of scanning the extractor's rows."""
        found: dict[str, ChunkExtraction] = {}
        wanted = set(chunk_ids)
        if len(wanted) <= _LOOKUP_AT_MOST:
            ordered = list(wanted)
            for start in range(0, len(ordered), 500):
                part = ordered[start:start + 500]
                rows = self.db.execute(f"SELECT chunk_id, payload FROM extractions WHERE extractor = ? AND chunk_id IN "
                                       f"({','.join('?' * len(part))})", (extractor, *part))
                found.update((chunk_id, ChunkExtraction.from_json(json.loads(payload))) for chunk_id, payload in rows)
        else:
            rows = self.db.execute("SELECT chunk_id, payload FROM extractions WHERE extractor = ?", (extractor,))
            for chunk_id, payload in rows:
                if chunk_id in wanted:
                    found[chunk_id] = ChunkExtraction.from_json(json.loads(payload))
        return [found[cid] for cid in chunk_ids if cid in found]

    def extraction_failures(self, extractor: str) -> Counter[str]:
        """Dropped and repaired items by reason, over every chunk of ``extractor``."""
        total: Counter[str] = Counter()
        rows = self.db.execute(f"SELECT payload FROM extractions WHERE extractor = ? "
                               f"ORDER BY {self.db.dialect.insertion_order}", (extractor,))
        for (payload,) in rows:
            total.update(json.loads(payload).get("dropped", {}))
        return total

    # -- merged graph ------------------------------------------------------
    def save_graph(self, graph: MergedGraph, states: Iterable[tuple[str, str]] = ()) -> None:
        """Replace the merged graph and its merge state (``states``: (key, state); none given,
        none kept, so a graph written without them is never extended)."""
        self._graph = None
        with self.db:
            for table in ("entities", "relationships", "claims", "merge_state"):
                self.db.execute(f"DELETE FROM {table}")
            self.db.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?)",
                                [_entity_row(e) for e in graph.entities.values()])
            self.db.executemany("INSERT INTO relationships VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [_relationship_row(r) for r in graph.relationships.values()])
            self.db.executemany(
                "INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(c.id, c.subject, c.object, c.type, c.status, c.date, c.description, json.dumps(c.chunk_ids))
                 for c in graph.claims.values()],
            )
            self.db.executemany("INSERT INTO merge_state VALUES (?, ?)", list(states))

    def save_graph_changes(self, graph: MergedGraph, changed: Iterable[str], new_entities: list[str],
                           new_relationships: list[str], states: Iterable[tuple[str, str]]) -> None:
        """Write an extended graph: rows of ``changed`` keys updated in place (so every row keeps
        its place in insertion order), rows of new keys appended in ``graph`` order, and the
        touched keys' merge states; ``graph`` becomes what :meth:`shared_graph` returns."""
        self._graph = None
        fresh = set(new_entities) | set(new_relationships)
        updates = [key for key in changed if key not in fresh]
        with self.db:
            self.db.executemany(_ENTITY_UPDATE, [(*_entity_row(graph.entities[key])[1:], key)
                                                 for key in updates if key in graph.entities])
            self.db.executemany(_RELATIONSHIP_UPDATE, [(*_relationship_row(graph.relationships[key])[1:], key)
                                                       for key in updates if key in graph.relationships])
            self.db.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?)",
                                [_entity_row(graph.entities[key]) for key in new_entities])
            self.db.executemany("INSERT INTO relationships VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [_relationship_row(graph.relationships[key]) for key in new_relationships])
            self.db.executemany(self.db.dialect.replace_into("merge_state", ("id", "state"), ("id",)), list(states))
        self._graph = graph

    def load_merge_states(self, ids: list[str]) -> dict[str, list[Any]]:
        """The stored merge state of each of ``ids`` that has one."""
        found: dict[str, list[Any]] = {}
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            rows = self.db.execute(f"SELECT id, state FROM merge_state WHERE id IN ({','.join('?' * len(part))})",
                                   part)
            found.update((key, json.loads(state)) for key, state in rows)
        return found

    def shared_graph(self) -> MergedGraph:
        """The merged graph read once for a whole build: a build reads it for every vector index
        and hierarchy (nine times for ``--index all``), which cost seconds per read on a big graph.
        Only for a caller that holds the write lock (no other writer) and does not modify it."""
        if self._graph is None:
            self._graph = self.load_graph()
        return self._graph

    def forget_shared_graph(self) -> None:
        """Drop the graph :meth:`shared_graph` read (a caller changed it and did not save it)."""
        self._graph = None

    def load_graph(self) -> MergedGraph:
        """The merged graph, its rows in the order save_graph wrote them; each JSON column is
        decoded in one call (:func:`json_values`), not one per row (~250,000 on 2Wiki)."""
        graph = MergedGraph()
        order = f"ORDER BY {self.db.dialect.insertion_order}"  # the order save_graph wrote: graph rows follow it
        rows = self.db.execute(
            f"SELECT id, name, type, description, chunk_ids, mentions FROM entities {order}").fetchall()
        chunks = json_values([row[4] for row in rows])
        graph.entities = {row[0]: Entity(row[0], row[1], row[2], row[3], chunk_ids, row[5])
                          for row, chunk_ids in zip(rows, chunks)}
        rows = self.db.execute(
            "SELECT id, source, target, relation, description, keywords, weight, strength, chunk_ids FROM relationships "
            + order
        ).fetchall()
        keywords, chunks = json_values([row[5] for row in rows]), json_values([row[8] for row in rows])
        graph.relationships = {
            row[0]: Relationship(row[0], row[1], row[2], row[3], row[4], words, row[6], row[7], chunk_ids)
            for row, words, chunk_ids in zip(rows, keywords, chunks)
        }
        for row in self.db.execute(
            "SELECT id, subject, object, type, status, date, description, chunk_ids FROM claims " + order
        ):
            graph.claims[row[0]] = Claim(*row[:7], json.loads(row[7]))
        return graph

    def load_columns(self) -> GraphColumns:
        """The merged graph as :class:`GraphColumns`: the rows :meth:`load_graph` reads, in its
        order, each column fetched whole and each JSON column decoded in one call."""
        order = f"ORDER BY {self.db.dialect.insertion_order}"
        entities = self.db.execute(f"SELECT id, name, type, description, chunk_ids FROM entities {order}").fetchall()
        entity_ids, names, types, descriptions, entity_chunks = (list(column) for column in zip(*entities)) \
            if entities else ([], [], [], [], [])
        rels = self.db.execute("SELECT id, source, target, relation, description, keywords, weight, chunk_ids "
                               f"FROM relationships {order}").fetchall()
        rel_ids, sources, targets, relations, rel_descriptions, keywords, weights, rel_chunks = \
            (list(column) for column in zip(*rels)) if rels else ([], [], [], [], [], [], [], [])
        return GraphColumns(
            entity_ids=entity_ids, names=names, types=types, descriptions=descriptions,
            entity_chunks=json_values(entity_chunks), rel_ids=rel_ids, rel_sources=sources, rel_targets=targets,
            relations=relations, rel_descriptions=rel_descriptions, rel_keywords=json_values(keywords),
            rel_weights=[float(weight) for weight in weights], rel_chunks=json_values(rel_chunks),
        )

    def graph_counts(self) -> dict[str, int]:
        out = {}
        for table in ("entities", "relationships", "claims"):
            out[table] = self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        out["tree_nodes"] = self.db.execute("SELECT COUNT(*) FROM tree_nodes WHERE tree = ?",
                                            (DEFAULT_TREE,)).fetchone()[0]
        for kind, count in self.db.execute("SELECT kind, COUNT(*) FROM chunk_links GROUP BY kind"):
            out[f"chunk_links:{kind}"] = count
        return out

    def type_counts(self) -> dict[str, dict[str, int]]:
        """Nodes and edges per built graph type (survey Table 2 projections)."""
        manifest = self.workspace.manifest.entries()
        out: dict[str, dict[str, int]] = {}
        one = lambda sql: self.db.execute(sql).fetchone()[0]
        chunks = self.workspace.corpus.counts()["chunks"]
        if "graph" in manifest:
            entities, relationships = one("SELECT COUNT(*) FROM entities"), one("SELECT COUNT(*) FROM relationships")
            for kind in ("kg", "tkg", "rkg"):
                out[kind] = {"nodes": entities, "edges": relationships}
            memberships = one(f"SELECT COALESCE(SUM({self.db.dialect.json_array_length('chunk_ids')}), 0) "
                              "FROM entities")
            if "chunk_links:pg" in manifest:
                out["pg"] = {"nodes": chunks, "edges": manifest["chunk_links:pg"]["count"]}
            if "chunk_links:hybrid" in manifest:
                out["hybrid"] = {
                    "nodes": chunks + entities,
                    "edges": manifest["chunk_links:hybrid"]["count"] + memberships + relationships,
                }
        if "tree" in manifest:
            out["tree"] = {
                "nodes": one(f"SELECT COUNT(*) FROM tree_nodes WHERE tree = '{DEFAULT_TREE}'"),
                "edges": one(f"SELECT COALESCE(SUM({self.db.dialect.json_array_length('children')}), 0) "
                             f"FROM tree_nodes WHERE tree = '{DEFAULT_TREE}'"),
            }
        return out

    # -- chunk links -------------------------------------------------------
    def save_chunk_links(self, kind: str, links: Iterable[tuple[str, str, int]]) -> None:
        with self.db:
            self.db.execute("DELETE FROM chunk_links WHERE kind = ?", (kind,))
            self.db.executemany("INSERT INTO chunk_links VALUES (?, ?, ?, ?)", [(kind, a, b, n) for a, b, n in links])

    def add_chunk_links(self, kind: str, links: Iterable[tuple[str, str, int]]) -> None:
        """Add the links of chunks the stored ``kind`` links do not know yet (an extended graph's)."""
        with self.db:
            self.db.executemany("INSERT INTO chunk_links VALUES (?, ?, ?, ?)", [(kind, a, b, n) for a, b, n in links])

    def load_chunk_links(self, kind: str) -> list[tuple[str, str, int]]:
        return list(self.db.execute("SELECT a, b, shared FROM chunk_links WHERE kind = ? ORDER BY a, b", (kind,)))

    # -- tree ----------------------------------------------------------------
    def save_tree(self, nodes: Iterable[tuple[str, int, str, list[str], np.ndarray]], tree: str = DEFAULT_TREE,
                  stored: Iterable[tuple[str, int, str, list[str], np.ndarray]] | None = None) -> None:
        """Replace tree ``tree`` (``tree``, or a variant such as ``tree:kmeans``) in one transaction.

        ``stored``: the tree as :meth:`load_tree` read it before this build (an update knows it):
        then only new or changed nodes are written and gone ones deleted -- an insert of 1 % of a
        corpus changes a few hundred of thousands of nodes, and rewriting them all would push the
        whole tree through the write-ahead log."""
        now = [(nid, layer, text, children, np.asarray(vec, dtype=np.float32).tobytes())
               for nid, layer, text, children, vec in nodes]
        with self.db:
            if stored is None:
                self.db.execute("DELETE FROM tree_nodes WHERE tree = ?", (tree,))
                changed = now
            else:
                before = {nid: (layer, text, children, np.asarray(vec, dtype=np.float32).tobytes())
                          for nid, layer, text, children, vec in stored}
                kept = {node[0] for node in now}
                self.db.executemany("DELETE FROM tree_nodes WHERE tree = ? AND id = ?",
                                    [(tree, nid) for nid in before if nid not in kept])
                changed = [node for node in now if before.get(node[0]) != node[1:]]
            self.db.executemany(self.db.dialect.replace_into("tree_nodes", _TREE_COLUMNS, ("tree", "id")),
                                [(tree, nid, layer, text, json.dumps(children), vector)
                                 for nid, layer, text, children, vector in changed])

    def tree_nodes(self, tree: str, ids: list[str]) -> dict[str, tuple[int, str, list[str]]]:
        """(layer, text, children) of the nodes ``ids`` of tree ``tree``: a primary-key
        lookup of a query's few hits, without the vectors."""
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(f"SELECT id, layer, text, children FROM tree_nodes WHERE tree = ? AND id IN ({marks})",
                               [tree, *ids])
        return {row[0]: (int(row[1]), row[2], json.loads(row[3])) for row in rows}

    def load_tree(self, tree: str = DEFAULT_TREE) -> list[tuple[str, int, str, list[str], np.ndarray]]:
        rows = self.db.execute(
            "SELECT id, layer, text, children, vector FROM tree_nodes WHERE tree = ? ORDER BY layer, id", (tree,))
        return [(r[0], r[1], r[2], json.loads(r[3]), np.frombuffer(r[4], dtype=np.float32)) for r in rows]
