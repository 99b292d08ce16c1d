"""Small helpers the evaluation reports share: means that skip missing values (and say
over how many values they are), table cells, and matplotlib without a display."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from unirag.errors import import_optional


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are numbers (None and NaN are left out); None when none is."""
    return mean_and_n(values)[0]


def numbers(values: Sequence[float | None]) -> list[float]:
    """The values that are numbers (None and NaN left out)."""
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_and_n(values: Sequence[float | None]) -> tuple[float | None, int]:
    """(:func:`mean_of`, how many values it averaged): a mean is only honest with its n."""
    kept = numbers(values)
    return (sum(kept) / len(kept) if kept else None), len(kept)


def put_mean(summary: dict[str, Any], name: str, values: Sequence[float | None]) -> None:
    """``summary[name]`` = the mean of ``values``, ``summary["n_" + name]`` = its n."""
    summary[name], summary[f"n_{name}"] = mean_and_n(values)


def cell_with_n(value: Any, n: int | None, questions: int) -> str:
    """A mean's cell that shows its n where the mean is not over all ``questions``
    ("0.4000 (n=12)"; "– (n=0)" where no question has the figure)."""
    if n is None or n == questions:
        return table_cell(value)
    return f"{table_cell(value) or '–'} (n={n})"


def table_cell(value: Any) -> str:
    """A table cell: 4 decimals below 10, 1 above, empty for None."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    """``rows`` as a CSV file with ``columns`` (cells as :func:`table_cell`; a missing value is empty)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([table_cell(row.get(name)) for name in columns])
    return path


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only: no display needed); without the
    ``eval`` extra, one line saying how to install it."""
    matplotlib = import_optional("matplotlib", "eval", "the evaluation plots")
    matplotlib.use("Agg")
    return import_optional("matplotlib.pyplot", "eval", "the evaluation plots")
