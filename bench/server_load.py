"""Load on ``unirag serve``: concurrent clients against ``POST /query``, with the embedded models.

Indexes the HotpotQA sample of tests/data (a few hundred passages) into a fresh
workspace with the default offline stack (MiniLM embeddings, SmolLM2 chat),
starts ``unirag serve`` on it in a subprocess, then runs ``--clients`` clients in
a loop for ``--seconds`` against ``POST /query`` with ``retrieve_only`` and, separately,
``--gen-seconds`` with generation (``--gen-clients``: the embedded SmolLM2 answers a few
questions a minute on a small CPU, so 50 generating clients would only queue). Prints p50/p95 latency, requests/s and errors
(target: 0 errors) per run.

    python bench/server_load.py                       # 50 clients 60 s retrieval; 4 clients 30 s generation
    python bench/server_load.py --clients 10 --seconds 10 --gen-seconds 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "datasets" / "hotpotqa"


@dataclass
class RunFigures:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self, label: str) -> str:
        done = len(self.latencies)
        if not done:
            return f"{label}: no request finished; errors {sum(self.errors.values())} {self.errors}"
        ordered = sorted(self.latencies)
        p95 = ordered[min(done - 1, int(0.95 * done))]
        return (f"{label}: {done} requests in {self.seconds:.1f} s = {done / self.seconds:.1f} req/s; "
                f"latency p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; "
                f"errors {sum(self.errors.values())} {self.errors or ''}")


def questions() -> list[str]:
    """The sample's questions, then one per passage title (varied questions: no embedding cache hits)."""
    asked = [record["question"] for record in json.loads((SAMPLE / "hotpotqa_train.json").read_text())]
    corpus = json.loads((SAMPLE / "hotpotqa_train_corpus.json").read_text())
    return asked + [f"What do we know about {title}?" for title in corpus]  # the sample maps title -> sentences


def index_sample(workspace: Path) -> None:
    subprocess.run([sys.executable, "-m", "unirag", "index", str(SAMPLE / "hotpotqa_train_corpus.json"),
                    "-w", str(workspace), "--quiet"], check=True, cwd=ROOT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(workspace: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([sys.executable, "-m", "unirag", "serve", "-w", str(workspace), "--port", str(port)],
                              cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.3)
        if server.poll() is not None:
            break
    server.kill()
    raise SystemExit(f"the server did not start; its log: {log}")


async def load(url: str, clients: int, seconds: float, retrieve_only: bool, asked: list[str]) -> RunFigures:
    figures = RunFigures()
    stop = time.monotonic() + seconds

    async def client(number: int, http: httpx.AsyncClient) -> None:
        turn = number
        while time.monotonic() < stop:
            body = {"question": asked[turn % len(asked)], "retrieve_only": retrieve_only}
            turn += clients
            tick = time.perf_counter()
            try:
                response = await http.post("/query", json=body)
                if response.status_code == 200:
                    figures.latencies.append(time.perf_counter() - tick)
                else:
                    figures.errors[str(response.status_code)] = figures.errors.get(str(response.status_code), 0) + 1
            except httpx.HTTPError as exc:
                figures.errors[type(exc).__name__] = figures.errors.get(type(exc).__name__, 0) + 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        started = time.monotonic()
        await asyncio.gather(*(client(number, http) for number in range(clients)))
        figures.seconds = time.monotonic() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="retrieve_only run")
    parser.add_argument("--gen-seconds", type=float, default=30.0, help="run with generation (0: skip)")
    parser.add_argument("--gen-clients", type=int, default=4,
                        help="clients of the generation run (SmolLM2 on CPU answers a few per minute per core)")
    parser.add_argument("--workspace", type=Path, help="an indexed workspace to reuse (default: a fresh one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="unirag-load-") as scratch:
        workspace = args.workspace or Path(scratch) / "ws"
        if args.workspace is None:
            tick = time.monotonic()
            index_sample(workspace)
            print(f"indexed the HotpotQA sample in {time.monotonic() - tick:.1f} s", flush=True)
        asked = questions()
        port = free_port()
        log = Path(scratch) / "server.log"
        server = start_server(workspace, port, log)
        url = f"http://127.0.0.1:{port}"
        try:
            httpx.post(f"{url}/query", json={"question": asked[0]}, timeout=600)  # load the models once
            print(f"{os.cpu_count()} CPUs, {args.clients} clients", flush=True)
            print(asyncio.run(load(url, args.clients, args.seconds, True, asked)).line(
                f"retrieve_only, {args.seconds:g} s"), flush=True)
            if args.gen_seconds > 0:
                print(asyncio.run(load(url, args.gen_clients, args.gen_seconds, False, asked)).line(
                    f"with generation (SmolLM2), {args.gen_clients} clients, {args.gen_seconds:g} s"), flush=True)
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
