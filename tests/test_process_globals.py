"""The library does not change its host process (issue 30): no module under ``unirag/``
tunes the C allocator, pauses the cyclic garbage collector, or writes into the module table,
and only an index job freezes what its steps leave alive (``unirag/index/survivors.py``), in a
way that leaves the host's collector as it found it. A server that embeds unirag keeps its own
``MALLOC_*`` tuning, its own ``gc.freeze()`` after a pre-fork, and its own imports.

The source checks read the code (the calls are process-global whichever code path runs them,
so no run could show they are never reached)."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from unirag.index.survivors import survivors_frozen

PACKAGE = Path(__file__).resolve().parents[1] / "unirag"
FORBIDDEN_CALLS = {("gc", "disable"), ("gc", "freeze"), ("gc", "unfreeze"), ("gc", "set_threshold")}
FORBIDDEN_NAMES = {"mallopt", "malloc_trim"}  # glibc's allocator, reached through ctypes
SURVIVORS = "unirag/index/survivors.py"  # the one module allowed gc.freeze/gc.unfreeze (see its docstring)


def _offences(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and (node.value.id, node.attr) in FORBIDDEN_CALLS:
            found.append(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
            found.append(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "gc":
            found.append("from gc import ...")
        elif isinstance(node, ast.Import) and any(alias.name == "ctypes" for alias in node.names):
            found.append("import ctypes")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            found += ["sys.modules[...] =" for target in targets if _is_module_table(target)]
    return found


def _is_module_table(target: ast.AST) -> bool:
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) \
        and target.value.attr == "modules" and isinstance(target.value.value, ast.Name) \
        and target.value.value.id == "sys"


def test_no_module_touches_the_allocator_the_collector_or_the_module_table() -> None:
    offences = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        found = _offences(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if name == SURVIVORS:
            found = [offence for offence in found if offence not in {"gc.freeze", "gc.unfreeze"}]
        if found:
            offences[name] = found
    assert offences == {}


def test_the_check_sees_each_trick() -> None:
    """The checker itself: each trick the library used before issue 30, written as it was."""
    tricks = ["import ctypes", "libc.mallopt(-4, 0)", "libc.malloc_trim(0)", "gc.disable()", "gc.freeze()",
              "gc.unfreeze()", "sys.modules['matplotlib'] = None", "del sys.modules['matplotlib']"]
    for trick in tricks:
        assert _offences(ast.parse(trick)), trick
    assert not _offences(ast.parse("import gc\ngc.isenabled()\nx = sys.modules.get('igraph')"))


def test_only_index_jobs_freeze_survivors() -> None:
    """``ensure_artifacts`` freezes only when asked, and only ``run_index`` and ``run_delete``
    ask: a query's refresh of a missing artifact runs in a library caller's query path."""
    asking = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(function):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "ensure_artifacts" \
                        and any(k.arg == "index_job" for k in call.keywords):
                    asking.append(function.name)
    assert sorted(asking) == ["run_delete", "run_index"]


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """pytest's own process: start and end with an empty permanent generation."""
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("nothing_frozen")
def test_survivors_are_handed_back_however_the_job_ends() -> None:
    with survivors_frozen() as after_step:
        after_step()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), survivors_frozen() as after_step:
        after_step()
        raise RuntimeError("a step failed")
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("nothing_frozen")
def test_a_host_that_froze_its_objects_keeps_them_frozen() -> None:
    """A pre-fork server froze its start-up objects: the job neither adds to nor unfreezes them."""
    gc.freeze()
    frozen = gc.get_freeze_count()
    with survivors_frozen() as after_step:
        [object() for _ in range(10)]  # noqa: B018 -- objects a step leaves
        after_step()
        # none added, none unfrozen: only a frozen object that the test run frees leaves the count
        assert 0 < gc.get_freeze_count() <= frozen
    assert 0 < gc.get_freeze_count() <= frozen


@pytest.mark.usefixtures("nothing_frozen")
def test_a_query_refresh_freezes_nothing() -> None:
    with survivors_frozen(False) as after_step:
        after_step()
        assert gc.get_freeze_count() == 0
