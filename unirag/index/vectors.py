"""HNSW vector index (hnswlib) over L2-normalised vectors, inner-product space.

Labels are row numbers; the caller keeps the row -> id mapping next to the
index file. Scores returned are cosine similarities (1 - hnswlib's distance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import WorkspaceError
from unirag.workspace import atomic_path, atomic_write_bytes


def embedding_mismatch(artifact: str, built_with: str, query_with: str) -> WorkspaceError:
    """One message for every way a query's embeddings cannot be compared with an
    artifact's (another model name, another dimension): the fix is the same."""
    return WorkspaceError(
        f"'{artifact}' was embedded with {built_with}, but the query embeds with {query_with}: "
        "use the same embedding settings, or re-index with 'unirag index --rebuild'"
    )


class HnswIndex:
    """Build once, save to the workspace, load once per process, search many times."""

    def __init__(self, index: Any, ids: list[str], dim: int, label: str = "vectors") -> None:
        self._index = index
        self.ids = ids
        self.dim = dim
        self.label = label  # the artifact's name, for messages

    @classmethod
    def build(cls, vectors: np.ndarray, ids: list[str], m: int = 16, ef_construction: int = 200) -> HnswIndex:
        import hnswlib

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(ids) != vectors.shape[0]:
            raise ValueError(f"{len(ids)} ids for {vectors.shape[0]} vectors")
        dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 1
        index = hnswlib.Index(space="ip", dim=dim)
        index.init_index(max_elements=max(1, len(ids)), ef_construction=ef_construction, M=m, random_seed=42)
        if len(ids):
            index.add_items(vectors, np.arange(len(ids)), num_threads=-1)
        return cls(index, list(ids), dim)

    @staticmethod
    def ids_path(path: Path) -> Path:
        """The row -> id map saved beside the index at ``path``."""
        return path.with_suffix(".ids.json")

    def save(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            self._index.save_index(str(tmp))
        atomic_write_bytes(self.ids_path(path), json.dumps({"dim": self.dim, "ids": self.ids}).encode())

    @classmethod
    def load(cls, path: Path) -> HnswIndex:
        import hnswlib

        meta = json.loads(cls.ids_path(path).read_text())
        index = hnswlib.Index(space="ip", dim=meta["dim"])
        index.load_index(str(path), max_elements=max(1, len(meta["ids"])))
        return cls(index, meta["ids"], meta["dim"], path.stem)

    def labelled(self, label: str) -> HnswIndex:
        """This index, named ``label`` (its artifact) in messages."""
        self.label = label
        return self

    @staticmethod
    def load_ids(path: Path) -> list[str]:
        """The row -> id map of a saved index, without loading the index."""
        return list(json.loads(HnswIndex.ids_path(path).read_text())["ids"])

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-k (id, cosine) per query row, best first."""
        query = np.atleast_2d(np.asarray(query, dtype=np.float32))
        k = min(k, len(self.ids))
        if k <= 0:
            return [[] for _ in range(query.shape[0])]
        if query.shape[1] != self.dim:
            raise embedding_mismatch(self.label, f"{self.dim}-dimension vectors", f"{query.shape[1]}-dimension vectors")
        self._index.set_ef(max(64, 2 * k))
        labels, distances = self._index.knn_query(query, k=k)
        return [
            [(self.ids[int(label)], float(1.0 - dist)) for label, dist in zip(row_l, row_d, strict=True)]
            for row_l, row_d in zip(labels, distances, strict=True)
        ]
