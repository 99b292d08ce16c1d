"""Shutting the server down finishes every accepted job, the queued ones too."""

from __future__ import annotations

import threading

from unirag.server.jobs import JobQueue


def test_shutdown_waits_for_queued_jobs() -> None:
    queue = JobQueue()
    release = threading.Event()
    first = queue.submit("index", lambda progress: {"waited": release.wait(timeout=30)})
    second = queue.submit("index", lambda progress: {"ran": True})
    stopping = threading.Thread(target=queue.shutdown)
    stopping.start()
    release.set()
    stopping.join(timeout=30)
    assert not stopping.is_alive()
    assert (first.state, first.report) == ("done", {"waited": True})
    assert (second.state, second.report) == ("done", {"ran": True})
