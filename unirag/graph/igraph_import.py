"""igraph, imported without its matplotlib plotting backend.

``import igraph`` imports ``matplotlib.pyplot`` when matplotlib is installed (it comes with
the ``eval`` extra), for plotting we never do: about 0.45 CPU s in every process that clusters
(an index update, a query that builds a projection), a tenth of what inserting 1 % of a corpus
costs. While igraph is imported, ``sys.modules`` says matplotlib is absent, so igraph keeps its
placeholder for plotting; the entry is removed right after, and a later ``import matplotlib``
(the evaluation plots) works as usual. Where matplotlib is already imported, nothing is hidden.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_igraph() -> ModuleType:
    """The ``igraph`` module (imported once per process; what ``leidenalg`` needs too)."""
    loaded = sys.modules.get("igraph")
    if loaded is not None:
        return loaded
    if "matplotlib" in sys.modules:
        return importlib.import_module("igraph")
    sys.modules["matplotlib"] = None  # type: ignore[assignment]  # `import matplotlib` raises ImportError
    try:
        return importlib.import_module("igraph")
    finally:
        if "matplotlib" in sys.modules and sys.modules["matplotlib"] is None:
            del sys.modules["matplotlib"]


def import_leidenalg() -> ModuleType:
    """``leidenalg``, after :func:`import_igraph` (it imports igraph first thing)."""
    import_igraph()
    return importlib.import_module("leidenalg")
