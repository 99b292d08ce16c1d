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

Stored in ``artifacts/tri_graph/``: ``arrays.npz`` (sparse incidences, vectors),
``nodes.json`` (entity ids and names, chunk ids, sentence count) and ``passages.json``
(each passage's part: its entity names, mention counts and sentences). A corpus change
reads only new passages and embeds only texts the last build had not (the result is the
same as a whole build's: the sparse matrices are re-assembled from the parts).
"""

from __future__ import annotations

import json
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from unirag.config import Settings, config_hash
from unirag.executors import model_call_parallelism
from unirag.graph.graph_build import make_extractor, run_extraction
from unirag.graph.merge import normalize_name
from unirag.index.vector_artifacts import embed_in_length_order
from unirag.llm.factory import Models
from unirag.progress import Progress
from unirag.text.sentences import sentences_of
from unirag.workspace import Workspace, atomic_path

TRI_GRAPH = "tri_graph"
ALGORITHM_VERSION = "v1"
PARTS_FILE = "passages.json"  # each passage's part, by chunk id: what the next update reuses


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


def _name_pattern(names: list[str]) -> re.Pattern[str]:
    alternatives = sorted({re.escape(name) for name in names if name}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class PassagePart:
    """What one passage adds to the Tri-Graph, a function of its text and the extractor's names
    alone, so an unchanged passage's part is reused after a corpus change.

    ``names``: (entity key, the passage's first name for it) in the passage's order (the first
    passage naming an entity gives its display name); ``counts``: mentions, aligned with
    ``names``; ``sentences``: each sentence mentioning entities, with their keys (sorted)."""

    names: list[tuple[str, str]]
    counts: list[int]
    sentences: list[tuple[str, list[str]]]

    def to_json(self) -> list[Any]:
        return [[list(pair) for pair in self.names], self.counts, [[s, keys] for s, keys in self.sentences]]

    @classmethod
    def from_json(cls, data: list[Any]) -> PassagePart:
        names, counts, sentences = data
        return cls([(key, name) for key, name in names], list(counts), [(s, list(keys)) for s, keys in sentences])


def read_passage(text: str, names: list[str]) -> PassagePart:
    """One passage's part: ``names`` are the extractor's names for it."""
    keyed: dict[str, list[str]] = {}
    for name in names:
        key = normalize_name(name)
        if key:
            keyed.setdefault(key, []).append(name)
    passage: dict[str, int] = {key: 0 for key in keyed}
    found_in: dict[str, set[str]] = {}
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
                found_in.setdefault(sentence, set()).update(found)
    return PassagePart([(key, group[0]) for key, group in keyed.items()],
                       [max(count, 1) for count in passage.values()],
                       [(sentence, sorted(keys)) for sentence, keys in found_in.items()])


def assemble(parts: list[PassagePart]) -> tuple[dict[str, str], list[dict[str, int]], dict[str, set[str]]]:
    """(entity key -> display name, per passage {entity key: mentions}, sentence -> entity keys)
    of passages in order: the corpus-wide view of their parts."""
    display: dict[str, str] = {}
    counts: list[dict[str, int]] = []
    sentence_entities: dict[str, set[str]] = {}
    for part in parts:
        for key, name in part.names:
            display.setdefault(key, name)
        counts.append({key: count for (key, _), count in zip(part.names, part.counts, strict=True)})
        for sentence, keys in part.sentences:
            sentence_entities.setdefault(sentence, set()).update(keys)
    return display, counts, sentence_entities


def read_passages(chunks: list[tuple[str, str]], entities: list[list[str]]) -> tuple[
        dict[str, str], list[dict[str, int]], dict[str, set[str]]]:
    """(entity key -> display name, per passage {entity key: mentions}, sentence -> entity keys).

    ``chunks`` are (chunk id, text); ``entities`` the extractor's names per chunk.
    """
    return assemble([read_passage(text, names) for (_, text), names in zip(chunks, entities, strict=True)])


def tri_graph_inputs(workspace: Workspace, extractor: str, embedding_model: str) -> str:
    return config_hash({"chunks": workspace.corpus.chunk_ids(), "extractor": extractor, "model": embedding_model,
                        "algorithm": ALGORITHM_VERSION})


@dataclass(frozen=True)
class PreviousTriGraph:
    """The last build's per-passage parts and embeddings (by text), what an update reuses."""

    parts: dict[str, PassagePart]
    parts_json: dict[str, list[Any]]  # the stored form of ``parts``: written back as read, not re-serialised
    entity_rows: dict[str, int]  # display name -> row of entity_vectors
    entity_vectors: np.ndarray
    sentence_rows: dict[str, int]  # sentence -> row of sentence_vectors
    sentence_vectors: np.ndarray


def _previous_build(workspace: Workspace, config: dict[str, str]) -> tuple[PreviousTriGraph | None, str]:
    """The last build when whole and made with ``config``, else None and why not."""
    entry = workspace.manifest.entry(TRI_GRAPH)
    if entry is None:
        return None, "no previous build"
    if entry.get("config") != config:
        return None, "another configuration"
    if (workspace.manifest.artifact_problem(TRI_GRAPH) or "").startswith("damaged"):
        return None, "previous files damaged"
    directory = workspace.artifact_path(TRI_GRAPH)
    if not (directory / PARTS_FILE).exists():
        return None, "previous build has no passage parts"
    try:
        stored = load_tri_graph(workspace)
        parts_json = json.loads((directory / PARTS_FILE).read_text(encoding="utf-8"))
        parts = {chunk_id: PassagePart.from_json(parts_json[chunk_id]) for chunk_id in stored.chunk_ids}
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None, "previous files unreadable"
    sentences = sorted({sentence for part in parts.values() for sentence, _ in part.sentences})
    if len(sentences) != stored.sentence_vectors.shape[0] or len(stored.entity_names) != len(stored.entity_vectors):
        return None, "previous files inconsistent"
    return PreviousTriGraph(parts, parts_json, {name: i for i, name in enumerate(stored.entity_names)},
                            stored.entity_vectors,
                            {sentence: i for i, sentence in enumerate(sentences)}, stored.sentence_vectors), ""


def _reused_or_embedded(texts: list[str], rows: dict[str, int], stored: np.ndarray | None,
                        embed: Callable[[list[str]], np.ndarray]) -> tuple[np.ndarray, int]:
    """Vectors of ``texts``: a stored row where the text was embedded before, else embedded now
    (through the cache, so either way the vector a whole build gets); with the count embedded."""
    missing = [i for i, text in enumerate(texts) if text not in rows]
    fresh = embed([texts[i] for i in missing]) if missing else None
    if not texts:
        return np.zeros((0, 1), dtype=np.float32), 0
    dim = fresh.shape[1] if fresh is not None else stored.shape[1]  # type: ignore[union-attr]
    out = np.zeros((len(texts), dim), dtype=np.float32)
    reused = [i for i, text in enumerate(texts) if text in rows]
    if reused:
        out[reused] = stored[[rows[texts[i]] for i in reused]]  # type: ignore[index]
    if missing:
        out[missing] = fresh
    return out, len(missing)


def _read_new_passages(workspace: Workspace, store: Any, extractor: str, chunk_ids: list[str],
                       progress: Progress) -> dict[str, PassagePart]:
    """The parts of ``chunk_ids`` (passages the last build did not read)."""
    if not chunk_ids:
        return {}
    extractions = {x.chunk_id: x for x in store.load_extractions(extractor, chunk_ids)}
    chunks = workspace.corpus.get_chunks(chunk_ids)
    parts: dict[str, PassagePart] = {}
    with progress.task("reading Tri-Graph passages", total=len(chunk_ids)) as advance:
        for chunk_id in chunk_ids:
            text = chunks[chunk_id].indexed_text if chunk_id in chunks else ""
            names = [e.name for e in extractions[chunk_id].entities] if chunk_id in extractions else []
            parts[chunk_id] = read_passage(text, names)
            advance(1)
    return parts


def _incidences(keys: list[str], counts: list[dict[str, int]], sentences: list[str],
                sentence_entities: dict[str, set[str]]) -> tuple[Any, Any]:
    """(entity x passage mention counts, sentence x entity links), CSR."""
    from scipy.sparse import coo_matrix

    row = {key: i for i, key in enumerate(keys)}
    cells = [(row[key], p, n) for p, passage in enumerate(counts) for key, n in passage.items()]
    entity_passage = coo_matrix(
        (np.array([c[2] for c in cells], dtype=np.float64),
         (np.array([c[0] for c in cells], dtype=np.int64), np.array([c[1] for c in cells], dtype=np.int64))),
        shape=(len(keys), len(counts))).tocsr()
    links = [(s, row[key]) for s, sentence in enumerate(sentences) for key in sorted(sentence_entities[sentence])]
    sentence_entity = coo_matrix(
        (np.ones(len(links)), (np.array([s for s, _ in links], dtype=np.int64),
                               np.array([e for _, e in links], dtype=np.int64))),
        shape=(len(sentences), len(keys))).tocsr()
    return entity_passage, sentence_entity


def build_tri_graph(workspace: Workspace, store: Any, settings: Settings, models: Models, progress: Progress) -> bool:
    """Build the Tri-Graph (zero LLM: the nlp extractor and the embedder); False when current.

    After a corpus change only new passages are read and only their new sentences and entity
    names embedded: unchanged passages' parts and vectors come from the last build."""
    nlp_settings = settings.model_copy(update={"graph": settings.graph.model_copy(update={"extractor": "nlp"})})
    directory = workspace.artifact_path(TRI_GRAPH)
    chunk_ids = workspace.corpus.chunk_ids()
    extractor_name = make_extractor(nlp_settings, models).name
    inputs = tri_graph_inputs(workspace, extractor_name, models.embedder.name)
    if workspace.manifest.is_current(TRI_GRAPH, inputs, (directory,)):
        return False
    started = time.perf_counter()
    config = {"extractor": extractor_name, "model": models.embedder.name, "algorithm": ALGORITHM_VERSION}
    run_extraction(workspace, store, nlp_settings, models, progress)
    previous, reason = _previous_build(workspace, config)
    known = previous.parts if previous is not None else {}
    new_ids = [chunk_id for chunk_id in chunk_ids if chunk_id not in known]
    parts = {**{c: known[c] for c in chunk_ids if c in known},
             **_read_new_passages(workspace, store, extractor_name, new_ids, progress)}
    display, counts, sentence_entities = assemble([parts[c] for c in chunk_ids])
    keys = sorted(display)
    sentences = sorted(sentence_entities)
    entity_passage, sentence_entity = _incidences(keys, counts, sentences, sentence_entities)
    batch, parallel = settings.embedding.resolved_batch_size, model_call_parallelism(settings)

    def embedder(label: str) -> Callable[[list[str]], np.ndarray]:
        return lambda texts: embed_in_length_order(models.embedder, texts, batch, progress, label, "index.tri_graph",
                                                   parallel=parallel)

    entity_vectors, entities_embedded = _reused_or_embedded(
        [display[k] for k in keys], previous.entity_rows if previous else {},
        previous.entity_vectors if previous else None, embedder("embedding Tri-Graph entities"))
    sentence_vectors, sentences_embedded = _reused_or_embedded(
        sentences, previous.sentence_rows if previous else {}, previous.sentence_vectors if previous else None,
        embedder("embedding Tri-Graph sentences"))
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / "arrays.npz") as tmp, open(tmp, "wb") as handle:
        np.savez(handle, ep_data=entity_passage.data, ep_indices=entity_passage.indices,
                 ep_indptr=entity_passage.indptr, se_indices=sentence_entity.indices,
                 se_indptr=sentence_entity.indptr, entity_vectors=entity_vectors, sentence_vectors=sentence_vectors)
    with atomic_path(directory / "nodes.json") as tmp:
        tmp.write_text(json.dumps({"entity_ids": keys, "entity_names": [display[k] for k in keys],
                                   "chunk_ids": chunk_ids, "sentences": len(sentences)}), encoding="utf-8")
    with atomic_path(directory / PARTS_FILE) as tmp:
        stored = previous.parts_json if previous is not None else {}
        tmp.write_text(json.dumps({c: stored[c] if c in known else parts[c].to_json() for c in chunk_ids}),
                       encoding="utf-8")
    update = {"mode": "update" if previous is not None else "full", "passages_read": len(new_ids),
              "entities_embedded": entities_embedded, "sentences_embedded": sentences_embedded}
    if previous is None:
        update["reason"] = reason
    workspace.manifest.set_entry(TRI_GRAPH, {
        "config": config, "inputs": inputs, "entities": len(keys), "sentences": len(sentences),
        "passages": len(chunk_ids), "entity_passage_edges": int(entity_passage.nnz),
        "sentence_entity_edges": int(sentence_entity.nnz), "update": update,
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
