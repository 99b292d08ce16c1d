"""igraph is imported without matplotlib (0.45 CPU s per clustering process), and matplotlib
still imports afterwards."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

SCRIPT = """
import sys
from unirag.graph.igraph_import import import_igraph, import_leidenalg
ig, leidenalg = import_igraph(), import_leidenalg()
graph = ig.Graph(n=4, edges=[(0, 1), (2, 3)])
parts = leidenalg.find_partition(graph, leidenalg.ModularityVertexPartition, seed=1)
print(sorted(len(p) for p in parts), "matplotlib" in sys.modules)
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


def test_igraph_clusters_without_importing_matplotlib() -> None:
    assert _run(SCRIPT) == "[2, 2] False"


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the eval extra) not installed")
def test_matplotlib_imports_after_igraph_and_before_it_is_left_alone() -> None:
    after = _run(SCRIPT + "import matplotlib\nprint(matplotlib.__name__)")
    assert after.splitlines()[-1] == "matplotlib"
    before = _run("import matplotlib.pyplot\n" + SCRIPT)
    assert before == "[2, 2] True"
