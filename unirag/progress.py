"""Progress bars for long steps (rich, on stderr), or nothing at all in tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Progress:
    """``with progress.task("embedding chunks", total=n) as advance: advance(32)``.

    Disabled (the default), it costs nothing; enabled, it draws a rich bar on
    stderr so that ``--json`` output on stdout stays clean.
    """

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        if not self.enabled:
            yield lambda n=1: None
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        columns.append(TimeElapsedColumn())
        with RichProgress(*columns, console=Console(stderr=True), transient=False) as bar:
            task_id = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task_id, n)
