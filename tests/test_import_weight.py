"""``import unirag`` does nothing, and the API loads no heavy optional package until it is used.

Issue 30 §5 moved the package's own imports to module top (a file's dependencies
are read at its top); the heavy third-party ones stay inside the functions that use
them. This holds that line: one import of the API in a fresh interpreter, then a
look at ``sys.modules``. A fresh process, because this test session has long since
imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Packages that cost from a tenth of a second to seconds to import (or pull in a web stack):
#: each is loaded by the one function that needs it, never by ``import unirag.api``.
HEAVY = ("onnxruntime", "xllamacpp", "spacy", "igraph", "leidenalg", "sklearn", "umap", "numba", "ray",
         "psycopg", "fastapi", "starlette", "matplotlib", "bm25s", "httpx", "torch", "hnswlib")


def loaded_after(code: str) -> list[str]:
    """Top-level names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_importing_the_api_loads_no_heavy_package() -> None:
    loaded = set(loaded_after("import unirag, unirag.api"))
    assert "unirag" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_importing_the_package_imports_none_of_its_modules() -> None:
    """``import unirag`` runs no submodule: the API is exported lazily (``unirag.__getattr__``)."""
    code = "import unirag\nimport sys\nprint([m for m in sys.modules if m.startswith('unirag.')])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
