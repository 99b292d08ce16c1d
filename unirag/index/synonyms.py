"""Synonym edges between entity names (HippoRAG 2 §3; HippoRAG §2): the ``synonym_edges`` artifact.

HippoRAG links two phrase nodes whose name embeddings have a cosine similarity of at
least 0.8 ("synonymy edges"), so a walk can cross from "Alan Turing" to "A. M. Turing"
even where no passage names both. HippoRAG 2's code keeps at most 100 neighbours per
phrase and skips names with fewer than 3 letters or digits; the same here, over the
``entity_name_vectors`` HNSW index (one batched k-NN search, no pair loop).

Every entity's search hits at or above the threshold (its *neighbour list*) are stored
with the edges, so a corpus change re-searches only what it can have changed
(:mod:`unirag.index.synonym_search`). Stored as ``artifacts/synonym_edges.npz``: entity ids,
edge ends (rows of those ids) and similarities, each pair once; the neighbour lists (CSR
over entity rows), the search's k and a digest of each entity's name and name vector.
"""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import config_hash
from unirag.index.synonym_search import (
    NeighbourLists,
    StoredSynonyms,
    SynonymConfig,
    SynonymEdges,
    edges_from,
    entity_digests,
    find_synonyms,
    full_neighbour_lists,
    update_neighbour_lists,
    usable_names,
)
from unirag.index.vector_artifacts import load_vectors, open_vector_index
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path

SYNONYM_EDGES = "synonym_edges"
__all__ = ["SYNONYM_EDGES", "SynonymConfig", "SynonymEdges", "build_synonym_edges", "find_synonyms",
           "load_synonym_edges", "synonym_path"]


def synonym_path(workspace: Workspace) -> Path:
    return workspace.artifact_path(f"{SYNONYM_EDGES}.npz")


def _previous_build(workspace: Workspace, config: SynonymConfig) -> tuple[StoredSynonyms | None, str]:
    """The last build's lists when whole and made with ``config``, else None and why not."""
    entry = workspace.manifest.entry(SYNONYM_EDGES)
    if entry is None:
        return None, "no previous build"
    if entry.get("config") != asdict(config):
        return None, "another configuration"
    if (workspace.manifest.artifact_problem(SYNONYM_EDGES) or "").startswith("damaged"):
        return None, "previous file damaged"
    try:
        with np.load(synonym_path(workspace)) as data:
            if "hit_indptr" not in data.files:
                return None, "previous build has no neighbour lists"
            stored = StoredSynonyms(
                json.loads(str(data["entity_ids"])), data["digests"],
                NeighbourLists(int(data["k"]), data["hit_indptr"], data["hit_rows"], data["hit_scores"]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None, "previous file unreadable"
    if len(stored.digests) != len(stored.entity_ids) or len(stored.lists.indptr) != len(stored.entity_ids) + 1:
        return None, "previous file inconsistent"
    return stored, ""


def build_synonym_edges(workspace: Workspace, load_graph: Callable[[], Any], inputs: dict[str, Any],
                        progress: Progress,
                        config: SynonymConfig | None = None) -> bool:
    """Build the artifact from ``entity_name_vectors`` (``inputs``: its fingerprint; ``load_graph``
    gives the merged graph's entity names, read only when a build is due); False when current.
    A whole previous build is updated (only new, changed and affected entities searched)."""
    config = config or SynonymConfig()
    fingerprint = config_hash({"needs": inputs, "config": asdict(config)})
    path = synonym_path(workspace)
    if workspace.manifest.is_current(SYNONYM_EDGES, fingerprint, (path,)):
        return False
    started = time.perf_counter()
    ids, vectors = load_vectors(workspace, "entity_name_vectors", "entity_name_vectors")
    ids = list(ids)
    index = open_vector_index(workspace, "entity_name_vectors", "entity_name_vectors")
    entities = load_graph().entities
    names = [entities[i].name if i in entities else "" for i in ids]
    digests = entity_digests(names, vectors)
    previous, reason = _previous_build(workspace, config)
    with progress.task("finding synonym edges (HippoRAG 2)"):
        update = (update_neighbour_lists(previous, ids, names, digests, vectors, index.search, config)
                  if previous is not None else None)
        if update is None:
            lists = full_neighbour_lists(ids, names, vectors, index.search, config)
            plan: dict[str, Any] = {"mode": "full", "reason": reason or "search length changed",
                                    "queried": int(np.count_nonzero(usable_names(names)))}
        else:
            lists, plan = update.lists, {"mode": "update", **update.counts}
        edges = edges_from(ids, usable_names(names), lists)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, entity_ids=np.array(json.dumps(edges.entity_ids)), source=edges.source,
                 target=edges.target, similarity=edges.similarity, digests=digests, k=np.array(lists.k),
                 hit_indptr=lists.indptr, hit_rows=lists.rows, hit_scores=lists.scores)
    workspace.manifest.set_entry(SYNONYM_EDGES, {
        "config": asdict(config), "inputs": fingerprint, "edges": int(edges.source.size), "update": plan,
        "seconds": round(time.perf_counter() - started, 3),
    }, files=(path,))
    return True


def load_synonym_edges(workspace: Workspace) -> SynonymEdges:
    with np.load(synonym_path(workspace)) as data:
        return SynonymEdges(json.loads(str(data["entity_ids"])), data["source"], data["target"], data["similarity"])
