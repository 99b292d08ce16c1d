"""The executor contract: run a picklable callable over items, results as they finish.

Why a contract this small: every fan-out the index makes (chunking documents, the zero-LLM
extractor over chunks, one model call) is "apply ``fn`` to each item"; what differs between
running here and on a cluster is only where ``fn`` runs and how a lost worker is retried.
The driver keeps every write: it stores each result as :meth:`Executor.map` yields it, so a
killed driver or worker loses at most the results in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn`` over items. ``fn`` and the items must pickle when :attr:`remote` is True."""

    name: str
    #: True when ``fn`` runs in other processes (perhaps machines): it gets copies of its
    #: arguments, and model clients must be built there (:mod:`unirag.llm.remote`).
    remote: bool

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, retries: int = 0, desc: str = "",
            cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        """``(index of the item, fn(item))`` as each finishes, in any order.

        ``items`` is read lazily (a bounded number in flight), so a long stream of documents
        is never all in memory. A task that raises, or whose worker dies, is run again up to
        ``retries`` times where the executor can (a cluster); then its error propagates and
        the tasks not yet finished are cancelled. ``desc`` names the tasks (the Ray dashboard).
        """
        ...

    def call(self, fn: Callable[[T], R], item: T, *, retries: int = 0, desc: str = "", cpus: float = 1.0) -> R:
        """``fn(item)``, waited for: one model call from one of the driver's threads. Only a lost
        worker is retried here; an error ``fn`` raises comes back at once (the model layers
        above decide whether and when to try again)."""
        ...


def in_order(results: Iterable[tuple[int, R]]) -> Iterator[R]:
    """Results of :meth:`Executor.map` in item order, each as soon as those before it are in.

    For writes whose order is visible (documents keep the order they were read in, so chunk
    ids list the same on every executor); results ahead of a slow one wait in memory.
    """
    waiting: dict[int, R] = {}
    expected = 0
    for index, value in results:
        waiting[index] = value
        while expected in waiting:
            yield waiting.pop(expected)
            expected += 1
    if waiting:
        raise ValueError(f"results for items {sorted(waiting)} arrived without item {expected}")


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` consecutive items (the last may be shorter): one task each."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
