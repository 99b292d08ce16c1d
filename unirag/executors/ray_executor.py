"""Index work as Ray tasks: ``ray.init(address=...)`` once, one task per batch or model call,
results streamed back with ``ray.wait`` so the driver stores each as it finishes.

Retries are Ray's own: a task whose worker died (or, for :meth:`RayExecutor.map`, that
raised) is scheduled again up to ``retries`` times (``max_retries``, ``retry_exceptions``).
The ``ray`` package is an optional extra: ``pip install 'unirag[ray]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from unirag.config import RaySettings
from unirag.errors import UniragError, import_optional

T = TypeVar("T")
R = TypeVar("R")

#: Tasks in flight per CPU of the cluster: enough to keep every worker busy while the
#: driver stores a result, few enough that a long stream of items is never all in memory.
IN_FLIGHT_PER_CPU = 2


def _apply(fn: Callable[[Any], Any], item: Any) -> Any:
    """What every task runs: the callable on its item (the callable comes once per map, by reference)."""
    return fn(item)


class RayExecutor:
    """Runs tasks on the Ray cluster ``settings.address`` names (or a local instance)."""

    name = "ray"
    remote = True

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self._task: Any = None  # ray.remote(_apply), made once Ray is up

    def _ray(self) -> Any:
        """The ``ray`` module, connected: joins a running instance of this process, else calls
        ``ray.init`` with the settings' address (a local instance when there is none)."""
        ray = import_optional("ray", "ray", "the Ray executor (executor: ray)")
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False}
            if self.settings.address:
                ray.init(address=self.settings.address, **options)
            else:
                ray.init(num_cpus=self.settings.num_cpus, **options)
        if self._task is None:
            self._task = ray.remote(_apply)
        return ray

    def cpus(self) -> int:
        """CPUs of the cluster: how many CPU tasks run at once."""
        ray = self._ray()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, retries: int = 0, desc: str = "",
            cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        ray = self._ray()
        task = self._task.options(max_retries=retries, retry_exceptions=True, num_cpus=cpus,
                                  name=desc or getattr(fn, "__name__", type(fn).__name__))
        shipped = ray.put(fn)
        window = IN_FLIGHT_PER_CPU * self.cpus()
        pending: dict[Any, int] = {}
        try:
            for index, item in enumerate(items):
                pending[task.remote(shipped, item)] = index
                while len(pending) >= window:
                    yield from self._finished(ray, pending, desc)
            while pending:
                yield from self._finished(ray, pending, desc)
        finally:
            for ref in pending:  # an error, or the caller stopped reading: drop what is still queued
                ray.cancel(ref)

    def call(self, fn: Callable[[T], R], item: T, *, retries: int = 0, desc: str = "", cpus: float = 1.0) -> R:
        ray = self._ray()
        task = self._task.options(max_retries=retries, retry_exceptions=False, num_cpus=cpus,
                                  name=desc or getattr(fn, "__name__", type(fn).__name__))
        return self._result(ray, task.remote(fn, item), desc)

    def _finished(self, ray: Any, pending: dict[Any, int], desc: str) -> Iterator[tuple[int, Any]]:
        """Wait for at least one task, then yield every finished one (and forget it)."""
        ray.wait(list(pending), num_returns=1)
        done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in done:
            index = pending.pop(ref)
            yield index, self._result(ray, ref, desc)

    @staticmethod
    def _result(ray: Any, ref: Any, desc: str) -> Any:
        """A task's value; its own error as itself (one line, the type the caller knows), a worker
        lost past its retries as one line naming the tasks."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.OwnerDiedError) as exc:
            what = f" ({desc})" if desc else ""
            raise UniragError(f"a Ray task{what} was lost with its worker after its retries: "
                              f"{type(exc).__name__}") from None
