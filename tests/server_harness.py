"""A real uvicorn server on a free port, in a thread, around a UniRAG on the scripted model.

Tests of the HTTP server talk to it over real HTTP (httpx, the openai client);
``running_server`` yields its base URL and stops it afterwards.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from fakes import HashEmbedder, ScriptedChat

from unirag import UniRAG
from unirag.server.app import create_app
from unirag.server.settings import ServerSettings


def scripted_rag(root: Path, chat: ScriptedChat | None = None) -> UniRAG:
    return UniRAG(root, chat_backend=chat or ScriptedChat(), embedding_backend=HashEmbedder())


@contextmanager
def running_server(rag: UniRAG, settings: ServerSettings | None = None, log_path: Path | None = None) -> Iterator[str]:
    """Serve ``rag`` on 127.0.0.1 and a free port until the block ends; yields ``http://127.0.0.1:PORT``.
    ``log_path``: uvicorn's log (access lines included) goes there."""
    import logging

    import uvicorn

    handler = logging.FileHandler(log_path) if log_path else None
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.access", "uvicorn.error")]
    if handler:
        for logger in loggers:
            logger.addHandler(handler)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(rag, settings), log_level="info", access_log=True, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        if handler:
            for logger in loggers:
                logger.removeHandler(handler)
            handler.close()


def wait_for_job(client: httpx.Client, job_id: str, within: float = 120.0) -> dict[str, Any]:
    """The job once done or failed: its state is polled until ``within`` seconds have passed
    (a generous bound, so a loaded machine does not fail a test)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError("the job did not finish")
