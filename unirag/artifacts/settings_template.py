"""The ``unirag.yaml`` that ``unirag init`` writes: every setting, commented out with its default.

Generated, not written by hand, so that it cannot fall behind the settings: the
pydantic :class:`~unirag.config.Settings` give every section and field (with its
description), and the hierarchy builders' config dataclasses give the knobs of
every ``index.<hierarchy>`` (from each hierarchy's spec) and ``index.chnsw``. It
lives above the hierarchy package because those dataclasses do.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel

from unirag.config import IndexSettings, Settings
from unirag.hierarchy.chnsw import CHnswConfig
from unirag.hierarchy.registry import hierarchy_registry

HEADER = """\
# unirag settings for this workspace: every setting, commented out with its default.
# Uncomment and edit what you change. Precedence, lowest first: defaults < this file
# < .env files (working directory, then workspace) < UNIRAG_* environment variables
# < command-line flags. ${VAR} and ${VAR:-default} are replaced from the environment.
# The standard OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL name the chat endpoint
# when nothing here or in UNIRAG_CHAT_* does.
"""


def hierarchy_configs() -> dict[str, type]:
    """``index.<name>`` -> the config dataclass whose fields that mapping overrides: each
    registered hierarchy's, and C-HNSW's."""
    return {**{name: spec.settings for name, spec in hierarchy_registry().items()}, "chnsw": CHnswConfig}


def settings_yaml() -> str:
    """The whole file: :data:`HEADER`, then every section and field of :class:`Settings`."""
    return HEADER + "\n" + "\n".join(_model_lines(Settings(), 0)) + "\n"


def _scalar(value: Any) -> str:
    """A default as YAML (JSON is YAML: lists, strings with colons and nulls stay valid)."""
    if hasattr(value, "get_secret_value"):
        return "null"
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _model_lines(model: BaseModel, depth: int) -> list[str]:
    pad = "  " * depth
    lines: list[str] = []
    configs = hierarchy_configs() if depth == 1 and _is_index(model) else {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        note = f"  # {' '.join(field.description.split())}" if field.description else ""
        if isinstance(value, BaseModel):
            doc = (type(value).__doc__ or "").strip().splitlines()[0] if type(value).__doc__ else ""
            lines.append(f"# {pad}{name}:" + (f"  # {doc}" if doc else ""))
            lines.extend(_model_lines(value, depth + 1))
            if depth == 0:
                lines.append("")
        elif name in configs:
            lines.append(f"# {pad}{name}:{note}")
            lines.extend(_dataclass_lines(configs[name], depth + 1))
        else:
            lines.append(f"# {pad}{name}: {_scalar(value)}{note}")
    return lines


def _is_index(model: BaseModel) -> bool:
    return isinstance(model, IndexSettings)


def field_defaults(config: type) -> dict[str, Any]:
    """The default of each field of a settings dataclass that has one, in field order."""
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


def _dataclass_lines(config: type, depth: int) -> list[str]:
    pad = "  " * depth
    return [f"# {pad}{name}: {_scalar(default)}" for name, default in field_defaults(config).items()]


def with_store(text: str, store: str | None) -> str:
    """The settings file ``text`` with its ``store:`` line (set or commented out) set to ``store``,
    appended when there is none; ``text`` as is when no store is given."""
    if not store:
        return text
    line = f"store: {json.dumps(store)}"
    lines = text.splitlines()
    for number, old in enumerate(lines):
        if old.startswith(("store:", "# store:")):
            lines[number] = line
            return "\n".join(lines) + "\n"
    return "\n".join([*lines, line]) + "\n"
