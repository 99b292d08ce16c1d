"""LinearRAG's two retrieval stages as array code over the Tri-Graph (no per-sentence Python work).

Split from :mod:`unirag.operators.passage_nodes` so the arithmetic can be checked on its own
against a plain transcription of the authors' BFS (tests/test_tri_graph_walk.py):

* :func:`spread_activation`: stage (i), entity activation by semantic bridging
  (``calculate_entity_scores`` in DEEP-PolyU/LinearRAG ``src/LinearRAG.py``);
* :class:`PassageOccurrences` and :func:`entity_bonus`: the passage bonus of stage (ii)
  (``calculate_passage_scores``): each activated entity's name counted in every passage's text.

Why the remaining loop over active entities is kept: within one step an entity may not pick a
sentence an entity before it picked (the authors' ``used_sentence_hash_ids`` grows as the step
goes), so the picks are sequential by nature. There are few active entities per step (the
question's entities, then those their sentences reach), and each pick is now a slice of the
CSR arrays and one ``argmax``/``lexsort`` -- the per-sentence Python sort and scipy row
slicing it replaces were the cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Activation:
    """Stage (i)'s result over Tri-Graph entity rows: ``weights`` (E,) the summed activation
    (the PPR seeds); ``last`` row -> (its last activation, the step that gave it), the
    authors' ``actived_entities`` (seeds at step 1)."""

    weights: np.ndarray
    last: dict[int, tuple[float, int]]


def spread_activation(
    seed_rows: np.ndarray, seed_scores: np.ndarray, sentence_similarity: np.ndarray, entity_sentence: Any,
    sentence_entity: Any, max_iterations: int, top_sentences: int, threshold: float,
) -> Activation:
    """LinearRAG stage (i) from the linked seeds (``seed_rows[i]`` at ``seed_scores[i]``).

    A seed named by several question entities keeps its best score (the authors keep the
    last one written, whose order is that of a Python ``set`` of strings: it varies with the
    interpreter's hash seed, so the max is the deterministic choice among their outcomes).
    Then, for up to ``max_iterations - 1`` steps, each entity activated in the last step at
    ``threshold`` or more takes its ``top_sentences`` unused sentences most similar to the
    question (ties: lower sentence row), marks them used, and when ``score x similarity``
    is still at least ``threshold`` adds it to every entity of the sentence (itself
    included, as the authors' code does); the last such write gives an entity's ``last``.
    """
    n_entities = entity_sentence.shape[0]
    weights = np.zeros(n_entities)
    current: dict[int, tuple[float, int]] = {}
    for row, score in zip(np.asarray(seed_rows).tolist(), np.asarray(seed_scores, dtype=np.float64).tolist(),
                          strict=True):
        best = max(score, current[row][0]) if row in current else score
        current[row] = (best, 1)
    for row, (score, _) in current.items():
        weights[row] = max(score, 0.0)  # a negative link scores no restart mass (the authors clip it in PPR)
    last = dict(current)
    es_ptr, es_idx = entity_sentence.indptr, entity_sentence.indices
    se_ptr, se_idx = sentence_entity.indptr, sentence_entity.indices
    used = np.zeros(sentence_entity.shape[0], dtype=bool)
    similarity = np.asarray(sentence_similarity)
    step = 1
    while current and step < max_iterations:
        reached: dict[int, tuple[float, int]] = {}
        for row, (score, _) in current.items():
            if score < threshold:
                continue
            candidates = es_idx[es_ptr[row]:es_ptr[row + 1]]
            candidates = candidates[~used[candidates]]
            if not candidates.size:
                continue
            picked = candidates[np.lexsort((candidates, -similarity[candidates]))[:top_sentences]]
            used[picked] = True
            for sentence in picked.tolist():
                bridged = score * float(similarity[sentence])
                if bridged < threshold:
                    continue
                others = se_idx[se_ptr[sentence]:se_ptr[sentence + 1]]
                weights[others] += bridged
                reached.update(dict.fromkeys(others.tolist(), (bridged, step + 1)))
        last.update(reached)
        current = reached
        step += 1
    return Activation(weights, last)


@dataclass
class PassageOccurrences:
    """Every passage's text, lower-cased and joined, to count a name in all of them at once.

    LinearRAG's bonus counts ``passage_text.lower().count(entity.lower())`` in *every*
    passage (a substring count, not only where the extractor found the entity); one scan
    of the joined text does the same count (non-overlapping, left to right, like
    ``str.count``) for all passages. Counts are kept per name: an entity activated by many
    questions is counted once per process."""

    text: str
    starts: np.ndarray  # offset of each passage in ``text``
    _counted: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def of(cls, texts: list[str]) -> PassageOccurrences:
        lowered = [text.lower() for text in texts]
        lengths = np.array([len(text) + 1 for text in lowered], dtype=np.int64)  # + the separator
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return cls("\x00".join(lowered), starts)

    def _positions(self, key: str) -> Iterator[int]:
        """Where ``key`` starts, non-overlapping, left to right (``str.find``: about 3x faster
        than a regex scan of the same text)."""
        at = self.text.find(key)
        while at >= 0:
            yield at
            at = self.text.find(key, at + len(key))

    def count(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(passage rows, occurrences) of ``name`` (case-insensitive substring) in every passage."""
        key = name.lower()
        if key not in self._counted:
            if not key:
                found = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
            else:
                positions = np.fromiter(self._positions(key), dtype=np.int64)
                rows, counts = np.unique(np.searchsorted(self.starts, positions, side="right") - 1,
                                         return_counts=True)
                found = (rows.astype(np.int64), counts.astype(np.int64))
            self._counted[key] = found
        return self._counted[key]


def entity_bonus(last: dict[int, tuple[float, int]], names: list[str], occurrences: PassageOccurrences,
                 n_passages: int) -> np.ndarray:
    """Per passage, the sum over activated entities found in it of
    activation x log(1 + occurrences) / step (LinearRAG's ``total_entity_bonus``)."""
    bonus = np.zeros(n_passages)
    if not last:
        return bonus
    parts_rows, parts_values = [], []
    for row, (score, step) in last.items():
        rows, counts = occurrences.count(names[row])
        if rows.size:
            parts_rows.append(rows)
            parts_values.append(score * np.log1p(counts) / max(step, 1))
    if parts_rows:
        np.add.at(bonus, np.concatenate(parts_rows), np.concatenate(parts_values))
    return bonus
