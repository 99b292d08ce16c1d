"""Saving a hierarchy over a stored one writes only what changed, and reads back exactly as a
whole rewrite would, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from unirag.index.community_store import CommunityStore
from unirag.index.hierarchy import Community, CommunityLink, HierarchyResult
from unirag.workspace import Workspace


def _community(cid: str, level: int, summary: str = "", rating: float | None = None) -> Community:
    return Community(id=cid, hierarchy="h", level=level, children=[f"{cid}-child"], entities=[f"{cid}-e", "é"],
                     title=cid.upper(), summary=summary or f"about {cid}", rating=rating, payload={"note": "ü"})


def _link(level: int, source: str, target: str, weight: float = 1.0) -> CommunityLink:
    return CommunityLink("h", level, source, target, weight, f"{source}->{target}", f"d{source}{target}")


def _before() -> HierarchyResult:
    communities = [_community(f"c{i}", i % 3, rating=i / 3) for i in range(12)]
    links = ([_link(0, f"a{i}", f"b{i}") for i in range(5)] + [_link(1, "x", "y", 0.5), _link(1, "y", "z")]
             + [_link(2, "p", "q")] + [_link(0, "late", "zero")])  # level 0's links not all first
    return HierarchyResult("h", "bottom_up", communities, links)


def _after() -> HierarchyResult:
    """c0 and c5 gone, c3 re-summarised, c7 moved a level, c20 and c21 new; level 0's links
    unchanged, level 1's reordered with one new, level 2's gone, level 3's new."""
    communities = [c for c in _before().communities if c.id not in {"c0", "c5", "c3", "c7"}]
    communities += [_community("c3", 0, "new summary", rating=1.0), _community("c7", 2, rating=7 / 3),
                    _community("c20", 1), _community("c21", 3)]
    links = ([_link(1, "y", "z"), _link(3, "top", "top2")] + [_link(0, f"a{i}", f"b{i}") for i in range(5)]
             + [_link(1, "x", "y", 0.5), _link(1, "new", "one")] + [_link(0, "late", "zero")])
    return HierarchyResult("h", "bottom_up", communities, links)


def _read(store: CommunityStore) -> tuple[object, ...]:
    return (store.load("h"), store.heads("h"), store.load_links("h"), store.level_counts(),
            store.load("other"), store.load_links("other"))


def _link_positions(ws: Workspace, level: int) -> list[int]:
    order = ws.db.dialect.insertion_order
    return [row[0] for row in ws.db.execute(
        f"SELECT {order} FROM community_links WHERE hierarchy = 'h' AND level = ? ORDER BY {order}", (level,))]


def _sibling(store: str, suffix: str) -> str:
    """Another workspace's store beside ``store``: its own directory on SQLite, on PostgreSQL a
    schema named after ``store``'s (the URL ends with its ``schema=``)."""
    return store if store == "sqlite" else f"{store}_{suffix}"


def _community_positions(ws: Workspace) -> dict[str, int]:
    order = ws.db.dialect.insertion_order
    return dict(ws.db.execute(f"SELECT id, {order} FROM communities WHERE hierarchy = 'h'").fetchall())


def _other() -> HierarchyResult:
    return HierarchyResult("other", "bottom_up", [_community("o1", 0)], [_link(0, "o", "p")])


def test_a_save_over_a_stored_hierarchy_reads_back_as_a_whole_rewrite(tmp_path: Path, any_store: str) -> None:
    ws = Workspace.init(tmp_path / "ws", store=any_store)
    store = CommunityStore(ws)
    store.save(_other())
    store.save(_before())
    level0, unchanged = _link_positions(ws, 0), _community_positions(ws)
    store.save(_after())
    assert _link_positions(ws, 0) == level0  # an unchanged level is not written again
    assert {item: at for item, at in _community_positions(ws).items() if item in {"c1", "c2", "c11"}} == {
        item: unchanged[item] for item in ("c1", "c2", "c11")}  # nor an unchanged community
    whole = Workspace.init(tmp_path / "whole", store=_sibling(any_store, "whole"))
    whole_store = CommunityStore(whole)
    whole_store.save(_other())
    whole_store.save(_after())
    assert _read(store) == _read(whole_store)
    assert [(link.level, link.source) for link in store.load_links("h")] == [
        (0, "a0"), (0, "a1"), (0, "a2"), (0, "a3"), (0, "a4"), (0, "late"), (1, "y"), (1, "x"), (1, "new"),
        (3, "top")]
    store.save(_before())  # and back
    assert _read(store)[:3] == _read_saved(tmp_path / "again", any_store, _before())[:3]
    ws.close()
    whole.close()


def _read_saved(root: Path, any_store: str, result: HierarchyResult) -> tuple[object, ...]:
    ws = Workspace.init(root, store=_sibling(any_store, root.name))
    store = CommunityStore(ws)
    store.save(result)
    out = _read(store)[:4]
    ws.close()
    return out


def test_links_without_recorded_digests_are_compared_with_the_stored_links(tmp_path: Path, any_store: str) -> None:
    """A workspace from before the level digests: the stored links are read and digested once."""
    ws = Workspace.init(tmp_path / "ws", store=any_store)
    store = CommunityStore(ws)
    store.save(_before())
    level0 = _link_positions(ws, 0)
    with ws.db:
        ws.db.execute("DELETE FROM community_link_levels")
    store.save(_after())
    assert _link_positions(ws, 0) == level0
    assert store.load_links("h") == _read_saved(tmp_path / "whole", any_store, _after())[2]
    assert len(ws.db.execute("SELECT * FROM community_link_levels").fetchall()) == 3  # recorded again
    ws.close()


def test_a_cleared_store_saves_every_level_again(tmp_path: Path, any_store: str) -> None:
    ws = Workspace.init(tmp_path / "ws", store=any_store)
    store = CommunityStore(ws)
    store.save(_before())
    store.clear()
    assert store.load("h") == [] and store.load_links("h") == []
    store.save(_before())
    assert len(store.load_links("h")) == len(_before().links) and len(store.load("h")) == 12
    ws.close()
