"""Relationship vectors from shared parts: each distinct description line embedded once.

On the nlp path a relationship's description is the sentence(s) that mention both its ends
(one line per chunk, lines joined by newlines when merged), so the dozens of pairs a sentence
names all carry that sentence: embedding each relationship's whole text read it once per pair
(2Wiki: 7.0 M embedded tokens for 640 k corpus tokens). Here a relationship's vector is

    normalise(mean(v(source name), v(target name)) + mean(v(line) for each distinct line of its description))

with ``ends`` = the mean of its two ends' names' vectors (the texts ``entity_name_vectors``
embeds, so with that artifact built they are cache hits): the ends keep as much weight as all
its evidence together, and each line is embedded once for every relationship that cites it.
A relationship without a description embeds ``source relation target`` as its one line. The
relation word and keywords are not embedded on their own: on the nlp path they are verbs of the
sentences embedded. ``index.relation_vectors: text`` keeps the whole-text vectors
(:func:`unirag.hierarchy.entity_graph.relationship_texts`).

``index.entity_vectors: parts`` (opt-in; ``text``, the entity's ``name: description``, is the
default) builds entity vectors the same way: normalise(v(name) + mean of its description's
distinct lines), the lines mostly embedded already for its relationships.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from unirag.graph.merge import MergedGraph
from unirag.index.vectors import embedding_mismatch
from unirag.index.vector_artifacts import (
    known_rows,
    save_text_digests,
    embed_in_length_order,
    save_vector_artifact,
    text_digests,
    vector_files,
)
from unirag.llm.base import EmbeddingModel, normalise_rows
from unirag.progress import Progress
from unirag.workspace import Workspace

#: Joins a relationship's parts into the one string whose digest says whether it changed.
_PART_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class RelationParts:
    """Per relationship (in graph order): its ends' names and its distinct description lines."""

    ids: list[str]
    ends: list[tuple[str, ...]]  # the names: a relationship's two ends, an entity's own
    lines: list[list[str]]

    def row_texts(self) -> list[str]:
        """One string per relationship holding all its parts (a changed part changes it)."""
        return [_PART_SEPARATOR.join([*ends, *lines]) for ends, lines in zip(self.ends, self.lines)]


def relation_parts(graph: MergedGraph) -> RelationParts:
    """The ends' names and the distinct non-empty lines of the description (whitespace collapsed)
    of every relationship; ``source relation target`` stands for a missing description."""
    entities = graph.entities
    ids, ends, lines = [], [], []
    for rel_id, rel in graph.relationships.items():
        source, target = entities[rel.source].name, entities[rel.target].name
        distinct = [line for line in dict.fromkeys(" ".join(line.split()) for line in rel.description.split("\n"))
                    if line]
        ids.append(rel_id)
        ends.append((source, target))
        lines.append(distinct or [f"{source} {rel.relation} {target}".strip()])
    return RelationParts(ids, ends, lines)


def entity_parts(graph: MergedGraph) -> RelationParts:
    """Per entity: its name and the distinct non-empty lines of its description (on the nlp path,
    the sentences of one chunk that name it, most of them lines of its relationships too). An
    entity without a description is its name alone, as in ``entity_vectors``' texts."""
    ids, ends, lines = [], [], []
    for entity_id, entity in graph.entities.items():
        ids.append(entity_id)
        ends.append((entity.name,))
        lines.append([line for line in dict.fromkeys(" ".join(line.split()) for line in entity.description.split("\n"))
                      if line])
    return RelationParts(ids, ends, lines)


def combine_parts(vectors: np.ndarray, end_rows: Sequence[Sequence[int]],
                  line_rows: Sequence[Sequence[int]]) -> np.ndarray:
    """normalise(mean of the names + mean of the lines) per row: row i combines ``end_rows[i]``
    and ``line_rows[i]`` (rows of ``vectors``, each normalised); the names alone without lines."""
    out = np.empty((len(end_rows), vectors.shape[1]), dtype=np.float32)
    for i, (ends, rows) in enumerate(zip(end_rows, line_rows)):
        out[i] = vectors[list(ends)].mean(axis=0)
        if len(rows):
            out[i] += vectors[list(rows)].mean(axis=0)
    return normalise_rows(out)


def build_relation_part_vectors(
    workspace: Workspace, embedder: EmbeddingModel, key: str, parts: RelationParts, batch_size: int,
    progress: Progress, stage: str, fingerprint: str, parallel: int = 1,
) -> bool:
    """Embed the distinct names and lines of the relationships not unchanged since the last build,
    combine them (:func:`combine_parts`) and index the result under ``key``; False when up to date."""
    if workspace.manifest.is_current(key, fingerprint, vector_files(workspace, key)):
        return False
    started = time.perf_counter()
    digests = text_digests(parts.row_texts())
    known = known_rows(workspace, key, key, parts.ids, digests, embedder.name)
    save_text_digests(workspace, key, fingerprint, digests)
    todo = [i for i in range(len(parts.ids)) if known is None or not known.mask[i]]
    texts: list[str] = []
    row_of: dict[str, int] = {}

    def row(text: str) -> int:
        if text not in row_of:
            row_of[text] = len(texts)
            texts.append(text)
        return row_of[text]

    end_rows = [[row(name) for name in parts.ends[i]] for i in todo]
    line_rows = [[row(line) for line in parts.lines[i]] for i in todo]
    vectors = known.gathered() if known is not None else None
    if texts:
        embedded = embed_in_length_order(embedder, texts, batch_size, progress, f"embedding {key} parts",
                                         stage, parallel=parallel)
        combined = combine_parts(embedded, end_rows, line_rows)
        if known is not None and combined.shape[1] != known.dim:
            raise embedding_mismatch(key, f"{known.dim}-dimension vectors", f"{combined.shape[1]}-dimension vectors")
        if vectors is None:
            vectors = np.zeros((len(parts.ids), combined.shape[1]), dtype=np.float32)
        vectors[todo] = combined
    if vectors is None:
        vectors = np.zeros((0, 1), dtype=np.float32)
    save_vector_artifact(workspace, key, key, parts.ids, vectors, fingerprint,
                         {"model": embedder.name, "texts": "parts"}, started, progress, known)
    return True
