"""The package's layers, checked on the source: no module imports a layer above its own, no import cycle.

unirag is layered bottom to top (docs/architecture.md): foundations, text,
model clients, prompts, workspace, ingest and graph building, index primitives,
hierarchies, the artifact registry, operators,
generation, methods, pipeline and evaluation, then the entry points. A
module may import its own layer or lower ones only, so each layer can be
read, tested and replaced knowing nothing of what sits above it. An upward
import, even one deferred inside a function, ties a lower layer to a higher
one and is how import cycles start; a cycle among module-level imports
breaks as soon as the import order changes.

Every module is parsed with :mod:`ast`, never imported: the check sees
imports inside functions too, and costs no import time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "unirag"

#: Bottom to top. A name ranks with its longest listed prefix; a module under
#: no listed name fails :func:`test_every_module_has_a_layer` until it is given one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("unirag.errors", "unirag.progress", "unirag.config", "unirag.store", "unirag.executors"),
    ("unirag.text",),
    ("unirag.llm",),
    ("unirag.prompts",),
    ("unirag.workspace", "unirag.workspace_tables", "unirag.corpus", "unirag.manifest", "unirag.usage_book",
     "unirag.ingest", "unirag.graph"),
    ("unirag.index",),
    ("unirag.hierarchy",),
    ("unirag.artifacts",),
    ("unirag.operators",),
    ("unirag.generate",),
    ("unirag.methods",),
    ("unirag.pipeline", "unirag.stats", "unirag.eval", "unirag.migrate"),
    ("unirag.cli", "unirag.__main__", "unirag", "unirag.api", "unirag.server", "unirag.integrations"),
)
RANK: dict[str, int] = {name: rank for rank, names in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Import:
    """One import of a unirag module by another, where it is written."""

    source: str  # the importing module
    target: str  # the imported module (a ``from M import name`` of a submodule names the submodule)
    path: Path
    line: int
    module_level: bool  # runs when ``source`` is imported (not inside a function, not type-only)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(PACKAGE.parent)}:{self.line}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def rank(name: str) -> int | None:
    """The layer of a module: that of its longest listed prefix."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        found = RANK.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def _resolve(name: str) -> str:
    """The deepest existing module that ``import name`` loads (``unirag.x.y`` may name an attribute)."""
    known = modules()
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    """The unirag imports of one module, each marked module-level or deferred."""

    def __init__(self, source: str, path: Path) -> None:
        self.source = source
        self.path = path
        self.package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        self.depth = 0  # functions (and type-only blocks) enclosing the current node
        self.found: list[Import] = []

    def _add(self, target: str, node: ast.stmt) -> None:
        if target == "unirag" or target.startswith("unirag."):
            self.found.append(Import(self.source, target, self.path, node.lineno, self.depth == 0))

    def _deferred(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _deferred

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node):
            self.generic_visit(node)
            return
        self.depth += 1
        for child in node.body:
            self.visit(child)
        self.depth -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(_resolve(alias.name), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            self._add(submodule if submodule in modules() else _resolve(module), node)


@lru_cache(maxsize=1)
def imports() -> tuple[Import, ...]:
    """Every unirag import in the package, in file and line order."""
    out: list[Import] = []
    for name, path in modules().items():
        collector = _Collector(name, path)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        out.extend(collector.found)
    return tuple(out)


def upward_imports() -> list[str]:
    """``file:line: source (layer n) imports target (layer m)`` for every import of a higher layer."""
    out = []
    for item in imports():
        low, high = rank(item.source), rank(item.target)
        if low is not None and high is not None and high > low:
            out.append(f"{item.where}: {item.source} (layer {low}) imports {item.target} (layer {high})")
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        # Recursion depth is bounded by the number of modules (about 100).
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def import_cycles(deferred: bool = False) -> list[str]:
    """Each cycle among module-level imports (with ``deferred``, all imports), with the lines that close it.

    Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``; that edge is
    kept unless the importer is inside the package (already initialised then).
    """
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], str] = {}
    for item in imports():
        if not (item.module_level or deferred) or item.target == item.source:
            continue
        parts = item.target.split(".")
        targets = [".".join(parts[:end]) for end in range(1, len(parts) + 1)]
        for target in targets:
            inside = item.source == target or item.source.startswith(target + ".")
            if target in modules() and not inside:
                edges.setdefault(item.source, set()).add(target)
                lines.setdefault((item.source, target), item.where)
    out = []
    for component in _cycles(edges):
        members = set(component)
        closing = sorted(
            f"{lines[(a, b)]} ({a} -> {b})" for a in component for b in edges.get(a, ()) if b in members
        )
        out.append(" <-> ".join(component) + ": " + "; ".join(closing))
    return out


def test_every_module_has_a_layer() -> None:
    unranked = sorted(name for name in modules() if rank(name) is None)
    assert not unranked, f"give these modules a layer in tests/test_layers.py LAYERS: {unranked}"


def test_the_checker_sees_imports_inside_functions_and_every_module() -> None:
    """Guards the test itself: an empty scan would pass everything."""
    assert {"unirag.text.replies", "unirag.operators.node", "unirag.cli"} <= set(modules())
    deferred = [item for item in imports() if not item.module_level]
    assert deferred and any(item.source.startswith("unirag.operators.") for item in deferred)


def test_no_module_imports_a_higher_layer() -> None:
    offenders = upward_imports()
    assert not offenders, "upward imports (move the code down, or the import up):\n" + "\n".join(offenders)


def test_no_import_cycle_among_module_level_imports() -> None:
    cycles = import_cycles()
    assert not cycles, "module-level import cycles:\n" + "\n".join(cycles)


def test_no_import_cycle_through_deferred_imports() -> None:
    """A cycle that only a function-level import closes still ties two modules into one unit
    (the last one, operators.question <-> operators.registry, went with ``operators/spec.py``)."""
    cycles = import_cycles(deferred=True)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """The two checks on a hand-made pair of modules, so a broken scan cannot pass silently."""
    edges = {"unirag.a": {"unirag.b"}, "unirag.b": {"unirag.a"}, "unirag.c": {"unirag.a"}}
    assert _cycles(edges) == [["unirag.a", "unirag.b"]]
    assert rank("unirag.operators.node") == 8 and rank("unirag.text.replies") == 1 and rank("unirag") == 12
    source = "from unirag.operators.node import rank\ndef f():\n    import unirag.cli\n"
    path = PACKAGE / "text" / "probe.py"  # never written: the collector only needs a name
    collector = _Collector("unirag.text.probe", path)
    collector.visit(ast.parse(source))
    assert [(i.target, i.line, i.module_level) for i in collector.found] == [
        ("unirag.operators.node", 1, True),
        ("unirag.cli", 3, False),
    ]
