"""The RAPTOR tree's table: a save that knows the stored tree writes only new or changed nodes
and leaves exactly what a whole rewrite leaves (other trees untouched)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unirag.graph.graph_store import GraphStore
from unirag.workspace import Workspace

Node = tuple[str, int, str, list[str], np.ndarray]


def _node(key: str, layer: int = 0, text: str = "t", children: list[str] | None = None, seed: int = 0) -> Node:
    return key, layer, text, children or [], np.random.default_rng(seed).standard_normal(4).astype(np.float32)


def _rows(ws: Workspace) -> list[tuple[object, ...]]:
    return ws.db.execute("SELECT tree, id, layer, text, children, vector FROM tree_nodes ORDER BY tree, id").fetchall()


def _same(a: list[Node], b: list[Node]) -> bool:
    return [(n[0], n[1], n[2], n[3], n[4].tobytes()) for n in a] == [(n[0], n[1], n[2], n[3], n[4].tobytes()) for n in b]


def test_a_tree_save_that_knows_the_stored_nodes_leaves_what_a_whole_rewrite_leaves(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    store = GraphStore(ws)
    first = [_node("a"), _node("b", seed=1), _node("c", seed=2), _node("top", 1, "sum", ["a", "b", "c"], 3)]
    store.save_tree(first)
    store.save_tree([_node("k", seed=9)], tree="tree:kmeans")
    stored = store.load_tree()
    now = [_node("a"), _node("b", text="edited", seed=1), _node("c", seed=5), _node("d", seed=6),
           _node("top", 1, "sum", ["a", "b", "d"], 3)]  # c's vector moved, b's text changed, d new
    written: list[int] = []
    ws.db.set_trace_callback(lambda sql: written.append(1) if sql.startswith("INSERT") else None)
    store.save_tree(now, stored=stored)
    ws.db.set_trace_callback(None)
    assert len(written) == 4  # b, c, d and top; a is left as it was
    whole = Workspace.init(tmp_path / "whole")
    GraphStore(whole).save_tree([_node("k", seed=9)], tree="tree:kmeans")
    GraphStore(whole).save_tree(now)
    assert sorted(_rows(ws)) == sorted(_rows(whole))
    assert _same(store.load_tree(), sorted(now, key=lambda n: (n[1], n[0])))
    assert _same(store.load_tree("tree:kmeans"), [_node("k", seed=9)])
