"""Benchmark: C-HNSW hierarchical search vs one HNSW per layer (ArchRAG appendix, Figure 5).

Dataset (as in the paper): layer 0 has ``--n`` nodes; each higher layer's size is the one
below divided by a random 3 or 4, until a layer has fewer than 100 nodes. Vectors are
random unit vectors of ``--dim`` dimensions (``--data random``, the paper's setting), or
``--data clustered``: each node of layer l is a random node of layer l+1 plus noise, so
layers share structure like communities and their members. ``--queries`` random unit
queries (``clustered``: a perturbed layer-0 node); top-``--k`` of every layer per query.

Compared, all with M=``--m``, ef_construction=``--ef-construction``, one thread, at each
search beam width given to ``--ef`` (several values reuse one build):

(a) C-HNSW hierarchical search (Algorithm 2): one pass returns the top-k of every layer;
(b) Base-HNSW: one hnswlib index per layer, each layer queried separately (the paper's baseline);
(c) the same numba engine and graphs, every layer searched from scratch from its own fixed
    entry node (separates the algorithm's gain from the implementation language's);
(d) the same numba engine, every layer reached by descending from the top layer again
    (greedy above the target): the paper's "naive" per-layer query on C-HNSW.

Two orders: query-major (one query searches all layers, then the next query -- what a RAG
question does; the primary table) and layer-major (all queries against one layer per
call, which keeps that layer's vectors in cache; (b)-(d) only). Per-layer times of the
numba modes are T(layers top..l) - T(layers top..l+1); hnswlib calls are timed one by one
(the query-major (b) includes Python call overhead, a few microseconds per call).

Reported: build times, query CPU time (all queries; best of ``--repeat`` interleaved
rounds; thread CPU time is barely disturbed by other processes on a shared machine),
speedups, recall@k against exact numpy search, mean distance evaluations per query (numba
modes), and the JIT compile time measured in a subprocess with an empty numba cache (the
main process uses the normal on-disk cache).

    .venv/bin/python bench/bench_chnsw.py [--n 100000] [--dim 384] [--queries 200] [--k 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from unirag.hierarchy.chnsw import CHnswIndex

_JIT_PROBE = """
import time, numpy as np
t0 = time.perf_counter()
from unirag.hierarchy.chnsw import CHnswIndex
x = np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32)
index = CHnswIndex.build([([str(i) for i in range(30)], x[:30]), ([str(i) for i in range(10)], x[30:])], m=4)
t1 = time.perf_counter()
index.search_arrays(x[:2], k=2)
t2 = time.perf_counter()
index.search_layer_arrays(x[:2], 0, k=2)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def layer_sizes(n: int, rng: np.random.Generator) -> list[int]:
    sizes = [n]
    while sizes[-1] >= 100:
        sizes.append(max(1, sizes[-1] // int(rng.choice([3, 4]))))
    return sizes


def make_data(sizes: list[int], dim: int, n_queries: int, kind: str, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "random":
        layers = [unit(rng.standard_normal((size, dim), dtype=np.float32)) for size in sizes]
        return layers, unit(rng.standard_normal((n_queries, dim), dtype=np.float32))
    layers: list[np.ndarray] = [unit(rng.standard_normal((sizes[-1], dim), dtype=np.float32))]
    for size in reversed(sizes[:-1]):
        parents = layers[0][rng.integers(0, layers[0].shape[0], size)]
        noise = rng.standard_normal((size, dim), dtype=np.float32) * (0.6 / np.sqrt(dim))
        layers.insert(0, unit(parents + noise))
    picks = layers[0][rng.integers(0, sizes[0], n_queries)]
    return layers, unit(picks + rng.standard_normal((n_queries, dim), dtype=np.float32) * (0.6 / np.sqrt(dim)))


def exact_topk(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ vectors.T
    k = min(k, vectors.shape[0])
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1)
    return np.take_along_axis(part, order, axis=1)


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    k = exact.shape[1]
    return float(np.mean([len(set(f.tolist()) & set(e.tolist())) / k for f, e in zip(found, exact, strict=True)]))


def time_interleaved(jobs: dict[Any, Any], repeat: int) -> tuple[dict[Any, float], dict[Any, float], dict[Any, Any]]:
    """Run every job ``repeat`` times, round-robin, keeping each job's best CPU and wall time.

    CPU time of the calling thread (every engine here runs single-threaded in it) is barely
    disturbed by other processes on a shared machine; round-robin order exposes all jobs to
    the same background load. Returns (cpu seconds, wall seconds, last result) per job.
    """
    cpu = dict.fromkeys(jobs, float("inf"))
    wall = dict.fromkeys(jobs, float("inf"))
    results: dict[Any, Any] = {}
    for _ in range(repeat):
        for key, fn in jobs.items():
            c0, w0 = time.thread_time(), time.perf_counter()
            results[key] = fn()
            cpu[key] = min(cpu[key], time.thread_time() - c0)
            wall[key] = min(wall[key], time.perf_counter() - w0)
    return cpu, wall, results


def jit_compile_seconds() -> dict[str, float]:
    """Cold JIT compile time: a subprocess with an empty numba cache builds and searches a toy index."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(REPO_ROOT)}
        out = subprocess.run([sys.executable, "-c", _JIT_PROBE], env=env, capture_output=True, text=True, check=True)
    build, hier, single = (float(x) for x in out.stdout.split())
    return {"build_kernel_s": round(build, 2), "multi_layer_kernel_s": round(hier, 2),
            "single_layer_kernel_s": round(single, 2), "total_s": round(build + hier + single, 2)}


def measure(
    ef: int, args: argparse.Namespace, sizes: list[int], queries: np.ndarray, exact: list[np.ndarray],
    chnsw: CHnswIndex, base: list[Any], base_build: list[float],
) -> dict[str, Any]:
    """Time and score (a)-(d) at one beam width ``ef``; print the tables; return the figures."""
    k, reps = args.k, args.repeat
    n_layers = len(sizes)
    for index in base:
        index.set_ef(ef)
    levels = range(n_layers)
    # Query-major: one query at a time, all layers (what one RAG question costs). Per-layer
    # time of the numba modes = T(layers top..l) - T(layers top..l+1); hnswlib is timed per call.
    hnsw_layer_cpu = [float("inf")] * n_layers

    def hnswlib_query_major() -> list[np.ndarray]:
        spent = [0.0] * n_layers
        labels = [np.empty((len(queries), min(k, size)), dtype=np.uint64) for size in sizes]
        for qi in range(len(queries)):
            q = queries[qi : qi + 1]
            for level in reversed(levels):
                t = time.thread_time()
                labels[level][qi] = base[level].knn_query(q, k=min(k, sizes[level]), num_threads=1)[0][0]
                spent[level] += time.thread_time() - t
        for level in levels:
            hnsw_layer_cpu[level] = min(hnsw_layer_cpu[level], spent[level])
        return labels

    modes = {"a": "hierarchical", "c": "layer_entry", "d": "top_down"}
    jobs: dict[Any, Any] = {("q", "b"): hnswlib_query_major}
    for level in levels:
        for m, start in modes.items():
            jobs[("q", m, level)] = lambda level=level, start=start: chnsw.search_arrays(
                queries, k, ef, lowest=level, start=start)
        # Layer-major: all queries against one layer per call (batch; that layer stays in cache).
        kq = min(k, sizes[level])
        jobs[("l", "b", level)] = lambda level=level, kq=kq: base[level].knn_query(queries, k=kq, num_threads=1)
        jobs[("l", "c", level)] = lambda level=level: chnsw.search_layer_arrays(queries, level, k, ef, from_top=False)
        jobs[("l", "d", level)] = lambda level=level: chnsw.search_layer_arrays(queries, level, k, ef)
    import hnswlib

    one = hnswlib.Index(space="ip", dim=queries.shape[1])
    one.init_index(max_elements=1, M=args.m)
    one.add_items(queries[:1], np.arange(1))

    def call_overhead() -> None:
        for qi in range(len(queries)):
            for _ in levels:
                one.knn_query(queries[qi : qi + 1], k=1, num_threads=1)

    jobs[("overhead",)] = call_overhead
    log(f"timing {len(jobs)} jobs x {reps} rounds")
    cpu, wall, res = time_interleaved(jobs, reps)

    def per_layer(m: str, level: int) -> float:
        if m == "b":
            return hnsw_layer_cpu[level]
        below = cpu[("q", m, level + 1)] if level + 1 < n_layers else 0.0
        return max(cpu[("q", m, level)] - below, 1e-6)

    q_totals = {m: cpu[("q", m, 0)] for m in modes} | {"b": cpu[("q", "b")]}
    q_wall = {m: wall[("q", m, 0)] for m in modes} | {"b": wall[("q", "b")]}
    l_totals = {m: sum(cpu[("l", m, level)] for level in levels) for m in "bcd"}
    rows_out: list[dict[str, Any]] = []
    for level in levels:
        kq = min(k, sizes[level])
        found = {m: res[("q", m, 0)][0][:, level, :kq] for m in modes} | {"b": res[("q", "b")][level]}
        row: dict[str, Any] = {"layer": level, "nodes": sizes[level]}
        for m in "abcd":
            row[f"{m}_ms"] = per_layer(m, level) * 1e3
            row[f"recall_{m}"] = recall(found[m], exact[level])
        for m in "bcd":
            row[f"{m}_over_a"] = row[f"{m}_ms"] / row["a_ms"]
            row[f"batch_{m}_ms"] = cpu[("l", m, level)] * 1e3
        for m in "acd":
            row[f"ndist_{m}"] = float(res[("q", m, 0)][2][:, level].mean())
        row["batch_recall_b"] = recall(res[("l", "b", level)][0], exact[level])
        row["base_build_s"] = base_build[level]
        rows_out.append(row)
    mean_recall = {m: float(np.mean([r[f"recall_{m}"] for r in rows_out])) for m in "abcd"}
    per_layer_ratio = float(np.mean([r["b_over_a"] for r in rows_out]))

    print(f"\nC-HNSW benchmark: n={args.n} dim={args.dim} data={args.data} layer sizes={sizes} "
          f"queries={args.queries} k={k} M={args.m} ef={ef} ef_construction={args.ef_construction}; "
          f"CPU ms for all queries, best of {reps} interleaved rounds, one thread.\n")
    print("Query-major (each query searches every layer before the next query, as a RAG question does):\n")
    header = ("| layer | nodes | (a) C-HNSW hier. | (b) hnswlib/layer | (c) numba flat | (d) numba top-down "
              "| b/a | c/a | d/a | recall a / b / c / d | dist evals/query a / c / d |")
    print(header)
    print("|" + "|".join(["---"] * (header.count("|") - 1)) + "|")
    for r in rows_out:
        print(f"| {r['layer']} | {r['nodes']} | {r['a_ms']:.1f} | {r['b_ms']:.1f} | {r['c_ms']:.1f} | {r['d_ms']:.1f} "
              f"| {r['b_over_a']:.2f} | {r['c_over_a']:.2f} | {r['d_over_a']:.2f} "
              f"| {r['recall_a']:.3f} / {r['recall_b']:.3f} / {r['recall_c']:.3f} / {r['recall_d']:.3f} "
              f"| {r['ndist_a']:.0f} / {r['ndist_c']:.0f} / {r['ndist_d']:.0f} |")
    qa = q_totals["a"]
    print(f"| all | {sum(sizes)} | {qa * 1e3:.1f} | {q_totals['b'] * 1e3:.1f} | {q_totals['c'] * 1e3:.1f} "
          f"| {q_totals['d'] * 1e3:.1f} | {q_totals['b'] / qa:.2f} | {q_totals['c'] / qa:.2f} | {q_totals['d'] / qa:.2f} "
          f"| {mean_recall['a']:.3f} / {mean_recall['b']:.3f} / {mean_recall['c']:.3f} / {mean_recall['d']:.3f} | |")
    overhead = cpu[("overhead",)]
    print(f"\n(b) includes {overhead * 1e3:.1f} ms of Python call overhead ({len(queries) * n_layers} knn_query "
          f"calls on a 1-node index); (b) without it: {(q_totals['b'] - overhead) * 1e3:.1f} ms, "
          f"{(q_totals['b'] - overhead) / qa:.2f}x (a)")
    print(f"mean of per-layer (b)/(a): {per_layer_ratio:.2f}; wall-clock totals ms: "
          + ", ".join(f"({m}) {q_wall[m] * 1e3:.1f}" for m in "abcd"))
    print("\nLayer-major (all queries against one layer per call, batch) -- CPU ms:\n")
    header = "| layer | (b) hnswlib batch | (c) numba flat batch | (d) numba top-down batch |"
    print(header)
    print("|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['layer']} | {r['batch_b_ms']:.1f} | {r['batch_c_ms']:.1f} | {r['batch_d_ms']:.1f} |")
    print(f"| all | {l_totals['b'] * 1e3:.1f} | {l_totals['c'] * 1e3:.1f} | {l_totals['d'] * 1e3:.1f} |")
    print(f"\nvs (a) query-major {qa * 1e3:.1f} ms: (b) {l_totals['b'] / qa:.2f}x, (c) {l_totals['c'] / qa:.2f}x, "
          f"(d) {l_totals['d'] / qa:.2f}x")
    return {
        "ef": ef, "layers": rows_out, "hnswlib_call_overhead_ms": overhead * 1e3, "mean_recall": mean_recall, "mean_per_layer_b_over_a": per_layer_ratio,
        "query_major_cpu_ms": {key: value * 1e3 for key, value in q_totals.items()},
        "query_major_wall_ms": {key: value * 1e3 for key, value in q_wall.items()},
        "layer_major_cpu_ms": {key: value * 1e3 for key, value in l_totals.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="layer-0 nodes")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--m", type=int, default=32)
    parser.add_argument("--ef", type=int, nargs="+", default=[100], help="search beam width(s), each timed")
    parser.add_argument("--ef-link", type=int, default=1, help="C-HNSW build: beam for the upper-layer node c")
    parser.add_argument("--ef-construction", type=int, default=100)
    parser.add_argument("--data", choices=["random", "clustered"], default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds per query batch (best kept)")
    parser.add_argument("--no-heuristic", action="store_true", help="C-HNSW: keep nearest neighbours when pruning")
    parser.add_argument("--no-refine", action="store_true", help="C-HNSW: plain Algorithm 3 inter-layer links")
    parser.add_argument("--skip-jit", action="store_true", help="do not measure the cold JIT compile time")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    sizes = layer_sizes(args.n, rng)
    log(f"layers {sizes}, dim {args.dim}, data {args.data}")
    jit = {} if args.skip_jit else jit_compile_seconds()
    if jit:
        log(f"cold JIT compile: {jit}")
    t0 = time.perf_counter()
    vectors, queries = make_data(sizes, args.dim, args.queries, args.data, args.seed + 1)
    log(f"data generated in {time.perf_counter() - t0:.1f} s")
    exact = [exact_topk(v, queries, args.k) for v in vectors]

    # Warm the kernels (cache load or compile) outside every timed region.
    t0 = time.perf_counter()
    probe = CHnswIndex.build([([str(i) for i in range(20)], vectors[0][:20])], m=4)
    probe.search_arrays(queries[:1], k=1)
    probe.search_layer_arrays(queries[:1], 0, k=1)
    warm_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    chnsw = CHnswIndex.build([([str(i) for i in range(len(v))], v) for v in vectors], m=args.m,
                             ef_construction=args.ef_construction, seed=args.seed,
                             heuristic=not args.no_heuristic, refine_links=not args.no_refine,
                             ef_link=args.ef_link)
    chnsw_build = time.perf_counter() - t0
    log(f"C-HNSW built in {chnsw_build:.1f} s")

    import hnswlib

    base: list[Any] = []
    base_build: list[float] = []
    for level, v in enumerate(vectors):
        t0 = time.perf_counter()
        index = hnswlib.Index(space="ip", dim=args.dim)
        index.init_index(max_elements=v.shape[0], ef_construction=args.ef_construction, M=args.m, random_seed=args.seed)
        index.add_items(v, np.arange(v.shape[0]), num_threads=1)
        base.append(index)
        base_build.append(time.perf_counter() - t0)
        log(f"hnswlib layer {level} built in {base_build[-1]:.1f} s")

    reports = [measure(ef, args, sizes, queries, exact, chnsw, base, base_build) for ef in args.ef]
    print(f"\nbuild: C-HNSW (numba, 1 thread) {chnsw_build:.1f} s; Base-HNSW (hnswlib, 1 thread) {sum(base_build):.1f} s")
    print(f"kernel warm-up in this process (on-disk cache load, or compile after an edit) {warm_s:.2f} s; "
          f"cold JIT compile {jit or 'not measured'}")
    print(f"C-HNSW stats: {chnsw.stats()['layers']}")

    if args.json:
        report = {
            "params": vars(args) | {"json": str(args.json)}, "layer_sizes": sizes, "runs": reports,
            "build_s": {"chnsw": chnsw_build, "hnswlib": sum(base_build), "hnswlib_per_layer": base_build},
            "warm_s": warm_s, "jit_cold": jit,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
            "chnsw_stats": chnsw.stats(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
