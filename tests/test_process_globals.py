"""The library does not change its host process (issue 30): no module under ``unirag/``
tunes the C allocator, pauses or freezes the cyclic garbage collector, or writes into the
module table. A server that embeds unirag keeps its own ``MALLOC_*`` tuning, its own
``gc.freeze()`` after a pre-fork, and its own imports.

The check reads the source (the calls are process-global whichever code path runs them,
so no run could show they are never reached)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "unirag"
FORBIDDEN_CALLS = {("gc", "disable"), ("gc", "freeze"), ("gc", "unfreeze"), ("gc", "set_threshold")}
FORBIDDEN_NAMES = {"mallopt", "malloc_trim"}  # glibc's allocator, reached through ctypes


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
        found = _offences(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if found:
            offences[str(path.relative_to(PACKAGE.parent))] = found
    assert offences == {}


def test_the_check_sees_each_trick() -> None:
    """The checker itself: each trick the library used before issue 30, written as it was."""
    tricks = ["import ctypes", "libc.mallopt(-4, 0)", "libc.malloc_trim(0)", "gc.disable()", "gc.freeze()",
              "gc.unfreeze()", "sys.modules['matplotlib'] = None", "del sys.modules['matplotlib']"]
    for trick in tricks:
        assert _offences(ast.parse(trick)), trick
    assert not _offences(ast.parse("import gc\ngc.isenabled()\nx = sys.modules.get('igraph')"))
