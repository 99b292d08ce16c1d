"""C-HNSW (ArchRAG): hierarchical search vs brute force, inter-layer links, persistence, input checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from unirag.hierarchy.chnsw import CHnswIndex

pytestmark = pytest.mark.numeric  # numba searches compared with a BLAS oracle (exact top k)


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _layers(sizes: list[int], dim: int, seed: int) -> list[tuple[list[str], np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [([f"L{level}-{i}" for i in range(size)], _unit(rng, size, dim)) for level, size in enumerate(sizes)]


def _exact(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ vectors.T
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


@pytest.fixture(scope="module")
def tiny() -> tuple[CHnswIndex, list[tuple[list[str], np.ndarray]]]:
    layers = _layers([60, 20, 6, 2], dim=8, seed=3)
    return CHnswIndex.build(layers, m=4, ef_construction=32, seed=0), layers


@pytest.fixture(scope="module")
def medium() -> tuple[CHnswIndex, list[tuple[list[str], np.ndarray]]]:
    layers = _layers([600, 180, 50, 12], dim=16, seed=5)
    return CHnswIndex.build(layers, m=8, ef_construction=64, seed=0), layers


def test_import_does_not_load_numba() -> None:
    code = "import sys, unirag.hierarchy.chnsw; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiny_hierarchical_search_is_exact(tiny) -> None:
    index, layers = tiny
    queries = _unit(np.random.default_rng(11), 25, 8)
    k = 3
    results = index.search_many(queries, k=k, ef=100)
    for level, (ids, vectors) in enumerate(layers):
        expected = _exact(vectors, queries, min(k, len(ids)))
        for q, result in enumerate(results):
            assert [i for i, _ in result[level]] == [ids[r] for r in expected[q]]
            cosines = [c for _, c in result[level]]
            assert cosines == sorted(cosines, reverse=True)
            np.testing.assert_allclose(cosines, (vectors[expected[q]] @ queries[q]), atol=1e-5)


def test_tiny_search_layer_is_exact(tiny) -> None:
    index, layers = tiny
    queries = _unit(np.random.default_rng(12), 10, 8)
    for level, (ids, vectors) in enumerate(layers):
        expected = _exact(vectors, queries, 2)
        got = index.search_layer_many(queries, level, k=2, ef=100)
        assert [[i for i, _ in row] for row in got] == [[ids[r] for r in e] for e in expected]
        rows, _, _ = index.search_layer_arrays(queries, level, k=2, ef=100, from_top=False)
        np.testing.assert_array_equal(rows, expected)
    for start in ("hierarchical", "layer_entry", "top_down"):
        rows, _, ndist = index.search_arrays(queries, k=2, ef=100, start=start)
        for level, (_, vectors) in enumerate(layers):
            np.testing.assert_array_equal(rows[:, level], _exact(vectors, queries, 2))
        assert (ndist > 0).all()
    rows, cosine, ndist = index.search_arrays(queries, k=2, ef=100, lowest=2)
    assert (rows[:, :2] == -1).all() and np.isnan(cosine[:, :2]).all() and (ndist[:, :2] == 0).all()
    with pytest.raises(ValueError, match="start must be"):
        index.search_arrays(queries, k=2, start="sideways")


def test_tiny_inter_layer_links_are_exact_nearest(tiny) -> None:
    index, layers = tiny
    for level in range(1, len(layers)):
        a, b = index.offsets[level], index.offsets[level + 1]
        got = index.down[a:b] - index.offsets[level - 1]
        expected = np.argmax(layers[level][1] @ layers[level - 1][1].T, axis=1)
        np.testing.assert_array_equal(got, expected)
    assert (index.down[: index.offsets[1]] == -1).all()


def test_medium_recall(medium) -> None:
    index, layers = medium
    queries = _unit(np.random.default_rng(13), 60, 16)
    k = 5
    rows, cosine, ndist = index.search_arrays(queries, k=k, ef=100)
    for level, (_, vectors) in enumerate(layers):
        expected = _exact(vectors, queries, k)
        recall = np.mean([len(set(rows[q, level]) & set(expected[q])) / k for q in range(len(queries))])
        assert recall >= 0.95, (level, recall)
        single, _, _ = index.search_layer_arrays(queries, level, k=k, ef=100)
        recall = np.mean([len(set(single[q]) & set(expected[q])) / k for q in range(len(queries))])
        assert recall >= 0.95, (level, recall)
    assert (ndist > 0).all()
    assert np.isfinite(cosine).all()


def test_every_upper_node_links_down_and_graph_is_sane(medium) -> None:
    index, _ = medium
    for level in range(1, index.n_layers):
        a, b = index.offsets[level], index.offsets[level + 1]
        links = index.down[a:b]
        assert (links >= index.offsets[level - 1]).all() and (links < index.offsets[level]).all()
    for level in range(index.n_layers):
        a, b = index.offsets[level], index.offsets[level + 1]
        adj, deg = index.adj[a:b], index.deg[a:b]
        used = np.arange(adj.shape[1])[None, :] < deg[:, None]
        assert ((adj >= a) & (adj < b))[used].all(), "intra-layer links stay in their layer"
        assert (adj[~used] == -1).all()
        assert (deg >= 1).all() and (deg <= 2 * index.params["m"]).all()
    stats = index.stats()
    assert [layer["nodes"] for layer in stats["layers"]] == index.layer_sizes()
    assert all(layer["inter_layer_links"] == layer["nodes"] for layer in stats["layers"][1:])


def test_plain_algorithm3_and_nearest_pruning_still_link_everything() -> None:
    layers = _layers([300, 90, 25, 7], dim=12, seed=8)
    index = CHnswIndex.build(layers, m=6, ef_construction=40, heuristic=False, refine_links=False)
    for level in range(1, index.n_layers):
        assert (index.down[index.offsets[level] : index.offsets[level + 1]] >= 0).all()
    queries = _unit(np.random.default_rng(2), 30, 12)
    rows, _, _ = index.search_arrays(queries, k=3, ef=100)
    expected = _exact(layers[0][1], queries, 3)
    recall = np.mean([len(set(rows[q, 0]) & set(expected[q])) / 3 for q in range(len(queries))])
    assert recall >= 0.9


def test_save_load_round_trip(tmp_path: Path, medium) -> None:
    index, _ = medium
    index.save(tmp_path / "chnsw")
    loaded = CHnswIndex.load(tmp_path / "chnsw")
    queries = _unit(np.random.default_rng(14), 20, 16)
    assert loaded.search_many(queries, k=4, ef=50) == index.search_many(queries, k=4, ef=50)
    assert loaded.stats() == index.stats()
    assert sorted(p.name for p in (tmp_path / "chnsw").iterdir()) == ["chnsw.json", "chnsw.npz"]


def test_load_rejects_mismatched_files(tmp_path: Path, tiny, medium) -> None:
    tiny[0].save(tmp_path / "a")
    medium[0].save(tmp_path / "b")
    (tmp_path / "a" / "chnsw.json").write_bytes((tmp_path / "b" / "chnsw.json").read_bytes())
    with pytest.raises(ValueError, match="disagree"):
        CHnswIndex.load(tmp_path / "a")


def test_build_is_deterministic() -> None:
    layers = _layers([200, 60, 15], dim=8, seed=4)
    first = CHnswIndex.build(layers, m=5, ef_construction=30, seed=7)
    second = CHnswIndex.build(layers, m=5, ef_construction=30, seed=7)
    for name in ("adj", "deg", "down", "layer_entry", "vectors"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    query = layers[0][1][0]
    assert first.search(query, k=3) == second.search(query, k=3)
    assert first.search(query, k=1)[0][0][0] == "L0-0"


def test_small_shapes() -> None:
    one = CHnswIndex.build([(["only"], np.ones((1, 4), dtype=np.float32))])
    assert one.search(np.ones(4, dtype=np.float32), k=3) == {0: [("only", pytest.approx(1.0))]}
    layers = _layers([5, 1], dim=4, seed=1)
    index = CHnswIndex.build(layers, m=2)
    result = index.search(layers[0][1][2], k=10)
    assert list(result) == [1, 0]
    assert len(result[1]) == 1 and len(result[0]) == 5
    assert result[0][0][0] == "L0-2"
    # Unnormalised input is normalised on the way in.
    scaled = CHnswIndex.build([(layers[0][0], layers[0][1] * 3.0)], m=2)
    assert scaled.search(layers[0][1][1] * 0.5, k=1)[0][0][0] == "L0-1"


def test_bad_input_is_rejected() -> None:
    good = np.eye(3, dtype=np.float32)
    cases = [
        ([], "at least one layer"),
        ([(["a", "b", "c"], good), ([], np.zeros((0, 3)))], "empty"),
        ([(["a", "b", "c"], good), (["x"], np.ones((1, 4)))], "dimension"),
        ([(["a", "b"], good)], "2 ids but 3 vectors"),
        ([(["a", "b", "a"], good)], "duplicate id 'a'"),
        ([(["a", "b", "c"], np.zeros((3, 3)))], "zero vector"),
        ([(["a", "b", "c"], np.full((3, 3), np.nan))], "NaN"),
        ([(["a", "b", "c"], np.ones(3))], "2-D"),
    ]
    for layers, message in cases:
        with pytest.raises(ValueError, match=message):
            CHnswIndex.build(layers)
    with pytest.raises(ValueError, match="m must be"):
        CHnswIndex.build([(["a", "b", "c"], good)], m=0)
    index = CHnswIndex.build([(["a", "b", "c"], good)])
    with pytest.raises(ValueError, match="shape"):
        index.search(np.ones(4, dtype=np.float32), k=1)
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.ones(3, dtype=np.float32), k=0)
    with pytest.raises(ValueError, match="out of range"):
        index.search_layer(np.ones(3, dtype=np.float32), layer=1, k=1)


def _changed(layers: list[tuple[list[str], np.ndarray]], seed: int, share: float = 0.05):
    """Each layer with ``share`` of its nodes gone, as many changed (new vector) and as many new."""
    rng = np.random.default_rng(seed)
    out = []
    for level, (ids, vectors) in enumerate(layers):
        n = len(ids)
        count = max(1, int(share * n)) if n > 4 else 0
        gone = set(rng.choice(n, count, replace=False).tolist())
        keep = [i for i in range(n) if i not in gone]
        new_ids = [ids[i] for i in keep]
        new_vectors = vectors[keep].copy()
        if count:
            changed = rng.choice(len(keep), count, replace=False)
            new_vectors[changed] = _unit(rng, count, vectors.shape[1])
        new_ids += [f"L{level}-new{i}" for i in range(count)]
        new_vectors = np.vstack([new_vectors, _unit(rng, count, vectors.shape[1])])
        out.append((new_ids, new_vectors))
    return out


def test_an_update_keeps_unchanged_nodes_and_searches_as_well_as_a_fresh_build(medium) -> None:
    """5 % of each layer gone, 5 % changed, 5 % new: the update inserts only those, every upper node
    still links down, and recall per layer is that of a fresh build (>= 0.95)."""
    index, layers = medium
    grown = _changed(layers, seed=21)
    updated, done = CHnswIndex.updated(index, grown)
    assert done["mode"] == "update" and done["inserted"] < 0.15 * sum(len(ids) for ids, _ in grown)
    assert updated.layer_sizes() == [len(ids) for ids, _ in grown]
    for level, (ids, _) in enumerate(grown):
        assert sorted(updated.ids[level]) == sorted(ids)
    queries = _unit(np.random.default_rng(14), 60, 16)
    k = 5
    rows, _, _ = updated.search_arrays(queries, k=k, ef=100)
    for level, (ids, vectors) in enumerate(grown):
        row_of = {node: i for i, node in enumerate(updated.ids[level])}
        expected = [[row_of[ids[r]] for r in e] for e in _exact(vectors, queries, k)]
        recall = np.mean([len(set(rows[q, level]) & set(expected[q])) / k for q in range(len(queries))])
        assert recall >= 0.95, (level, recall)
    for level in range(1, updated.n_layers):
        a, b = updated.offsets[level], updated.offsets[level + 1]
        links = updated.down[a:b]
        assert (links >= updated.offsets[level - 1]).all() and (links < updated.offsets[level]).all()
    a, b = updated.offsets[0], updated.offsets[1]
    assert (updated.deg[a:b] >= 1).all()


def test_an_update_with_nothing_changed_is_the_same_index_and_too_much_change_builds_afresh(medium) -> None:
    index, layers = medium
    same, done = CHnswIndex.updated(index, layers)
    assert done == {"mode": "update", "inserted": 0, "kept": sum(len(ids) for ids, _ in layers)}
    assert np.array_equal(same.adj, index.adj) and np.array_equal(same.down, index.down)
    _, done = CHnswIndex.updated(index, _changed(layers, seed=22, share=0.2))
    assert done["mode"] == "full"
    _, done = CHnswIndex.updated(index, layers[:-1])
    assert done["mode"] == "full"


def test_an_updated_inter_layer_link_is_as_near_as_a_fresh_builds(tiny) -> None:
    """An update keeps unchanged nodes' links and offers them only the new nodes below (one matrix
    product); every link must still be at least as near as the one a fresh build searches."""
    index, layers = tiny
    grown = _changed(layers, seed=31, share=0.1)
    updated, done = CHnswIndex.updated(index, grown)
    fresh = CHnswIndex.build(grown, m=4, ef_construction=32, seed=0)
    assert done["mode"] == "update" and done["kept"] > 0
    for level in range(1, updated.n_layers):
        fresh_row = {node: i for i, node in enumerate(fresh.ids[level])}
        for row, node in enumerate(updated.ids[level]):
            mine, theirs = updated.offsets[level] + row, fresh.offsets[level] + fresh_row[node]
            mine_sim = updated.vectors[mine] @ updated.vectors[updated.down[mine]]
            fresh_sim = fresh.vectors[theirs] @ fresh.vectors[fresh.down[theirs]]
            assert mine_sim >= fresh_sim - 1e-6, (level, node)


def _on_circle(degrees: list[float]) -> np.ndarray:
    radians = np.deg2rad(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(radians), np.sin(radians)], axis=1).astype(np.float32)


def test_a_new_lower_node_nearer_than_a_kept_link_takes_it_over() -> None:
    """Upper nodes at 5 and 15 degrees both link to the lower node at 60; a new lower node at 13
    degrees is nearest to both, although only the 15-degree node is *its* nearest upper node (so
    the insertion alone would not offer it to the 5-degree one): both links must move to it."""
    lower_angles = [float(a) for a in range(60, 301, 20)]
    lower_ids = [f"e{int(a)}" for a in lower_angles]
    upper = (["c5", "c15", "c180"], _on_circle([5, 15, 180]))
    index = CHnswIndex.build([(lower_ids, _on_circle(lower_angles)), upper], m=4, ef_construction=16)
    assert [index.ids[0][index.down[index.offsets[1] + r] - index.offsets[0]] for r in range(3)] == ["e60", "e60", "e180"]
    grown = [(lower_ids + ["e13"], _on_circle(lower_angles + [13.0])), upper]
    updated, done = CHnswIndex.updated(index, grown)
    assert done == {"mode": "update", "inserted": 1, "kept": 16}
    links = {updated.ids[1][r]: updated.ids[0][updated.down[updated.offsets[1] + r] - updated.offsets[0]]
             for r in range(3)}
    assert links == {"c5": "e13", "c15": "e13", "c180": "e180"}


def _stats_by_unique_pairs(index: CHnswIndex) -> list[int]:
    """Edges per layer as ``stats`` computed them before its kernel: unique (min, max) pairs."""
    edges = []
    for level in range(index.n_layers):
        a, b = int(index.offsets[level]), int(index.offsets[level + 1])
        rows = np.repeat(np.arange(a, b), index.deg[a:b])
        cols = index.adj[a:b][index.adj[a:b] >= 0]
        pairs = np.unique(np.minimum(rows, cols).astype(np.int64) * index.vectors.shape[0] + np.maximum(rows, cols))
        edges.append(int(pairs.size))
    return edges


def test_stats_count_the_edges_a_unique_over_all_pairs_counts(medium) -> None:
    index, layers = medium
    updated, _ = CHnswIndex.updated(index, _changed(layers, seed=41))
    for each in (index, updated, CHnswIndex.build(layers, m=8, ef_construction=64, heuristic=False)):
        stats = each.stats()
        assert [layer["edges"] for layer in stats["layers"]] == _stats_by_unique_pairs(each)
        assert [layer["directed_links"] for layer in stats["layers"]] == [
            int(each.deg[each.offsets[level]:each.offsets[level + 1]].sum()) for level in range(each.n_layers)]


def test_renamed_nodes_keep_their_place_and_links(medium) -> None:
    """Every community of layers 1.. renamed (an id derived from members changes while its summary,
    hence its vector, stays): the update inserts nothing and answers as the index it continues."""
    index, layers = medium
    renamed = [layers[0]] + [([f"{node}-renamed" for node in ids], vectors) for ids, vectors in layers[1:]]
    order = [np.argsort(ids, kind="stable") for ids, _ in renamed]  # new ids sort elsewhere: rows move
    renamed = [([ids[i] for i in o], vectors[o]) for (ids, vectors), o in zip(renamed, order, strict=True)]
    updated, done = CHnswIndex.updated(index, renamed)
    assert done == {"mode": "update", "inserted": 0, "kept": sum(len(ids) for ids, _ in layers)}
    queries = _unit(np.random.default_rng(42), 40, 16)
    for before, after in zip(index.search_many(queries, 5), updated.search_many(queries, 5), strict=True):
        assert {level: [(f"{node}-renamed" if level else node, score) for node, score in hits]
                for level, hits in before.items()} == after
