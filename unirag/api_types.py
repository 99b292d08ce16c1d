"""The typed values of the Python API (:mod:`unirag.api`): what a caller gets back.

Every type has ``to_json()``, the same JSON the CLI prints with ``--json``, so a
server answers with it as is. The results of the layers below are reused, not
copied: :class:`~unirag.methods.runner.QueryResult`,
:class:`~unirag.operators.context.ContextItem`, usage as
:class:`~unirag.llm.base.StageUsage`, index and delete reports
(:class:`~unirag.pipeline.IndexReport`, :class:`~unirag.pipeline.DeleteReport`).

A streamed query yields :data:`QueryEvent` values: any number of
:class:`AnswerDelta` (the answer's text in generation order), then exactly one
:class:`QueryDone` with the whole result. ``event`` names each kind and
``to_json()`` is its payload, so a server maps them onto server-sent events
(``event: delta`` / ``event: done``) one to one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from unirag.methods.runner import QueryResult
    from unirag.methods.spec import MethodSpec


@dataclass(frozen=True)
class AnswerDelta:
    """The next piece of the answer's text, as the model generated it."""

    text: str
    event: ClassVar[str] = "delta"

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True)
class QueryDone:
    """The end of a streamed query: the whole result, with context, usage and timings."""

    result: QueryResult
    event: ClassVar[str] = "done"

    def to_json(self) -> dict[str, Any]:
        return self.result.to_json()


#: What :meth:`unirag.api.UniRAG.stream` yields.
QueryEvent = AnswerDelta | QueryDone


@dataclass(frozen=True)
class DocumentInfo:
    """One stored document: where it came from and how it was chunked."""

    id: str
    title: str | None  # None: the document has no title (a plain text file's name is its title)
    sources: list[str]  # origins: ``path`` or ``path#record``; empty for documents given in memory
    chars: int
    chunks: int
    added: str  # local time, ISO 8601 to the second

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DocumentInfo:
        return cls(row["id"], row["title"], list(row["sources"]), int(row["chars"]), int(row["chunks"]),
                   row["added"])

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "sources": self.sources, "chars": self.chars,
                "chunks": self.chunks, "added": self.added}


@dataclass(frozen=True)
class MethodInfo:
    """A method as a caller chooses one: name, what it does, what it needs built."""

    name: str
    title: str
    description: str
    source: str
    aliases: list[str] = field(default_factory=list)
    pipeline: str = ""
    generation: str = "direct"
    requires: list[str] = field(default_factory=list)
    group: str = "Other"  # unirag.methods.spec.OTHER_GROUP: the spec names no group

    @classmethod
    def from_spec(cls, spec: MethodSpec) -> MethodInfo:
        data = spec.to_json()
        return cls(spec.name, spec.title, spec.description, spec.source, list(spec.aliases), data["pipeline"],
                   spec.generation.mode, list(data["requires"]), spec.group)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "description": self.description, "source": self.source,
                "aliases": self.aliases, "pipeline": self.pipeline, "generation": self.generation,
                "requires": self.requires, "group": self.group}
