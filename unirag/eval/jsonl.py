"""JSON Lines files of evaluation results, read the way a killed run leaves them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> tuple[list[dict[str, Any]], int]:
    """(rows, bad lines) of a JSONL file; a missing file is empty.

    A line that is not a JSON object (the last one, cut by a kill) is skipped
    and counted: its judgment is simply asked again, from the cache.
    """
    if not path.is_file():
        return [], 0
    rows: list[dict[str, Any]] = []
    bad = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def end_cut_line(path: Path) -> None:
    """End a last line that a kill cut short (no newline) before rows are appended:
    otherwise the next row would be glued to it and be unreadable too."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
