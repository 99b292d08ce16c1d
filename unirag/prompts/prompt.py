"""Prompts live in ``prompts/{index,query,eval}/*.yaml``, each with a version.

The version is part of every cache key (``name@version``): editing a prompt
without bumping its version would silently reuse stale answers, so the loader
also mixes a hash of the text into the version string it reports.

A workspace may shadow a packaged prompt with its own ``WORKSPACE/prompts/NAME.yaml``
(:class:`PromptLibrary`), and a method spec may name a prompt file by path: such a
file carries its own version, and its text hash keeps the cache honest either way.

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

    @property
    def fields(self) -> set[str]:
        """The ``{field}`` names its templates ask for."""
        return set(_FIELD.findall(self.system)) | set(_FIELD.findall(self.user))

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
    """The packaged prompt ``name`` from whichever group folder holds it (names are unique across groups)."""
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


#: A workspace's own prompt files: ``WORKSPACE/prompts/NAME.yaml``.
WORKSPACE_PROMPTS = "prompts"


def is_prompt_path(name: str) -> bool:
    """Whether a method spec names a prompt file (``./my_answer.yaml``) rather than a prompt."""
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def load_prompt_file(path: Path) -> Prompt:
    """A user's prompt file (a workspace override or a spec's ``prompt: ./file.yaml``).

    Same shape as the packaged files; ``name`` defaults to the file's stem and
    ``version`` to ``user``. Read again whenever the file changes (size or time), so
    an edit takes effect in a running process. Any problem is one line naming the file."""
    try:
        stat = path.stat()
    except OSError:
        raise MethodError(f"prompt file {path}: no such file") from None
    return _parsed_prompt_file(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _parsed_prompt_file(path: str, mtime_ns: int, size: int) -> Prompt:
    """The parsed file; ``mtime_ns`` and ``size`` are only the cache key."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise MethodError(f"prompt file {path}: cannot read it ({first})") from None
    if not isinstance(data, dict) or not isinstance(data.get("user"), str) or not data["user"].strip():
        raise MethodError(f"prompt file {path}: needs a 'user' template (and optionally name, version, system)")
    system = data.get("system", "")
    if not isinstance(system, str):
        raise MethodError(f"prompt file {path}: 'system' must be text")
    return Prompt(
        name=str(data.get("name") or Path(path).stem),
        version=str(data.get("version", "user")),
        description=str(data.get("description", "")),
        system=system,
        user=data["user"],
    )


@dataclass(frozen=True)
class PromptLibrary:
    """The prompts one workspace asks: its ``prompts/NAME.yaml`` first, the packaged file else.

    Why an object handed down rather than a lookup of the current workspace: builders and
    operators run in worker threads and several workspaces may live in one process; each
    gets the library of its own workspace (``PromptLibrary()``: the packaged prompts only).
    """

    overrides: Path | None = None

    @classmethod
    def of_workspace(cls, root: Path) -> PromptLibrary:
        return cls(Path(root) / WORKSPACE_PROMPTS)

    def load(self, name: str) -> Prompt:
        """Prompt ``name`` (a workspace file shadows the packaged one), or the file a path names."""
        if is_prompt_path(name):
            return load_prompt_file(Path(name))
        if self.overrides is not None:
            path = self.overrides / f"{name}.yaml"
            if path.is_file():
                return load_prompt_file(path)
        return load_prompt(name)

    def overridden(self, *names: str) -> dict[str, str]:
        """``{name: cache version}`` of those of ``names`` this workspace shadows: what a builder
        adds to its fingerprint, so an edited override rebuilds the artifact (and a workspace
        without overrides keeps the fingerprints it had)."""
        if self.overrides is None:
            return {}
        return {name: self.load(name).cache_version for name in names
                if (self.overrides / f"{name}.yaml").is_file()}

    def has(self, name: str) -> bool:
        """Whether prompt ``name`` exists here (a workspace file or a packaged one)."""
        if self.overrides is not None and (self.overrides / f"{name}.yaml").is_file():
            return True
        return any((PROMPT_DIR / group / f"{name}.yaml").is_file() for group in PROMPT_GROUPS)
