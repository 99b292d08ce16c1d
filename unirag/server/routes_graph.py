"""``GET /graph/{type}`` (pages of a graph) and ``GET /communities/{hierarchy}`` (pages of a hierarchy).

Both page with ``limit``/``offset`` (capped by ``ServerSettings.max_page``), so a
client never receives a whole large graph unless it walks every page on purpose.
Graph types and hierarchies are names from fixed lists; nothing reaches a path.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from unirag.server.deps import server_state
from unirag.server.errors import ApiError
from unirag.server.graph_pages import graph_page
from unirag.server.state import ServerState

State = Annotated[ServerState, Depends(server_state)]
Limit = Annotated[int, Query(ge=1, description="items per page (at most the server's max_page)")]
Offset = Annotated[int, Query(ge=0)]

router = APIRouter(tags=["graph"])


@router.get("/graph/{graph_type}", summary="Nodes and edges of a graph: around an entity (k hops) or the hubs")
async def graph(graph_type: str, state: State, entity: str | None = None,
                hops: Annotated[int, Query(ge=0)] = 1, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    if hops > state.settings.max_hops:
        raise ApiError(422, f"hops: at most {state.settings.max_hops}")
    index = await asyncio.to_thread(state.graph, graph_type)
    return graph_page(index, entity, hops, min(limit, state.settings.max_page), offset)


@router.get("/communities/{hierarchy}", summary="Communities of a hierarchy, level by level, paged")
async def communities(hierarchy: str, state: State, level: Annotated[int | None, Query(ge=0)] = None,
                      limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return await asyncio.to_thread(community_page, state, hierarchy, level, min(limit, state.settings.max_page),
                                   offset)


def community_page(state: ServerState, hierarchy: str, level: int | None, limit: int, offset: int) -> dict[str, Any]:
    """One page of ``hierarchy``'s communities (by level, then id): title, summary, members, parent/children."""
    from unirag.index.community_store import CommunityStore

    workspace = state.rag.workspace
    built = sorted(name.split(":", 1)[1] for name in workspace.manifest() if name.startswith("communities:"))
    if hierarchy not in built:
        known = ", ".join(built) or "none built: run 'unirag index -w WS --index graphrag' (or archrag, ...)"
        raise ApiError(404, f"no community hierarchy '{hierarchy}' (built: {known})", "not_found")
    rows = [c for c in CommunityStore(workspace).load(hierarchy) if level is None or c.level == level]
    page = rows[offset:offset + limit]
    following = offset + len(page)
    return {
        "hierarchy": hierarchy, "level": level, "levels": sorted({c.level for c in rows}) if level is None else [level],
        "total": len(rows), "offset": offset, "limit": limit, "next_offset": following if following < len(rows) else None,
        "communities": [
            {"id": c.id, "level": c.level, "title": c.title, "summary": c.summary, "members": len(c.children),
             "entities": len(c.entities), "parent": c.parent, "children": c.children, "rating": c.rating,
             "chunk_ids": c.chunks}
            for c in page
        ],
    }
