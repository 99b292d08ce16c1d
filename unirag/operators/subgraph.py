"""Subgraph operators (survey §6.1, subgraph type).

* ``subgraph.khop_path`` (DALK): k-hop paths between the candidate entities.
* ``subgraph.steiner`` (G-retriever): a prize-collecting Steiner tree over the
  candidate entities and relationships.
* ``subgraph.agent_path`` (DALK): the LLM keeps the paths relevant to the question.

All work on the seeds' k-hop neighbourhood (sparse mat-vecs on the
adjacency), never on the whole graph in Python.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

from unirag.errors import MethodError
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.spec import Count, CountOrZero, OperatorSpec
from unirag.text.replies import first_list, first_object

if TYPE_CHECKING:
    from unirag.operators.graph_index import GraphIndex

# -- shared helpers --------------------------------------------------------------


def neighbourhood(graph: GraphIndex, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Sorted rows within ``hops`` hops of any seed (the seeds included), by
    repeated sparse frontier expansion (column indices of the frontier's rows)."""
    reached = np.zeros(graph.n_entities, dtype=bool)
    reached[seeds] = True
    frontier = np.unique(np.asarray(seeds, dtype=np.int64))
    for _ in range(max(hops, 0)):
        step = np.unique(graph.adjacency[frontier].indices)
        frontier = step[~reached[step]]
        if not len(frontier):
            break
        reached[frontier] = True
    return np.flatnonzero(reached)


def relation_between(graph: GraphIndex, a: int, b: int) -> int | None:
    """The relationship row linking entity rows ``a`` and ``b`` (highest weight, then id)."""
    shared = np.intersect1d(graph.entity_rel[a].indices, graph.entity_rel[b].indices)
    if not len(shared):
        return None
    return min(shared.tolist(), key=lambda r: (-graph.rel_weight[r], graph.rel_ids[r]))


def path_text(graph: GraphIndex, rows: list[int]) -> tuple[str, list[int]]:
    """``A -[relation]-> B <-[relation]- C`` (arrows follow each relationship's
    direction) and the relationship rows along the path."""
    parts = [graph.names[rows[0]]]
    rels: list[int] = []
    for a, b in itertools.pairwise(rows):
        rel = relation_between(graph, a, b)
        relation = (graph.rel_relation[rel] if rel is not None else "") or "related to"
        forward = rel is None or int(graph.rel_src[rel]) == a
        parts.append(f"-[{relation}]-> {graph.names[b]}" if forward else f"<-[{relation}]- {graph.names[b]}")
        if rel is not None:
            rels.append(rel)
    return " ".join(parts), rels


def _chunks_of(graph: GraphIndex, rel_rows: list[int], limit: int = 50) -> list[str]:
    seen: dict[str, None] = {}
    for rel in rel_rows:
        for chunk in graph.rel_chunks[rel].indices.tolist():
            seen.setdefault(graph.chunk_ids[chunk], None)
    return list(seen)[:limit]


def path_items(state: QueryState, paths: list[list[str]], scores: list[float], operator: str) -> list[ContextItem]:
    """Paths (entity ids) as ``path`` items; provenance = entities, relationships, chunks."""
    graph = state.resources.graph()
    items = []
    for ids, score in zip(paths, scores, strict=True):
        rows = graph.rows_of(ids).tolist()
        if len(rows) != len(ids) or not rows:
            continue
        text, rels = path_text(graph, rows)
        items.append(ContextItem(
            "path", "path:" + " -> ".join(ids), text, score,
            f"{graph.names[rows[0]]} / {graph.names[rows[-1]]}",
            {"entities": list(ids), "relationships": [graph.rel_ids[r] for r in rels],
             "chunk_ids": _chunks_of(graph, rels)},
            operator,
        ))
    return items


# -- k-hop paths (DALK) -------------------------------------------------------------


def _contains(longer: list[int], shorter: list[int]) -> bool:
    """Whether ``shorter`` (or its reverse) is a contiguous run of ``longer``."""
    n = len(shorter)
    if n > len(longer):
        return False
    runs = {tuple(longer[i : i + n]) for i in range(len(longer) - n + 1)}
    return tuple(shorter) in runs or tuple(reversed(shorter)) in runs


def merge_paths(paths: list[list[int]]) -> list[list[int]]:
    """Drop every path that another one extends (A→B→C inside A→B→C→D), keeping
    first-found order; of two equal paths the first stays."""
    kept: list[list[int]] = []
    for i, path in enumerate(paths):
        covered = any(
            _contains(other, path) and (len(other) > len(path) or (len(other) == len(path) and j < i))
            for j, other in enumerate(paths) if j != i
        )
        if not covered:
            kept.append(path)
    return kept


def khop_paths(graph: GraphIndex, seeds: list[int], k: int) -> list[list[int]]:
    """DALK's path exploration (survey §6.1 subgraph ① KhopPath) over entity rows.

    Take the first remaining seed as a start; find shortest paths (at most
    ``k`` hops, BFS) from it to every remaining seed it reaches, nearest first
    (ties by seed order); each path's entities leave the seed set. Repeat
    until no seed remains, then merge paths that extend one another.
    """
    from scipy.sparse.csgraph import dijkstra

    seeds = list(dict.fromkeys(seeds))
    if len(seeds) < 2 or k < 1:
        return []
    nodes = neighbourhood(graph, np.array(seeds, dtype=np.int64), k)
    local = {int(row): i for i, row in enumerate(nodes.tolist())}
    sub = graph.adjacency[nodes][:, nodes]
    remaining = list(seeds)
    found: list[list[int]] = []
    while remaining:
        start = remaining.pop(0)
        dist, pred = dijkstra(sub, directed=False, unweighted=True, indices=local[start], limit=k,
                              return_predecessors=True)
        order = {seed: position for position, seed in enumerate(remaining)}
        targets = sorted((s for s in remaining if np.isfinite(dist[local[s]])),
                         key=lambda s: (dist[local[s]], order[s]))
        covered: set[int] = set()
        for target in targets:  # a path holds only seeds nearer than its end: none is skipped
            path = [local[target]]
            while path[-1] != local[start]:
                path.append(int(pred[path[-1]]))
            rows = [int(nodes[i]) for i in reversed(path)]
            found.append(rows)
            covered.update(rows)
        remaining = [s for s in remaining if s not in covered]
    return merge_paths(found)


def subgraph_khop_path(state: QueryState, k: Count = 2) -> list[ContextItem]:
    """k-hop paths between the candidate entities (DALK; survey §6.1 subgraph ① KhopPath).

    Reads ``state.entities`` (seeds, best first; e.g. from ``node.link``),
    writes ``state.paths`` (entity ids along each path) and returns ``path``
    items with text ``A -[relation]-> B -[relation]-> C``, scored by the sum
    of the candidate scores of the entities on them, best first. Paths are
    found by BFS on the sparse adjacency restricted to the seeds' k-hop
    neighbourhood; seeds that reach no other seed within ``k`` hops give no path.
    """
    if len(state.entities) < 2:
        state.paths = []
        return []
    graph = state.resources.graph()
    rows = [graph.entity_row[e] for e in state.entities if e in graph.entity_row]
    paths = [[graph.entity_ids[r] for r in path] for path in khop_paths(graph, rows, k)]
    scores = [float(sum(state.entities.get(e, 0.0) for e in path)) for path in paths]
    order = sorted(range(len(paths)), key=lambda i: (-scores[i], i))
    state.paths = [paths[i] for i in order]
    return path_items(state, state.paths, [scores[i] for i in order], "subgraph.khop_path")


# -- prize-collecting Steiner tree (G-retriever) -----------------------------------------


def _prizes(scored: dict[str, float], row_of: dict[str, int], mode: str) -> dict[int, float]:
    """G-retriever's rank prizes (the best of n candidates gets n, the last 1) or raw scores."""
    known = [(row_of[key], float(score)) for key, score in scored.items() if key in row_of]
    if mode == "rank":
        return {row: float(len(known) - i) for i, (row, _) in enumerate(known)}
    if mode == "score":
        return {row: max(score, 0.0) for row, score in known}
    raise MethodError(f"subgraph.steiner: 'prizes' must be 'rank' or 'score', not {mode!r}")


def prune_tree(tree: Any, prize: dict[int, float]) -> tuple[float, list[int]]:
    """The most valuable connected part of a tree (prizes minus edge ``weight``s).

    Exact dynamic programme (pcst_fast's "strong" pruning): rooted anywhere,
    ``down[v] = prize[v] + sum(max(0, down[c] - w(v, c)))`` over children;
    the best subtree hangs from the node with the largest ``down``. Returns
    (value, nodes).
    """
    import networkx as nx

    root = min(tree.nodes)
    order = list(nx.dfs_preorder_nodes(tree, root))
    parent = {root: None} | {child: node for node, child in nx.dfs_edges(tree, root)}
    down = {v: prize.get(v, 0.0) for v in order}
    keep: dict[int, list[int]] = {v: [] for v in order}
    for v in reversed(order):
        p = parent[v]
        if p is not None:
            gain = down[v] - tree[p][v]["weight"]
            if gain > 0:
                down[p] += gain
                keep[p].append(v)
    best = max(order, key=lambda v: down[v])  # first in preorder on ties
    chosen, stack = [], [best]
    while stack:
        v = stack.pop()
        chosen.append(v)
        stack.extend(keep[v])
    return down[best], sorted(chosen)


def steiner_trees(
    graph: GraphIndex, node_prize: dict[int, float], rel_prize: dict[int, float], hops: int, edge_cost: float,
    trees: int,
) -> list[tuple[float, list[int], list[int]]]:
    """Prize-collecting Steiner trees: [(value, entity rows, relationship rows)], best first.

    G-retriever's construction on the seeds' ``hops``-hop neighbourhood: an
    edge costs ``edge_cost / weight`` (weight = supporting mentions); an edge
    prize up to its cost lowers the cost, a larger one becomes a virtual node
    in the middle of the edge with the excess as its prize. Each connected
    component gets a Steiner tree over its prized nodes (networkx
    ``approximation.steiner_tree``, Mehlhorn), then the exact pruning of
    :func:`prune_tree`; the ``trees`` best components are returned
    (G-retriever: one).
    """
    import networkx as nx
    from networkx.algorithms.approximation import steiner_tree

    n = graph.n_entities
    seeds = set(node_prize)
    for rel in rel_prize:
        seeds.update((int(graph.rel_src[rel]), int(graph.rel_dst[rel])))
    nodes = neighbourhood(graph, np.array(sorted(seeds), dtype=np.int64), hops)
    inside = np.zeros(n, dtype=bool)
    inside[nodes] = True
    rels = np.unique(graph.entity_rel[nodes].indices)
    rels = rels[inside[graph.rel_src[rels]] & inside[graph.rel_dst[rels]]]
    weights = graph.rel_weight[rels]
    weights = np.where(np.isfinite(weights) & (weights > 0), weights, 1.0)
    costs = edge_cost / weights

    g = nx.Graph()
    g.add_nodes_from(nodes.tolist())
    prize = {row: p for row, p in node_prize.items() if p > 0}
    edge_rel: dict[tuple[int, int], int] = {}
    virtual_rel: dict[int, int] = {}
    for rel, cost in zip(rels.tolist(), costs.tolist(), strict=True):
        a, b = sorted((int(graph.rel_src[rel]), int(graph.rel_dst[rel])))
        gain = rel_prize.get(rel, 0.0)
        if gain > cost:  # worth more than it costs: a prized virtual node on the edge
            virtual = n + rel
            virtual_rel[virtual] = rel
            prize[virtual] = gain - cost
            g.add_edge(a, virtual, weight=0.0)
            g.add_edge(virtual, b, weight=0.0)
        elif (a, b) not in edge_rel or cost - gain < g[a][b]["weight"]:
            edge_rel[(a, b)] = rel
            g.add_edge(a, b, weight=cost - gain)

    found = []
    for component in nx.connected_components(g):
        terminals = sorted(v for v in component if v in prize)
        if not terminals:
            continue
        sub = g.subgraph(sorted(component)).copy()  # a copy: networkx walks views far slower
        tree = nx.Graph()
        tree.add_node(terminals[0])
        if len(terminals) > 1:
            tree = steiner_tree(sub, terminals, weight="weight", method="mehlhorn")
        value, chosen = prune_tree(tree, prize)
        chosen_set = set(chosen)
        tree_rels = {virtual_rel[v] for v in chosen if v in virtual_rel}
        tree_rels.update(edge_rel[tuple(sorted((a, b)))] for a, b in tree.subgraph(chosen).edges
                         if a < n and b < n)
        entity_rows = {v for v in chosen_set if v < n}
        for rel in tree_rels:  # a kept virtual node brings both ends (G-retriever)
            entity_rows.update((int(graph.rel_src[rel]), int(graph.rel_dst[rel])))
        found.append((value, sorted(entity_rows), sorted(tree_rels)))
    found.sort(key=lambda t: (-t[0], t[1][0] if t[1] else -1))
    return found[: max(trees, 0)]


def subgraph_steiner(
    state: QueryState, hops: CountOrZero = 2, edge_cost: Annotated[float, Field(ge=0.0)] = 0.5,
    prizes: Literal["rank", "score"] = "rank", trees: Count = 1,
) -> list[ContextItem]:
    """Prize-collecting Steiner tree (G-retriever; survey §6.1 subgraph ② Steiner).

    Prizes: ``state.entities`` on nodes and ``state.relationships`` on edges
    (``prizes: rank``, G-retriever's: the best of n candidates gets n, the
    last 1; ``prizes: score``: the candidate scores). Costs:
    ``edge_cost / weight`` per relationship (G-retriever's uniform 0.5 at
    weight 1). Solved by :func:`steiner_trees`: networkx's
    ``approximation.steiner_tree`` on the seeds' ``hops``-hop neighbourhood
    plus exact strong pruning — ``pcst_fast`` (G-retriever's solver) returns
    garbage under numpy 2, so it is not used.

    Returns one ``subgraph`` item per tree (text: its entities and
    relationships; provenance: ``edges`` [source, target, relationship],
    ``entities``, ``relationships``, ``chunk_ids``; score: the tree's prizes
    minus costs) and replaces ``state.entities`` / ``state.relationships``
    with the trees' nodes / edges (their candidate scores, else 0).
    """
    graph = state.resources.graph()
    node_prize = _prizes(state.entities, graph.entity_row, prizes)
    rel_prize = _prizes(state.relationships, graph.rel_row, prizes)
    if not node_prize and not rel_prize:
        return []
    found = steiner_trees(graph, node_prize, rel_prize, hops, edge_cost, trees)
    entities: dict[str, float] = {}
    relationships: dict[str, float] = {}
    items = []
    for value, entity_rows, rel_rows in found:
        entity_ids = [graph.entity_ids[r] for r in entity_rows]
        rel_ids = [graph.rel_ids[r] for r in rel_rows]
        for e in entity_ids:
            entities[e] = float(state.entities.get(e, 0.0))
        for r in rel_ids:
            relationships[r] = float(state.relationships.get(r, 0.0))
        lines = ["Entities:"] + [f"- {graph.entity_text(r)}" for r in entity_rows]
        if rel_rows:
            lines += ["Relationships:"] + [f"- {graph.rel_text(r)}" for r in rel_rows]
        digest = hashlib.sha256("\x00".join(entity_ids + ["|"] + rel_ids).encode("utf-8")).hexdigest()[:12]
        items.append(ContextItem(
            "subgraph", f"steiner-{digest}", "\n".join(lines), float(value),
            f"Steiner tree of {len(entity_ids)} entities",
            {"entities": entity_ids, "relationships": rel_ids,
             "edges": [[graph.entity_ids[graph.rel_src[r]], graph.entity_ids[graph.rel_dst[r]], graph.rel_ids[r]]
                       for r in rel_rows],
             "chunk_ids": _chunks_of(graph, rel_rows)},
            "subgraph.steiner",
        ))
    state.entities = dict(sorted(entities.items(), key=lambda kv: (-kv[1], kv[0])))
    state.relationships = dict(sorted(relationships.items(), key=lambda kv: (-kv[1], kv[0])))
    return items


# -- agent path (DALK) --------------------------------------------------------------

_BRACKETED = re.compile(r"\[(\d+)\]")
_NAMED = re.compile(r"\bpath\s*#?\s*(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?!\d|\.\d|\w)")


def parse_path_numbers(reply: str, count: int) -> list[int] | None:
    """1-based path numbers the reply keeps, in its order; [] for an explicit
    NONE; None when nothing can be read.

    Tried in turn: a JSON object's first list (``{"paths": [2, 1]}``), a JSON
    list (``[2, 1]``; ``[]`` names none), ``[n]`` markers, ``path n``, bare
    integers; numbers outside 1..count are ignored.
    """
    text = reply.strip()
    if re.match(r"^\W*none\b", text, re.IGNORECASE):
        return []

    def valid(values: Any) -> list[int]:
        out: dict[int, None] = {}
        for value in values if isinstance(values, list) else []:
            if isinstance(value, bool):
                continue
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value.strip())
            if isinstance(value, (int, float)) and float(value).is_integer() and 1 <= int(value) <= count:
                out.setdefault(int(value), None)
        return list(out)

    obj = first_object(text)
    if obj is not None:
        lists = [v for v in obj.values() if isinstance(v, list)]
        if lists:
            kept = valid(lists[0])
            if kept or not lists[0]:
                return kept
    value = first_list(text)
    if value is not None:
        kept = valid(value)
        if kept or not value:  # "[]" names none
            return kept
    for pattern in (_BRACKETED, _NAMED, _NUMBER):
        kept = valid([int(m) for m in pattern.findall(text)])
        if kept:
            return kept
    return None


def subgraph_agent_path(state: QueryState, top_k: Count = 4) -> list[ContextItem]:
    """The LLM keeps the paths relevant to the question (DALK; survey §6.1 subgraph ③ AgentPath).

    Reads ``state.paths`` (e.g. from ``subgraph.khop_path``), asks the chat
    model (prompt ``agent_path``, stage ``query.agent_path``) for the numbers
    of the relevant ones, most relevant first, and keeps at most ``top_k``.
    A reply that names none keeps none; one that cannot be read keeps the
    first ``top_k`` paths. Writes ``state.paths``; returns ``path`` items
    scored by the kept order (1, then lower).
    """
    if not state.paths or top_k <= 0:
        return []
    graph = state.resources.graph()
    texts = []
    for ids in state.paths:
        rows = graph.rows_of(ids).tolist()
        texts.append(path_text(graph, rows)[0] if rows else " -> ".join(ids))
    prompt = state.prompt("agent_path")
    request = state.request(
        prompt, "query.agent_path", max_tokens=100, question=state.question, k=str(top_k),
        paths="\n".join(f"[{i}] {text}" for i, text in enumerate(texts, 1)),
    )
    numbers = parse_path_numbers(state.models.chat.complete(request).text, len(state.paths))
    if numbers is None:
        numbers = list(range(1, len(state.paths) + 1))
    kept = [state.paths[i - 1] for i in numbers[:top_k]]
    state.paths = kept
    scores = [1.0 - i / len(kept) for i in range(len(kept))]
    return path_items(state, kept, scores, "subgraph.agent_path")


OPERATORS = (
    OperatorSpec(
        "subgraph.khop_path", "subgraph", subgraph_khop_path,
        "k-hop paths between the candidate entities, merged where one extends another (DALK)",
        requires=("graph",),
    ),
    OperatorSpec(
        "subgraph.steiner", "subgraph", subgraph_steiner,
        "prize-collecting Steiner tree over the candidate entities and relationships (G-retriever)",
        requires=("graph",),
    ),
    OperatorSpec(
        "subgraph.agent_path", "subgraph", subgraph_agent_path,
        "the LLM keeps the relevant paths of state.paths (DALK)",
        requires=("graph",),
    ),
)
