"""Synonym edges between entity names (HippoRAG 2 §3; HippoRAG §2): the ``synonym_edges`` artifact.

HippoRAG links two phrase nodes whose name embeddings have a cosine similarity of at
least 0.8 ("synonymy edges"), so a walk can cross from "Alan Turing" to "A. M. Turing"
even where no passage names both. HippoRAG 2's code keeps at most 100 neighbours per
phrase and skips names with fewer than 3 letters or digits; the same here, over the
``entity_name_vectors`` HNSW index (one batched k-NN search, no pair loop).
Stored as ``artifacts/synonym_edges.npz``: entity ids, edge ends (rows of those ids)
and similarities, each pair once.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import config_hash
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path

SYNONYM_EDGES = "synonym_edges"
_ALNUM = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class SynonymConfig:
    """HippoRAG 2's defaults (``synonymy_edge_sim_threshold``, its 100-neighbour cap)."""

    threshold: float = 0.8
    max_neighbours: int = 100


@dataclass(frozen=True)
class SynonymEdges:
    """Undirected edges between entities: ``source[i]`` -- ``target[i]`` with ``similarity[i]``."""

    entity_ids: list[str]
    source: np.ndarray
    target: np.ndarray
    similarity: np.ndarray


def find_synonyms(entity_ids: list[str], names: list[str], vectors: np.ndarray,
                  search: Callable[[np.ndarray, int], list[list[tuple[str, float]]]],
                  config: SynonymConfig) -> SynonymEdges:
    """Pairs of entities at least ``config.threshold`` similar; ``search(vectors, k)`` is an
    HNSW search returning (id, cosine) lists per row, best first."""
    row = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    usable = np.array([len(_ALNUM.sub("", name)) > 2 for name in names], dtype=bool)
    pairs: dict[tuple[int, int], float] = {}
    rows = np.flatnonzero(usable)
    k = min(config.max_neighbours + 1, len(entity_ids))
    for start in range(0, len(rows), 4096):
        batch = rows[start:start + 4096]
        for i, hits in zip(batch.tolist(), search(np.asarray(vectors[batch], dtype=np.float32), k), strict=True):
            for other_id, score in hits:
                j = row.get(other_id)
                if score < config.threshold:
                    break
                if j is None or j == i or not usable[j]:
                    continue
                key = (i, j) if i < j else (j, i)
                pairs[key] = max(pairs.get(key, 0.0), float(score))
    ordered = sorted(pairs)
    return SynonymEdges(
        entity_ids=list(entity_ids),
        source=np.array([a for a, _ in ordered], dtype=np.int64),
        target=np.array([b for _, b in ordered], dtype=np.int64),
        similarity=np.array([pairs[p] for p in ordered], dtype=np.float64),
    )


def synonym_path(workspace: Workspace) -> Path:
    return workspace.artifact_path(f"{SYNONYM_EDGES}.npz")


def build_synonym_edges(workspace: Workspace, load_graph: Callable[[], Any], inputs: dict[str, Any],
                        progress: Progress,
                        config: SynonymConfig | None = None) -> bool:
    """Build the artifact from ``entity_name_vectors`` (``inputs``: its fingerprint; ``load_graph``
    gives the merged graph's entity names, read only when a build is due); False when current."""
    from unirag.index.vector_artifacts import load_vectors, open_vector_index

    config = config or SynonymConfig()
    fingerprint = config_hash({"needs": inputs, "config": asdict(config)})
    path = synonym_path(workspace)
    if workspace.is_current(SYNONYM_EDGES, fingerprint, (path,)):
        return False
    started = time.perf_counter()
    ids, vectors = load_vectors(workspace, "entity_name_vectors", "entity_name_vectors")
    index = open_vector_index(workspace, "entity_name_vectors", "entity_name_vectors")
    entities = load_graph().entities
    names = [entities[i].name if i in entities else "" for i in ids]
    with progress.task("finding synonym edges (HippoRAG 2)"):
        edges = find_synonyms(list(ids), names, vectors, index.search, config)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, entity_ids=np.array(json.dumps(edges.entity_ids)), source=edges.source,
                 target=edges.target, similarity=edges.similarity)
    workspace.set_manifest_entry(SYNONYM_EDGES, {
        "config": asdict(config), "inputs": fingerprint, "edges": int(edges.source.size),
        "seconds": round(time.perf_counter() - started, 3),
    }, files=(path,))
    return True


def load_synonym_edges(workspace: Workspace) -> SynonymEdges:
    with np.load(synonym_path(workspace)) as data:
        return SynonymEdges(json.loads(str(data["entity_ids"])), data["source"], data["target"], data["similarity"])
