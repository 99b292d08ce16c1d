"""C-HNSW: ArchRAG's Community-based HNSW over entities and community levels.

Why one index instead of a vector index per level: ArchRAG retrieves the top-k of *every*
level for a query. C-HNSW keeps one proximity graph per level (layer 0 = entities, layer i =
communities of level i; each node lives in exactly one layer) plus one inter-layer link per
node of layer i>0 to its nearest node of layer i-1. The hierarchical search (paper Algorithm
2) searches the top layer, then starts each lower layer at the inter-layer link of the best
node found just above -- a start already close to the query -- instead of searching every
level from scratch. Construction (paper Algorithm 3) inserts layers top-down with the same
search, so it needs no all-pairs nearest-neighbour computation.

Vectors are L2-normalised float32 (rows are normalised on input); distance = 1 - cosine.
Scores returned are cosine similarities. The numba kernels live in
``unirag.hierarchy.chnsw_kernels``, imported (and, on a fresh checkout, compiled) at the first
build or search, never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from unirag.index.vectors import TIE_MARGIN, identical_rows, ties_by_id
from unirag.workspace import atomic_path, atomic_write_bytes

FORMAT_VERSION = 1
ARRAYS_FILE = "chnsw.npz"
META_FILE = "chnsw.json"
_NORM_TOLERANCE = 1e-6


@dataclass(frozen=True)
class CHnswConfig:
    """C-HNSW parameters (ArchRAG's experiments: M = 32, efConstruction = 100)."""

    m: int = 32
    ef_construction: int = 100
    seed: int = 0


def _kernels() -> ModuleType:
    """The numba kernel module (imported on first use: loading numba costs ~0.5 s)."""
    from unirag.hierarchy import chnsw_kernels

    return chnsw_kernels


def _unit_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    """Rows as C-contiguous float32 of unit length; zero or non-finite rows are errors."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ValueError(f"{what}: vectors contain NaN or infinity")
    norms = np.linalg.norm(vectors, axis=1)
    zero = np.flatnonzero(norms <= _NORM_TOLERANCE)
    if zero.size:
        raise ValueError(f"{what}: row {int(zero[0])} is a zero vector (no direction to compare)")
    return np.ascontiguousarray(vectors / norms[:, None], dtype=np.float32)


def _validate_layers(layers: Sequence[tuple[Sequence[str], np.ndarray]]) -> tuple[list[list[str]], list[np.ndarray]]:
    if not layers:
        raise ValueError("C-HNSW needs at least one layer (layer 0 = entities)")
    ids_per_layer: list[list[str]] = []
    vectors: list[np.ndarray] = []
    dim: int | None = None
    for level, layer in enumerate(layers):
        if len(layer) != 2:
            raise ValueError(f"layer {level}: expected a pair (ids, vectors)")
        ids, vecs = list(layer[0]), np.asarray(layer[1])
        if not ids:
            raise ValueError(f"layer {level} is empty: every layer needs at least one node")
        if vecs.ndim != 2:
            raise ValueError(f"layer {level}: vectors must be a 2-D array, got shape {vecs.shape}")
        if vecs.shape[0] != len(ids):
            raise ValueError(f"layer {level}: {len(ids)} ids but {vecs.shape[0]} vectors")
        if dim is None:
            dim = int(vecs.shape[1])
        if vecs.shape[1] != dim or dim == 0:
            raise ValueError(f"layer {level}: vector dimension {vecs.shape[1]} differs from layer 0's {dim}")
        if not all(isinstance(i, str) for i in ids):
            raise ValueError(f"layer {level}: ids must be strings")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            for node_id in ids:
                if node_id in seen:
                    raise ValueError(f"layer {level}: duplicate id {node_id!r}")
                seen.add(node_id)
        ids_per_layer.append(ids)
        vectors.append(_unit_rows(vecs, f"layer {level}"))
    return ids_per_layer, vectors


def _without_orphans(previous: CHnswIndex, origin: list[np.ndarray], kept_rows: list[np.ndarray],
                     new_rows: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Kept nodes none of whose links survive are inserted anew (nothing would lead out of them).
    ``origin[level][row]``: the previous global row of the layer's current row (-1: none)."""
    alive = np.zeros(len(previous.vectors), dtype=bool)
    for level, kept in enumerate(kept_rows):
        alive[origin[level][kept]] = True
    out_kept, out_new = [], []
    for level, (kept, new) in enumerate(zip(kept_rows, new_rows)):
        links = previous.adj[origin[level][kept]]
        has_link = ((links >= 0) & alive[np.clip(links, 0, None)]).any(axis=1) if len(kept) else np.zeros(0, bool)
        if len(kept) == 1:
            has_link[:] = True  # a layer's only kept node needs no link to be reached
        out_kept.append(kept[has_link])
        out_new.append(np.sort(np.concatenate([new, kept[~has_link]])))
    return out_kept, out_new


def _take_over_renamed(previous: CHnswIndex, level: int, old_rows: np.ndarray, same: np.ndarray,
                       origin: np.ndarray, vectors: np.ndarray) -> None:
    """A node of a new id whose vector is byte-identical to a gone node's of its layer (a
    community renamed: its id derives from its members, its summary is the same) takes the
    gone node's place and links, as if its id had not changed: ``same`` and ``origin`` are
    set for it. Pairs are made in row order, so an update is the same every time."""
    used = np.zeros(len(previous.ids[level]), dtype=bool)
    used[old_rows[same]] = True
    gone, open_rows = np.flatnonzero(~used), np.flatnonzero(~same)
    if not len(gone) or not len(open_rows):
        return
    taken, takers = identical_rows(previous.layer_vectors(level)[gone], vectors[open_rows])
    origin[open_rows[takers]] = int(previous.offsets[level]) + gone[taken]
    same[open_rows[takers]] = True


def _nearest_new_lower_nodes(flat: np.ndarray, offsets: np.ndarray, first_new: np.ndarray) -> np.ndarray:
    """Per kept node of a layer l>0, its nearest *new* node of layer l-1 (-1 elsewhere).

    Why: an update keeps the inter-layer links of unchanged nodes instead of re-searching every
    one of them (three quarters of an update's C-HNSW time); a kept link was the nearest among
    the old nodes that remain, so only a new node below can beat it, and one matrix product per
    layer (kept upper rows x new lower rows) finds each kept node's best new candidate. The
    kernel takes it once layer l-1 is inserted, where it is nearer than the kept link.
    """
    offer = np.full(len(flat), -1, dtype=np.int32)
    for level in range(1, len(offsets) - 1):
        upper = np.arange(int(offsets[level]), int(first_new[level]))
        new_lower = np.arange(int(first_new[level - 1]), int(offsets[level]))
        if upper.size and new_lower.size:
            offer[upper] = new_lower[(flat[upper] @ flat[new_lower].T).argmax(axis=1)]
    return offer


class CHnswIndex:
    """One C-HNSW over layers 0..L. Build once, save, load once per process, search many times.

    Arrays (one flat numbering over all layers, layer ``l`` = rows ``offsets[l]:offsets[l+1]``):
    ``vectors`` (N, d), ``adj`` (N, 2M) int32 intra-layer neighbours (-1 padded), ``deg`` (N,),
    ``down`` (N,) inter-layer link into the layer below (-1 on layer 0), ``layer_entry`` (L+1,)
    one seeded start node per layer (``layer_entry[L]`` starts every hierarchical search).
    """

    def __init__(
        self,
        ids: list[list[str]],
        vectors: np.ndarray,
        offsets: np.ndarray,
        adj: np.ndarray,
        deg: np.ndarray,
        down: np.ndarray,
        layer_entry: np.ndarray,
        params: dict[str, Any],
    ) -> None:
        self.ids = ids
        self.vectors = vectors
        self.offsets = offsets
        self.adj = adj
        self.deg = deg
        self.down = down
        self.layer_entry = layer_entry
        self.params = params

    # -- construction ----------------------------------------------------
    @classmethod
    def build(
        cls,
        layers: Sequence[tuple[Sequence[str], np.ndarray]],
        m: int = 32,
        ef_construction: int = 100,
        seed: int = 0,
        heuristic: bool = True,
        refine_links: bool = True,
        ef_link: int = 1,
    ) -> CHnswIndex:
        """Build top-down (ArchRAG Algorithm 3). ``layers[0]`` = entities, ``layers[i]`` = level i.

        ``m``: neighbours linked per inserted node (a node keeps at most ``2*m``, pruned like
        HNSW). ``heuristic``: prune/select with HNSW's diversity heuristic (hnswlib's rule);
        False keeps the plain nearest. ``refine_links``: after each layer, re-search every
        inter-layer link of the layer above from its current target so it points at the
        nearest node (the paper's definition of the link; Algorithm 3 alone only fixes
        missing links, and in our random-vector tests left 20-80% of links -- depending on
        ``ef_link`` -- at a near-but-not-nearest node; the re-search costs about 30%
        of the build time).
        ``ef_link``: beam width of the search, in the layer above, for the node c whose
        inter-layer link an inserted node may take (paper: SearchLayer(.., 1), greedy).
        Same input and seed give the same index.
        """
        if m < 1:
            raise ValueError(f"m must be >= 1, got {m}")
        if ef_link < 1:
            raise ValueError(f"ef_link must be >= 1, got {ef_link}")
        if ef_construction < 1:
            raise ValueError(f"ef_construction must be >= 1, got {ef_construction}")
        ids, vectors = _validate_layers(layers)
        sizes = np.array([len(layer_ids) for layer_ids in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        flat = np.ascontiguousarray(np.concatenate(vectors, axis=0), dtype=np.float32)
        n = int(offsets[-1])
        max_degree = 2 * m
        adj = np.full((n, max_degree), -1, dtype=np.int32)
        deg = np.zeros(n, dtype=np.int32)
        down = np.full(n, -1, dtype=np.int32)
        rng = np.random.default_rng(seed)
        layer_entry = (offsets[:-1] + rng.integers(0, sizes)).astype(np.int32)
        rand_u = rng.random(n)
        ef = max(int(ef_construction), int(m))
        _kernels().build_kernel(flat, offsets, adj, deg, down, layer_entry, int(m), ef, int(ef_link),
                                bool(heuristic), bool(refine_links), rand_u, offsets[:-1].copy(),
                                np.ones(n, dtype=bool), np.full(n, -1, dtype=np.int32))
        params = {"m": int(m), "ef_construction": int(ef_construction), "seed": int(seed),
                  "heuristic": bool(heuristic), "refine_links": bool(refine_links), "ef_link": int(ef_link),
                  "max_degree": max_degree}
        return cls(ids, flat, offsets, adj, deg, down, layer_entry, params)

    @classmethod
    def updated(cls, previous: CHnswIndex, layers: Sequence[tuple[Sequence[str], np.ndarray]],
                max_new_share: float = 0.25) -> tuple[CHnswIndex, dict[str, Any]]:
        """``layers`` indexed by continuing ``previous`` (built with the same parameters): nodes
        whose id and vector are unchanged keep their links (links to nodes now gone are dropped),
        so do renamed nodes (a gone node's exact vector under a new id, :func:`_take_over_renamed`;
        counted as kept), the rest are inserted as :meth:`build` inserts them. A kept node keeps its inter-layer
        link unless the target is gone or a new node below is nearer (``refine_links``: found
        by one matrix product, not by a re-search per node). Falls back to a full build when the
        layer count differs or more than ``max_new_share`` of the nodes are new. Returns the index
        and ``{"mode": "update"|"full", "inserted": .., "kept": ..}``.

        Like any HNSW after insertions, the graph differs from a fresh build's (node order
        decides links); searches are as good, which the tests measure."""
        p = previous.params
        ids, vectors = _validate_layers(layers)
        total = sum(len(layer_ids) for layer_ids in ids)
        kept_rows, new_rows = [], []
        origin: list[np.ndarray] = []  # per layer: each current row's previous global row, -1 if new
        if len(ids) == previous.n_layers and vectors[0].shape[1] == previous.dim:
            for level, (layer_ids, vecs) in enumerate(zip(ids, vectors)):
                old = {node: i for i, node in enumerate(previous.ids[level])}
                candidates = np.array([old.get(node, -1) for node in layer_ids], dtype=np.int64)
                has = candidates >= 0
                origin.append(np.where(has, int(previous.offsets[level]) + candidates, -1))
                same = np.zeros(len(layer_ids), dtype=bool)
                same[has] = (previous.vectors[origin[-1][has]] == vecs[has]).all(axis=1)
                _take_over_renamed(previous, level, candidates, same, origin[-1], vecs)
                kept_rows.append(np.flatnonzero(same))
                new_rows.append(np.flatnonzero(~same))
        if kept_rows:
            kept_rows, new_rows = _without_orphans(previous, origin, kept_rows, new_rows)
        inserted = sum(len(r) for r in new_rows)
        if not kept_rows or inserted > max_new_share * total:
            index = cls.build(layers, m=p["m"], ef_construction=p["ef_construction"], seed=p["seed"],
                              heuristic=p["heuristic"], refine_links=p["refine_links"], ef_link=p["ef_link"])
            return index, {"mode": "full", "inserted": total, "kept": 0}
        # previous global row -> new global row, for the kept nodes (they come first in each layer)
        moved = np.full(len(previous.vectors), -1, dtype=np.int64)
        start = 0
        for level, (kept, layer_ids) in enumerate(zip(kept_rows, ids)):
            moved[origin[level][kept]] = start + np.arange(len(kept))
            start += len(layer_ids)
        order = [np.concatenate([k, r]) for k, r in zip(kept_rows, new_rows)]
        ids = [[layer_ids[i] for i in o] for layer_ids, o in zip(ids, order)]
        vectors = [vecs[o] for vecs, o in zip(vectors, order)]
        sizes = np.array([len(layer_ids) for layer_ids in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        flat = np.ascontiguousarray(np.concatenate(vectors, axis=0), dtype=np.float32)
        n, max_degree = int(offsets[-1]), int(p["max_degree"])
        adj = np.full((n, max_degree), -1, dtype=np.int32)
        deg = np.zeros(n, dtype=np.int32)
        down = np.full(n, -1, dtype=np.int32)
        kept_old = np.flatnonzero(moved >= 0)
        kept_new = moved[kept_old]
        links = previous.adj[kept_old].astype(np.int64)
        links = np.where(links >= 0, moved[np.clip(links, 0, None)], -1)
        order_valid = np.argsort(links < 0, axis=1, kind="stable")  # kept links first, in their order
        adj[kept_new] = np.take_along_axis(links, order_valid, axis=1).astype(np.int32)
        deg[kept_new] = (links >= 0).sum(axis=1).astype(np.int32)
        below = previous.down[kept_old].astype(np.int64)
        down[kept_new] = np.where(below >= 0, moved[np.clip(below, 0, None)], -1).astype(np.int32)
        rng = np.random.default_rng(p["seed"])
        layer_entry = np.empty(len(sizes), dtype=np.int32)
        for level in range(len(sizes)):
            before = int(moved[previous.layer_entry[level]])
            layer_entry[level] = before if before >= 0 else int(offsets[level])
        rand_u = rng.random(n)
        first_new = offsets[:-1] + np.array([len(k) for k in kept_rows], dtype=np.int64)
        # re-searched after their lower layer: new nodes and kept ones whose link target is gone
        research = np.ones(n, dtype=bool)
        research[kept_new] = down[kept_new] < 0
        offer = _nearest_new_lower_nodes(flat, offsets, first_new) if p["refine_links"] else np.full(n, -1, np.int32)
        ef = max(int(p["ef_construction"]), int(p["m"]))
        _kernels().build_kernel(flat, offsets, adj, deg, down, layer_entry, int(p["m"]), ef, int(p["ef_link"]),
                                bool(p["heuristic"]), bool(p["refine_links"]), rand_u, first_new, research, offer)
        return cls(ids, flat, offsets, adj, deg, down, layer_entry, dict(p)), {
            "mode": "update", "inserted": inserted, "kept": total - inserted}

    # -- shape -----------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def layer_sizes(self) -> list[int]:
        return [len(layer_ids) for layer_ids in self.ids]

    def layer_vectors(self, layer: int) -> np.ndarray:
        """The stored (unit) vectors of one layer, a view."""
        self._check_layer(layer)
        return self.vectors[self.offsets[layer] : self.offsets[layer + 1]]

    def stats(self) -> dict[str, Any]:
        """Nodes, edges and inter-layer links per layer (JSON-serialisable)."""
        edges = _kernels().undirected_edges(self.adj, self.deg, self.offsets)  # a numpy unique costs 0.7 s
        per_layer = []
        for level in range(self.n_layers):
            a, b = int(self.offsets[level]), int(self.offsets[level + 1])
            deg = self.deg[a:b]
            per_layer.append({
                "layer": level,
                "nodes": b - a,
                "edges": int(edges[level]),
                "directed_links": int(deg.sum()),
                "mean_degree": round(float(deg.mean()), 3),
                "isolated": int((deg == 0).sum()),
                "inter_layer_links": int((self.down[a:b] >= 0).sum()) if level > 0 else 0,
            })
        return {"layers": per_layer, "nodes": int(self.offsets[-1]), "dim": self.dim, **self.params}

    # -- search ----------------------------------------------------------
    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer {layer} out of range 0..{self.n_layers - 1}")

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (q, {self.dim}), got {queries.shape}")
        return _unit_rows(queries, "queries")

    @staticmethod
    def _check_k(k: int, ef: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if ef < 1:
            raise ValueError(f"ef must be >= 1, got {ef}")

    def search_arrays(
        self,
        queries: np.ndarray,
        k: int,
        ef: int = 100,
        lowest: int = 0,
        start: str = "hierarchical",
        upper_ef: int = 1,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k of layers top..``lowest`` for every query row, one query at a time.

        ``start="hierarchical"``: ArchRAG Algorithm 2 (each layer starts at the inter-layer
        link of the nearest node found just above). Baselines on the same graphs, for
        benchmarks: ``"layer_entry"`` starts every layer at its own fixed node (a flat search
        per layer); ``"top_down"`` reaches every layer by descending from the top again (beam
        ``upper_ef`` above it). Returns ``rows`` (q, L+1, k) int32 layer-local rows (-1 where a
        layer has < k nodes or was not searched), ``cosine`` (q, L+1, k) float32 (NaN there)
        and ``ndist`` (q, L+1) distance evaluations per layer. The beam width is max(ef, k).
        """
        modes = {"hierarchical": 0, "layer_entry": 1, "top_down": 2}
        if start not in modes:
            raise ValueError(f"start must be one of {sorted(modes)}, got {start!r}")
        self._check_k(k, ef)
        self._check_layer(lowest)
        if upper_ef < 1:
            raise ValueError(f"upper_ef must be >= 1, got {upper_ef}")
        queries = self._queries(queries)
        nq, nl = queries.shape[0], self.n_layers
        rows = np.full((nq, nl, k), -1, dtype=np.int32)
        dist = np.full((nq, nl, k), np.nan, dtype=np.float32)
        ndist = np.zeros((nq, nl), dtype=np.int64)
        _kernels().multi_layer_kernel(self.vectors, self.offsets, self.adj, self.deg, self.down, self.layer_entry,
                                      queries, int(k), max(int(ef), int(k)), int(upper_ef), modes[start],
                                      int(lowest), rows, dist, ndist)
        return rows, 1.0 - dist, ndist

    def search_layer_arrays(
        self, queries: np.ndarray, layer: int, k: int, ef: int = 100, upper_ef: int = 1, from_top: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k of one layer per query row without the other layers' results.

        ``from_top`` (default): descend from the top entry (beam ``upper_ef`` per upper layer,
        follow the nearest node's inter-layer link) -- what a single-layer query costs in
        C-HNSW. False: start at that layer's own fixed entry node (a flat graph search; the
        baseline "search every layer from scratch"). Returns ``rows`` (q, k), ``cosine`` (q, k),
        ``ndist`` (q,).
        """
        self._check_k(k, ef)
        self._check_layer(layer)
        if upper_ef < 1:
            raise ValueError(f"upper_ef must be >= 1, got {upper_ef}")
        queries = self._queries(queries)
        nq = queries.shape[0]
        rows = np.full((nq, k), -1, dtype=np.int32)
        dist = np.full((nq, k), np.nan, dtype=np.float32)
        ndist = np.zeros(nq, dtype=np.int64)
        _kernels().single_layer_kernel(self.vectors, self.offsets, self.adj, self.deg, self.down, self.layer_entry,
                                       queries, int(layer), int(k), max(int(ef), int(k)), int(upper_ef),
                                       bool(from_top), rows, dist, ndist)
        return rows, 1.0 - dist, ndist

    def _pairs(self, layer: int, rows: np.ndarray, cosine: np.ndarray) -> list[tuple[str, float]]:
        ids = self.ids[layer]
        return [(ids[r], float(c)) for r, c in zip(rows.tolist(), cosine.tolist(), strict=True) if r >= 0]

    def search_many(self, queries: np.ndarray, k: int, ef: int = 100) -> list[dict[int, list[tuple[str, float]]]]:
        """Hierarchical search per query row: {layer: [(id, cosine), ...] best first}. Equal
        scores are ordered by id, a tie at the k-th place too (a few rows past k are fetched):
        which of tied nodes the graph walk meets first depends on how the graph was built
        (whole, or updated in place), and an answer must not."""
        self._check_k(k, ef)
        rows, cosine, _ = self.search_arrays(queries, k + TIE_MARGIN, max(ef, k))
        return [
            {layer: ties_by_id(self._pairs(layer, rows[q, layer], cosine[q, layer]), k)
             for layer in range(self.n_layers - 1, -1, -1)}
            for q in range(rows.shape[0])
        ]

    def search(self, query: np.ndarray, k: int, ef: int = 100) -> dict[int, list[tuple[str, float]]]:
        """Top-k of every layer for one query vector (d,), via the hierarchical search."""
        query = np.asarray(query, dtype=np.float32)
        if query.ndim != 1:
            raise ValueError(f"query must be one vector of shape ({self.dim},), got {query.shape}")
        return self.search_many(query[None, :], k, ef)[0]

    def search_layer_many(
        self, queries: np.ndarray, layer: int, k: int, ef: int = 100, upper_ef: int = 1
    ) -> list[list[tuple[str, float]]]:
        """Top-k (id, cosine) of one layer per query row, descending from the top layer; equal
        scores by id (:meth:`search_many`)."""
        self._check_k(k, ef)
        rows, cosine, _ = self.search_layer_arrays(queries, layer, k + TIE_MARGIN, max(ef, k), upper_ef=upper_ef)
        return [ties_by_id(self._pairs(layer, rows[q], cosine[q]), k) for q in range(rows.shape[0])]

    def search_layer(self, query: np.ndarray, layer: int, k: int, ef: int = 100) -> list[tuple[str, float]]:
        """Top-k (id, cosine) of one layer for one query vector (d,)."""
        query = np.asarray(query, dtype=np.float32)
        if query.ndim != 1:
            raise ValueError(f"query must be one vector of shape ({self.dim},), got {query.shape}")
        return self.search_layer_many(query[None, :], layer, k, ef)[0]

    # -- persistence -----------------------------------------------------
    def save(self, path_dir: Path) -> None:
        """Write ``chnsw.npz`` (arrays) then ``chnsw.json`` (ids, params), each atomically."""
        path_dir = Path(path_dir)
        path_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(path_dir / ARRAYS_FILE) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, vectors=self.vectors, offsets=self.offsets, adj=self.adj, deg=self.deg,
                     down=self.down, layer_entry=self.layer_entry)
        meta = {"format": FORMAT_VERSION, "params": self.params, "dim": self.dim,
                "sizes": self.layer_sizes(), "ids": self.ids}
        atomic_write_bytes(path_dir / META_FILE, json.dumps(meta).encode("utf-8"))

    @classmethod
    def load(cls, path_dir: Path) -> CHnswIndex:
        """Read an index written by :meth:`save`; a mismatched pair of files is an error."""
        path_dir = Path(path_dir)
        meta = json.loads((path_dir / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path_dir}: C-HNSW format {meta.get('format')!r}, expected {FORMAT_VERSION}")
        with np.load(path_dir / ARRAYS_FILE) as data:
            arrays = {name: np.ascontiguousarray(data[name]) for name in data.files}
        ids = [list(layer) for layer in meta["ids"]]
        sizes = [len(layer) for layer in ids]
        offsets = arrays["offsets"]
        if sizes != meta["sizes"] or np.diff(offsets).tolist() != sizes or arrays["vectors"].shape[0] != sum(sizes):
            raise ValueError(f"{path_dir}: {ARRAYS_FILE} and {META_FILE} disagree on layer sizes")
        return cls(ids, arrays["vectors"], offsets, arrays["adj"], arrays["deg"], arrays["down"],
                   arrays["layer_entry"], meta["params"])

    def __repr__(self) -> str:
        return f"CHnswIndex(layers={self.layer_sizes()}, dim={self.dim}, m={self.params.get('m')})"
