"""Issue 17: before an indexing run calls a paid model, say what it will cost; ask on a
terminal (unless --yes), never off one; --dry-run only estimates; stats shows both."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from fakes import HashEmbedder, ScriptedChat, make_settings, scripted_extraction, small_corpus
from typer.testing import CliRunner

import unirag.cli as cli
from unirag.llm.factory import build_stack
from unirag.text.tokenizer import get_tokenizer

runner = CliRunner()
PEOPLE = ["Alice Moreau", "Bruno Keller", "Chiara Rossi", "Dmitri Volkov", "Elena Duarte", "Farid Haddad",
          "Greta Lind", "Hiro Tanaka", "Ines Costa", "Jonas Berg", "Karin Holm", "Luca Ferri"]
PLACES = ["Paris", "Lisbon", "Oslo", "Kyoto", "Turin", "Vienna"]


def people_corpus(root: Path, documents: int = 14) -> Path:
    """Short biographies naming people and places: graphs with a few communities."""
    root.mkdir(parents=True, exist_ok=True)
    for number in range(documents):
        a, b, c = (PEOPLE[(number + k) % len(PEOPLE)] for k in (0, 3, 7))
        place = PLACES[number % len(PLACES)]
        text = (f"{a} met {b} in {place} to plan a study of rivers. Later {b} wrote to {c} about the work. "
                f"{c} visited {place} and praised {a} for the careful measurements. " * 3)
        (root / f"bio{number:02d}.txt").write_text(text, encoding="utf-8")
    return root


class ScriptedEndpoint:
    """An OpenAI-compatible server (the pattern of tests/test_openai_compat.py) answering like the
    scripted model: extraction JSON for extraction prompts, NO to the gleaning check, a plain
    summary otherwise; hash embeddings; usage counted with our tokenizer, as a real server reports it."""

    def __init__(self) -> None:
        self.chat_calls = 0
        self._embedder = HashEmbedder()
        self._count = get_tokenizer().count
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            return {"data": [{"index": i, "embedding": self._embedder.vector(t).tolist()} for i, t in enumerate(texts)],
                    "usage": {"prompt_tokens": sum(self._count(t) for t in texts)}}
        with self._lock:
            self.chat_calls += 1
        user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        if "YES or NO" in user:
            text = "NO"
        elif "Passages:" in user:
            text = scripted_extraction(user)
        else:
            text = f"summary of {len(user.splitlines())} lines"
        prompt = sum(self._count(m["content"]) for m in body["messages"])
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": self._count(text)}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                payload = json.dumps(endpoint.reply(self.path, body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads what it needs from the counters."""

        return Handler

    def __enter__(self) -> ScriptedEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def run(*args: str | Path, input: str | None = None) -> Result:
    return runner.invoke(cli.app, [str(a) for a in args], input=input)


def ok(*args: str | Path, input: str | None = None) -> Result:
    result = run(*args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


PAID = ("--chat-base-url", "http://127.0.0.1:9/v1", "--chat-model", "paid-model")


def test_estimate_is_within_a_sane_factor_of_the_actual_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    corpus, ws = people_corpus(tmp_path / "corpus"), tmp_path / "ws"
    with ScriptedEndpoint() as endpoint:
        models = ("--chat-base-url", endpoint.base_url, "--chat-model", "m",
                  "--embedding-base-url", endpoint.base_url, "--embedding-model", "e")
        dry = json.loads(ok("index", corpus, "-w", ws, *models, "--graph", "kg,tree", "--index", "graphrag",
                            "--dry-run", "--json").stdout)["estimate"]
        assert endpoint.chat_calls == 0 and not ws.exists()
        result = ok("index", corpus, "-w", ws, *models, "--graph", "kg,tree", "--index", "graphrag", "-q")
        assert "estimate: about" in result.stderr  # said, and no question: stdin is not a terminal
        served = endpoint.chat_calls
    cost = json.loads(ok("stats", "-w", ws, "--json").stdout)["last_index_cost"]
    estimate, actual = cost["estimate"], cost["actual"]
    assert estimate == dry  # the dry run saw the same corpus the run indexed
    assert {step["step"] for step in estimate["steps"]} >= {"extract", "tree", "communities:graphrag"}
    assert actual["llm_calls"] == served > 0
    assert actual["llm_calls"] / 3 <= estimate["llm_calls"] <= actual["llm_calls"] * 3, (estimate, actual)
    assert actual["prompt_tokens"] / 3 <= estimate["prompt_tokens"] <= actual["prompt_tokens"] * 3, (estimate, actual)
    text = ok("stats", "-w", ws).stdout
    assert f"estimated {estimate['llm_calls']} LLM calls" in text and f"actual {actual['llm_calls']} calls" in text


def test_nothing_left_to_do_estimates_zero_and_says_nothing(tmp_path: Path,
                                                            cli_scripted_chats: list[ScriptedChat]) -> None:
    corpus, ws = people_corpus(tmp_path / "corpus", 4), tmp_path / "ws"
    ok("index", corpus, "-w", ws, *PAID, "--graph", "kg", "-q")
    again = ok("index", corpus, "-w", ws, *PAID, "--graph", "kg", "-q")
    assert "estimate:" not in again.stderr


def snapshot(ws: Path) -> dict[str, Any]:
    """What a dry run must leave as it was: every file but SQLite's own WAL companions, and the store's rows."""
    import sqlite3

    files = {str(p.relative_to(ws)): p.stat().st_size for p in sorted(ws.rglob("*"))
             if p.is_file() and not p.name.endswith(("-wal", "-shm"))}
    db = sqlite3.connect(ws / "store.sqlite")
    try:
        rows = {table: db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                for table in ("documents", "chunks", "manifest", "usage", "meta")}
    finally:
        db.close()
    return {"files": files, "rows": rows}


def test_dry_run_prints_the_estimate_and_changes_nothing(tmp_path: Path,
                                                         cli_scripted_chats: list[ScriptedChat]) -> None:
    ws = tmp_path / "ws"
    ok("index", small_corpus(tmp_path), "-w", ws, *PAID, "--graph", "kg", "-q")
    before = snapshot(ws)
    more = people_corpus(tmp_path / "more", 6)
    result = ok("index", more, "-w", ws, *PAID, "--graph", "kg", "--index", "graphrag", "--dry-run")
    assert "estimate: about" in result.stdout and "nothing was changed" in result.stdout
    assert snapshot(ws) == before
    fresh = tmp_path / "never-made"
    assert "estimate: about" in ok("index", more, "-w", fresh, *PAID, "--graph", "kg", "--dry-run").stdout
    assert not fresh.exists()


def test_free_models_get_no_estimate_and_no_question(tmp_path: Path, cli_scripted_chats: list[ScriptedChat],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    ws = tmp_path / "ws"
    result = ok("index", small_corpus(tmp_path), "-w", ws, "--graph", "kg", "--index", "graphrag", "-q")
    assert "estimate" not in result.stderr and "go on" not in result.stderr
    assert "nothing to estimate" in ok("index", "-w", ws, "--dry-run").stdout


def test_terminal_asks_and_no_cancels_before_anything_is_indexed(tmp_path: Path, cli_scripted_chats: list[ScriptedChat],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    ws, corpus = tmp_path / "ws", people_corpus(tmp_path / "corpus", 4)
    refused = run("index", corpus, "-w", ws, *PAID, "--graph", "kg", input="n\n")
    assert refused.exit_code == 1 and "go on with these model calls?" in refused.stderr
    assert "cancelled" in refused.stderr and not cli_scripted_chats[-1].calls
    assert json.loads(ok("stats", "-w", ws, "--json").stdout)["documents"] == 0
    accepted = ok("index", corpus, "-w", ws, *PAID, "--graph", "kg", "-q", input="y\n")
    assert "go on with these model calls?" in accepted.stderr and cli_scripted_chats[-1].calls


def test_yes_skips_the_question(tmp_path: Path,
                                cli_scripted_chats: list[ScriptedChat], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    result = ok("index", people_corpus(tmp_path / "corpus", 4), "-w", tmp_path / "ws", *PAID, "--graph", "kg",
                "-q", "--yes")
    assert "estimate: about" in result.stderr and "go on" not in result.stderr and cli_scripted_chats[-1].calls


def test_off_a_terminal_it_never_waits_for_an_answer(tmp_path: Path, cli_scripted_chats: list[ScriptedChat]) -> None:
    # CliRunner's stdin is no terminal and holds nothing: a question would read EOF and abort.
    result = ok("index", people_corpus(tmp_path / "corpus", 4), "-w", tmp_path / "ws", *PAID, "--graph", "kg", "-q")
    assert "estimate: about" in result.stderr and "go on" not in result.stderr and cli_scripted_chats[-1].calls


# -- a killed sync's resume (issue 29 §3.10: the estimate left out the re-summaries, 102 -> 24) ----
FIRST = ["Ada", "Boris", "Clara", "Dario", "Edda", "Fabio", "Gerda", "Hugo", "Irma", "Jules", "Kira", "Lars"]
MIDDLE = ["Noor", "Otto", "Pia", "Remy", "Sven", "Tove"]
LAST = ["Moreau", "Keller", "Rossi", "Volkov", "Duarte", "Haddad", "Lind", "Tanaka", "Costa", "Berg"]
NAMES = [f"{a} {m} {b}" for b in LAST for m in MIDDLE for a in FIRST]
HIERARCHIES = ["tree", "communities:graphrag", "communities:archrag"]


def _meeting(corpus: Path, number: int) -> None:
    """Document ``number``: three people of their own (new documents bring new entities)."""
    a, b, c = (NAMES[3 * number + k] for k in range(3))
    place = PLACES[number % len(PLACES)]
    (corpus / f"doc{number:03d}.txt").write_text(
        f"{a} met {b} in {place}. Later {b} wrote to {c} about rivers. {c} praised {a}.", encoding="utf-8")


class _DiesAtSummaries(ScriptedChat):
    """Extracts, then dies (as a kill would) at the first summary: the sync stored its
    chunks and extractions, and every hierarchy is left stale."""

    def complete(self, request: Any) -> Any:
        if not request.stage.startswith("build.extract"):
            raise KeyboardInterrupt
        return super().complete(request)


def test_the_estimate_after_a_killed_sync_counts_the_hierarchies_re_summaries(tmp_path: Path) -> None:
    from unirag.pipeline import estimate_index, run_index
    from unirag.workspace import Workspace

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(60):
        _meeting(corpus, number)
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root, graph__extractor="llm", index__summarizer="llm", concurrency=1)

    def index(chat: ScriptedChat) -> Any:
        stack = build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())
        return run_index(ws, [corpus], settings, stack, graphs=["kg"], artifacts=HIERARCHIES, sync=True)

    def estimate() -> Any:
        return estimate_index(ws, [corpus], settings, ScriptedChat(), graphs=["kg"], artifacts=HIERARCHIES)

    index(ScriptedChat())
    for number in range(5):
        (corpus / f"doc{number:03d}.txt").unlink()
    for number in range(60, 70):
        _meeting(corpus, number)
    before = estimate()
    with pytest.raises(KeyboardInterrupt):
        index(_DiesAtSummaries())
    assert ws.manifest.stale_artifacts()

    resumed_estimate, resumed = estimate(), ScriptedChat()
    index(resumed)
    assert not ws.manifest.stale_artifacts()
    summaries = {step.step: step.calls for step in resumed_estimate.steps}
    assert set(summaries) == set(HIERARCHIES)  # the old estimate had none: the chunks were stored already
    assert "extract" not in summaries  # and nothing left to extract
    # The same summaries as the sync's own estimate (less what its sync would remove, which an
    # estimate does not count), and within 30 % of the calls the resumed run made.
    planned = sum(step.calls for step in before.steps if step.step != "extract")
    assert 0.7 * planned <= resumed_estimate.calls <= 1.3 * planned, (before.to_json(), resumed_estimate.to_json())
    assert 0.7 * resumed.calls <= resumed_estimate.calls <= 1.3 * resumed.calls, (resumed_estimate.to_json(),
                                                                                  resumed.calls)
