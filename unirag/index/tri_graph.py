"""LinearRAG's Tri-Graph (Zhuang et al. 2025, "relation-free graph construction"):
the ``tri_graph`` artifact. Zero LLM calls: spaCy NER and embeddings only.

Three node kinds and two edge kinds, no relation extraction:

* **entities**: the names spaCy finds in each passage. They come from the nlp
  extractor's stored extractions (NER + proper-noun chunks, its name cleaning; run
  here, and stored for reuse, when the workspace's graph was built another way), so
  the Tri-Graph costs no model call whatever ``graph.extractor`` is. Entities are
  merged across passages by the graph's normalised name.
* **sentences**: each sentence of a passage that mentions at least one of the
  passage's entities; sentence -- entity edges ("mention"), used by entity
  activation (semantic bridging: an entity reaches the entities of its sentences).
* **passages**: the chunks; passage -- entity edges weighted by the entity's share
  of the passage's entity mentions (LinearRAG's code: count / all counts of the
  passage), walked by the global importance aggregation (PPR).

Mentions are counted by a case-insensitive whole-word match of the entity's names in
the passage text, sentence by sentence (a name the extractor kept always counts at
least once, e.g. a passage's title). Entity names and sentences are embedded with the
workspace's embedding model (through the cache); passages reuse ``chunk_vectors``.

Stored in ``artifacts/tri_graph/``: ``arrays.npz`` (sparse incidences, vectors) and
``nodes.json`` (entity ids and names, chunk ids, sentence count).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from unirag.config import Settings, config_hash
from unirag.llm.factory import Models
from unirag.progress import Progress
from unirag.workspace import Workspace, atomic_path

TRI_GRAPH = "tri_graph"
ALGORITHM_VERSION = "v1"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass
class TriGraph:
    """The Tri-Graph as arrays: rows follow ``entity_ids`` / ``chunk_ids`` / sentences.

    ``entity_passage`` (E x P, CSR): mention counts; ``sentence_entity`` (S x E, CSR, 0/1);
    ``entity_vectors`` (E x d) and ``sentence_vectors`` (S x d), L2-normalised.
    """

    entity_ids: list[str]  # normalised names (the merged graph's keys)
    entity_names: list[str]
    chunk_ids: list[str]
    entity_passage: Any
    sentence_entity: Any
    entity_vectors: np.ndarray
    sentence_vectors: np.ndarray

    @property
    def entity_sentence(self) -> Any:
        """E x S: the sentences mentioning each entity (CSR)."""
        return self.sentence_entity.T.tocsr()

    def passage_weights(self) -> Any:
        """E x P: each passage's edges weighted by the entity's share of its mentions."""
        from scipy.sparse import diags

        per_passage = np.asarray(self.entity_passage.sum(axis=0)).ravel()
        inverse = np.divide(1.0, per_passage, out=np.zeros_like(per_passage, dtype=np.float64),
                            where=per_passage > 0)
        return (self.entity_passage @ diags(inverse)).tocsr()


def sentences_of(text: str) -> list[str]:
    """A passage's sentences (title line apart): a regex split, enough to say which
    entities share a sentence."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def _name_pattern(names: list[str]) -> re.Pattern[str]:
    alternatives = sorted({re.escape(name) for name in names if name}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


def read_passages(chunks: list[tuple[str, str]], entities: list[list[str]]) -> tuple[
        dict[str, str], list[dict[str, int]], dict[str, set[str]]]:
    """(entity key -> display name, per passage {entity key: mentions}, sentence -> entity keys).

    ``chunks`` are (chunk id, text); ``entities`` the extractor's names per chunk.
    """
    from unirag.graph.merge import normalize_name

    display: dict[str, str] = {}
    counts: list[dict[str, int]] = []
    sentence_entities: dict[str, set[str]] = {}
    for (_, text), names in zip(chunks, entities, strict=True):
        keyed: dict[str, list[str]] = {}
        for name in names:
            key = normalize_name(name)
            if key:
                keyed.setdefault(key, []).append(name)
                display.setdefault(key, name)
        passage: dict[str, int] = {key: 0 for key in keyed}
        if keyed:
            key_of = {name.casefold(): key for key, group in keyed.items() for name in group}
            pattern = _name_pattern([name for group in keyed.values() for name in group])
            for sentence in sentences_of(text):
                found: set[str] = set()
                for match in pattern.finditer(sentence):
                    key = key_of.get(match.group(0).casefold())
                    if key is not None:
                        passage[key] += 1
                        found.add(key)
                if found:
                    sentence_entities.setdefault(sentence, set()).update(found)
        counts.append({key: max(count, 1) for key, count in passage.items()})
    return display, counts, sentence_entities


def tri_graph_inputs(workspace: Workspace, extractor: str, embedding_model: str) -> str:
    return config_hash({"chunks": workspace.chunk_ids(), "extractor": extractor, "model": embedding_model,
                        "algorithm": ALGORITHM_VERSION})


def build_tri_graph(workspace: Workspace, store: Any, settings: Settings, models: Models, progress: Progress) -> bool:
    """Build the Tri-Graph (zero LLM: the nlp extractor and the embedder); False when current."""
    from scipy.sparse import coo_matrix

    from unirag.graph.graph_build import make_extractor, run_extraction
    from unirag.executors import model_call_parallelism
    from unirag.index.vector_artifacts import embed_in_length_order

    nlp_settings = settings.model_copy(update={"graph": settings.graph.model_copy(update={"extractor": "nlp"})})
    directory = workspace.artifact_path(TRI_GRAPH)
    chunk_ids = workspace.chunk_ids()
    extractor_name = make_extractor(nlp_settings, models).name
    inputs = tri_graph_inputs(workspace, extractor_name, models.embedder.name)
    if workspace.is_current(TRI_GRAPH, inputs, (directory,)):
        return False
    started = time.perf_counter()
    run_extraction(workspace, store, nlp_settings, models, progress)
    extractions = {x.chunk_id: x for x in store.load_extractions(extractor_name, chunk_ids)}
    chunks = workspace.get_chunks(chunk_ids)
    texts = [(cid, chunks[cid].indexed_text if cid in chunks else "") for cid in chunk_ids]
    names = [[e.name for e in extractions[cid].entities] if cid in extractions else [] for cid in chunk_ids]
    display, counts, sentence_entities = read_passages(texts, names)
    keys = sorted(display)
    row = {key: i for i, key in enumerate(keys)}
    cells = [(row[key], p, n) for p, passage in enumerate(counts) for key, n in passage.items()]
    entity_passage = coo_matrix(
        (np.array([c[2] for c in cells], dtype=np.float64),
         (np.array([c[0] for c in cells], dtype=np.int64), np.array([c[1] for c in cells], dtype=np.int64))),
        shape=(len(keys), len(chunk_ids))).tocsr()
    sentences = sorted(sentence_entities)
    links = [(s, row[key]) for s, sentence in enumerate(sentences) for key in sorted(sentence_entities[sentence])]
    sentence_entity = coo_matrix(
        (np.ones(len(links)), (np.array([s for s, _ in links], dtype=np.int64),
                               np.array([e for _, e in links], dtype=np.int64))),
        shape=(len(sentences), len(keys))).tocsr()
    batch, parallel = settings.embedding.batch_size, model_call_parallelism(settings)
    entity_vectors = embed_in_length_order(models.embedder, [display[k] for k in keys], batch, progress,
                                           "embedding Tri-Graph entities", "index.tri_graph", parallel=parallel)
    sentence_vectors = embed_in_length_order(models.embedder, sentences, batch, progress,
                                             "embedding Tri-Graph sentences", "index.tri_graph", parallel=parallel)
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / "arrays.npz") as tmp, open(tmp, "wb") as handle:
        np.savez(handle, ep_data=entity_passage.data, ep_indices=entity_passage.indices,
                 ep_indptr=entity_passage.indptr, se_indices=sentence_entity.indices,
                 se_indptr=sentence_entity.indptr, entity_vectors=entity_vectors, sentence_vectors=sentence_vectors)
    with atomic_path(directory / "nodes.json") as tmp:
        tmp.write_text(json.dumps({"entity_ids": keys, "entity_names": [display[k] for k in keys],
                                   "chunk_ids": chunk_ids, "sentences": len(sentences)}), encoding="utf-8")
    workspace.set_manifest_entry(TRI_GRAPH, {
        "config": {"extractor": extractor_name, "model": models.embedder.name, "algorithm": ALGORITHM_VERSION},
        "inputs": inputs, "entities": len(keys), "sentences": len(sentences), "passages": len(chunk_ids),
        "entity_passage_edges": int(entity_passage.nnz), "sentence_entity_edges": int(sentence_entity.nnz),
        "seconds": round(time.perf_counter() - started, 3),
    }, files=(directory,))
    return True


def load_tri_graph(workspace: Workspace) -> TriGraph:
    from scipy.sparse import csr_matrix

    directory = workspace.artifact_path(TRI_GRAPH)
    nodes = json.loads((directory / "nodes.json").read_text(encoding="utf-8"))
    n_entities, n_chunks, n_sentences = len(nodes["entity_ids"]), len(nodes["chunk_ids"]), nodes["sentences"]
    with np.load(directory / "arrays.npz") as data:
        entity_passage = csr_matrix((data["ep_data"], data["ep_indices"], data["ep_indptr"]),
                                    shape=(n_entities, n_chunks))
        sentence_entity = csr_matrix((np.ones(data["se_indices"].size), data["se_indices"], data["se_indptr"]),
                                     shape=(n_sentences, n_entities))
        return TriGraph(nodes["entity_ids"], nodes["entity_names"], nodes["chunk_ids"], entity_passage, sentence_entity,
                        np.asarray(data["entity_vectors"], dtype=np.float32),
                        np.asarray(data["sentence_vectors"], dtype=np.float32))
