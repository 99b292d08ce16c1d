"""MkDocs hook: pages that are generated from the code, so they follow it.

A page holds a marker line (``<!-- generated: methods -->``, ``<!-- generated: settings -->``)
and the hook replaces it at build time with a table made from the shipped method specs
(``unirag/methods/specs/*.yaml``) or the settings model (``unirag/config.py``). Nothing is
written to ``docs/``: a new spec or setting appears on the next build. tests/test_docs.py
checks that every spec and every setting is in what these functions make.
"""

from __future__ import annotations

from typing import Any

MARKERS = {"methods": "<!-- generated: methods -->", "settings": "<!-- generated: settings -->",
           "vector_reads": "<!-- generated: vector-reads -->"}
#: Operators and conversions that ask the chat model at query time (cost grows with their calls).
MODEL_OPERATORS = ("node.agent", "relationship.agent", "subgraph.agent_path", "kgp.traverse",
                   "relationship.recognition")
MODEL_CONVERSIONS = ("entities", "keywords")


def _cell(text: str) -> str:
    """Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def cost_shape(spec: Any) -> str:
    """Model calls per question, read off the spec: conversions and operators that ask the chat
    model, repeat rounds, and the generation mode's calls (direct: 1; map-reduce and adaptive
    filtering: one per batch of retrieved items, then one to reduce or merge)."""
    from unirag.methods.spec import RepeatBlock

    parts: list[str] = []
    llm_conversions = [name for name in spec.question if name in MODEL_CONVERSIONS]
    if llm_conversions:
        parts.append(f"{len(llm_conversions)} to convert the question (0 on the zero-LLM path)")
    for step in spec.operators:
        if isinstance(step, RepeatBlock):
            asking = [call.op for call in step.repeat.operators if call.op in MODEL_OPERATORS]
            if asking:
                parts.append(f"up to {step.repeat.rounds} rounds x {len(asking)} ({', '.join(asking)})"
                             + (" + a stop check per round" if step.repeat.until else ""))
        elif step.op in MODEL_OPERATORS:
            parts.append(f"1+ ({step.op})")
    mode = spec.generation.mode
    parts.append({"direct": "1 to answer", "map_reduce": "1 per batch of items (map) + 1 (reduce)",
                  "adaptive_filter": "1 per batch of items (filter) + 1 (merge)"}[mode])
    return "; ".join(parts)


def methods_catalogue() -> str:
    """A table per method group of every shipped spec: name and aliases, paper, pipeline,
    what it needs built, and its cost in model calls per question."""
    from unirag.methods.spec import METHOD_GROUPS, OTHER_GROUP, builtin_methods, group_order

    specs = sorted(builtin_methods().values(), key=lambda s: group_order(s.group, s.name))
    lines: list[str] = []
    for group in (*METHOD_GROUPS, OTHER_GROUP):
        members = [spec for spec in specs if spec.group == group]
        if not members:
            continue
        lines += [f"### {group}", "",
                  "| method | paper | operators | needs built | model calls per question |",
                  "|---|---|---|---|---|"]
        for spec in members:
            data = spec.to_json()
            name = f"`{spec.name}`" + (f" ({', '.join(spec.aliases)})" if spec.aliases else "")
            needs = ", ".join(f"`{artifact}`" for artifact in data["requires"]) or "nothing"
            lines.append(f"| {name}<br>{_cell(spec.title)} | {_cell(spec.source)} | {_cell(data['pipeline'])} "
                         f"| {needs} | {_cell(cost_shape(spec))} |")
        lines.append("")
    return "\n".join(lines)


def vector_reads_table() -> str:
    """Per vector artifact: the shipped methods that read it, named by their operators or
    through an artifact built from it (:mod:`unirag.methods.vector_reads`)."""
    from unirag.methods.spec import builtin_methods
    from unirag.methods.vector_reads import vector_artifact_names, vector_reads

    methods = builtin_methods()
    reads = {name: vector_reads(spec) for name, spec in sorted(methods.items())}
    lines = ["| vector artifact | read by (its operators) | read through another artifact |", "|---|---|---|"]
    for artifact in vector_artifact_names():
        direct = [f"`{name}`" for name, read in reads.items() if artifact in read.direct]
        through = [f"`{name}`" for name, read in reads.items() if artifact in read.through]
        lines.append(f"| `{artifact}` | {', '.join(direct) or '-'} | {', '.join(through) or '-'} |")
    return "\n".join(lines)


def setting_rows() -> list[tuple[str, str, str, str, str]]:
    """(section, setting path, environment variable, default, what it is) of every leaf setting;
    the section is the dotted path of the settings model that holds it ("" at the top)."""
    from pydantic import BaseModel

    from unirag.config import ENV_PREFIX, Settings

    rows: list[tuple[str, str, str, str, str]] = []

    def walk(instance: BaseModel, prefix: tuple[str, ...]) -> None:
        for name, field in type(instance).model_fields.items():
            value = getattr(instance, name)
            path = (*prefix, name)
            if isinstance(value, BaseModel):
                walk(value, path)
                continue
            default = "unset" if value is None else repr(value)
            rows.append((".".join(prefix), ".".join(path), (ENV_PREFIX + "_".join(path)).upper(), default,
                         field.description or ""))

    walk(Settings(), ())
    return rows


def section_doc(section: str) -> str:
    """The docstring of the settings model at ``section`` (why the section exists), one paragraph."""
    from unirag.config import Settings

    model: Any = Settings
    for name in filter(None, section.split(".")):
        model = model.model_fields[name].annotation
    return " ".join((model.__doc__ or "").split("\n\n")[0].split())


def settings_reference() -> str:
    """Every leaf of :class:`unirag.config.Settings`, a table per section: env name and default."""
    lines: list[str] = []
    current = None
    for section, path, env, default, described in setting_rows():
        if section != current:
            current = section
            lines += ["", f"### `{section}`" if section else "### Top level", ""]
            doc = section_doc(section) if section else ""
            if doc:
                lines += [_cell(doc), ""]
            lines += ["| setting | environment variable | default | what |", "|---|---|---|---|"]
        lines.append(f"| `{path}` | `{env}` | `{_cell(default)}` | {_cell(described)} |")
    return "\n".join(lines + hierarchy_settings()) + "\n"


def hierarchy_settings() -> list[str]:
    """The knobs of every ``index.<hierarchy>`` mapping: the fields of each registered hierarchy's
    settings class (its ``HierarchySpec``) and C-HNSW's, with their defaults, read from the code."""
    import dataclasses

    from unirag.artifacts.settings_template import field_defaults, hierarchy_configs

    lines = ["", "### Hierarchy settings", "",
             _cell("Each `index.<hierarchy>` mapping above overrides fields of that hierarchy's settings class; "
                   "an unknown key is refused in one line when the hierarchy is built."), "",
             "| setting | default |", "|---|---|"]
    for name, config in hierarchy_configs().items():
        defaults = field_defaults(config)
        for field in dataclasses.fields(config):
            default = defaults.get(field.name, "required")
            lines.append(f"| `index.{name}.{field.name}` | `{_cell(repr(default))}` |")
    return lines


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill the generated sections of a page."""
    if MARKERS["methods"] in markdown:
        markdown = markdown.replace(MARKERS["methods"], methods_catalogue())
    if MARKERS["vector_reads"] in markdown:
        markdown = markdown.replace(MARKERS["vector_reads"], vector_reads_table())
    if MARKERS["settings"] in markdown:
        markdown = markdown.replace(MARKERS["settings"], settings_reference())
    return markdown
