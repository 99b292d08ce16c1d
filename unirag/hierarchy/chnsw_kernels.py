"""Numba kernels of C-HNSW (ArchRAG): beam search in one layer, hierarchical search, construction.

Imported only by ``unirag.hierarchy.chnsw`` when an index is built or searched, so importing
``unirag`` never loads numba. Every kernel is ``cache=True``: the first call in a fresh
checkout compiles (tens of seconds), later processes load machine code from ``__pycache__``
(a second or so). Public kernels release the GIL, so threads can search at once.

Layout shared by all kernels (one flat numbering over all layers, so one array per field):

* ``vecs`` (N, d) float32, L2-normalised; distance = 1 - inner product;
* ``offsets`` (L+2,) int64: layer ``l`` holds global nodes ``offsets[l] .. offsets[l+1]-1``;
* ``adj`` (N, max_degree) int32, -1 padded, intra-layer neighbours (global numbers);
* ``deg`` (N,) int32: used slots of ``adj``;
* ``down`` (N,) int32: inter-layer link of a node of layer l>0 to a node of layer l-1 (-1: none);
* ``layer_entry`` (L+1,) int32: one fixed (seeded) node per layer; ``layer_entry[L]`` is the
  start of every hierarchical search.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_TAG_LIMIT = 2_000_000_000


@nb.njit(cache=True, fastmath=True)
def _dist(vecs, i, q):  # pragma: no cover - compiled
    """Cosine distance between stored node ``i`` and vector ``q`` (both unit length)."""
    s = np.float32(0.0)
    for t in range(vecs.shape[1]):
        s += vecs[i, t] * q[t]
    return np.float32(1.0) - s


@nb.njit(cache=True)
def _heap_push(hd, hi, n, d, i):  # pragma: no cover - compiled
    """Push (d, i) on a binary min-heap of size n held in (hd, hi); return the new size."""
    j = n
    hd[j] = d
    hi[j] = i
    while j > 0:
        p = (j - 1) >> 1
        if hd[p] <= hd[j]:
            break
        hd[p], hd[j] = hd[j], hd[p]
        hi[p], hi[j] = hi[j], hi[p]
        j = p
    return n + 1


@nb.njit(cache=True)
def _heap_pop(hd, hi, n):  # pragma: no cover - compiled
    """Remove the root of a min-heap of size n; return the new size (read the root first)."""
    n -= 1
    if n <= 0:
        return 0
    hd[0] = hd[n]
    hi[0] = hi[n]
    j = 0
    while True:
        left = 2 * j + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n and hd[right] < hd[left]:
            best = right
        if hd[j] <= hd[best]:
            break
        hd[best], hd[j] = hd[j], hd[best]
        hi[best], hi[j] = hi[j], hi[best]
        j = best
    return n


@nb.njit(cache=True)
def _next_tag(visited, tag):  # pragma: no cover - compiled
    """Fresh visited-marker value; the array is cleared only once every two billion searches."""
    tag += 1
    if tag >= _TAG_LIMIT:
        visited[:] = 0
        tag = 1
    return tag


@nb.njit(cache=True, fastmath=True)
def _search_layer(vecs, adj, deg, q, start, ef, visited, tag, cd, ci, rd, ri, od, oi):  # pragma: no cover
    """Beam search (HNSW SEARCH-LAYER, ArchRAG Algorithm 2's SearchLayer) from ``start``.

    Expands the nearest unexpanded candidate until it is farther than the worst of the
    ``ef`` best found so far. Scratch: ``visited`` (N,) markers (== ``tag``: seen in this
    search); ``cd``/``ci`` candidate min-heap sized to the largest layer (a node enters it
    at most once); ``rd``/``ri`` result heap of negated distances (a max-heap), ef+1 slots. Writes the found nodes sorted by distance to ``od``/``oi``;
    returns (count, distance evaluations).
    """
    d0 = _dist(vecs, start, q)
    visited[start] = tag
    nc = _heap_push(cd, ci, 0, d0, start)
    nr = _heap_push(rd, ri, 0, -d0, start)
    ndist = 1
    while nc > 0:
        c_d = cd[0]
        c = ci[0]
        if nr >= ef and c_d > -rd[0]:
            break
        nc = _heap_pop(cd, ci, nc)
        for j in range(deg[c]):
            x = adj[c, j]
            if visited[x] == tag:
                continue
            visited[x] = tag
            dx = _dist(vecs, x, q)
            ndist += 1
            if nr < ef or dx < -rd[0]:
                nc = _heap_push(cd, ci, nc, dx, x)
                nr = _heap_push(rd, ri, nr, -dx, x)
                if nr > ef:
                    nr = _heap_pop(rd, ri, nr)
    count = nr
    for p in range(count - 1, -1, -1):
        od[p] = -rd[0]
        oi[p] = ri[0]
        nr = _heap_pop(rd, ri, nr)
    return count, ndist


@nb.njit(cache=True)
def _max_layer_size(offsets):  # pragma: no cover - compiled
    best = 1
    for l in range(offsets.shape[0] - 1):
        size = offsets[l + 1] - offsets[l]
        best = max(best, size)
    return best


@nb.njit(cache=True, fastmath=True)
def _select_heuristic(vecs, cand_i, cand_d, n, m, out):  # pragma: no cover - compiled
    """HNSW's neighbour-selection heuristic over candidates sorted by distance to the base.

    Keeps a candidate only if it is closer to the base than to every already kept one, so
    the kept links point in different directions (keeps sparse clusters reachable).
    """
    count = 0
    for p in range(n):
        e = cand_i[p]
        good = True
        for r in range(count):
            if _dist(vecs, out[r], vecs[e]) < cand_d[p]:
                good = False
                break
        if good:
            out[count] = e
            count += 1
            if count >= m:
                break
    return count


@nb.njit(cache=True, fastmath=True)
def _add_link(vecs, adj, deg, u, w, heuristic, pc_i, pc_d, ps_i, ps_d, sel):  # pragma: no cover
    """Add the directed link u -> w; when u's list is full, prune it like HNSW.

    ``heuristic``: re-select u's neighbours among old ones plus w with the HNSW heuristic;
    otherwise keep the nearest (w replaces u's farthest neighbour if it is closer).
    """
    max_degree = adj.shape[1]
    du = deg[u]
    for j in range(du):
        if adj[u, j] == w:
            return
    if du < max_degree:
        adj[u, du] = w
        deg[u] = du + 1
        return
    base = vecs[u]
    if not heuristic:
        far = 0
        far_d = np.float32(-1.0)
        for j in range(du):
            dj = _dist(vecs, adj[u, j], base)
            if dj > far_d:
                far_d = dj
                far = j
        if _dist(vecs, w, base) < far_d:
            adj[u, far] = w
        return
    for j in range(du):
        pc_i[j] = adj[u, j]
        pc_d[j] = _dist(vecs, adj[u, j], base)
    pc_i[du] = w
    pc_d[du] = _dist(vecs, w, base)
    order = np.argsort(pc_d[: du + 1])
    for p in range(du + 1):
        ps_i[p] = pc_i[order[p]]
        ps_d[p] = pc_d[order[p]]
    kept = _select_heuristic(vecs, ps_i, ps_d, du + 1, max_degree, sel)
    for j in range(kept):
        adj[u, j] = sel[j]
    for j in range(kept, max_degree):
        adj[u, j] = -1
    deg[u] = kept


@nb.njit(cache=True, fastmath=True, nogil=True)
def build_kernel(vecs, offsets, adj, deg, down, layer_entry, m, ef_construction, ef_link, heuristic, refine, rand_u, first_new, research, offer):  # pragma: no cover
    """ArchRAG Algorithm 3: insert layer L, then L-1, ... 0, one node at a time.

    For a node v of layer l < L: descend from the top entry (greedy above layer l+1, an
    ``ef_link`` beam in layer l+1; the paper's SearchLayer(.., 1) is ef_link=1) to its
    nearest node c of layer l+1; c's old
    inter-layer link s is the start point in layer l (a random inserted node if c has none,
    or at the top layer), and v replaces it as c's link when v is closer to c. A beam search
    in layer l over the already inserted nodes gives v's M neighbours; links go both ways.
    After a layer, every node of layer l+1 still without a link gets its nearest node of
    layer l by a search (with ``refine``, every node of layer l+1 is re-searched and keeps
    the nearer of its link and the found node). ``rand_u`` (N,) uniforms in [0, 1) make the
    random starts seeded. ``first_new`` (L+1,): per layer the first row to insert; the rows
    before it are already in place (an update continuing a previous build; a full build
    passes ``offsets[:-1]``). ``research`` (N,) bool: with ``refine``, the nodes whose existing
    link is re-searched after their lower layer (a full build: all; an update: new nodes and
    kept nodes whose link was lost -- re-searching every kept link cost three quarters of an
    update). ``offer`` (N,) int32: a node of layer l-1 (or -1) that a node of layer l takes as its
    link, once layer l-1 is inserted, where it is nearer than the link it has (an update's
    nearest new lower node of each kept node, found by ``chnsw._nearest_new_lower_nodes``).
    """
    n_layers = offsets.shape[0] - 1
    top = n_layers - 1
    max_degree = adj.shape[1]
    cap = _max_layer_size(offsets) + 1
    visited = np.zeros(vecs.shape[0], np.int32)
    cd = np.empty(cap, np.float32)
    ci = np.empty(cap, np.int32)
    width = max(ef_construction, ef_link) + 2
    rd = np.empty(width, np.float32)
    ri = np.empty(width, np.int32)
    od = np.empty(width, np.float32)
    oi = np.empty(width, np.int32)
    sel = np.empty(max_degree + 1, np.int32)
    sel_prune = np.empty(max_degree + 1, np.int32)
    pc_i = np.empty(max_degree + 1, np.int32)
    pc_d = np.empty(max_degree + 1, np.float32)
    ps_i = np.empty(max_degree + 1, np.int32)
    ps_d = np.empty(max_degree + 1, np.float32)
    tag = 0
    entry = layer_entry[top]
    for l in range(top, -1, -1):
        a = offsets[l]
        b = offsets[l + 1]
        for v in range(first_new[l], b):
            q = vecs[v]
            s = -1
            if l < top:
                cur = entry
                for j in range(top, l + 1, -1):
                    tag = _next_tag(visited, tag)
                    _search_layer(vecs, adj, deg, q, cur, 1, visited, tag, cd, ci, rd, ri, od, oi)
                    cur = down[oi[0]]
                tag = _next_tag(visited, tag)
                _search_layer(vecs, adj, deg, q, cur, ef_link, visited, tag, cd, ci, rd, ri, od, oi)
                c = oi[0]
                s = down[c]
                if s == -1 or _dist(vecs, s, vecs[c]) > _dist(vecs, v, vecs[c]):
                    down[c] = v
            n_inserted = v - a
            if n_inserted == 0:
                continue
            if s == -1:
                s = a + min(int(rand_u[v] * n_inserted), n_inserted - 1)
            tag = _next_tag(visited, tag)
            count, _ = _search_layer(vecs, adj, deg, q, s, ef_construction, visited, tag, cd, ci, rd, ri, od, oi)
            if heuristic:
                n_sel = _select_heuristic(vecs, oi, od, count, m, sel)
            else:
                n_sel = min(m, count)
                for p in range(n_sel):
                    sel[p] = oi[p]
            for p in range(n_sel):
                w = sel[p]
                _add_link(vecs, adj, deg, v, w, heuristic, pc_i, pc_d, ps_i, ps_d, sel_prune)
                _add_link(vecs, adj, deg, w, v, heuristic, pc_i, pc_d, ps_i, ps_d, sel_prune)
        if l < top:
            # Every node of layer l+1 must lead down (paper: checked after layer l is done).
            # ``refine``: also re-search the links that exist -- insertion only offers c the
            # nodes that found c as their nearest upper node, which often misses c's own nearest.
            # An update re-searches only ``research`` nodes; every other kept node is offered
            # its nearest new node of layer l instead.
            for c in range(offsets[l + 1], offsets[l + 2]):
                o = offer[c]
                if o != -1 and (down[c] == -1 or _dist(vecs, o, vecs[c]) < _dist(vecs, down[c], vecs[c])):
                    down[c] = o
                s = down[c]
                if s != -1 and (not refine or not research[c]):
                    continue
                if s == -1:
                    for j in range(deg[c]):
                        if down[adj[c, j]] != -1:
                            s = down[adj[c, j]]
                            break
                if s == -1:
                    s = a + min(int(rand_u[c] * (b - a)), b - a - 1)
                tag = _next_tag(visited, tag)
                _search_layer(vecs, adj, deg, vecs[c], s, ef_construction, visited, tag, cd, ci, rd, ri, od, oi)
                if down[c] == -1 or od[0] < _dist(vecs, down[c], vecs[c]):
                    down[c] = oi[0]


@nb.njit(cache=True, fastmath=True, nogil=True)
def multi_layer_kernel(vecs, offsets, adj, deg, down, layer_entry, queries, k, ef, upper_ef, mode, lowest, out_i, out_d, ndist):  # pragma: no cover
    """Top-k of layers top..``lowest`` for each query, one query at a time.

    ``mode`` 0: ArchRAG Algorithm 2 -- each layer's beam search starts at the inter-layer
    link of the nearest node found in the layer above. ``mode`` 1: each layer starts at its
    own fixed entry node (no reuse; a flat search per layer). ``mode`` 2: each layer is
    reached by descending from the top entry again (beam ``upper_ef`` above it), what
    querying the layers one by one costs in C-HNSW. ``out_i``/``out_d`` (q, L+1, k):
    layer-local rows and cosine distances, best first (untouched where a layer has fewer
    than k nodes); ``ndist`` (q, L+1): distance evaluations spent for each layer.
    """
    top = offsets.shape[0] - 2
    cap = _max_layer_size(offsets) + 1
    width = max(ef, upper_ef) + 2
    visited = np.zeros(vecs.shape[0], np.int32)
    cd = np.empty(cap, np.float32)
    ci = np.empty(cap, np.int32)
    rd = np.empty(width, np.float32)
    ri = np.empty(width, np.int32)
    od = np.empty(width, np.float32)
    oi = np.empty(width, np.int32)
    tag = 0
    for qi in range(queries.shape[0]):
        q = queries[qi]
        s = layer_entry[top]
        for l in range(top, lowest - 1, -1):
            total = 0
            if mode == 1:
                s = layer_entry[l]
            elif mode == 2:
                s = layer_entry[top]
                for j in range(top, l, -1):
                    tag = _next_tag(visited, tag)
                    _, nd = _search_layer(vecs, adj, deg, q, s, upper_ef, visited, tag, cd, ci, rd, ri, od, oi)
                    total += nd
                    s = down[oi[0]]
                    if s == -1:
                        s = layer_entry[j - 1]
            tag = _next_tag(visited, tag)
            count, nd = _search_layer(vecs, adj, deg, q, s, ef, visited, tag, cd, ci, rd, ri, od, oi)
            ndist[qi, l] = total + nd
            for p in range(min(k, count)):
                out_i[qi, l, p] = oi[p] - offsets[l]
                out_d[qi, l, p] = od[p]
            if l > 0:
                s = down[oi[0]]
                if s == -1:
                    s = layer_entry[l - 1]


@nb.njit(cache=True, fastmath=True, nogil=True)
def single_layer_kernel(vecs, offsets, adj, deg, down, layer_entry, queries, layer, k, ef, upper_ef, from_top, out_i, out_d, ndist):  # pragma: no cover
    """Top-k of one layer per query, without reusing other layers' results.

    ``from_top``: descend from the top entry through the layers above (beam ``upper_ef``,
    follow the nearest node's inter-layer link), then an ``ef`` beam in ``layer`` -- what a
    query for only that layer costs in C-HNSW. Otherwise start at ``layer_entry[layer]``
    (a flat search of that layer's graph). ``out_i``/``out_d`` (q, k); ``ndist`` (q,).
    """
    top = offsets.shape[0] - 2
    cap = _max_layer_size(offsets) + 1
    width = max(ef, upper_ef) + 2
    visited = np.zeros(vecs.shape[0], np.int32)
    cd = np.empty(cap, np.float32)
    ci = np.empty(cap, np.int32)
    rd = np.empty(width, np.float32)
    ri = np.empty(width, np.int32)
    od = np.empty(width, np.float32)
    oi = np.empty(width, np.int32)
    tag = 0
    for qi in range(queries.shape[0]):
        q = queries[qi]
        total = 0
        s = layer_entry[layer]
        if from_top:
            s = layer_entry[top]
            for l in range(top, layer, -1):
                tag = _next_tag(visited, tag)
                _, nd = _search_layer(vecs, adj, deg, q, s, upper_ef, visited, tag, cd, ci, rd, ri, od, oi)
                total += nd
                s = down[oi[0]]
                if s == -1:
                    s = layer_entry[l - 1]
        tag = _next_tag(visited, tag)
        count, nd = _search_layer(vecs, adj, deg, q, s, ef, visited, tag, cd, ci, rd, ri, od, oi)
        ndist[qi] = total + nd
        for p in range(min(k, count)):
            out_i[qi, p] = oi[p] - offsets[layer]
            out_d[qi, p] = od[p]


@nb.njit(cache=True, nogil=True)
def undirected_edges(adj, deg, offsets):  # pragma: no cover - compiled
    """Per layer, the distinct unordered pairs {u, v} linked either way (``CHnswIndex.stats``).

    A link u -> v counts unless v < u and v -> u exists (then v's link counted the pair). A node's
    neighbours are distinct (``_add_link`` never adds one twice), so this equals counting the
    unique (min, max) pairs, without sorting every link of the index on each update."""
    n_layers = offsets.shape[0] - 1
    out = np.zeros(n_layers, np.int64)
    for l in range(n_layers):
        count = 0
        for u in range(offsets[l], offsets[l + 1]):
            for j in range(deg[u]):
                v = adj[u, j]
                counted_at_v = False
                if v < u:
                    for i in range(deg[v]):
                        if adj[v, i] == u:
                            counted_at_v = True
                            break
                if not counted_at_v:
                    count += 1
        out[l] = count
    return out
