"""Per-chunk term counts that an update of a lexical index continues instead of re-tokenising.

BM25 and TF-IDF weights depend on the whole corpus (idf, average length, row
norms), but the term counts of a chunk depend on its text alone. A build keeps
them beside its artifact (an economy file: lost, damaged or written with other
tokeniser settings, the next build tokenises every chunk again) and an update

* keeps the rows of chunks it counted before: chunk ids are content hashes (of
  the document's title and text, the chunk's place and text), so an id names one
  indexed text, and a changed text is a new id;
* reads and tokenises only the texts of new chunks;
* drops the rows of removed chunks, and with them the terms no chunk uses;

then the index's weights are recomputed from the counts with array operations.

The counts are kept in the form the libraries' own builds see: each row lists
its terms in the order they first occur in its text, and columns are numbered
by each term's first occurrence in the corpus (chunk order, then text order).
scikit-learn and bm25s number their vocabularies that way, and the order of a
row's entries decides the order of float sums, so an update gives the same
bytes as a build over the same chunks.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unirag.workspace import atomic_path

Tokenize = Callable[[list[str]], list[list[str]]]  # texts -> each text's tokens, in text order
TextsOf = Callable[[list[int]], list[str]]  # rows -> their texts (only new rows are asked for)
FORMAT = 1  # of the economy file; another format is read as no file


@dataclass(frozen=True)
class TermCounts:
    """Term counts of every chunk, rows in chunk order (see the module docstring)."""

    signature: str  # the tokeniser and its settings: counts from another one are not reused
    ids: list[str]  # content hashes of the texts counted
    terms: list[str]  # column -> term, numbered by first occurrence in the corpus
    indptr: np.ndarray  # int64, len(ids) + 1
    columns: np.ndarray  # int64 per entry; a row's entries in the order they occur in its text
    counts: np.ndarray  # int32 per entry

    def row_of_entry(self) -> np.ndarray:
        """The row of each entry (int64)."""
        return np.repeat(np.arange(len(self.ids), dtype=np.int64), np.diff(self.indptr))

    def row_lengths(self) -> np.ndarray:
        """Tokens per row (int64): the sum of its counts."""
        totals = np.concatenate(([0], np.cumsum(self.counts, dtype=np.int64)))
        return totals[self.indptr[1:]] - totals[self.indptr[:-1]]


def count_terms(ids: list[str], texts_of: TextsOf, tokenize: Tokenize, signature: str,
                previous: TermCounts | None = None) -> TermCounts:
    """The term counts of the texts of ``ids``, reusing the rows of ``previous`` with the same id.

    Without ``previous`` (or with one from another tokeniser) every text is read and
    tokenised: a full build and an update run the same code."""
    if previous is not None and previous.signature != signature:
        previous = None
    source = _reused_rows(previous, ids)
    fresh = np.flatnonzero(source < 0)
    vocabulary = {} if previous is None else {term: column for column, term in enumerate(previous.terms)}
    fresh_indptr, fresh_columns, fresh_counts = _count(tokenize(texts_of(fresh.tolist())), vocabulary)
    old_entries = 0 if previous is None else len(previous.columns)
    starts = np.zeros(len(ids), dtype=np.int64)
    lengths = np.zeros(len(ids), dtype=np.int64)
    if previous is not None:
        kept = source >= 0
        starts[kept] = previous.indptr[source[kept]]
        lengths[kept] = np.diff(previous.indptr)[source[kept]]
    starts[fresh] = old_entries + fresh_indptr[:-1]
    lengths[fresh] = np.diff(fresh_indptr)
    take = _ranges(starts, lengths)
    old_columns = np.zeros(0, np.int64) if previous is None else previous.columns
    old_counts = np.zeros(0, np.int32) if previous is None else previous.counts
    columns = np.concatenate((old_columns, fresh_columns))[take]
    counts = np.concatenate((old_counts, fresh_counts))[take]
    indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return _canonical(signature, list(ids), list(vocabulary), indptr, columns, counts)


def _reused_rows(previous: TermCounts | None, ids: list[str]) -> np.ndarray:
    """Per row of the new corpus, the row of ``previous`` with its id, or -1."""
    if previous is None or not previous.ids:
        return np.full(len(ids), -1, dtype=np.int64)
    row_of = {chunk_id: row for row, chunk_id in enumerate(previous.ids)}
    return np.fromiter((row_of.get(chunk_id, -1) for chunk_id in ids), dtype=np.int64, count=len(ids))


def _count(token_lists: list[list[str]], vocabulary: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (indptr, columns, counts) of ``token_lists``; new terms are added to ``vocabulary``
    in the order they first occur. A row lists its terms in the order they occur in its text."""
    indptr = [0]
    columns: list[int] = []
    counts: list[int] = []
    for tokens in token_lists:
        counter = Counter(tokens)  # keys in order of first occurrence
        for term in counter:
            column = vocabulary.get(term)
            if column is None:
                column = vocabulary[term] = len(vocabulary)
            columns.append(column)
        counts.extend(counter.values())
        indptr.append(len(columns))
    return (np.asarray(indptr, dtype=np.int64), np.asarray(columns, dtype=np.int64),
            np.asarray(counts, dtype=np.int32))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(start, start + length)`` for each pair, without a loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)


def _canonical(signature: str, ids: list[str], terms: list[str],
               indptr: np.ndarray, columns: np.ndarray, counts: np.ndarray) -> TermCounts:
    """Renumber the columns by first occurrence in the corpus, dropping terms no row uses."""
    used, first = np.unique(columns, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    renumber = np.full(len(terms), -1, dtype=np.int64)
    renumber[order] = np.arange(len(order), dtype=np.int64)
    return TermCounts(signature, ids, [terms[int(i)] for i in order], indptr,
                      renumber[columns], counts)


# -- the economy file ----------------------------------------------------------------
def save_term_counts(path: Path, counts: TermCounts) -> None:
    """Write all or nothing (a killed build leaves the previous file, which an update still
    reads correctly: it says which chunks its rows were counted from)."""
    header = json.dumps({"format": FORMAT, "signature": counts.signature, "ids": counts.ids,
                         "terms": counts.terms}).encode("utf-8")
    with atomic_path(path) as tmp, tmp.open("wb") as handle:
        np.savez(handle, header=np.frombuffer(header, dtype=np.uint8), indptr=counts.indptr, columns=counts.columns, counts=counts.counts)


def load_term_counts(path: Path, signature: str) -> TermCounts | None:
    """The counts saved at ``path``, or None when there are none to reuse: no file, a damaged
    one, or one from another tokeniser or format (the caller then tokenises every chunk)."""
    try:
        with path.open("rb") as handle, np.load(handle, allow_pickle=False) as saved:
            header = json.loads(saved["header"].tobytes())
            arrays = {name: saved[name] for name in ("indptr", "columns", "counts")}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
        return None  # json's and numpy's format errors are ValueErrors
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("signature") != signature:
        return None
    counts = TermCounts(signature, header.get("ids"), header.get("terms"),
                        arrays["indptr"], arrays["columns"], arrays["counts"])
    return counts if _consistent(counts) else None


def _consistent(counts: TermCounts) -> bool:
    """Whether the arrays fit together (a file cut or edited by hand is not reused)."""
    n, indptr, columns = len(counts.ids or ()), counts.indptr, counts.columns
    if not isinstance(counts.ids, list) or not isinstance(counts.terms, list):
        return False
    if indptr.dtype != np.int64 or columns.dtype != np.int64 or counts.counts.dtype != np.int32:
        return False
    if indptr.shape != (n + 1,) or columns.shape != counts.counts.shape:
        return False
    if indptr[0] != 0 or indptr[-1] != len(columns) or np.any(np.diff(indptr) < 0):
        return False
    return not len(columns) or (int(columns.min()) >= 0 and int(columns.max()) < len(counts.terms)
                                and int(counts.counts.min()) > 0)
