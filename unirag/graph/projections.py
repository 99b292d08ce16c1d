"""Graph types as projections of one merged extraction (survey Table 2).

| type   | nodes                      | edges                                            |
|--------|----------------------------|--------------------------------------------------|
| kg     | entity name                | relation name, weight                            |
| tkg    | + type, description        | + description, weight                            |
| rkg    | as tkg                     | + keywords                                       |
| pg     | chunks                     | chunks sharing >= t entities (survey §4 ①)       |
| hybrid | chunks + entities          | chunk-chunk (> l shared), chunk-entity, entity-entity (HyGRAG §3.1) |
| tree   | chunks + summaries         | parent -> child (RAPTOR, survey §4 ②)            |

A :class:`GraphView` is plain tables (nodes, edges); ``to_networkx``,
``to_igraph`` and ``adjacency`` give algorithm views.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from unirag.graph.merge import MergedGraph

GRAPH_TYPES = ("kg", "tkg", "rkg", "pg", "tree", "hybrid")


@dataclass
class GraphView:
    name: str
    nodes: list[dict[str, Any]] = field(default_factory=list)  # each has "id"
    edges: list[dict[str, Any]] = field(default_factory=list)  # each has "source", "target"

    def node_index(self) -> dict[str, int]:
        return {node["id"]: i for i, node in enumerate(self.nodes)}

    def adjacency(self, weight: str = "weight") -> Any:
        """Symmetric scipy.sparse CSR adjacency in ``nodes`` order."""
        from scipy import sparse

        index = self.node_index()
        rows = [index[e["source"]] for e in self.edges]
        cols = [index[e["target"]] for e in self.edges]
        data = [float(e.get(weight, 1.0)) for e in self.edges]
        n = len(self.nodes)
        matrix = sparse.coo_matrix((data, (rows, cols)), shape=(n, n))
        return (matrix + matrix.T).tocsr()

    def to_igraph(self) -> Any:
        import igraph

        index = self.node_index()
        graph = igraph.Graph(n=len(self.nodes), edges=[(index[e["source"]], index[e["target"]]) for e in self.edges])
        graph.vs["name"] = [node["id"] for node in self.nodes]
        if self.edges:
            graph.es["weight"] = [float(e.get("weight", 1.0)) for e in self.edges]
        return graph

    def to_networkx(self) -> Any:
        """Scalar attributes only (lists become JSON strings) so GraphML can hold them."""
        import networkx as nx

        def scalar(value: Any) -> Any:
            return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else value

        graph = nx.Graph(name=self.name)
        for node in self.nodes:
            graph.add_node(node["id"], **{k: scalar(v) for k, v in node.items() if k != "id"})
        for edge in self.edges:
            attrs = {k: scalar(v) for k, v in edge.items() if k not in ("source", "target")}
            graph.add_edge(edge["source"], edge["target"], **attrs)
        return graph


def incidence(graph: MergedGraph, chunk_ids: list[str]) -> Any:
    """Chunk x entity 0/1 matrix (CSR), rows in ``chunk_ids`` order, columns in entity order."""
    from scipy import sparse

    row_of = {cid: i for i, cid in enumerate(chunk_ids)}
    rows, cols = [], []
    for col, entity in enumerate(graph.entities.values()):
        for cid in entity.chunk_ids:
            if cid in row_of:
                rows.append(row_of[cid])
                cols.append(col)
    return sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(chunk_ids), len(graph.entities))
    )


def shared_entity_links(graph: MergedGraph, chunk_ids: list[str], minimum: int) -> list[tuple[str, str, int]]:
    """Pairs of chunks sharing at least ``minimum`` entities: upper triangle of M·Mᵀ (sparse)."""
    from scipy import sparse

    m = incidence(graph, chunk_ids)
    shared = sparse.triu(m @ m.T, k=1).tocoo()
    keep = shared.data >= minimum
    return [
        (chunk_ids[i], chunk_ids[j], int(n))
        for i, j, n in zip(shared.row[keep], shared.col[keep], shared.data[keep], strict=True)
    ]


def new_chunk_links(graph: MergedGraph, chunk_ids: list[str], added: list[str], minimum: int
                    ) -> list[tuple[str, str, int]]:
    """The pairs of :func:`shared_entity_links` that hold a chunk of ``added``, without the
    whole product: only the entities of those chunks are counted. Pairs come as there
    (earlier chunk first), in ``chunk_ids`` order of their first chunk, then of the second."""
    position = {cid: i for i, cid in enumerate(chunk_ids)}
    new = set(added)
    shared: dict[tuple[int, int], int] = {}
    for entity in graph.entities.values():
        if new.isdisjoint(entity.chunk_ids):
            continue
        rows = sorted(position[cid] for cid in entity.chunk_ids if cid in position)
        fresh = [row for row in rows if chunk_ids[row] in new]
        for j in fresh:
            for i in rows:
                if i < j or (i > j and chunk_ids[i] not in new):
                    pair = (i, j) if i < j else (j, i)
                    shared[pair] = shared.get(pair, 0) + 1
    return [(chunk_ids[i], chunk_ids[j], n) for (i, j), n in sorted(shared.items()) if n >= minimum]


def _entity_nodes(graph: MergedGraph, textual: bool) -> list[dict[str, Any]]:
    nodes = []
    for e in graph.entities.values():
        node: dict[str, Any] = {"id": e.id, "kind": "entity", "name": e.name, "chunk_ids": e.chunk_ids}
        if textual:
            node.update(type=e.type, description=e.description)
        nodes.append(node)
    return nodes


def project(
    kind: str,
    graph: MergedGraph,
    chunks: dict[str, str] | None = None,
    chunk_links: list[tuple[str, str, int]] | None = None,
    tree: list[tuple[str, int, str, list[str], Any]] | None = None,
) -> GraphView:
    """The ``kind`` view. ``chunks`` maps chunk id -> title; links/tree come from the store."""
    if kind not in GRAPH_TYPES:
        raise ValueError(f"unknown graph type {kind!r} (known: {', '.join(GRAPH_TYPES)})")
    view = GraphView(kind)
    if kind in ("kg", "tkg", "rkg"):
        view.nodes = _entity_nodes(graph, textual=kind != "kg")
        for r in graph.relationships.values():
            edge: dict[str, Any] = {"source": r.source, "target": r.target, "weight": r.weight, "chunk_ids": r.chunk_ids}
            if kind == "kg":
                edge["relation"] = r.relation
            else:
                edge["description"] = r.description
                edge["strength"] = r.strength
            if kind == "rkg":
                edge["keywords"] = r.keywords
            view.edges.append(edge)
    elif kind == "pg":
        view.nodes = [{"id": cid, "kind": "chunk", "title": title} for cid, title in (chunks or {}).items()]
        view.edges = [{"source": a, "target": b, "weight": n, "shared": n} for a, b, n in chunk_links or []]
    elif kind == "hybrid":
        view.nodes = [{"id": cid, "kind": "chunk", "title": title} for cid, title in (chunks or {}).items()]
        view.nodes += _entity_nodes(graph, textual=True)
        view.edges = [
            {"source": a, "target": b, "weight": n, "kind": "chunk-chunk", "shared": n} for a, b, n in chunk_links or []
        ]
        for e in graph.entities.values():
            view.edges += [
                {"source": cid, "target": e.id, "weight": 1.0, "kind": "chunk-entity"}
                for cid in e.chunk_ids
                if chunks is None or cid in chunks
            ]
        view.edges += [
            {"source": r.source, "target": r.target, "weight": r.weight, "kind": "entity-entity",
             "description": r.description}
            for r in graph.relationships.values()
        ]
    else:  # tree
        for node_id, layer, text, children, _ in tree or []:
            view.nodes.append({"id": node_id, "kind": "tree", "layer": layer, "text": text, "children": children})
            view.edges += [{"source": node_id, "target": child, "weight": 1.0} for child in children]
    return view
