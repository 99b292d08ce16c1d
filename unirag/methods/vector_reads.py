"""Which vector artifacts each shipped method reads, derived from its operators' ``requires``.

A method reads a vector artifact *directly* when one of its operators names it, and *through*
another artifact when an artifact it needs is built from it (C-HNSW from the entity and
community vectors, HippoRAG 2's synonym edges from the entity-name vectors, a hierarchy from the
entity vectors). ``docs/graphs.md`` shows the table (scripts/docs_hooks.py), and a test checks
that ``--index all`` builds no vector artifact outside it (issue 34: embed only what is read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from unirag.artifacts.registry import artifact_registry, build_order
from unirag.methods.spec import MethodSpec, builtin_methods


def is_vector_artifact(name: str) -> bool:
    """An artifact of embeddings (an ``.npy`` of vectors + its HNSW index)."""
    return name.split(":", 1)[0].endswith("vectors")


@dataclass(frozen=True)
class VectorReads:
    """The vector artifacts one method reads: named by its operators, and read through others."""

    direct: tuple[str, ...]
    through: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return self.direct + self.through


def vector_reads(spec: MethodSpec) -> VectorReads:
    """The vector artifacts ``spec`` reads, each once (direct ones first)."""
    requires = spec.requires()
    direct = tuple(name for name in requires if is_vector_artifact(name))
    through = tuple(name for name in build_order(requires) if is_vector_artifact(name) and name not in direct) \
        if requires else ()
    return VectorReads(direct, through)


def readers(methods: Mapping[str, MethodSpec] | None = None) -> dict[str, list[str]]:
    """Vector artifact -> the methods that read it (directly or through another artifact)."""
    out: dict[str, list[str]] = {}
    for name, spec in (methods or builtin_methods()).items():
        for artifact in vector_reads(spec).all:
            out.setdefault(artifact, []).append(name)
    return out


def unread_vector_artifacts(names: Iterable[str], methods: Mapping[str, MethodSpec] | None = None) -> list[str]:
    """The vector artifacts among ``names`` (and what they are built from) that no method reads."""
    read = readers(methods)
    built = build_order(list(names)) if names else []
    return [name for name in built if is_vector_artifact(name) and name not in read]


def vector_artifact_names() -> list[str]:
    """Every registered vector artifact, variants included."""
    return [name for name in artifact_registry() if is_vector_artifact(name)]
