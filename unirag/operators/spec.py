"""The operator contract: what an operator or a question conversion declares.

An operator is ``fn(state, **params) -> list[ContextItem]``. Its parameters,
their defaults and their types are the keyword arguments of that function and
nowhere else: :class:`OperatorSpec` reads them with ``inspect.signature`` and
``typing.get_type_hints``, and checks a method spec's params against them with
pydantic when the spec loads, so ``top_k: "many"`` fails before any query runs.
Counts carry their range in the annotation (:data:`Count`, :data:`CountOrZero`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from unirag.operators.context import ContextItem, QueryState

Count = Annotated[int, Field(ge=1)]
"""How many results, candidates, hops or trees: 0 would make the call return nothing."""

CountOrZero = Annotated[int, Field(ge=0)]
"""A count whose 0 the operator gives a meaning: every scored candidate (the ranking
operators' ``top_k``), the seeds alone (``hops``), none of one part (``top_c``)."""

Level = Annotated[int, Field(ge=0)]
"""A level of a community hierarchy (0 = its first)."""

EMIT = "emit"
"""The runner's own param, which every operator call takes (``emit: false``: feed later operators only)."""


@dataclass(frozen=True)
class OperatorParam:
    """One keyword parameter of an operator function: its name, default and type."""

    name: str
    default: Any
    annotation: Any


@dataclass(frozen=True)
class ParamProblem:
    """Why a call's value of one param is refused (``expected an integer, got 'many'``)."""

    name: str
    message: str


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    kind: str  # node | relationship | chunk | subgraph | community | tree | hierarchy
    fn: Callable[..., list[ContextItem]]
    summary: str
    requires: tuple[str, ...] = ()  # workspace artifacts; "{param}" is filled from the call's params
    needs: tuple[str, ...] = ()  # question conversions
    # Artifact names that are not a plain "{param}" fill (a variant's C-HNSW or tree):
    # a function of the call's params, added to ``requires``.
    requires_fn: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    # Question conversions that depend on the call's params (a VDB operator searching with
    # LightRAG's keywords needs 'keywords', not 'embedding'); replaces ``needs`` when set.
    needs_fn: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    # Calls the cross-encoder (``rerank.*`` settings): a method using it without one configured
    # stops at query start, before any model call (:func:`unirag.llm.rerank.missing_reranker`).
    needs_reranker: bool = False

    @cached_property
    def signature(self) -> tuple[OperatorParam, ...]:
        """The function's parameters after ``state``, with their resolved annotations
        (``Count`` keeps its range: ``include_extras``)."""
        hints = typing.get_type_hints(self.fn, include_extras=True)
        parameters = list(inspect.signature(self.fn).parameters.values())[1:]
        return tuple(OperatorParam(p.name, p.default, hints.get(p.name, Any)) for p in parameters)

    @property
    def params(self) -> tuple[tuple[str, Any], ...]:
        """(name, default) of every param, in signature order."""
        return tuple((param.name, param.default) for param in self.signature)

    def requires_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The artifacts a call with ``params`` needs: ``"community_vectors:{hierarchy}"``
        with ``hierarchy: archrag`` is ``community_vectors:archrag``."""
        values = {**dict(self.params), **params}
        filled = tuple(artifact.format(**values) for artifact in self.requires)
        return filled + (self.requires_fn(values) if self.requires_fn else ())

    def needs_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The question conversions a call with ``params`` needs."""
        return self.needs_fn({**dict(self.params), **params}) if self.needs_fn else self.needs

    @property
    def accepted_params(self) -> tuple[str, ...]:
        """The names a call may set: the function's params, then the runner's ``emit``."""
        return (*(param.name for param in self.signature), EMIT)

    def unknown_params(self, params: Mapping[str, Any]) -> list[str]:
        """Names in ``params`` the function has no parameter for (sorted)."""
        return sorted(set(params) - set(self.accepted_params))

    @cached_property
    def _params_model(self) -> type[BaseModel]:
        """A pydantic model of the params, built on first use. Strict: a YAML spec
        gives typed values, so ``"4"`` or ``2.0`` for a count is a mistake, not a number."""
        fields: dict[str, Any] = {param.name: (param.annotation, param.default) for param in self.signature}
        fields[EMIT] = (bool, True)
        return create_model(f"{self.name}.params", __config__=ConfigDict(strict=True), **fields)

    def invalid_param(self, params: Mapping[str, Any]) -> ParamProblem | None:
        """The first param whose value its annotation refuses, else None (names
        must be known ones: :meth:`unknown_params`)."""
        try:
            self._params_model.model_validate(dict(params))
        except ValidationError as exc:
            error = exc.errors()[0]
            name = str(error["loc"][0]) if error["loc"] else "params"
            return ParamProblem(name, f"{expectation(error)}, got {error['input']!r}")
        return None


def expectation(error: Mapping[str, Any]) -> str:
    """A pydantic error as ``expected ...`` (a type or a range), for one-line messages."""
    context = error.get("ctx") or {}
    kinds = {
        "int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
        "string_type": "a string", "none_required": "null",
    }
    bounds = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
              "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}
    kind = error["type"]
    if kind in kinds:
        return f"expected {kinds[kind]}"
    if kind in bounds:
        key, words = bounds[kind]
        return f"expected {words} {context[key]}"
    if kind == "literal_error":
        return f"expected {context['expected']}"
    message = str(error.get("msg", kind))
    return message[:1].lower() + message[1:]


@dataclass(frozen=True)
class ConversionSpec:
    """A question conversion: ``fn(state)`` fills a field of the state (the question's
    embedding, its entities, LightRAG's keywords) that operators read."""

    name: str
    fn: Callable[[QueryState], None]
    summary: str
    # The state field family it fills, which operators name in their ``needs``: the
    # zero-LLM ``entities_nlp`` provides what ``entities`` does.
    provides: str = ""

    @property
    def provided(self) -> str:
        return self.provides or self.name
