"""Who runs index work: this process (threads for model calls, one process for CPU work) or
a Ray cluster (one task per batch or per model call, results streamed back as they finish).

The layers above never import Ray: they ask :func:`executor_for` for an :class:`Executor`
and hand it picklable callables (:mod:`unirag.executors.base`). Graph algorithms (merge,
Leiden, clustering) and every write to the store stay on the driver, whichever executor runs.
"""

from __future__ import annotations

from unirag.config import Settings
from unirag.executors.base import Executor, in_order
from unirag.executors.local import LocalExecutor
from unirag.executors.ray_executor import RayExecutor


def executor_for(settings: Settings) -> Executor:
    """The executor ``settings.executor`` names; Ray starts (or is joined) on its first task."""
    if settings.executor == "ray":
        return RayExecutor(settings.ray)
    return LocalExecutor()


def model_call_parallelism(settings: Settings) -> int:
    """Embedding batches in flight at once: one here (the embedded model has its own threads,
    as today), ``concurrency`` when each batch is a task on a cluster."""
    return settings.concurrency if settings.executor == "ray" else 1


__all__ = ["Executor", "LocalExecutor", "executor_for", "in_order", "model_call_parallelism"]
