"""The README and the documentation site say what the code does: every code block runs.

Each Markdown file (README.md, docs/**/*.md) is one test. Its fenced blocks run in order in
one temporary directory that holds a copy of ``examples/`` (the files the examples read):

* ``bash``/``sh``: run by bash (``set -euo pipefail``) with the ``unirag`` of this checkout;
  ``unirag serve`` is started in the background and waited for (stopped when the file ends),
  ``unirag mcp`` gets an empty stdin; ports 8080 and 9000 are replaced by free ones;
* ``python``: executed in this process;
* ``yaml``: a method spec (it has ``operators``) is loaded and checked as ``-m FILE`` would;
  any other mapping is validated as settings (``unirag.yaml``); ``json`` must parse;
* ``text``: output shown to the reader, not code.

The chat and embedding models are the scripted OpenAI-compatible endpoint of
tests/docs_endpoint.py (one for the whole session: it keeps no state a page could see),
named through ``UNIRAG_CHAT_BASE_URL``/``UNIRAG_EMBEDDING_BASE_URL``.
A block after ``<!-- docs-test: endpoint -->`` is one a reader runs against a real model:
it gets no ``UNIRAG_CHAT_*`` from us, ``OPENAI_BASE_URL`` points at the test endpoint and the
local URLs it names (vLLM's :8000, Ollama's :11434) are replaced by the endpoint's. A block
after ``<!-- docs-test: not-run REASON -->`` (installing, the whole test suite, hour-long
benchmarks, a PostgreSQL server) is not executed, but every repository file it names must exist.

Pages are independent (own directory, own ports), and nearly all of a page's time is ``unirag``
processes starting and working, so the pages run side by side, each in its own Python process
(``python tests/test_docs.py PAGE ...``: its ``python`` blocks may change the working directory
and the environment freely), as many at once as there are CPUs (at most ``MAX_JOBS``); each
page's test then reports that run's outcome, so a failure still names its page and block.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = re.compile(r"<!--\s*docs-test:\s*(endpoint|not-run)\b\s*(.*?)\s*-->")
RUN_LANGS = {"bash", "sh", "python", "yaml", "json", "text"}
README_LIMIT = 10 * 1024
#: Pages run at once: at most this many, and no more than the CPUs this process may use.
MAX_JOBS = 4
#: Seconds a whole page may take (its bash blocks have 300 s each).
PAGE_TIMEOUT = 1200


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str
    marker: str  # "", "endpoint" or "not-run"
    reason: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown file, with the docs-test marker on the line before."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+)\s*([\w-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, lang = fence.group(1), fence.group(2), fence.group(3)
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(previous)
        body: list[str] = []
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        out.append(Block(path, start, lang, "\n".join(body) + "\n", marker.group(1) if marker else "",
                         marker.group(2) if marker else ""))
        i += 1
    return out


PRELUDE = r"""
set -euo pipefail
docs_stop_servers() {
  if [ -f "$DOCS_TMP/servers" ]; then
    while read -r pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done < "$DOCS_TMP/servers"
    rm -f "$DOCS_TMP/servers"
  fi
}
unirag() {
  case "${1:-}" in
    serve)
      docs_stop_servers
      local port="$DOCS_PORT_8080" args=("$@") i
      for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = --port ] && port="${args[$((i + 1))]}"; done
      case " $* " in *" --port "*) ;; *) args+=(--port "$port") ;; esac
      command unirag "${args[@]}" >>"$DOCS_TMP/serve.log" 2>&1 &
      echo $! >> "$DOCS_TMP/servers"
      for i in $(seq 1 300); do
        curl -s -o /dev/null "http://127.0.0.1:$port/health" && return 0
        kill -0 "$!" 2>/dev/null || { cat "$DOCS_TMP/serve.log" >&2; return 1; }
        sleep 0.2
      done
      echo "unirag serve did not answer on port $port" >&2; return 1 ;;
    mcp) command unirag "$@" </dev/null ;;
    *) command unirag "$@" ;;
  esac
}
"""


class Session:
    """One Markdown file's run: its directory, ports, environment and the scripted endpoint's URL."""

    def __init__(self, tmp: Path, base_url: str, ports: dict[str, str]) -> None:
        self.tmp = tmp
        self.base_url = base_url
        self.ports = ports
        shutil.copytree(ROOT / "examples", tmp / "examples")

    def substitute(self, text: str, block: Block) -> str:
        for old, new in self.ports.items():
            text = re.sub(rf"(?<=[:\s=]){old}\b", new, text)
        if block.marker == "endpoint":
            text = re.sub(r"https?://(localhost|127\.0\.0\.1):(8000|11434)/v1", self.base_url, text)
        return text

    def env(self, block: Block) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UNIRAG_", "OPENAI_"))}
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONPATH=str(ROOT), DOCS_TMP=str(self.tmp), DOCS_PORT_8080=self.ports["8080"],
                   UNIRAG_EMBEDDING_BASE_URL=self.base_url, UNIRAG_EMBEDDING_MODEL="hash-64")
        if block.marker == "endpoint":
            env.update(OPENAI_BASE_URL=self.base_url)
        else:
            env.update(UNIRAG_CHAT_BASE_URL=self.base_url, UNIRAG_CHAT_MODEL="scripted")
        return env

    def run(self, block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
        if block.marker == "not-run":
            assert block.reason, f"{block.where}: a not-run block says why"
            for named in re.findall(r"(?:bench|scripts|examples|tests|docs)/[\w./-]+\.\w+", block.text):
                assert (ROOT / named).exists(), f"{block.where}: names {named}, which does not exist"
            return
        text = self.substitute(block.text, block)
        if block.lang in ("bash", "sh"):
            done = subprocess.run(["bash", "-c", PRELUDE + text], cwd=self.tmp, env=self.env(block),
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        elif block.lang == "python":
            for name in [n for n in os.environ if n.startswith(("UNIRAG_", "OPENAI_"))]:
                monkeypatch.delenv(name)
            for name, value in self.env(block).items():
                if name.startswith(("UNIRAG_", "OPENAI_")):
                    monkeypatch.setenv(name, value)
            monkeypatch.chdir(self.tmp)
            exec(compile(text, block.where, "exec"), {"__name__": "__main__"})  # noqa: S102 - the docs' own example
        elif block.lang == "yaml":
            data = yaml.safe_load(text)
            if isinstance(data, dict) and "operators" in data:
                from unirag.methods.spec import resolve_method

                spec_file = self.tmp / "docs_spec.yaml"
                spec_file.write_text(text, encoding="utf-8")
                resolve_method(str(spec_file))
            else:
                from unirag.config import Settings

                Settings.model_validate(data)
        elif block.lang == "json":
            json.loads(text)

    def close(self) -> None:
        subprocess.run(["bash", "-c", PRELUDE + "docs_stop_servers"], cwd=self.tmp, env=os.environ | {"DOCS_TMP": str(self.tmp)},
                       check=False)


def run_page(path: Path, tmp: Path, base_url: str, ports: dict[str, str]) -> None:
    """Run every block of one Markdown file, in order, in ``tmp`` (in this process)."""
    found = blocks(path)
    for block in found:
        assert block.lang in RUN_LANGS, f"{block.where}: a code block says its language (one of {sorted(RUN_LANGS)})"
    runnable = [b for b in found if b.lang != "text"]
    if not runnable:
        return
    session = Session(tmp, base_url, ports)
    monkeypatch = pytest.MonkeyPatch()
    try:
        for block in runnable:
            session.run(block, monkeypatch)
    finally:
        monkeypatch.undo()
        session.close()


@dataclass
class PageRun:
    """One page running in its own process, its output in ``log``."""

    path: Path
    process: subprocess.Popen[str] | None = None
    log: Path | None = None
    started: float = 0.0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class PageRunner:
    """Starts the selected pages' processes, ``jobs`` at a time, those with most commands first."""

    def __init__(self, paths: list[Path], tmp: Path, base_url: str, jobs: int) -> None:
        self.runs = {path: PageRun(path) for path in paths}
        self.tmp = tmp
        self.base_url = base_url
        self.jobs = jobs
        # every page's ports chosen while all are held, so two pages never get the same one
        held = [socket.socket() for _ in range(2 * len(paths))]
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        numbers = [str(sock.getsockname()[1]) for sock in held]
        for sock in held:
            sock.close()
        self.ports = {path: {"8080": numbers[2 * i], "9000": numbers[2 * i + 1]} for i, path in enumerate(paths)}
        self.queue = sorted(paths, key=lambda p: -p.read_text(encoding="utf-8").count("unirag "))

    def _start(self, path: Path) -> None:
        run = self.runs[path]
        work = self.tmp / f"{len(self.runs) - len(self.queue):02d}-{path.stem}"
        work.mkdir()
        run.log = work.with_suffix(".log")
        run.started = time.monotonic()
        with run.log.open("w", encoding="utf-8") as log:
            run.process = subprocess.Popen(
                [sys.executable, __file__, str(path), str(work), self.base_url, json.dumps(self.ports[path])],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)

    def _fill(self) -> None:
        while self.queue and sum(run.running for run in self.runs.values()) < self.jobs:
            self._start(self.queue.pop(0))

    def outcome(self, path: Path) -> tuple[int, str]:
        """Wait for ``path``'s run (keeping ``jobs`` pages running meanwhile): exit code and output."""
        run = self.runs[path]
        while run.process is None or run.running:
            self._fill()
            if run.running and time.monotonic() - run.started > PAGE_TIMEOUT:
                run.process.kill()  # type: ignore[union-attr]
            time.sleep(0.05)  # a poll, not a wait for anything to happen in time
        self._fill()
        assert run.process is not None and run.log is not None
        return run.process.wait(), run.log.read_text(encoding="utf-8", errors="replace")


def _jobs() -> int:
    return max(1, min(MAX_JOBS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


@pytest.fixture(scope="session")
def pages(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageRunner]:
    """The pages this session selected, run side by side against one scripted endpoint."""
    from docs_endpoint import DocsEndpoint

    selected = [item.callspec.params["path"] for item in request.session.items
                if item.originalname == "test_every_code_block_runs"]
    with DocsEndpoint() as endpoint:
        runner = PageRunner(selected, tmp_path_factory.mktemp("docs"), endpoint.base_url, _jobs())
        try:
            yield runner
        finally:
            for run in runner.runs.values():
                if run.process is not None and run.process.poll() is None:
                    run.process.kill()
                    run.process.wait()


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_runs(path: Path, pages: PageRunner) -> None:
    code, log = pages.outcome(path)
    assert code == 0, f"{path.relative_to(ROOT)}: exit {code}\n{log[-6000:]}"


def test_readme_fits_on_a_few_screens() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; the limit is {README_LIMIT}: move detail to docs/"


def test_readme_keeps_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in readme and "bash scripts/demo.sh" in readme
    assert "pip install unirag" not in readme  # unirag is installed from a clone, not from PyPI


def test_stages_picture_is_what_its_script_draws() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import stages_svg
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    committed = (DOCS / "img" / "stages.svg").read_text(encoding="utf-8")
    assert committed == stages_svg.render(), "docs/img/stages.svg is stale: run python scripts/stages_svg.py"


def _hooks():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import docs_hooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return docs_hooks


def test_method_catalogue_lists_every_shipped_spec() -> None:
    hooks = _hooks()
    catalogue = hooks.methods_catalogue()
    for spec_file in sorted((ROOT / "unirag" / "methods" / "specs").glob("*.yaml")):
        name = yaml.safe_load(spec_file.read_text(encoding="utf-8"))["name"]
        assert f"| `{name}`" in catalogue, f"{spec_file.name}: method {name} is missing from the catalogue"
    assert hooks.MARKERS["methods"] in (DOCS / "methods.md").read_text(encoding="utf-8")


def test_settings_page_lists_every_setting() -> None:
    from unirag.config import _field_paths

    hooks = _hooks()
    reference = hooks.settings_reference()
    for env_name, path in _field_paths().items():
        assert f"`{'.'.join(path)}` | `{env_name}`" in reference, f"setting {'.'.join(path)} is missing"
    from dataclasses import fields

    from unirag.artifacts.settings_template import hierarchy_configs

    for name, config in hierarchy_configs().items():  # every registered hierarchy's knobs
        for field in fields(config):
            assert f"| `index.{name}.{field.name}` |" in reference, f"setting index.{name}.{field.name} is missing"
    assert hooks.MARKERS["settings"] in (DOCS / "settings.md").read_text(encoding="utf-8")


def test_nothing_points_outside_the_repository() -> None:
    """Papers are cited (docs/references.md), never pointed at as files beside the checkout."""
    pointer = re.compile("paper" + r" 0\d\d|papers/0\d\d|shared/" + "papers")
    offenders = [f"{path.relative_to(ROOT)}:{number}"
                 for folder in ("unirag", "docs", "tests", "bench", "scripts", "examples")
                 for path in (ROOT / folder).rglob("*") if path.is_file() and path.suffix in (".py", ".md", ".yaml", ".sh")
                 for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1)
                 if pointer.search(line)]
    offenders += [f"README.md:{n}" for n, line in enumerate((ROOT / "README.md").read_text().split("\n"), 1)
                  if pointer.search(line)]
    assert not offenders, f"pointers to files outside the repository: {offenders}"


if __name__ == "__main__":  # one page, run by PageRunner: PAGE WORKDIR BASE_URL PORTS_JSON
    try:
        run_page(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
    except AssertionError as failure:
        print(failure, file=sys.stderr)
        sys.exit(1)
