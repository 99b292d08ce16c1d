"""Prompts live in ``prompts/*.yaml``, each with a version.

The version is part of every cache key (``name@version``): editing a prompt
without bumping its version would silently reuse stale answers, so the loader
also mixes a hash of the text into the version string it reports.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from unirag.errors import MethodError

PROMPT_DIR = Path(__file__).parent / "prompts"
_FIELD = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    description: str
    system: str
    user: str

    @property
    def cache_version(self) -> str:
        digest = hashlib.sha256((self.system + "\x00" + self.user).encode()).hexdigest()[:8]
        return f"{self.name}@{self.version}+{digest}"

    def messages(self, **fields: str) -> tuple[dict[str, str], ...]:
        """Fill ``{field}`` placeholders (only known names; braces in data are safe)."""

        def fill(template: str) -> str:
            def sub(match: re.Match[str]) -> str:
                key = match.group(1)
                if key not in fields:
                    raise MethodError(f"prompt {self.name} needs field '{key}'")
                return fields[key]

            return _FIELD.sub(sub, template)

        out = []
        if self.system.strip():
            out.append({"role": "system", "content": fill(self.system).strip()})
        out.append({"role": "user", "content": fill(self.user).strip()})
        return tuple(out)


@lru_cache(maxsize=64)
def load_prompt(name: str) -> Prompt:
    import yaml

    path = PROMPT_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in PROMPT_DIR.glob("*.yaml")))
        raise MethodError(f"unknown prompt '{name}' (known: {known})")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Prompt(
        name=data["name"],
        version=str(data["version"]),
        description=data.get("description", ""),
        system=data.get("system", ""),
        user=data["user"],
    )
