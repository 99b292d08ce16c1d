"""The numba kernel of TF-IDF's row normalisation, scikit-learn's arithmetic to the bit.

Imported only by :mod:`unirag.index.tfidf` when a matrix is weighted, so importing ``unirag``
never loads numba. scikit-learn normalises a float32 CSR row by adding each entry's float32
square to a float64 sum, one after another, and dividing every entry by the sum's root in
float64; numpy's own reductions add in pairs, which rounds differently on long rows, so the
loop is written out here (``cache=True``: compiled once per checkout).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def l2_normalise_rows(data: np.ndarray, indptr: np.ndarray) -> None:  # pragma: no cover - compiled
    """Each CSR row of ``data`` (float32) divided by its L2 norm, in place; empty rows left."""
    for row in range(indptr.shape[0] - 1):
        total = 0.0
        for j in range(indptr[row], indptr[row + 1]):
            total += data[j] * data[j]
        if total == 0.0:
            continue
        total = np.sqrt(total)
        for j in range(indptr[row], indptr[row + 1]):
            data[j] = data[j] / total
