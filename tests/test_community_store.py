"""The community tables: a save that knows what was stored writes only what changed and
leaves exactly what a whole rewrite leaves; links come back level by level in their order."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.communities import Community, CommunityLink, HierarchyResult
from unirag.workspace import Workspace


def _community(key: str, level: int = 0, children: list[str] | None = None, **fields: object) -> Community:
    return Community(id=key, hierarchy="h", level=level, children=children or [], entities=[f"e-{key}"],
                     title=key.upper(), summary="s", **fields)  # type: ignore[arg-type]


def _result(communities: list[Community], links: list[CommunityLink] | None = None) -> HierarchyResult:
    return HierarchyResult("h", "bottom_up", communities, links or [])


def _rows(ws: Workspace) -> list[tuple[object, ...]]:
    return ws.db.execute("SELECT * FROM communities ORDER BY hierarchy, id").fetchall()


def test_a_save_that_knows_the_stored_rows_leaves_what_a_whole_rewrite_leaves(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    store = CommunityStore(ws)
    store.save(_result([_community("a"), _community("b"), _community("c", payload={"size": 2}),
                        _community("top", level=1, children=["a", "b"])]))
    other = HierarchyResult("other", "bottom_up", [replace(_community("a"), hierarchy="other")])
    store.save(other)
    stored = store.load("h")
    by_id = {c.id: c for c in stored}
    in_place = by_id["c"]
    in_place.payload["size"] = 3  # a stored object changed in place and handed back: still written
    now = [by_id["a"], replace(by_id["b"], summary="new"), in_place, _community("d"),
           replace(by_id["top"], children=["a", "b", "d"])]
    store.save(_result(now), stored=stored)
    whole = Workspace.init(tmp_path / "whole")
    CommunityStore(whole).save(_result(now))
    CommunityStore(whole).save(other)
    assert _rows(ws) == _rows(whole)
    assert [c.id for c in store.load("h")] == ["a", "b", "c", "d", "top"]
    assert store.load("other") == other.communities


def test_links_come_back_level_by_level_in_the_order_they_were_saved(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    links = [CommunityLink("h", 2, "x", "y", 1.5), CommunityLink("h", 1, "b", "a", 2.0, "b and a", "d1"),
             CommunityLink("h", 1, "a", "c", 0.25)]
    store = CommunityStore(ws)
    store.save(_result([_community("a")], links))
    assert store.load_links("h") == [links[1], links[2], links[0]]
    store.save(_result([_community("a")], links[:1]))
    assert store.load_links("h") == links[:1]
    assert store.load_links("none") == []


def test_a_hierarchy_is_read_by_level_through_an_index_not_a_sort(tmp_path: Path) -> None:
    """load() and heads() order a hierarchy by level and id; without the index SQLite sorted
    every hierarchy in a temp file on each read."""
    ws = Workspace.init(tmp_path / "ws")
    CommunityStore(ws).save(_result([_community("a")]))
    plan = ws.db.execute("EXPLAIN QUERY PLAN SELECT id FROM communities WHERE hierarchy = ? ORDER BY level, id",
                         ("h",)).fetchall()
    assert "communities_by_level" in str(plan) and "TEMP B-TREE" not in str(plan)
