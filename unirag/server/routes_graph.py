"""``GET /graph/{type}`` (pages of a graph, name search) and ``GET /communities/{hierarchy}`` (pages, one community).

Both page with ``limit``/``offset`` (capped by ``ServerSettings.max_page``), so a
client never receives a whole large graph unless it walks every page on purpose.
Graph types and hierarchies are names from fixed lists; nothing reaches a path.
Every answer carries ``stale`` and ``stale_artifacts`` (:meth:`ServerState.staleness`):
what it shows may be behind the corpus (a delete or an upload not yet applied to it).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query

from unirag.server.deps import server_state
from unirag.server.errors import ApiError
from unirag.server.graph_pages import graph_page
from unirag.server.state import ServerState, graph_artifacts

if TYPE_CHECKING:
    from unirag.hierarchy.communities import Community

State = Annotated[ServerState, Depends(server_state)]
Limit = Annotated[int, Query(ge=1, description="items per page (at most the server's max_page)")]
Offset = Annotated[int, Query(ge=0)]

router = APIRouter(tags=["graph"])


@router.get("/graph/{graph_type}/search", summary="Nodes whose name contains the text (for a search box)")
async def graph_search(graph_type: str, state: State, q: Annotated[str, Query(min_length=1, max_length=200)],
                       limit: Annotated[int, Query(ge=1, le=100)] = 20) -> dict[str, Any]:
    index = await asyncio.to_thread(state.graph, graph_type)
    stale = await asyncio.to_thread(state.staleness, graph_artifacts(graph_type))
    return {"type": graph_type, "q": q, "nodes": index.search(q, limit), **stale}


@router.get("/graph/{graph_type}", summary="Nodes and edges of a graph: around an entity (k hops) or the hubs")
async def graph(graph_type: str, state: State, entity: str | None = None,
                hops: Annotated[int, Query(ge=0)] = 1, limit: Limit = 100, offset: Offset = 0,
                hierarchy: Annotated[str | None, Query(description="give each node its community here")] = None,
                level: Annotated[int | None, Query(ge=0, description="the hierarchy's level (default: its first)")]
                = None) -> dict[str, Any]:
    if hops > state.settings.max_hops:
        raise ApiError(422, f"hops: at most {state.settings.max_hops}")
    index = await asyncio.to_thread(state.graph, graph_type)
    page = graph_page(index, entity, hops, min(limit, state.settings.max_page), offset)
    shown = graph_artifacts(graph_type)
    if hierarchy is not None:
        page = await asyncio.to_thread(with_communities, state, page, hierarchy, level)
        shown.append(f"communities:{hierarchy}")
    return {**page, **await asyncio.to_thread(state.staleness, shown)}


@router.get("/communities/{hierarchy}", summary="Communities of a hierarchy, level by level, paged")
async def communities(hierarchy: str, state: State, level: Annotated[int | None, Query(ge=0)] = None,
                      limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return await asyncio.to_thread(community_page, state, hierarchy, level, min(limit, state.settings.max_page),
                                   offset)


def community_page(state: ServerState, hierarchy: str, level: int | None, limit: int, offset: int) -> dict[str, Any]:
    """One page of ``hierarchy``'s communities (by level, then id): title, summary, members, parent/children."""
    rows = [c for c in built_communities(state, hierarchy) if level is None or c.level == level]
    page = rows[offset:offset + limit]
    following = offset + len(page)
    return {
        "hierarchy": hierarchy, "level": level, "levels": sorted({c.level for c in rows}) if level is None else [level],
        "total": len(rows), "offset": offset, "limit": limit, "next_offset": following if following < len(rows) else None,
        "communities": [community_json(c) for c in page], **state.staleness([f"communities:{hierarchy}"]),
    }


@router.get("/communities/{hierarchy}/{community_id}", summary="One community: its report/summary, level, members")
async def community(hierarchy: str, community_id: str, state: State) -> dict[str, Any]:
    rows = await asyncio.to_thread(built_communities, state, hierarchy)
    found = next((c for c in rows if c.id == community_id), None)
    if found is None:
        raise ApiError(404, f"no community '{community_id}' in the {hierarchy} hierarchy", "not_found")
    stale = await asyncio.to_thread(state.staleness, [f"communities:{hierarchy}"])
    return {**community_json(found), "hierarchy": hierarchy, "entity_ids": found.entities, **stale}


def with_communities(state: ServerState, page: dict[str, Any], hierarchy: str, level: int | None) -> dict[str, Any]:
    """``page`` with each node's ``community`` (id, or None) at ``level`` of ``hierarchy`` (default: its
    first level), so a client colours the nodes it shows without loading the whole hierarchy."""
    rows = built_communities(state, hierarchy)
    levels = sorted({c.level for c in rows})
    chosen = levels[0] if level is None and levels else level
    member_of = {entity: c.id for c in rows if c.level == chosen for entity in c.entities}
    nodes = [{**node, "community": member_of.get(node["id"])} for node in page["nodes"]]
    return {**page, "nodes": nodes, "hierarchy": hierarchy, "level": chosen, "levels": levels}


def built_communities(state: ServerState, hierarchy: str) -> list[Community]:
    """Every community of a built hierarchy; 404 naming the built ones (the name never reaches a path)."""
    built = state.rag.hierarchies()
    if hierarchy not in built:
        known = ", ".join(built) or "none built: run 'unirag index -w WS --index graphrag' (or archrag, ...)"
        raise ApiError(404, f"no community hierarchy '{hierarchy}' (built: {known})", "not_found")
    return state.rag.communities(hierarchy)


def community_json(c: Community) -> dict[str, Any]:
    return {"id": c.id, "level": c.level, "title": c.title, "summary": c.summary, "members": len(c.children),
            "entities": len(c.entities), "parent": c.parent, "children": c.children, "rating": c.rating,
            "chunk_ids": c.chunks}
