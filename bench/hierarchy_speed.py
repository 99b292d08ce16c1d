"""Clustering cost against community quality, before and after the speed-ups of issue 20.

Each variant runs in a subprocess of its own (so its peak RSS and its numba compilation
are its own) on a built workspace's vectors:

* ``leanrag``: LeanRAG's level-1 clustering of the entity vectors, one Gaussian mixture
  over the whole layer (``gmm_block_size=0``, the former default) against blocks of 1,000
  (k-means, then a local PCA and mixture per block). Quality by the paper's measures
  (ArchRAG eqs. 3-5 on the raw 384-d vectors): Calinski-Harabasz index, mean cosine to the
  cluster centroid, and the cluster size distribution.
* ``tree``: the RAPTOR tree (UMAP + GMM/BIC, extractive summaries, the workspace's
  embedder) over the first ``--chunks`` chunk vectors, the full BIC sweep
  (``bic_patience=0``) against the bounded one: seconds and the tree's shape.
* ``umap``: the fixed cost of UMAP's first fit in a fresh process, without and with
  numba's on-disk cache (:func:`unirag.hierarchy.jit_cache.cached_umap`; run it twice: the
  first run with the cache fills it).

    .venv/bin/python bench/hierarchy_speed.py -w WORKSPACE [--only leanrag,tree,umap] [--chunks 1000]

CPU seconds are the process's own (user + system), so a machine shared with other jobs
inflates wall time but hardly these.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's unirag, not an installed one
LEANRAG_VARIANTS = {"one mixture per layer (before)": {"gmm_block_size": 0},
                    "blocks of 1,000 (after, default)": {}}
TREE_VARIANTS = {"full BIC sweep (before)": {"bic_patience": 0}, "BIC patience 10 (after, default)": {}}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _vectors(workspace: Path, name: str) -> np.ndarray:
    from unirag.index.vector_artifacts import load_vectors
    from unirag.workspace import Workspace

    _, vectors = load_vectors(Workspace.open(workspace), name, name)
    return np.asarray(vectors, dtype=np.float32)


def size_figures(labels: np.ndarray) -> dict[str, Any]:
    sizes = np.bincount(labels)
    return {"clusters": len(sizes), "p10": int(np.percentile(sizes, 10)), "median": float(np.median(sizes)),
            "p90": int(np.percentile(sizes, 90)), "max": int(sizes.max()), "singletons": int((sizes == 1).sum())}


def one_leanrag(workspace: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    from unirag.hierarchy.archrag import community_quality
    from unirag.hierarchy.leanrag import LeanragConfig, cluster_layer
    from unirag.llm.base import normalise_rows

    vectors = normalise_rows(_vectors(workspace, "entity_vectors"))
    config = LeanragConfig(**overrides)
    cpu, wall = _cpu(), time.perf_counter()
    labels, components = cluster_layer(vectors, config)
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    quality = community_quality(vectors, labels)
    return {"entities": len(vectors), "components": components, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "peak_rss_mib": _peak_mib(), "chi": round(float(quality["chi"]), 2),
            "cosine": round(float(quality["cosine"]), 3), **size_figures(labels)}


class TimedEmbedder:
    """The workspace's embedder, keeping the CPU seconds its calls took: the tree's figure
    is its clustering, and a summary embedded by one variant is a cache hit for the next."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.cpu_s = inner, inner.name, 0.0

    def embed(self, texts: list[str], stage: str = "embed") -> Any:
        started = _cpu()
        try:
            return self.inner.embed(texts, stage=stage)
        finally:
            self.cpu_s += _cpu() - started


def one_tree(workspace: Path, overrides: dict[str, Any], chunks: int) -> dict[str, Any]:
    from unirag.config import load_settings
    from unirag.hierarchy.layered import BuildModels
    from unirag.hierarchy.jit_cache import cached_umap
    from unirag.hierarchy.tree import TreeConfig, build_tree
    from unirag.llm.factory import build_stack
    from unirag.workspace import Workspace

    ws = Workspace.open(workspace)
    settings = load_settings(workspace)
    embedder = TimedEmbedder(build_stack(settings, ws.cache()).embedder)
    vectors = np.load(ws.artifact_path("chunk_vectors.npy"), mmap_mode="r")
    leaves = [(chunk.id, chunk.indexed_text, np.asarray(vectors[i], dtype=np.float32))
              for i, chunk in zip(range(chunks), ws.corpus.iter_chunks())]
    cached_umap()  # the JIT is the umap variant's figure, not this one's
    cpu, wall = _cpu(), time.perf_counter()
    result = build_tree(leaves, BuildModels(None, embedder), TreeConfig(**overrides))
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    per_layer = [len(result.layer(layer)) for layer in range(result.depth + 1)]
    return {"chunks": len(leaves), "cpu_s": round(cpu - embedder.cpu_s, 1), "embed_cpu_s": round(embedder.cpu_s, 1),
            "wall_s": round(wall, 1), "peak_rss_mib": _peak_mib(),
            "nodes_per_layer": per_layer, "singletons": result.stats.get("singletons")}


def one_umap(cached: bool) -> dict[str, Any]:
    cpu = _cpu()
    if cached:
        from unirag.hierarchy.jit_cache import cached_umap

        umap = cached_umap()
    else:
        import umap
    imported = _cpu()
    x = np.random.default_rng(0).standard_normal((300, 384)).astype(np.float32)
    umap.UMAP(n_neighbors=15, n_components=10, metric="cosine", random_state=224, n_jobs=1).fit_transform(x)
    first = _cpu()
    umap.UMAP(n_neighbors=15, n_components=10, metric="cosine", random_state=224, n_jobs=1).fit_transform(x)
    return {"import_cpu_s": round(imported - cpu, 1), "first_fit_cpu_s": round(first - imported, 1),
            "second_fit_cpu_s": round(_cpu() - first, 1)}


UMAP_VARIANTS = {"numba cache off (before)": {"cached": False}, "numba cache on (after)": {"cached": True}}
TABLES: dict[str, tuple[dict[str, dict[str, Any]], str, Any]] = {
    "leanrag": (LEANRAG_VARIANTS,
                "| LeanRAG level 1 | entities | CPU s | wall s | peak RSS MiB | CHI | cosine | clusters | "
                "size p10 / median / p90 / max | singletons |",
                lambda f: f"{f['entities']:,} | {f['cpu_s']} | {f['wall_s']} | {f['peak_rss_mib']:.0f} | {f['chi']} | "
                          f"{f['cosine']} | {f['clusters']:,} | {f['p10']} / {f['median']:g} / {f['p90']} / {f['max']} | "
                          f"{f['singletons']}"),
    "tree": (TREE_VARIANTS, "| RAPTOR tree | chunks | CPU s (embedding excluded) | wall s | peak RSS MiB | nodes per layer |",
             lambda f: f"{f['chunks']:,} | {f['cpu_s']} | {f['wall_s']} | {f['peak_rss_mib']:.0f} | "
                       f"{' · '.join(str(n) for n in f['nodes_per_layer'])}"),
    "umap": (UMAP_VARIANTS, "| UMAP in a fresh process | import CPU s | first fit CPU s | second fit CPU s |",
             lambda f: f"{f['import_cpu_s']} | {f['first_fit_cpu_s']} | {f['second_fit_cpu_s']}"),
}


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-W", "ignore", __file__, *args], check=True, capture_output=True,
                          text=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", type=Path, required=True, help="a workspace with entity and chunk vectors")
    parser.add_argument("--only", default="leanrag,tree,umap")
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        overrides = json.loads(args.overrides)
        run = {"leanrag": lambda: one_leanrag(args.workspace, overrides),
               "tree": lambda: one_tree(args.workspace, overrides, args.chunks),
               "umap": lambda: one_umap(bool(overrides.get("cached")))}[args.one]
        print(json.dumps(run()))
        return
    figures: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "workspace": str(args.workspace)}
    common = ["-w", str(args.workspace), "--chunks", str(args.chunks)]
    for section in args.only.split(","):
        variants, header, row = TABLES[section]
        figures[section] = {name: _child(*common, "--one", section, "--overrides", json.dumps(o))
                            for name, o in variants.items()}
        print(f"\n{header}\n|" + "---|" * header.count("|", 1))
        for name, f in figures[section].items():
            print(f"| {name} | {row(f)} |")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "hierarchy_speed.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
