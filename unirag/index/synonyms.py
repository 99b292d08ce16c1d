"""Synonym edges between entity names (HippoRAG 2 §3; HippoRAG §2): the ``synonym_edges`` artifact.

HippoRAG links two phrase nodes whose name embeddings have a cosine similarity of at
least 0.8 ("synonymy edges"), so a walk can cross from "Alan Turing" to "A. M. Turing"
even where no passage names both. HippoRAG 2's code keeps at most 100 neighbours per
phrase and skips names with fewer than 3 letters or digits; the same here, over the
``entity_name_vectors`` HNSW index (one batched k-NN search, no pair loop).

Every entity's search hits at or above the threshold (its *neighbour list*) are stored
with the edges, so a corpus change re-searches only what it can have changed
(:mod:`unirag.index.synonym_update`). Stored as ``artifacts/synonym_edges.npz``: entity ids,
edge ends (rows of those ids) and similarities, each pair once; the neighbour lists (CSR
over entity rows), the search's k and a digest of each entity's name and name vector.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import config_hash
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path

SYNONYM_EDGES = "synonym_edges"
_ALNUM = re.compile(r"[^A-Za-z0-9]")
_QUERY_BATCH = 4096

Search = Callable[[np.ndarray, int], list[list[tuple[str, float]]]]
Hits = list[tuple[int, float]]  # (entity row, cosine), best first


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


@dataclass(frozen=True)
class NeighbourLists:
    """Each entity's search hits at or above the threshold, best first, as CSR over entity rows
    (the entity itself and names too short for an edge included: they hold places in the top k).
    A list of ``k`` hits is *full*: entities past it may be as similar."""

    k: int
    indptr: np.ndarray
    rows: np.ndarray
    scores: np.ndarray

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = int(self.indptr[row]), int(self.indptr[row + 1])
        return self.rows[start:end], self.scores[start:end]

    @classmethod
    def from_hits(cls, k: int, hits: Sequence[Hits]) -> NeighbourLists:
        lengths = np.array([len(h) for h in hits], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(k, indptr, np.array([j for h in hits for j, _ in h], dtype=np.int64),
                   np.array([s for h in hits for _, s in h], dtype=np.float64))


def usable_names(names: Sequence[str]) -> np.ndarray:
    """Which names may have synonym edges: at least 3 letters or digits (HippoRAG 2)."""
    return np.array([len(_ALNUM.sub("", name)) > 2 for name in names], dtype=bool)


def search_k(config: SynonymConfig, n_entities: int) -> int:
    """Hits per search: the entity itself plus ``max_neighbours``."""
    return min(config.max_neighbours + 1, n_entities)


def query_neighbours(rows: np.ndarray, vectors: np.ndarray, row_of: dict[str, int], search: Search, k: int,
                     threshold: float) -> dict[int, Hits]:
    """The neighbour list of each of ``rows``: its top-k hits cut at the first below ``threshold``."""
    lists: dict[int, Hits] = {}
    for start in range(0, len(rows), _QUERY_BATCH):
        batch = rows[start:start + _QUERY_BATCH]
        found = search(np.asarray(vectors[batch], dtype=np.float32), k)
        for i, hits in zip(batch.tolist(), found, strict=True):
            kept: Hits = []
            for other_id, score in hits:
                if score < threshold:
                    break
                j = row_of.get(other_id)
                if j is not None:
                    kept.append((j, float(score)))
            lists[i] = kept
    return lists


def edges_from(entity_ids: list[str], usable: np.ndarray, lists: NeighbourLists) -> SynonymEdges:
    """Each pair of usable entities where one is in the other's list, once, with the higher score."""
    owners = np.repeat(np.arange(len(entity_ids), dtype=np.int64), np.diff(lists.indptr))
    keep = (owners != lists.rows) & usable[owners] & usable[lists.rows] if owners.size else np.zeros(0, bool)
    a = np.minimum(owners[keep], lists.rows[keep])
    b = np.maximum(owners[keep], lists.rows[keep])
    scores = lists.scores[keep]
    if not a.size:
        empty = np.zeros(0, dtype=np.int64)
        return SynonymEdges(list(entity_ids), empty, empty.copy(), np.zeros(0, dtype=np.float64))
    order = np.lexsort((-scores, b, a))  # by pair, the best score first
    a, b, scores = a[order], b[order], scores[order]
    first = np.concatenate([[True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return SynonymEdges(list(entity_ids), a[first], b[first], scores[first])


def full_neighbour_lists(entity_ids: list[str], names: list[str], vectors: np.ndarray, search: Search,
                         config: SynonymConfig) -> NeighbourLists:
    """Every usable entity searched (a whole build)."""
    row_of = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    k = search_k(config, len(entity_ids))
    found = query_neighbours(np.flatnonzero(usable_names(names)), vectors, row_of, search, k, config.threshold)
    return NeighbourLists.from_hits(k, [found.get(i, []) for i in range(len(entity_ids))])


def find_synonyms(entity_ids: list[str], names: list[str], vectors: np.ndarray, search: Search,
                  config: SynonymConfig) -> SynonymEdges:
    """Pairs of entities at least ``config.threshold`` similar; ``search(vectors, k)`` is an
    HNSW search returning (id, cosine) lists per row, best first."""
    lists = full_neighbour_lists(entity_ids, names, vectors, search, config)
    return edges_from(list(entity_ids), usable_names(names), lists)


def entity_digests(names: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """A digest of each entity's name and name vector: what says it changed since the last build."""
    out = np.empty(len(names), dtype="S16")
    for i, name in enumerate(names):
        digest = hashlib.blake2b(name.encode("utf-8"), digest_size=16)
        digest.update(np.ascontiguousarray(vectors[i], dtype=np.float32).tobytes())
        out[i] = digest.digest()
    return out


@dataclass(frozen=True)
class StoredSynonyms:
    """What the last build left for the next: its entities, their digests and neighbour lists."""

    entity_ids: list[str]
    digests: np.ndarray
    lists: NeighbourLists


def synonym_path(workspace: Workspace) -> Path:
    return workspace.artifact_path(f"{SYNONYM_EDGES}.npz")


def _previous_build(workspace: Workspace, config: SynonymConfig) -> tuple[StoredSynonyms | None, str]:
    """The last build's lists when whole and made with ``config``, else None and why not."""
    entry = workspace.manifest_entry(SYNONYM_EDGES)
    if entry is None:
        return None, "no previous build"
    if entry.get("config") != asdict(config):
        return None, "another configuration"
    if (workspace.artifact_problem(SYNONYM_EDGES) or "").startswith("damaged"):
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
    from unirag.index.synonym_update import update_neighbour_lists
    from unirag.index.vector_artifacts import load_vectors, vector_paths
    from unirag.index.vectors import HnswIndex

    config = config or SynonymConfig()
    fingerprint = config_hash({"needs": inputs, "config": asdict(config)})
    path = synonym_path(workspace)
    if workspace.is_current(SYNONYM_EDGES, fingerprint, (path,)):
        return False
    started = time.perf_counter()
    ids, vectors = load_vectors(workspace, "entity_name_vectors", "entity_name_vectors")
    ids = list(ids)
    index = HnswIndex.load(vector_paths(workspace, "entity_name_vectors")[1])
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
    workspace.set_manifest_entry(SYNONYM_EDGES, {
        "config": asdict(config), "inputs": fingerprint, "edges": int(edges.source.size), "update": plan,
        "seconds": round(time.perf_counter() - started, 3),
    }, files=(path,))
    return True


def load_synonym_edges(workspace: Workspace) -> SynonymEdges:
    with np.load(synonym_path(workspace)) as data:
        return SynonymEdges(json.loads(str(data["entity_ids"])), data["source"], data["target"], data["similarity"])
