"""Issue 29 (items 3, 5, 6 and 10): what a hostile page or an operator's slip must not get from the server.

Over real HTTP (uvicorn on a free port, :mod:`server_harness`): a write from a page
of another origin is refused and stores nothing, a ``Host`` this server is not reached
by is refused (DNS rebinding), graph routes say when what they show is stale. In a
subprocess: with an API key the lifespan runs, so SIGTERM during an upload waits for
its job. In process: ``unirag serve`` refuses a key-less non-loopback address and
warns about a key given on the command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import N_DOCUMENTS, small_corpus
from server_harness import running_server, scripted_rag, wait_for_job
from typer.testing import CliRunner

from unirag.errors import ConfigError
from unirag.server.settings import ServerSettings
from unirag.workspace import Workspace

pytest.importorskip("fastapi")

TESTS = Path(__file__).resolve().parent
OKAPI = ("Okapi.txt", b"The okapi lives in the Congo rainforest.", "text/plain")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("trusted")
    with scripted_rag(tmp / "ws") as rag:
        rag.index(small_corpus(tmp))
        with running_server(rag, ServerSettings(allowed_hosts=("rag.example.org",))) as url:
            yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as made:
        yield made


def refused(response: httpx.Response, status: int, contains: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert contains in message and "\n" not in message




# -- item 3: CSRF, DNS rebinding, exposure ------------------------------------------------------------------


def test_a_cross_origin_upload_is_refused_and_stores_nothing(client: httpx.Client, base: str) -> None:
    """A page elsewhere may POST multipart without a preflight: the server refuses it."""
    refused(client.post("/documents", files={"files": OKAPI}, headers={"Origin": "http://evil.example"}),
            403, "cross-origin request refused")
    refused(client.post("/documents", files={"files": OKAPI}, headers={"Origin": "null"}), 403, "cross-origin")
    refused(client.post("/documents", files={"files": OKAPI}, headers={"Sec-Fetch-Site": "cross-site"}),
            403, "cross-site request refused")
    port = base.rsplit(":", 1)[1]
    refused(client.post("/documents", files={"files": OKAPI}, headers={"Origin": f"http://localhost:{int(port) + 1}"}),
            403, "cross-origin")  # same host, another port: another origin
    doc_id = client.get("/documents").json()[0]["id"]
    refused(client.delete(f"/documents/{doc_id}", headers={"Origin": "https://evil.example"}), 403, "cross-origin")
    refused(client.post("/query", json={"question": "Capital of France?"}, headers={"Origin": "http://evil.example"}),
            403, "cross-origin")
    assert len(client.get("/documents").json()) == N_DOCUMENTS  # nothing stored, nothing deleted


def test_a_same_origin_write_and_a_cross_origin_read_are_served(client: httpx.Client, base: str) -> None:
    """The web page's own requests carry its origin; reads from elsewhere stay unreadable to the page
    by CORS (no CORS headers are sent), so they are not refused."""
    accepted = client.post("/documents", json=[{"title": "Kiwi", "text": "The kiwi lives in New Zealand."}],
                           headers={"Origin": base, "Sec-Fetch-Site": "same-origin"})
    assert accepted.status_code == 202, accepted.text
    assert wait_for_job(client, accepted.json()["job"]["id"])["state"] == "done"
    other = client.get("/documents", headers={"Origin": "http://evil.example"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


def test_a_host_the_server_is_not_reached_by_is_refused(client: httpx.Client, base: str) -> None:
    """DNS rebinding: the attacker's name resolves to 127.0.0.1, the request still names it."""
    port = base.rsplit(":", 1)[1]
    refused(client.get("/documents", headers={"Host": f"evil.example:{port}"}), 421, "--allowed-host evil.example")
    refused(client.post("/documents", files={"files": OKAPI}, headers={"Host": "evil.example"}), 421, "evil.example")
    for host in (f"localhost:{port}", f"[::1]:{port}", f"rag.example.org:{port}", f"10.1.2.3:{port}"):
        assert client.get("/health", headers={"Host": host}).status_code == 200, host  # an IP literal: no rebinding


def test_a_key_less_server_stays_on_loopback_unless_insecure() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert ServerSettings(host=host).check_exposure() is None
    with pytest.raises(ConfigError, match="without an API key") as info:
        ServerSettings(host="0.0.0.0").check_exposure()
    assert "UNIRAG_SERVER_API_KEY" in str(info.value) and "--insecure" in str(info.value)
    assert ServerSettings(host="0.0.0.0", api_key="k").check_exposure() is None
    assert "no API key" in (ServerSettings(host="192.168.1.4", insecure=True).check_exposure() or "")


# -- item 10 and the CLI side of item 3 ---------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ServerSettings]:
    """``unirag serve`` up to the point it would serve: the settings it would serve with."""
    import unirag.server.app
    import unirag.server.run

    calls: list[ServerSettings] = []
    monkeypatch.setattr(unirag.server.app, "create_app", lambda workspace, settings: object())
    monkeypatch.setattr(unirag.server.run, "serve", lambda app, settings: calls.append(settings))
    monkeypatch.delenv("UNIRAG_SERVER_API_KEY", raising=False)
    return calls


def test_a_key_on_the_command_line_is_warned_about_never_printed(served: list[ServerSettings],
                                                                 tmp_path: Path) -> None:
    from unirag.cli import app

    secret = "s3cret-cli-key"
    flagged = CliRunner().invoke(app, ["serve", "-w", str(tmp_path), "--api-key", secret])
    assert flagged.exit_code == 0, flagged.output
    assert "visible to every user" in flagged.stderr and "UNIRAG_SERVER_API_KEY" in flagged.stderr
    assert secret not in flagged.stderr + flagged.stdout and served[-1].api_key == secret
    from_env = CliRunner().invoke(app, ["serve", "-w", str(tmp_path)], env={"UNIRAG_SERVER_API_KEY": secret})
    assert from_env.exit_code == 0 and "visible" not in from_env.stderr and served[-1].api_key == secret
    help_text = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    assert help_text.index("UNIRAG_SERVER_API_KEY") < help_text.index("--api-key")  # the environment first


def test_serve_refuses_a_key_less_public_address(served: list[ServerSettings], tmp_path: Path) -> None:
    from unirag.cli import app

    bare = CliRunner().invoke(app, ["serve", "-w", str(tmp_path), "--host", "0.0.0.0"])
    assert bare.exit_code == 2 and not served
    assert len(bare.stderr.strip().splitlines()) == 1 and "without an API key" in bare.stderr
    insecure = CliRunner().invoke(app, ["serve", "-w", str(tmp_path), "--host", "0.0.0.0", "--insecure"])
    assert insecure.exit_code == 0 and "warning: serving on 0.0.0.0 with no API key" in insecure.stderr
    assert served[-1].insecure and served[-1].host == "0.0.0.0"


# -- item 6: graph routes say when what they show is stale --------------------------------------------------


def test_graph_routes_flag_a_graph_behind_the_corpus(tmp_path: Path) -> None:
    """What a killed ``unirag delete`` leaves: the documents gone, the graph and communities built
    on the corpus before. Every graph route says so instead of serving the old graph as current."""
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path), graphs="kg", indices="graphrag")
        with running_server(rag) as url, httpx.Client(base_url=url, timeout=30) as client:
            hub = client.get("/graph/kg").json()
            community = client.get("/communities/graphrag").json()
            assert hub["stale"] is False and hub["stale_artifacts"] == {} and community["stale"] is False
            other = Workspace.open(tmp_path / "ws")  # the delete's own process, killed after its first step
            try:
                other.corpus.delete_documents([client.get("/documents").json()[0]["id"]])
            finally:
                other.close()
            routes = ["/graph/kg", "/graph/kg/search?q=a", "/communities/graphrag",
                      f"/communities/graphrag/{community['communities'][0]['id']}", "/graph/kg?hierarchy=graphrag"]
            for route in routes:
                shown = client.get(route)
                assert shown.status_code == 200, (route, shown.text)
                assert shown.json()["stale"] is True, route
                assert all("corpus version" in why for why in shown.json()["stale_artifacts"].values()), route
            assert "graph" in client.get("/graph/kg").json()["stale_artifacts"]
            assert "communities:graphrag" in client.get("/graph/kg?hierarchy=graphrag").json()["stale_artifacts"]


# -- item 5: with a key the lifespan runs, so shutdown waits for a running job ------------------------------

SERVER_SCRIPT = """
import socket, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import uvicorn
from fakes import HashEmbedder, ScriptedChat, small_corpus
from unirag import UniRAG
from unirag.server.app import create_app
from unirag.server.settings import ServerSettings

ENTERED, GATE = Path({entered!r}), Path({gate!r})


class GatedEmbedder(HashEmbedder):
    \"\"\"Holds the upload's embedding until the test opens the gate: its job is still running when
    SIGTERM comes, whatever the machine's speed.\"\"\"

    def embed(self, texts, stage="embed"):
        if any("okapi" in text.lower() for text in texts):
            ENTERED.touch()
            while not GATE.exists():
                time.sleep(0.02)
        return super().embed(texts, stage)


root = Path({root!r})
rag = UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=GatedEmbedder())
rag.index(small_corpus(root.parent))
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
sock.listen(16)  # a client's connection waits in the backlog until uvicorn accepts it
Path({port_file!r}).write_text(str(sock.getsockname()[1]))
config = uvicorn.Config(create_app(rag, ServerSettings(api_key={key!r})), log_level="info")
uvicorn.Server(config).run(sockets=[sock])  # the main thread: uvicorn's own SIGTERM handling
"""


def _wait(condition: Any, what: str, process: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen in time; log: {log.read_text()[-2000:]}")
        time.sleep(0.05)


def test_with_a_key_sigterm_waits_for_the_running_upload(tmp_path: Path) -> None:
    key = "lifespan-test-key"
    root, entered, gate, port_file, log = (tmp_path / "ws", tmp_path / "entered", tmp_path / "gate",
                                           tmp_path / "port", tmp_path / "server.log")
    script = SERVER_SCRIPT.format(tests=str(TESTS), root=str(root), entered=str(entered), gate=str(gate),
                                  port_file=str(port_file), key=key)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as sink:
        process = subprocess.Popen([sys.executable, "-c", script], stdout=sink, stderr=subprocess.STDOUT, text=True,
                                   cwd=TESTS.parent, env=env)
    try:
        _wait(lambda: port_file.exists() or process.poll() is not None, "the port", process, log)
        assert process.poll() is None, log.read_text()
        _wait(lambda: port_file.read_text().isdigit(), "the port", process, log)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
            accepted = client.post("/documents", files={"files": OKAPI})
            assert accepted.status_code == 202, accepted.text
        _wait(entered.exists, "the upload job running", process, log)
        process.send_signal(signal.SIGTERM)
        # the old server died here, its job half done; this one waits in its shutdown hook
        _wait(lambda: "Waiting for application shutdown" in log.read_text() or process.poll() is not None,
              "shutdown", process, log)
        assert process.poll() is None, log.read_text()
        gate.touch()
        process.wait(timeout=120)
    finally:
        gate.touch()
        if process.poll() is None:
            process.kill()
            process.wait()
    logged = log.read_text()
    assert "lifespan protocol appears unsupported" not in logged and "Application startup complete" in logged
    assert "Application shutdown complete" in logged and key not in logged
    ws = Workspace.open(root)
    try:
        assert "Okapi" in ws.corpus.document_titles() and ws.manifest.stale_artifacts() == {}
    finally:
        ws.close()
