"""Prompts live in ``prompts/{index,query,eval}/*.yaml``, each with a version.

The version is part of every cache key (``name@version``): editing a prompt
without bumping its version would silently reuse stale answers, so the loader
also mixes a hash of the text into the version string it reports.

:meth:`Prompt.request` is the one way a prompt becomes a :class:`ChatRequest`:
the prompt's cache version always travels with its messages.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from unirag.errors import MethodError
from unirag.llm.base import ChatRequest
from unirag.text.tokenizer import get_tokenizer

PROMPT_DIR = Path(__file__).parent
PROMPT_GROUPS = ("index", "query", "eval")
_FIELD = re.compile(r"\{([a-z_]+)\}")
# Room left in a fitted request for the chat template's own tokens.
FIT_MARGIN = 64


@dataclass(frozen=True)
class Prompt:
    """One prompt file: its name, declared version and the system / user templates."""

    name: str
    version: str
    description: str
    system: str
    user: str

    @property
    def cache_version(self) -> str:
        """``name@version+hash``: part of every cache key, so an edited prompt never reuses old answers."""
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

    def fitted_fields(self, fields: dict[str, str], window: int, reply_tokens: int,
                      encoding: str = "cl100k_base") -> tuple[dict[str, str], list[str]]:
        """``fields`` cut, longest first, so the messages and ``reply_tokens`` fit ``window``;
        and the names of the fields that were cut (none when it fitted already).

        The safety net under every query-time prompt: a context is packed to its budget
        where it is built, but a long question, a long candidate list or a small window can
        still overflow, and a server then refuses the call or silently drops the prompt's start.
        """
        tokenizer = get_tokenizer(encoding)
        fitted, cut = dict(fields), []

        def excess() -> int:
            used = sum(tokenizer.count(message["content"]) for message in self.messages(**fitted))
            return used + reply_tokens + FIT_MARGIN - window

        over = excess()
        while over > 0:
            name = max(fitted, key=lambda key: tokenizer.count(fitted[key]), default=None)
            size = tokenizer.count(fitted[name]) if name is not None else 0
            if name is None or size == 0:
                break  # the template alone is over the window: nothing left to cut
            fitted[name] = tokenizer.truncate(fitted[name], max(0, size - over))
            if name not in cut:
                cut.append(name)
            over = excess()
        return fitted, cut

    def request(
        self,
        stage: str,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        json_mode: bool = False,
        **fields: str,
    ) -> ChatRequest:
        """The chat request that asks this prompt with ``fields`` filled, charged to ``stage``."""
        return ChatRequest(
            messages=self.messages(**fields),
            stage=stage,
            prompt_version=self.cache_version,
            temperature=temperature,
            max_tokens=max_tokens,
            json_mode=json_mode,
        )


@lru_cache(maxsize=64)
def load_prompt(name: str) -> Prompt:
    """The prompt ``name`` from whichever group folder holds it (names are unique across groups)."""
    import yaml

    path = next((PROMPT_DIR / group / f"{name}.yaml" for group in PROMPT_GROUPS
                 if (PROMPT_DIR / group / f"{name}.yaml").is_file()), None)
    if path is None:
        known = ", ".join(sorted(p.stem for p in PROMPT_DIR.glob("*/*.yaml")))
        raise MethodError(f"unknown prompt '{name}' (known: {known})")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Prompt(
        name=data["name"],
        version=str(data["version"]),
        description=data.get("description", ""),
        system=data.get("system", ""),
        user=data["user"],
    )
