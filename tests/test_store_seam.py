"""The store stays behind its seam: no code outside ``unirag/store/`` asks which backend it runs on.

A workspace asks its :class:`unirag.store.backend.Backend` for what differs (a connection,
the writer lock, where artifact files are kept, whether vector indices are tables); a
backend test above the store (``location.is_postgres``, the PostgreSQL dialect, psycopg)
is how a second store's facts leaked into eight modules before. The source is read as
text, never imported.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "unirag"
STORE = PACKAGE / "store"
BACKEND_TEST = re.compile(r"is_postgres|POSTGRESQL|psycopg")
#: path (relative to unirag/) -> why it may name a backend; none today
ALLOWED: dict[str, str] = {}


def backend_tests_outside_the_store() -> list[str]:
    """``path:line: text`` of every backend test in unirag/ outside unirag/store/."""
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if STORE in path.parents or path.relative_to(PACKAGE).as_posix() in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BACKEND_TEST.search(line):
                hits.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    return hits


def test_no_backend_test_outside_the_store() -> None:
    hits = backend_tests_outside_the_store()
    assert not hits, "ask the store's Backend instead of testing for one:\n" + "\n".join(hits)


def test_the_check_sees_a_backend_test() -> None:
    """The pattern matches what it must forbid (a check that matches nothing passes forever)."""
    for line in ("if workspace.location.is_postgres:", "from unirag.store.database import POSTGRESQL",
                 'if "psycopg" in sys.modules:'):
        assert BACKEND_TEST.search(line), line
