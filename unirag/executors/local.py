"""Today's behaviour, as an executor: CPU work in this process, one item after another.

Model calls need nothing from it: under the local executor they go straight to the model
layers, in the driver's threads (:func:`unirag.llm.batch.complete_all`, the LLM extractor's
pool), as they always did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    """Runs ``fn`` here, lazily, in item order. ``retries`` is not used: a failure in this
    process is a bug or a bad input, not a lost machine, and running it again repeats it."""

    name = "local"
    remote = False

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, retries: int = 0, desc: str = "",
            cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        for index, item in enumerate(items):
            yield index, fn(item)

    def call(self, fn: Callable[[T], R], item: T, *, retries: int = 0, desc: str = "", cpus: float = 1.0) -> R:
        return fn(item)
