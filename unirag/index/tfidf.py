"""TF-IDF over chunk texts as a scipy sparse matrix (KGP's seed retrieval, survey §5).

scikit-learn's ``TfidfVectorizer`` defines the terms and weights: its analyser tokenises,
its ``TfidfTransformer`` weighs. The matrix (rows L2-normalised) is saved as ``matrix.npz``
with the vocabulary and idf, so a query is one sparse transform and one sparse mat-vec — no
Python loop over chunks. The matrix is weighted from per-chunk term counts
(:mod:`unirag.index.term_counts`), so an update tokenises only new chunks and still gives
what ``fit_transform`` over every chunk gives.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from unirag.index.term_counts import count_terms
from unirag.workspace import atomic_directory, atomic_write_bytes

if TYPE_CHECKING:
    from unirag.index.term_counts import TermCounts


class TfidfIndex:
    """Build once, save, load once per process, search many times."""

    CONFIG = {"stop_words": "english", "sublinear_tf": True, "min_df": 1, "ngram_range": [1, 1]}
    TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # scikit-learn's default; the query vectoriser is given it too

    def __init__(self, vocabulary: dict[str, int], idf: np.ndarray, matrix: Any, ids: list[str]) -> None:
        self.vocabulary = vocabulary  # term -> column, in scikit-learn's order (first occurrence)
        self.idf = idf  # float32 per column
        self.matrix = matrix  # (n_chunks, vocabulary) CSR, rows L2-normalised
        self.ids = ids
        self._vectorizer: Any = None  # made on the first query

    @classmethod
    def _vectorizer_for(cls, vocabulary: dict[str, int] | None = None) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        config = dict(cls.CONFIG, ngram_range=tuple(cls.CONFIG["ngram_range"]))
        return TfidfVectorizer(vocabulary=vocabulary, dtype=np.float32, token_pattern=cls.TOKEN_PATTERN, **config)

    @classmethod
    def signature(cls) -> str:
        """What term counts depend on: an update reuses saved counts only while it is unchanged."""
        from importlib.metadata import version

        return json.dumps({"library": "scikit-learn", "version": version("scikit-learn"), **cls.CONFIG})

    @classmethod
    def tokenize(cls, texts: list[str]) -> list[list[str]]:
        """Each text's terms as the vectoriser's analyser gives them (lowercased, stop words out),
        in text order."""
        analyse = cls._vectorizer_for().build_analyzer()
        return [analyse(text) for text in texts]

    @classmethod
    def build(cls, texts: list[str], ids: list[str]) -> TfidfIndex:
        return cls.from_counts(count_terms(
            list(ids), lambda rows: [texts[i] for i in rows], cls.tokenize, cls.signature()))

    @classmethod
    def from_counts(cls, counts: TermCounts) -> TfidfIndex:
        """The index scikit-learn's ``fit_transform`` gives over the counted texts, from their counts.

        scikit-learn numbers terms alphabetically but keeps each row's entries in the order
        its terms first occur in the corpus (the counts' column order), and that order decides
        the float sums of the row norms: the count matrix is laid out that way, then weighted
        by scikit-learn's own transformer."""
        from scipy.sparse import csr_matrix
        from sklearn.feature_extraction.text import TfidfTransformer

        n, size = len(counts.ids), len(counts.terms)
        if size == 0:  # empty corpus, or only stop words: an empty index, not a crash
            return cls({}, np.zeros(0, np.float32), csr_matrix((n, 0), dtype=np.float32), list(counts.ids))
        alphabetical = np.empty(size, dtype=np.int64)
        alphabetical[sorted(range(size), key=counts.terms.__getitem__)] = np.arange(size)
        layout = np.lexsort((counts.columns, counts.row_of_entry()))  # by row, then first occurrence
        matrix = csr_matrix((counts.counts[layout].astype(np.float32),
                             alphabetical[counts.columns[layout]].astype(np.int32),
                             counts.indptr.astype(np.int32)), shape=(n, size))
        vectorizer = cls._vectorizer_for()  # what its fit_transform does after counting
        transformer = TfidfTransformer(norm=vectorizer.norm, use_idf=vectorizer.use_idf,
                                       smooth_idf=vectorizer.smooth_idf, sublinear_tf=vectorizer.sublinear_tf)
        weighted = transformer.fit_transform(matrix)
        vocabulary = dict(zip(counts.terms, alphabetical.tolist(), strict=True))
        return cls(vocabulary, transformer.idf_, weighted, list(counts.ids))

    def save(self, directory: Path) -> None:
        from scipy.sparse import save_npz

        with atomic_directory(directory) as tmp:
            save_npz(tmp / "matrix.npz", self.matrix)
            fitted = {"vocabulary": self.vocabulary, "idf": self.idf.tolist()}
            atomic_write_bytes(tmp / "vectorizer.json", json.dumps(fitted).encode())
            atomic_write_bytes(tmp / "ids.json", json.dumps(self.ids).encode())

    @classmethod
    def load(cls, directory: Path) -> TfidfIndex:
        from scipy.sparse import load_npz

        ids = json.loads((directory / "ids.json").read_text())
        fitted = json.loads((directory / "vectorizer.json").read_text())
        matrix = load_npz(directory / "matrix.npz").tocsr()
        return cls(fitted["vocabulary"], np.asarray(fitted["idf"], dtype=np.float32), matrix, ids)

    def _query_vectorizer(self) -> Any:
        """The vectoriser with this index's vocabulary and idf (made once, on the first query)."""
        if self._vectorizer is None:
            vectorizer = self._vectorizer_for(self.vocabulary)
            with warnings.catch_warnings():
                # The vocabulary is lowercase, but str.lower() leaves a few Unicode letters
                # (e.g. titlecase digraphs) that sklearn's check flags; they were fitted that way.
                warnings.filterwarnings("ignore", message="Upper case characters found in vocabulary")
                vectorizer.fit(["placeholder"])  # sets the fitted state; idf is replaced below
            vectorizer.idf_ = self.idf
            self._vectorizer = vectorizer
        return self._vectorizer

    def query_vector(self, text: str) -> Any:
        """The question as a (1, vocabulary) sparse TF-IDF row."""
        return self._query_vectorizer().transform([text])

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k (id, cosine) with a positive score, best first."""
        if not self.vocabulary or k <= 0 or not self.ids:
            return []
        scores = (self.matrix @ self.query_vector(query).T).toarray().ravel()
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[int(i)], float(scores[i])) for i in top if scores[i] > 0]
