"""Background jobs that write the workspace (index uploaded documents, delete documents).

One job runs at a time per server (one worker thread), the others wait in order
(``queued``): writes to one workspace are serialised anyway (its write lock), so
a second upload is queued rather than refused with 409, and a client polls
``GET /jobs/{id}`` the same way either way. Queries keep answering meanwhile,
from the artifacts as they were (``UniRAG(stale_while_writing=True)``).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from unirag.errors import UniragError
from unirag.progress import Progress
from unirag.server.errors import internal_message, one_line

#: A job's work: given its progress, returns its report as JSON.
JobWork = Callable[["JobProgress"], dict[str, Any]]


class JobProgress(Progress):
    """Progress that draws nothing and keeps the current step for ``GET /jobs/{id}``."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
        self._lock = threading.Lock()
        self.step: str | None = None
        self.done = 0
        self.total: int | None = None

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        with self._lock:
            self.step, self.done, self.total = description, 0, total

        def advance(n: int = 1) -> None:
            with self._lock:
                self.done += n

        yield advance

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"step": self.step, "done": self.done, "total": self.total}


@dataclass
class Job:
    id: str
    kind: str
    state: str = "queued"  # queued -> running -> done | failed
    progress: JobProgress = field(default_factory=JobProgress)
    report: dict[str, Any] | None = None
    error: str | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "state": self.state, "progress": self.progress.to_json(),
                "report": self.report, "error": self.error, "created": _iso(self.created),
                "finished": _iso(self.finished) if self.finished else None}


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(moment))


class JobQueue:
    """Runs jobs one at a time, in submission order, on one worker thread."""

    def __init__(self, keep: int = 1000) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="unirag-job")
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._keep = keep

    def submit(self, kind: str, work: JobWork) -> Job:
        job = Job(uuid.uuid4().hex, kind)
        with self._lock:
            self._jobs[job.id] = job
            self._forget_old()
        self._pool.submit(self._run, job, work)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def shutdown(self) -> None:
        """Wait for every accepted job, queued ones included: a 202 promised the work, and a
        document dropped at shutdown would be lost without a word."""
        with self._lock:
            pending = sum(job.finished is None for job in self._jobs.values())
        if pending:
            logging.getLogger("unirag.server").warning(
                "finishing %d accepted job%s before stopping", pending, "s" * (pending != 1))
        self._pool.shutdown(wait=True)

    def _run(self, job: Job, work: JobWork) -> None:
        job.state = "running"
        try:
            job.report = work(job.progress)
            job.state = "done"
        except UniragError as exc:
            job.error, job.state = one_line(str(exc)), "failed"
        except Exception as exc:  # a job's failure is its state; the worker thread lives on
            job.error, job.state = internal_message(exc), "failed"
        finally:
            job.finished = time.time()

    def _forget_old(self) -> None:
        """Finished jobs beyond the ``keep`` newest are dropped (a long-running server stays small)."""
        finished = [job for job in self._jobs.values() if job.finished is not None]
        for job in finished[: max(0, len(self._jobs) - self._keep)]:
            del self._jobs[job.id]
