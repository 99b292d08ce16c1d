"""What each step of an index job leaves alive, kept out of the cyclic collector's reach.

Why: an index job (``unirag index``, an insert, a delete) runs some twenty steps over a heap of
millions of objects (the merged graph, stores, caches) that later steps keep, and CPython's full
collections walk all of them again and again. Freezing them after each step (``gc.freeze``)
leaves later collections only what later steps make.

This is the one place unirag touches the collector, and it is bounded so that a host process
embedding unirag keeps its own: only an index job asks for it (never a query, not even the
query path's refresh of a missing artifact); it freezes only when nothing was frozen before it
(a server that froze its start-up objects before forking keeps them frozen, and the job then
does nothing); and it unfreezes when the job ends, however it ends, leaving the permanent
generation empty as it found it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _nothing() -> None:
    """The step hook when survivors are not frozen."""


@contextmanager
def survivors_frozen(wanted: bool = True) -> Iterator[Callable[[], None]]:
    """Yields the hook to call after each step: ``gc.freeze`` when ``wanted`` and nothing is
    frozen yet, else a no-op. What the block froze goes back to the collector when it ends."""
    if not wanted or gc.get_freeze_count() > 0:
        yield _nothing
        return
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()
