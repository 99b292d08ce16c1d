"""A method is data: question conversions, an ordered operator list, a generation mode.

Specs ship in ``specs/*.yaml``; a user passes a path to their own file to
``unirag query -m my_method.yaml``. Validation names the file and the field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from unirag.errors import MethodError
from unirag.operators.registry import conversion_registry, operator_registry
from unirag.prompts.prompt import PromptLibrary, is_prompt_path

SPEC_DIR = Path(__file__).parent / "specs"
#: What a method's direct-generation or stop prompt is filled with.
PROMPT_FIELDS = frozenset({"question", "context"})
#: The families a person browses methods by (the web page's picker), in the README's order.
#: A spec's ``group`` names one; a group is how methods are shown, never how they run.
METHOD_GROUPS: tuple[str, ...] = (
    "No retrieval",
    "Passages",
    "Entity graph",
    "GraphRAG communities",
    "LightRAG",
    "Trees and passage graphs",
    "ArchRAG",
    "HyGRAG and LeanRAG",
    "HippoRAG 2 and LinearRAG",
)
#: The group of a spec that names none (a user's own spec file); listed after the others.
OTHER_GROUP = "Other"


class OperatorCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: str
    params: dict[str, Any] = Field(default_factory=dict)

    def describe(self) -> str:
        return self.op

    def calls(self) -> list[OperatorCall]:
        return [self]


class Rounds(BaseModel):
    """Operators run again round after round (ToG's exploration to a maximum depth).

    After each round but the last, ``until`` (a prompt name; optional) asks the
    LLM whether the context gathered so far answers the question; a clear yes
    ends the rounds early (ToG's reasoning step). Without ``until`` all
    ``rounds`` run.
    """

    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(ge=1, le=10)
    until: str | None = None
    operators: list[OperatorCall] = Field(min_length=1)


class RepeatBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeat: Rounds

    def describe(self) -> str:
        stop = f" until {self.repeat.until}" if self.repeat.until else ""
        inner = " -> ".join(call.op for call in self.repeat.operators)
        return f"repeat<={self.repeat.rounds}[{inner}]{stop}"

    def calls(self) -> list[OperatorCall]:
        return list(self.repeat.operators)


class GenerationSpec(BaseModel):
    """How the answer is generated (survey §6.3; GraphRAG §3.1.6; ArchRAG "adaptive filtering").

    ``direct``: one prompt with the context. ``map_reduce``: a partial answer
    with a helpfulness score per batch of context, then a reduce prompt.
    ``adaptive_filter``: a filter prompt per group of items returning scored
    points, then a merge prompt. ``params`` go to the mode (token limits...).
    """

    model_config = ConfigDict(extra="forbid")
    mode: Literal["direct", "map_reduce", "adaptive_filter"] = "direct"
    prompt: str = "answer_with_context"
    use_context: bool = True
    params: dict[str, Any] = Field(default_factory=dict)


class MethodSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    title: str
    group: str = Field(default=OTHER_GROUP, description="the family it is listed under: one of METHOD_GROUPS")
    aliases: list[str] = Field(default_factory=list)
    description: str
    source: str = Field(description="where the method is defined (paper, section)")
    question: list[str] = Field(default_factory=list, description="question conversions")
    operators: list[OperatorCall | RepeatBlock] = Field(default_factory=list)
    generation: GenerationSpec = GenerationSpec()

    @field_validator("group")
    @classmethod
    def _known_group(cls, group: str) -> str:
        if group not in (*METHOD_GROUPS, OTHER_GROUP):
            raise ValueError(f"{group!r} is not a method group (known: {', '.join((*METHOD_GROUPS, OTHER_GROUP))})")
        return group

    def calls(self) -> list[OperatorCall]:
        """Every operator call, those inside ``repeat`` blocks included, in order."""
        return [call for step in self.operators for call in step.calls()]

    def located_calls(self) -> list[tuple[str, OperatorCall]]:
        """Every operator call with where it sits in the file (``operators[2]``,
        ``operators[1].repeat.operators[0]``), for messages that point at it."""
        out: list[tuple[str, OperatorCall]] = []
        for position, step in enumerate(self.operators):
            if isinstance(step, RepeatBlock):
                out += [(f"operators[{position}].repeat.operators[{inner}]", call)
                        for inner, call in enumerate(step.repeat.operators)]
            else:
                out.append((f"operators[{position}]", step))
        return out

    def requires(self) -> list[str]:
        """Workspace artifacts the operators need (derived, never declared twice)."""
        registry = operator_registry()
        out: list[str] = []
        for call in self.calls():
            for artifact in registry[call.op].requires_for(call.params):
                if artifact not in out:
                    out.append(artifact)
        return out

    def check(self, where: str) -> MethodSpec:
        """Every operator and conversion must exist; params must be known ones, of the
        types (and in the ranges) the operator function's annotations give."""
        operators, conversions = operator_registry(), conversion_registry()
        for name in self.question:
            if name not in conversions:
                raise MethodError(f"{where}: unknown question conversion '{name}' (known: {', '.join(conversions)})")
        for at, call in self.located_calls():
            spec = operators.get(call.op)
            if spec is None:
                known = ", ".join(sorted(operators))
                raise MethodError(f"{where}: {at}: unknown operator '{call.op}' (known: {known})")
            unknown = spec.unknown_params(call.params)
            if unknown:
                raise MethodError(f"{where}: {at}: operator {call.op} has no parameter {', '.join(unknown)} "
                                  f"(known: {', '.join(spec.accepted_params)})")
            problem = spec.invalid_param(call.params)
            if problem:
                raise MethodError(f"{where}: {at} {call.op}.{problem.name}: {problem.message}")
            provided = {conversions[name].provided for name in self.question}
            missing = [need for need in spec.needs_for(call.params) if need not in provided]
            if missing:
                raise MethodError(f"{where}: {at}: operator {call.op} needs question conversion {', '.join(missing)}")

        prompts = [("generation.prompt", self.generation.prompt)] + [
            (f"operators[{position}].repeat.until", step.repeat.until) for position, step in enumerate(self.operators)
            if isinstance(step, RepeatBlock) and step.repeat.until]
        for field, prompt in prompts:
            try:
                fields = PromptLibrary().load(prompt).fields
            except MethodError as exc:
                raise MethodError(f"{where}: {field}: {exc}") from None
            unknown = sorted(fields - PROMPT_FIELDS)
            if unknown and (field != "generation.prompt" or self.generation.mode == "direct"):
                raise MethodError(f"{where}: {field}: prompt {prompt} asks for {', '.join(unknown)} "
                                  f"(a method's prompt is given: {', '.join(sorted(PROMPT_FIELDS))})")
        if self.generation.mode != "direct":
            from importlib import import_module

            known = {name for name, _ in import_module(f"unirag.generate.{self.generation.mode}").PARAMS}
            unknown = sorted(set(self.generation.params) - known)
            if unknown:
                raise MethodError(f"{where}: generation mode {self.generation.mode} has no parameter "
                                  f"{', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return self

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump()
        data["requires"] = self.requires()
        data["pipeline"] = " -> ".join([*(f"q:{q}" for q in self.question), *(step.describe() for step in self.operators),
                                        f"generate:{self.generation.mode}"])
        return data


def parse_spec(path: Path) -> MethodSpec:
    import yaml

    try:
        # libyaml's loader when PyYAML has it: a query resolves its method's spec file each time,
        # and the pure-Python loader took 15 ms per spec on a 2-core VM (libyaml: 0.6 ms).
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise MethodError(f"{path}: cannot read method spec ({first})") from None
    if not isinstance(data, dict):
        raise MethodError(f"{path}: a method spec is a YAML mapping")
    try:
        spec = MethodSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise MethodError(f"{path}: field '{loc}': {err['msg']}") from None
    return _prompt_paths_from(spec, path.parent).check(str(path))


def _prompt_paths_from(spec: MethodSpec, folder: Path) -> MethodSpec:
    """A prompt the spec names by a relative path is relative to the spec file (as a user reads it)."""
    def anchored(prompt: str) -> str:
        return str(folder / prompt) if is_prompt_path(prompt) and not Path(prompt).is_absolute() else prompt

    spec.generation.prompt = anchored(spec.generation.prompt)
    for step in spec.operators:
        if isinstance(step, RepeatBlock) and step.repeat.until:
            step.repeat.until = anchored(step.repeat.until)
    return spec


def group_order(group: str, name: str) -> tuple[int, str]:
    """Sort key of a method in a grouped listing: its group in :data:`METHOD_GROUPS` order
    (:data:`OTHER_GROUP` last), then its name."""
    rank = METHOD_GROUPS.index(group) if group in METHOD_GROUPS else len(METHOD_GROUPS)
    return rank, name


@lru_cache(maxsize=1)
def builtin_methods() -> dict[str, MethodSpec]:
    """Every shipped method, keyed by its name."""
    specs = [parse_spec(path) for path in sorted(SPEC_DIR.glob("*.yaml"))]
    return {spec.name: spec for spec in specs}


def resolve_method(name_or_path: str) -> MethodSpec:
    """A shipped method by name or alias (case-insensitive), or a spec file path."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise MethodError(f"method spec file {path} does not exist")
        return parse_spec(path)
    wanted = name_or_path.lower()
    named = SPEC_DIR / f"{wanted}.yaml"
    if named.is_file():  # a shipped method is its own file: a cold query parses one spec, not all of them
        spec = parse_spec(named)
        if spec.name.lower() == wanted:
            return spec
    for spec in builtin_methods().values():
        if wanted == spec.name.lower() or wanted in (a.lower() for a in spec.aliases):
            return spec
    known = ", ".join(sorted(builtin_methods()))
    raise MethodError(f"unknown method '{name_or_path}' (known: {known}; or a path to a .yaml spec)")
