"""Pages of a graph for a client to draw: a k-hop neighbourhood or the best-connected nodes.

A page is ``limit`` nodes from ``offset`` and the edges among them and to the
nodes of the pages before it (so a client that loads page after page has every
edge among what it shows, each once), so no request returns a whole large graph. Without an ``entity`` the nodes come by
degree (the hubs first); with one, by hop distance from it (then degree). Every
node and edge carries a ``description`` and its source ``chunk_ids`` so a page
can open the passages (``GET /chunks/{id}``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from unirag.graph.projections import GraphView
from unirag.server.errors import ApiError


@dataclass
class GraphIndex:
    """A graph view with what paging needs: adjacency and a name lookup (built once per view)."""

    view: GraphView
    neighbours: dict[str, set[str]] = field(default_factory=dict)
    by_name: dict[str, str] = field(default_factory=dict)
    position: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, view: GraphView) -> GraphIndex:
        index = cls(view)
        for number, node in enumerate(view.nodes):
            index.position[node["id"]] = number
            index.neighbours.setdefault(node["id"], set())
            for key in ("name", "title"):
                if node.get(key):
                    index.by_name.setdefault(str(node[key]).lower(), node["id"])
        for edge in view.edges:
            index.neighbours.setdefault(edge["source"], set()).add(edge["target"])
            index.neighbours.setdefault(edge["target"], set()).add(edge["source"])
        return index

    def find(self, entity: str) -> str:
        """A node by id, or by name/title (case-insensitive); 404 when there is none."""
        if entity in self.position:
            return entity
        found = self.by_name.get(entity.strip().lower())
        if found is None:
            raise ApiError(404, f"no node '{entity}' in the {self.view.name} graph", "not_found")
        return found

    def degree(self, node_id: str) -> int:
        return len(self.neighbours.get(node_id, ()))

    def search(self, text: str, limit: int) -> list[dict[str, Any]]:
        """Nodes whose name or title contains ``text`` (case-insensitive): names starting with it
        first, then the best connected, so a search box can offer the likely entity."""
        wanted = text.strip().lower()
        found = {node_id for name, node_id in self.by_name.items() if wanted in name}
        ranked = sorted(found, key=lambda node_id: (not _label(self, node_id).lower().startswith(wanted),
                                                    -self.degree(node_id), self.position[node_id]))
        return [{"id": node_id, "label": _label(self, node_id), "kind": self.view.nodes[self.position[node_id]].get(
            "kind"), "degree": self.degree(node_id)} for node_id in ranked[:limit]]


def _label(index: GraphIndex, node_id: str) -> str:
    node = index.view.nodes[index.position[node_id]]
    return str(node.get("name") or node.get("title") or node_id)


def neighbourhood(index: GraphIndex, start: str, hops: int) -> dict[str, int]:
    """Node id -> hop distance, for every node within ``hops`` of ``start`` (breadth first)."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if distance[node] == hops:
            continue
        for other in index.neighbours.get(node, ()):
            if other not in distance:
                distance[other] = distance[node] + 1
                queue.append(other)
    return distance


def graph_page(index: GraphIndex, entity: str | None, hops: int, limit: int, offset: int) -> dict[str, Any]:
    """One page: ``nodes`` (each with ``hops`` when around an entity), the ``edges`` among them and to
    earlier pages' nodes, totals."""
    if entity is None:
        order = sorted(index.position, key=lambda node: (-index.degree(node), index.position[node]))
        distance: dict[str, int] = {}
    else:
        distance = neighbourhood(index, index.find(entity), hops)
        order = sorted(distance, key=lambda node: (distance[node], -index.degree(node), index.position[node]))
    chosen = order[offset:offset + limit]
    members, shown = set(chosen), set(order[:offset + limit])
    nodes = [_node(index.view.nodes[index.position[node]], distance.get(node)) for node in chosen]
    edges = [_edge(edge, index) for edge in index.view.edges
             if {edge["source"], edge["target"]} <= shown and (edge["source"] in members or edge["target"] in members)]
    following = offset + len(chosen)
    return {"type": index.view.name, "entity": entity, "hops": hops if entity is not None else None,
            "total_nodes": len(order), "offset": offset, "limit": limit,
            "next_offset": following if following < len(order) else None, "nodes": nodes, "edges": edges}


def _node(node: dict[str, Any], hops: int | None) -> dict[str, Any]:
    out = {**node, "hops": hops} if hops is not None else dict(node)
    out.setdefault("description", node.get("text", ""))
    out.setdefault("chunk_ids", [node["id"]] if node.get("kind") == "chunk" else [])
    return out


def _edge(edge: dict[str, Any], index: GraphIndex) -> dict[str, Any]:
    """An edge between passages (pg, hybrid) has its endpoints' chunks as sources."""
    out = dict(edge)
    out.setdefault("description", edge.get("relation", ""))
    ends = (edge["source"], edge["target"])
    out.setdefault("chunk_ids", [end for end in ends
                                 if index.view.nodes[index.position[end]].get("kind") == "chunk"])
    return out
