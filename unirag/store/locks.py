"""Writer locks: one writer per workspace, any number of readers.

The SQLite store locks ``WS/.lock`` with ``flock`` (one machine); the PostgreSQL store
takes an advisory lock keyed by its schema (:class:`unirag.store.postgres.AdvisoryWriterLock`),
which every machine that reaches the server sees. Both wait and word their refusal
through :func:`wait_for`, so a second writer reads the same line on either store.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from unirag.errors import WorkspaceError


class FileWriterLock:
    """The SQLite store's writer lock: ``flock`` on ``WS/.lock`` (one writer per workspace
    on one machine; readers never take it). ``name`` says the workspace in messages."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name

    def held_elsewhere(self) -> bool:
        if not self.path.exists():
            return False
        with open(self.path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False

    @contextmanager
    def hold(self, wait: float, on_wait: Callable[[str], None] | None) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w") as handle:
            wait_for(lambda: _try_flock(handle), self.name, wait, on_wait)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _try_flock(handle: Any) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def wait_for(take: Callable[[], bool], name: str, wait: float, on_wait: Callable[[str], None] | None) -> None:
    """Call ``take`` until it takes the writer lock, up to ``wait`` seconds (said once through
    ``on_wait``); a one-line :class:`WorkspaceError` when another process still holds it.
    Both stores' locks wait the same way, so the lines are the same."""
    deadline = time.monotonic() + wait
    said = False
    while True:
        if take():
            return
        if wait <= 0:
            raise WorkspaceError(f"{name} is being written by another unirag process")
        if time.monotonic() >= deadline:
            raise WorkspaceError(
                f"{name} is still being written by another unirag process after {wait:g} s: run the "
                "command again when it has finished, or raise retrieval.build_wait"
            )
        if not said and on_wait is not None:
            on_wait(f"{name} is being written by another unirag process: waiting for it "
                    f"(up to {wait:g} s, retrieval.build_wait)")
            said = True
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
