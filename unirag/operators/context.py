"""What operators read and write: the per-query state and per-process resources."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from unirag.config import Settings
from unirag.errors import WorkspaceError
from unirag.index.vector_artifacts import load_vectors, open_vector_index
from unirag.index.vectors import embedding_mismatch
from unirag.llm.sentence_mean import base_model
from unirag.llm.base import ChatRequest
from unirag.llm.factory import Models
from unirag.operators.graph_index import GraphIndex
from unirag.progress import Progress
from unirag.prompts.answer_style import answer_prompt
from unirag.prompts.prompt import Prompt, PromptLibrary
from unirag.workspace import Workspace

if TYPE_CHECKING:
    from unirag.index.bm25 import Bm25Index
    from unirag.index.tfidf import TfidfIndex
    from unirag.hierarchy.communities import Community
    from unirag.index.synonyms import SynonymEdges
    from unirag.index.tri_graph import TriGraph
    from unirag.index.vectors import VectorIndex

T = TypeVar("T")


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
    Each accessor spells out what it returns; the cache behind them holds
    artifacts of every kind, keyed by artifact name.
    """

    def __init__(self, workspace: Workspace, settings: Settings) -> None:
        self.workspace = workspace
        self.settings = settings
        self._loaded: dict[str, Any] = {}

    def _artifact(self, name: str, loader: Callable[[], T], cache_key: str | None = None) -> T:
        """Artifact ``name`` as ``loader`` reads it, once per process (under ``cache_key`` when
        one artifact is read two ways: an HNSW index and its whole vector matrix)."""
        key = cache_key or name
        if key not in self._loaded:
            if self.workspace.manifest.entry(name) is None:
                raise WorkspaceError(
                    f"{self.workspace.root} has no '{name}' artifact: run 'unirag index SOURCE -w {self.workspace.root}'"
                )
            try:
                self.workspace.manifest.checkout(name)
                self._loaded[key] = loader()
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                raise WorkspaceError(
                    f"artifact '{name}' in {self.workspace.root} is damaged ({type(exc).__name__}): "
                    "run 'unirag index' on the same sources to rebuild it"
                ) from None
        return self._loaded[key]

    @property
    def prompts(self) -> PromptLibrary:
        """The prompts queries ask: ``WORKSPACE/prompts/NAME.yaml`` first, the packaged ones else."""
        return PromptLibrary.of_workspace(self.workspace.root)

    def derived(self, key: str, build: Callable[[], T]) -> T:
        """A structure derived from loaded artifacts (a lookup table), built once per process."""
        if key not in self._loaded:
            self._loaded[key] = build()
        return self._loaded[key]

    def check_embedding_model(self, artifact: str, model: str) -> None:
        """Vectors are comparable only with the model that made them (a sentence mean's are its
        model's: :mod:`unirag.llm.sentence_mean`)."""
        entry = self.workspace.manifest.entry(artifact) or {}
        built_with = entry.get("config", {}).get("model")
        if built_with and base_model(built_with) != model:
            raise embedding_mismatch(artifact, built_with, model)

    def chunk_hnsw(self, embedding_model: str) -> VectorIndex:
        """The chunk HNSW index, checked against the query's embedding model."""
        if "chunk_vectors" not in self._loaded:
            self.check_embedding_model("chunk_vectors", embedding_model)
        return self._chunk_hnsw

    @property
    # Each artifact's module is imported by its loader below, not at the top: a query imports
    # only what its method reads (a vanilla query never loads the graph, hierarchy or lexical
    # modules, about half of a cold query's import time).

    def _chunk_hnsw(self) -> VectorIndex:
        from unirag.index.chunks import CHUNK_VECTORS

        return self._artifact(CHUNK_VECTORS, lambda: open_vector_index(self.workspace, CHUNK_VECTORS, CHUNK_VECTORS))

    @property
    def chunk_bm25(self) -> Bm25Index:
        from unirag.index.bm25 import Bm25Index
        from unirag.index.chunks import CHUNK_BM25

        return self._artifact(CHUNK_BM25, lambda: Bm25Index.load(self.workspace.artifact_path("chunks.bm25")))

    def graph(self) -> GraphIndex:
        """The merged graph as sparse matrices (:class:`GraphIndex`), loaded once."""
        from unirag.graph.graph_store import GraphStore

        return self._artifact("graph", lambda: GraphIndex.from_columns(GraphStore(self.workspace).load_columns(),
                                                                       self.workspace.corpus.chunk_ids()))

    def vectors(self, key: str, file_stem: str | None = None, embedding_model: str | None = None) -> VectorIndex:
        """The HNSW index of a vector artifact (``entity_vectors``, ``relation_vectors``,
        ``community_vectors:graphrag``, ...), checked against the query's embedding model."""
        if embedding_model and key not in self._loaded:
            self.check_embedding_model(key, embedding_model)
        stem = file_stem or key.replace(":", ".")
        return self._artifact(key, lambda: open_vector_index(self.workspace, key, stem))

    def vector_matrix(self, key: str, embedding_model: str) -> tuple[list[str], np.ndarray]:
        """(ids, every vector) of a vector artifact, memory-mapped: for scores over all rows
        (HippoRAG 2 normalises fact and passage scores over the whole corpus)."""
        self.check_embedding_model(key, embedding_model)
        stem = key.replace(":", ".")
        return self._artifact(key, lambda: load_vectors(self.workspace, key, stem), cache_key=f"{key}#matrix")

    def synonym_edges(self) -> SynonymEdges:
        """HippoRAG 2's synonym edges between entities (``synonym_edges``)."""
        from unirag.index.synonyms import SYNONYM_EDGES, load_synonym_edges

        return self._artifact(SYNONYM_EDGES, lambda: load_synonym_edges(self.workspace))

    def tri_graph(self) -> TriGraph:
        """LinearRAG's Tri-Graph (``tri_graph``)."""
        from unirag.index.tri_graph import TRI_GRAPH, load_tri_graph

        return self._artifact(TRI_GRAPH, lambda: load_tri_graph(self.workspace))

    def communities(self, hierarchy: str) -> dict[str, Community]:
        """Communities of one hierarchy by id, loaded once."""
        from unirag.hierarchy.community_store import CommunityStore

        return self._artifact(
            f"communities:{hierarchy}",
            lambda: {c.id: c for c in CommunityStore(self.workspace).load(hierarchy)},
        )

    def level_order(self, hierarchy: str) -> str:
        """Whether a hierarchy's levels count from its roots (``top_down``: GraphRAG's C0)
        or from the entities up (``bottom_up``), as its manifest entry records."""
        entry = self.workspace.manifest.entry(f"communities:{hierarchy}") or {}
        return str(entry.get("level_order", "top_down"))

    @property
    def chunk_tfidf(self) -> TfidfIndex:
        from unirag.index.chunks import CHUNK_TFIDF
        from unirag.index.tfidf import TfidfIndex

        return self._artifact(CHUNK_TFIDF, lambda: TfidfIndex.load(self.workspace.artifact_path("chunks.tfidf")))

    def entity_items(self, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
        """Entities as context items (``name: description``), provenance = their chunks."""
        graph = self.graph()
        items = []
        for entity_id, score in scored:
            row = graph.entity_row.get(entity_id)
            if row is None:
                continue
            chunks = [graph.chunk_ids[c] for c in graph.entity_chunks[row].indices.tolist()]
            items.append(ContextItem("entity", entity_id, graph.entity_text(row), score, graph.names[row],
                                     {"chunk_ids": chunks, "type": graph.types[row]}, operator))
        return items

    def relationship_items(self, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
        """Relationships as context items, provenance = their endpoints and chunks."""
        graph = self.graph()
        items = []
        for rel_id, score in scored:
            row = graph.rel_row.get(rel_id)
            if row is None:
                continue
            chunks = [graph.chunk_ids[c] for c in graph.rel_chunks[row].indices.tolist()]
            source, target = graph.entity_ids[graph.rel_src[row]], graph.entity_ids[graph.rel_dst[row]]
            items.append(ContextItem("relationship", rel_id, graph.rel_text(row), score,
                                     f"{graph.names[graph.rel_src[row]]} / {graph.names[graph.rel_dst[row]]}",
                                     {"source": source, "target": target, "chunk_ids": chunks}, operator))
        return items

    def community_items(self, hierarchy: str, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
        """Communities as context items (title + summary/report), provenance = level and members."""
        communities = self.communities(hierarchy)
        items = []
        for community_id, score in scored:
            community = communities.get(community_id)
            if community is None:
                continue
            text = f"{community.title}\n{community.summary}".strip() if community.title else community.summary
            items.append(ContextItem(
                "community", community_id, text, score, f"{hierarchy} level {community.level}",
                {"hierarchy": hierarchy, "level": community.level, "rating": community.rating,
                 "entities": len(community.entities), "chunk_ids": community.chunks[:50]},
                operator,
            ))
        return items

    def chunk_items(self, scored: list[tuple[str, float]], operator: str) -> list[ContextItem]:
        """Turn (chunk id, score) pairs into context items, fetched by id."""
        chunks = self.workspace.corpus.get_chunks([cid for cid, _ in scored])
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
                    provenance={"doc_id": chunk.doc_id, "chunk_index": chunk.index, "path": chunk.source,
                                "title": chunk.title or None},
                    operator=operator,
                )
            )
        return items


@dataclass
class QueryState:
    """Everything one query accumulates as its operators run.

    Operators pass results to the next through the candidate maps (id ->
    score, best first): a node operator fills ``entities``, a relationship
    operator reads them and fills ``relationships``, and so on (survey §6.1).
    ``entity_scores`` is a full vector over the graph's entity rows (PPR),
    for the Aggregator operators. ``items`` is what generation will see.
    """

    question: str
    resources: Resources
    models: Models
    query_vector: np.ndarray | None = None
    question_entities: list[str] = field(default_factory=list)  # conversion "entities"
    keywords_low: list[str] = field(default_factory=list)  # conversion "keywords" (LightRAG)
    keywords_high: list[str] = field(default_factory=list)
    entities: dict[str, float] = field(default_factory=dict)
    relationships: dict[str, float] = field(default_factory=dict)
    chunks: dict[str, float] = field(default_factory=dict)
    communities: dict[str, float] = field(default_factory=dict)
    paths: list[list[str]] = field(default_factory=list)  # entity ids along each retrieved path
    entity_scores: np.ndarray | None = None
    items: list[ContextItem] = field(default_factory=list)
    # What each operator call returned, in call order (``emit: false`` ones included), as
    # (operator, its items best first): the ranked lists a fusion operator (``chunk.rrf``) merges.
    ranked_lists: list[tuple[str, list[ContextItem]]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)  # rounds each ``repeat`` block ran, by its position
    conversions: list[str] = field(default_factory=list)  # question conversions that ran (entities_nlp, ...)
    # Candidate entities of a store other than the merged graph (LinearRAG's Tri-Graph), with the
    # activation step that reached each (its tier: a later step's entity counts for less).
    activated: dict[str, tuple[float, int]] = field(default_factory=dict)
    # Bars for a query's long LLM stages (GGraphRAG's map step is dozens of calls).
    progress: Progress | None = None
    started: float = field(default_factory=time.perf_counter)  # for the query's total seconds
    # One line each for what the user should know about this answer (a prompt cut to fit, an empty reply).
    warnings: list[str] = field(default_factory=list)
    # A multi-turn chat: the last message as asked, and the rule that made ``question`` self-contained
    # (``unirag.generate.standalone``); empty without earlier turns.
    asked: str = ""
    rewrite: str = ""

    def request(self, prompt: Prompt, stage: str, *, max_tokens: int, temperature: float = 0.0,
                json_mode: bool = False, **fields: str) -> ChatRequest:
        """``prompt.request`` with its fields fitted to ``chat.context_window`` (a warning when cut)."""
        settings = self.resources.settings
        fitted, cut = prompt.fitted_fields(fields, settings.chat.prompt_window, max_tokens,
                                           settings.chunking.encoding)
        if cut:
            self.warn(f"{stage}: prompt '{prompt.name}' cut to fit chat.context_window "
                      f"({settings.chat.context_window} tokens): {', '.join(cut)} shortened")
        return prompt.request(stage, max_tokens=max_tokens, temperature=temperature, json_mode=json_mode, **fitted)

    def prompt(self, name: str) -> Prompt:
        """Prompt ``name`` (or a prompt file's path) as this workspace has it."""
        return self.resources.prompts.load(name)

    def answer_prompt(self, name: str) -> Prompt:
        """The final answer prompt ``name`` in the settings' ``generate.style`` and ``generate.language``."""
        generate = self.resources.settings.generate
        return answer_prompt(self.resources.prompts, name, generate.style, generate.language)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
