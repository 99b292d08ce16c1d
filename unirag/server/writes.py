"""One write (index, delete) of a server or MCP process, off the reader it answers queries with.

A write runs on a sibling of the shared reader (:meth:`unirag.api.UniRAG.sibling`: its own
store connection, the reader's model stack), after any writer already holding the workspace
(a query building an artifact, another process) is done. Callers run writes one at a time
(:class:`unirag.server.jobs.JobQueue`); the workspace's write lock covers other processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from unirag.api import UniRAG
    from unirag.progress import Progress


class Report(Protocol):
    """An index or delete report."""

    def to_json(self) -> dict[str, Any]: ...


def written(rag: UniRAG, progress: Progress, write: Callable[[UniRAG], Report]) -> dict[str, Any]:
    """Run ``write(writer)`` on a writer of its own; its report as JSON."""
    writer = rag.sibling(progress)
    try:
        wait_for_writers(rag)
        return write(writer).to_json()
    finally:
        writer.close()


def wait_for_writers(rag: UniRAG) -> None:
    """A query of this process may be building an artifact (or another process writing): let it
    finish, up to ``retrieval.build_wait`` seconds (then the write's own lock says it is busy)."""
    deadline = time.monotonic() + rag.settings.retrieval.build_wait
    while rag.being_written() and time.monotonic() < deadline:
        time.sleep(0.2)
