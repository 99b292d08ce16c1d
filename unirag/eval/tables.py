"""Small helpers the evaluation reports share: means that skip missing values, table
cells, and matplotlib without a display."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from unirag.errors import import_optional


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are numbers (None and NaN are left out); None when none is."""
    kept = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(kept) / len(kept) if kept else None


def table_cell(value: Any) -> str:
    """A table cell: 4 decimals below 10, 1 above, empty for None."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only: no display needed); without the
    ``eval`` extra, one line saying how to install it."""
    matplotlib = import_optional("matplotlib", "eval", "the evaluation plots")
    matplotlib.use("Agg")
    return import_optional("matplotlib.pyplot", "eval", "the evaluation plots")
