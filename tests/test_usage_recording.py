"""Issue 17 item 12: usage reaches the workspace as calls finish, so a killed run's calls are listed."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from fakes import ScriptedChat, fake_stack, make_settings, small_corpus

from unirag.llm.base import StageUsage, UsageLedger
from unirag.pipeline import run_index
from unirag.workspace import Workspace

TESTS = Path(__file__).parent
KILL_AT = 25  # the model serves this many calls, then the process dies without cleanup


def test_ledger_hands_over_deltas_every_n_calls() -> None:
    handed: list[dict[str, StageUsage]] = []
    ledger = UsageLedger(sink=lambda delta: handed.append(delta) or True, flush_calls=2, flush_seconds=3600)
    for _ in range(5):
        ledger.record("build.extract", llm_calls=1, prompt_tokens=10)
    assert [d["build.extract"].llm_calls for d in handed] == [2, 2]
    ledger.flush()
    assert sum(d["build.extract"].llm_calls for d in handed) == 5
    assert sum(d["build.extract"].prompt_tokens for d in handed) == 50


def test_a_busy_sink_gets_the_same_usage_again_later() -> None:
    answers = iter([False, True])
    handed: list[int] = []

    def sink(delta: dict[str, StageUsage]) -> bool:
        handed.append(delta["s"].llm_calls)
        return next(answers, True)

    ledger = UsageLedger(sink=sink, flush_calls=1, flush_seconds=3600)
    ledger.record("s", llm_calls=1)  # refused: kept
    ledger.record("s", llm_calls=1)  # both handed over
    ledger.flush()  # nothing new
    assert handed == [1, 2]


SCRIPT = """
import os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from fakes import ScriptedChat, fake_stack, make_settings
from unirag.pipeline import run_index
from unirag.workspace import Workspace


class Dying(ScriptedChat):
    def complete(self, request):
        if self.calls >= {kill_at}:
            os._exit(137)  # as SIGKILL: no finally, no atexit
        return super().complete(request)


root = Path({root!r})
settings = make_settings(root, graph__extractor="llm", graph__gleaning=0, graph__share_call_below_tokens=0,
                         concurrency=1)
ws = Workspace.init(root)
run_index(ws, [{corpus!r}], settings, fake_stack(settings, ws, chat=Dying()), graphs=["kg"])
"""


def test_a_killed_index_run_leaves_its_served_calls_in_stats(tmp_path: Path) -> None:
    corpus = tmp_path / "many"
    corpus.mkdir()
    for number in range(40):
        (corpus / f"doc{number}.txt").write_text(f"Person{number} founded Company{number} in Town{number}.\n")
    root = tmp_path / "ws"
    script = SCRIPT.format(tests=str(TESTS), kill_at=KILL_AT, root=str(root), corpus=str(corpus))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=TESTS.parent)
    assert done.returncode == 137, done.stderr
    from typer.testing import CliRunner

    from unirag.cli import app

    result = CliRunner().invoke(app, ["stats", "-w", str(root), "--json"])
    assert result.exit_code == 0, result.output
    served = json.loads(result.stdout)["usage_by_stage"]["build.extract"]["llm_calls"]
    assert KILL_AT - 10 <= served <= KILL_AT  # flushed every 10 calls: at most the last 9 are lost


def test_a_finished_run_records_each_call_once(tmp_path: Path) -> None:
    settings = make_settings(None, graph__extractor="llm", graph__gleaning=0)
    ws = Workspace.init(tmp_path / "ws")
    chat = ScriptedChat()
    report = run_index(ws, [small_corpus(tmp_path)], settings, fake_stack(settings, ws, chat=chat), graphs=["kg"])
    stored = ws.usage.by_stage()
    assert stored["build.extract"].llm_calls == report.ledger.stages["build.extract"].llm_calls == chat.calls
    for stage, usage in report.ledger.stages.items():
        assert stored[stage].embedded_texts == usage.embedded_texts and stored[stage].llm_calls == usage.llm_calls
    ws.close()


# -- issue 29 item 4: a query's usage write never turns its answer into an error ----------------------------


def _query_rows(root: Path) -> int:
    with closing(sqlite3.connect(root / "store.sqlite")) as db:
        return db.execute("SELECT COUNT(*) FROM usage WHERE command LIKE 'query:%'").fetchone()[0]


def test_a_locked_store_never_fails_a_served_answer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Another connection holds the store's write lock (as an upload job's long transaction does)
    while a query is served over HTTP: the answer comes back 200 with one warning, and its usage
    is written with the next query's once the lock is released. Old code: the query waited for
    the lock and answered 500 'database is locked'."""
    pytest.importorskip("fastapi")
    import httpx
    from server_harness import running_server, scripted_rag

    root = tmp_path / "ws"
    with scripted_rag(root) as rag:
        rag.workspace.usage.busy_timeout = 0.2  # the wait before giving up: short, the lock is held throughout
        rag.index(small_corpus(tmp_path))
        with running_server(rag) as url, httpx.Client(base_url=url, timeout=60) as client:
            assert client.post("/query", json={"question": "What is the capital of France?"}).status_code == 200
            per_query = _query_rows(root)
            assert per_query > 0
            holder = sqlite3.connect(root / "store.sqlite", isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")  # the write lock, held while the query is answered
                with caplog.at_level(logging.WARNING, logger="unirag"):
                    locked = client.post("/query", json={"question": "What is the capital of France?"})
                assert locked.status_code == 200, locked.text
                assert locked.json()["answer"] == "paris"
                warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
                assert len(warnings) == 1 and "busy" in warnings[0] and "\n" not in warnings[0]
                assert _query_rows(root) == per_query  # not written yet (a WAL reader sees the committed rows)
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            assert client.post("/query", json={"question": "What is the capital of France?"}).status_code == 200
            assert _query_rows(root) == 3 * per_query  # the kept rows went in with the next query's


def test_usage_kept_from_a_busy_store_is_written_at_close(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    ws.usage.busy_timeout = 0.05
    ledger = UsageLedger()
    ledger.record("answer", llm_calls=1, prompt_tokens=7)
    holder = sqlite3.connect(tmp_path / "ws" / "store.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    ws.usage.record("query:vanilla", ledger)
    holder.execute("ROLLBACK")
    holder.close()
    ws.close()
    reopened = Workspace.open(tmp_path / "ws")
    assert reopened.usage.by_stage()["answer"].prompt_tokens == 7
    reopened.close()
