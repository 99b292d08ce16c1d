"""Progress for long steps on stderr: rich bars on a terminal, a plain line every few
seconds elsewhere (logs, pipes, CI), or nothing at all in tests."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Progress:
    """``with progress.task("embedding chunks", total=n) as advance: advance(32)``.

    Disabled (the default), it costs nothing; enabled, it draws a rich bar on
    stderr so that ``--json`` output on stdout stays clean. With ``lines`` (stderr
    is not a terminal) it writes one plain line per ``every`` seconds and one when a
    step ends, so a long run in a log still shows it is alive and how far it got.
    """

    def __init__(self, enabled: bool = False, lines: bool = False, every: float = 5.0,
                 write: Callable[[str], Any] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self.lines = lines
        self.every = every
        self._write = write
        self._clock = clock

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        if not self.enabled:
            yield lambda n=1: None
            return
        if self.lines:
            with self._line_task(description, total) as advance:
                yield advance
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

    @contextmanager
    def _line_task(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        """Plain lines: ``unirag: DESCRIPTION: N[/TOTAL] (S s)`` at most every ``every`` seconds,
        and a last one when a step that said anything ends (a short step stays silent)."""
        write = self._write or (lambda line: print(line, file=sys.stderr, flush=True))
        started = self._clock()
        state = {"done": 0, "said_at": started, "lines": 0}

        def line() -> str:
            of = f"/{total}" if total is not None else ""
            return f"unirag: {description}: {state['done']}{of} ({self._clock() - started:.0f} s)"

        def advance(n: int = 1) -> None:
            state["done"] += n
            now = self._clock()
            if now - state["said_at"] >= self.every:
                state["said_at"] = now
                state["lines"] += 1
                write(line())

        yield advance
        if state["lines"]:
            write(line() + " done")
