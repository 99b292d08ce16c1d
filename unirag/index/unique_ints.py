"""Sorted unique values of an integer array by one sort: ``np.unique`` without its hash table.

NumPy 2's plain ``np.unique`` finds the unique values with a hash table, then
sorts them. On the int64 edge keys of a hierarchy layer (10^5 to 10^6 of them,
many repeated) that is several times slower than sorting the keys and
dropping repeats, and the hierarchy builders call it on every layer of every
update. For integers both give the
same array.
"""

from __future__ import annotations

import numpy as np


def unique_ints(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for an integer array (flattened, sorted, repeats dropped)."""
    keys = np.sort(np.asarray(values).reshape(-1))
    if keys.dtype.kind not in "iub":
        raise TypeError(f"unique_ints takes integers, not {keys.dtype}")
    if len(keys) < 2:
        return keys
    keep = np.empty(len(keys), dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]

