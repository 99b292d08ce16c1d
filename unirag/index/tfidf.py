"""TF-IDF over chunk texts as a scipy sparse matrix (KGP's seed retrieval, survey §5).

scikit-learn fits the vocabulary and idf; the matrix (rows L2-normalised) is
saved as ``matrix.npz`` with the fitted vectoriser's vocabulary and idf, so a
query is one sparse transform and one sparse mat-vec — no Python loop over
chunks.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from unirag.workspace import atomic_directory, atomic_write_bytes


class TfidfIndex:
    """Build once, save, load once per process, search many times."""

    CONFIG = {"stop_words": "english", "sublinear_tf": True, "min_df": 1, "ngram_range": [1, 1]}

    def __init__(self, vectorizer: Any, matrix: Any, ids: list[str]) -> None:
        self._vectorizer = vectorizer
        self.matrix = matrix  # (n_chunks, vocabulary) CSR, rows L2-normalised
        self.ids = ids

    @classmethod
    def _vectorizer_for(cls, vocabulary: dict[str, int] | None = None) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        config = dict(cls.CONFIG, ngram_range=tuple(cls.CONFIG["ngram_range"]))
        return TfidfVectorizer(vocabulary=vocabulary, dtype=np.float32, **config)

    @classmethod
    def build(cls, texts: list[str], ids: list[str]) -> TfidfIndex:
        from scipy.sparse import csr_matrix

        vectorizer = cls._vectorizer_for()
        try:
            matrix = vectorizer.fit_transform(texts).tocsr()
        except ValueError:  # empty corpus, or only stop words: an empty index, not a crash
            vectorizer, matrix = None, csr_matrix((len(texts), 0), dtype=np.float32)
        return cls(vectorizer, matrix, list(ids))

    def save(self, directory: Path) -> None:
        from scipy.sparse import save_npz

        with atomic_directory(directory) as tmp:
            save_npz(tmp / "matrix.npz", self.matrix)
            vocabulary = {} if self._vectorizer is None else {k: int(v) for k, v in self._vectorizer.vocabulary_.items()}
            idf = [] if self._vectorizer is None else self._vectorizer.idf_.tolist()
            atomic_write_bytes(tmp / "vectorizer.json", json.dumps({"vocabulary": vocabulary, "idf": idf}).encode())
            atomic_write_bytes(tmp / "ids.json", json.dumps(self.ids).encode())

    @classmethod
    def load(cls, directory: Path) -> TfidfIndex:
        from scipy.sparse import load_npz

        ids = json.loads((directory / "ids.json").read_text())
        fitted = json.loads((directory / "vectorizer.json").read_text())
        matrix = load_npz(directory / "matrix.npz").tocsr()
        if not fitted["vocabulary"]:
            return cls(None, matrix, ids)
        vectorizer = cls._vectorizer_for(fitted["vocabulary"])
        with warnings.catch_warnings():
            # The fitted vocabulary is lowercase, but str.lower() leaves a few Unicode letters
            # (e.g. titlecase digraphs) that sklearn's check flags; they were fitted that way.
            warnings.filterwarnings("ignore", message="Upper case characters found in vocabulary")
            vectorizer.fit(["placeholder"])  # sets the fitted state; idf is replaced below
        vectorizer.idf_ = np.asarray(fitted["idf"], dtype=np.float32)
        return cls(vectorizer, matrix, ids)

    def query_vector(self, text: str) -> Any:
        """The question as a (1, vocabulary) sparse TF-IDF row."""
        return self._vectorizer.transform([text])

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k (id, cosine) with a positive score, best first."""
        if self._vectorizer is None or k <= 0 or not self.ids:
            return []
        scores = (self.matrix @ self.query_vector(query).T).toarray().ravel()
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[int(i)], float(scores[i])) for i in top if scores[i] > 0]
