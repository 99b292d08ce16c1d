"""BM25 over chunk texts in the ``bm25s`` library's format (sparse, fast).

The score matrix is computed from per-chunk term counts
(:mod:`unirag.index.term_counts`) with array operations that repeat bm25s's
own per-document arithmetic in the same float types, so a build equals the
one ``bm25s.BM25().index`` gives and an update tokenises only new chunks.
bm25s reads and searches the saved index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from unirag.index.term_counts import count_terms
from unirag.workspace import atomic_directory, atomic_write_bytes

if TYPE_CHECKING:
    from unirag.index.term_counts import TermCounts

STOPWORDS = "en"


class Bm25Index:
    def __init__(self, retriever: Any, ids: list[str]) -> None:
        self._retriever = retriever
        self.ids = ids

    @staticmethod
    def signature() -> str:
        """What term counts depend on: an update reuses saved counts only while it is unchanged."""
        import bm25s

        return json.dumps({"library": "bm25s", "version": bm25s.__version__, "stopwords": STOPWORDS})

    @staticmethod
    def tokenize(texts: list[str]) -> list[list[str]]:
        """Each text's tokens as bm25s's indexing sees them (lowercased, stop words out), in text order."""
        import bm25s

        return bm25s.tokenize(texts, stopwords=STOPWORDS, return_ids=False, show_progress=False)

    @classmethod
    def build(cls, texts: list[str], ids: list[str]) -> Bm25Index:
        return cls.from_counts(count_terms(
            list(ids), lambda rows: [texts[i] for i in rows], cls.tokenize, cls.signature()))

    @classmethod
    def from_counts(cls, counts: TermCounts) -> Bm25Index:
        """The index ``bm25s.BM25().index`` gives over the counted texts, from their counts.

        bm25s scores a document's terms as ``idf * tf / (k1 * ((1 - b) + b * len / avg) + tf)``
        with float32 tf and idf and float64 lengths; the same element-wise operations on
        every entry at once give the same floats (no sums whose order could differ, and the
        average length is the same mean over the same lengths)."""
        import bm25s
        from bm25s.scoring import _select_idf_scorer

        retriever = bm25s.BM25()
        n, size = len(counts.ids), len(counts.terms)
        lengths = counts.row_lengths()
        rows = counts.row_of_entry()
        average = lengths.mean() if n else np.float64(0.0)
        frequencies = np.bincount(counts.columns, minlength=size)
        idf_of = _select_idf_scorer(retriever.idf_method)
        distinct = np.unique(frequencies)
        idf_by_frequency = np.array([idf_of(int(df), N=n) for df in distinct], dtype=retriever.dtype)
        idf = idf_by_frequency[np.searchsorted(distinct, frequencies)]
        tf = counts.counts.astype(retriever.dtype)
        k1, b = retriever.k1, retriever.b
        tfc = tf / (k1 * ((1 - b) + b * lengths[rows] / average) + tf)
        scores = (idf[counts.columns] * tfc).astype(retriever.dtype)
        order = np.lexsort((rows, counts.columns))  # bm25s's CSC: by term, then document
        indptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(frequencies, out=indptr[1:])
        retriever.scores = {"data": scores[order], "indices": rows[order].astype(retriever.int_dtype),
                            "indptr": indptr, "num_docs": n}
        retriever.nonoccurrence_array = None  # only BM25L and BM25+ have one
        retriever.vocab_dict = {**dict(zip(counts.terms, range(size), strict=True)), "": size}
        retriever.unique_token_ids_set = set(retriever.vocab_dict.values())
        return cls(retriever, list(counts.ids))

    def save(self, directory: Path) -> None:
        """Write to a sibling temp dir, then swap it in (a crash leaves the old index)."""
        with atomic_directory(directory) as tmp:
            self._retriever.save(str(tmp), show_progress=False)
            atomic_write_bytes(tmp / "ids.json", json.dumps(self.ids).encode())

    @classmethod
    def load(cls, directory: Path) -> Bm25Index:
        import bm25s

        ids = json.loads((directory / "ids.json").read_text())
        retriever = bm25s.BM25.load(str(directory), show_progress=False, mmap=True)
        return cls(retriever, ids)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k (id, BM25 score) with a positive score, best first."""
        import bm25s

        vocab = getattr(self._retriever, "vocab_dict", None) or {}
        tokens = bm25s.tokenize([query], stopwords=STOPWORDS, return_ids=False, show_progress=False)[0]
        tokens = [t for t in tokens if t in vocab]
        k = min(k, len(self.ids))
        if not tokens or k <= 0:
            return []
        rows, scores = self._retriever.retrieve([tokens], k=k, show_progress=False, n_threads=1)
        return [(self.ids[int(r)], float(s)) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]
