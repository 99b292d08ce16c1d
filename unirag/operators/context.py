"""What operators read and write: the per-query state and per-process resources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from unirag.config import Settings
from unirag.errors import WorkspaceError
from unirag.llm.factory import Models
from unirag.workspace import Workspace


@dataclass
class ContextItem:
    """One retrieved element with its provenance.

    ``kind`` is chunk / entity / relationship / community / ...; ``source`` is
    the document or passage it came from (a title, else a path).
    """

    kind: str
    id: str
    text: str
    score: float
    source: str
    provenance: dict[str, Any] = field(default_factory=dict)
    operator: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "text": self.text,
            "score": round(self.score, 6),
            "source": self.source,
            "provenance": self.provenance,
            "operator": self.operator,
        }


class Resources:
    """Indices and stores opened once per process and shared by every query.

    Loading is lazy: a method that needs only BM25 never loads the HNSW index.
    """

    def __init__(self, workspace: Workspace, settings: Settings) -> None:
        self.workspace = workspace
        self.settings = settings
        self._loaded: dict[str, Any] = {}

    def _artifact(self, name: str, loader: Any) -> Any:
        if name not in self._loaded:
            if self.workspace.manifest_entry(name) is None:
                raise WorkspaceError(
                    f"{self.workspace.root} has no '{name}' artifact: run 'unirag index SOURCE -w {self.workspace.root}'"
                )
            try:
                self._loaded[name] = loader()
            except (OSError, ValueError, RuntimeError) as exc:
                raise WorkspaceError(
                    f"artifact '{name}' in {self.workspace.root} is damaged ({type(exc).__name__}): "
                    "run 'unirag index' on the same sources to rebuild it"
                ) from None
        return self._loaded[name]

    def check_embedding_model(self, artifact: str, model: str) -> None:
        """Vectors are comparable only with the model that made them."""
        entry = self.workspace.manifest_entry(artifact) or {}
        built_with = entry.get("config", {}).get("model")
        if built_with and built_with != model:
            raise WorkspaceError(
                f"'{artifact}' was embedded with {built_with}, but the query embeds with {model}: "
                "use the same embedding settings, or re-index with 'unirag index --rebuild'"
            )

    def chunk_hnsw(self, embedding_model: str) -> Any:
        """The chunk HNSW index, checked against the query's embedding model."""
        if "chunk_vectors" not in self._loaded:
            self.check_embedding_model("chunk_vectors", embedding_model)
        return self._chunk_hnsw

    @property
    def _chunk_hnsw(self) -> Any:
        from unirag.index.chunks import CHUNK_VECTORS, chunk_vector_paths
        from unirag.index.vectors import HnswIndex

        return self._artifact(CHUNK_VECTORS, lambda: HnswIndex.load(chunk_vector_paths(self.workspace)[1]))

    @property
    def chunk_bm25(self) -> Any:
        from unirag.index.bm25 import Bm25Index
        from unirag.index.chunks import CHUNK_BM25

        return self._artifact(CHUNK_BM25, lambda: Bm25Index.load(self.workspace.artifact_path("chunks.bm25")))

    def chunk_items(self, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
        """Turn (chunk id, score) pairs into context items, fetched by id."""
        chunks = self.workspace.get_chunks([cid for cid, _ in scored])
        items = []
        for cid, score in scored:
            chunk = chunks.get(cid)
            if chunk is None:
                continue
            items.append(
                ContextItem(
                    kind="chunk",
                    id=cid,
                    text=chunk.indexed_text,
                    score=score,
                    source=chunk.title or chunk.source,
                    provenance={"doc_id": chunk.doc_id, "chunk_index": chunk.index, "path": chunk.source},
                    operator=operator,
                )
            )
        return items


@dataclass
class QueryState:
    """Everything one query accumulates as its operators run."""

    question: str
    resources: Resources
    models: Models
    query_vector: np.ndarray | None = None
    items: list[ContextItem] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
