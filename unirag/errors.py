"""Errors a user can act on.

Every error that reaches the command line is a :class:`UniragError`: its
message is one line that says what went wrong and what to do. The CLI prints
it to stderr without a traceback and exits non-zero.
"""

from __future__ import annotations

from typing import Any


class UniragError(Exception):
    """Base class for errors reported to the user as one line."""

    exit_code = 1


class ConfigError(UniragError):
    """The settings file, an environment variable or a flag is invalid."""

    exit_code = 2


class SourceError(UniragError):
    """Nothing readable in the sources given to ``unirag index``."""


class WorkspaceError(UniragError):
    """The workspace is missing, locked, or was built with another config."""


class PaidBuildError(WorkspaceError):
    """A query would build artifacts with a paid chat model and was not told it may.

    Why an error of its own: a caller that can ask (a terminal) shows ``estimate`` and
    retries with the build allowed; every other caller reports the one line."""

    def __init__(self, summary: str, advice: str, estimate: object = None) -> None:
        super().__init__(f"{summary}: {advice}")
        self.summary = summary  # "building X needs about N LLM calls / T prompt tokens to MODEL"
        self.estimate = estimate


class MethodError(UniragError):
    """An unknown method, or a method spec that does not validate."""

    exit_code = 2


class QuestionError(UniragError):
    """A question that cannot be asked: empty, or longer than ``retrieval.max_question_tokens``.

    A distinct class so a server can answer it as a client error (400/422)."""

    exit_code = 2


class LLMError(UniragError):
    """A model call failed for good (after retries)."""


class LLMUnavailableError(LLMError):
    """The model endpoint cannot be reached or keeps failing."""


class RetryableLLMError(LLMError):
    """A transient failure (429, 5xx, timeout, connection reset): retry it.

    ``reason`` (``"429 Too Many Requests"``, ``"timeout"``) and ``endpoint`` (host and
    port, never a key) make the one line printed per retry wait; ``max_retries`` caps the
    retries below the policy's where more would only waste time (a refused local port)."""

    def __init__(self, message: str, retry_after: float | None = None, *, reason: str = "",
                 endpoint: str = "", max_retries: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.reason = reason
        self.endpoint = endpoint
        self.max_retries = max_retries


class StoreDamagedError(WorkspaceError):
    """The workspace's SQLite store is damaged: restore it, or index anew."""


_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def damaged_database(exc: BaseException) -> str | None:
    """Why ``exc`` (from :mod:`sqlite3`) says a database file is damaged, in fixed words;
    None for any other failure (a lock, a full disk), which is not damage.

    The words are fixed because sqlite's own message can quote stored text (``Could
    not decode to UTF-8 column 'text' with text '...'``), which must never reach an
    error line or a log."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_CORRUPT:
        return "database disk image is malformed"
    if code is not None and code & 0xFF == _SQLITE_NOTADB:
        return "not a database file"
    if str(exc).startswith("Could not decode to UTF-8"):
        return "it holds text that is not valid UTF-8"
    return None


def embedding_mismatch(artifact: str, built_with: str, query_with: str) -> WorkspaceError:
    """One message for every way new embeddings cannot be compared with an artifact's
    (another model name, another dimension): the fix is the same. Here, below both the
    model cache and the indices, so that each says it in the same words."""
    return WorkspaceError(
        f"'{artifact}' was embedded with {built_with}, but the query embeds with {query_with}: "
        "use the same embedding settings, or re-index with 'unirag index --rebuild'"
    )


class MissingExtraError(ConfigError):
    """An optional package is not installed: the line names the extra that installs it."""


def import_optional(module: str, extra: str, purpose: str) -> Any:
    """``module``, imported now; if it (or what it needs) is not installed, one line naming the
    extra: the core serves a remote endpoint, and the offline models (``embedded``), the evaluation
    stack (``eval``) and the server (``server``) are extras. ``pip install 'unirag[EXTRA]'`` is
    true for any installed unirag, a clone's included (``pip install .`` / ``-e .``): pip finds
    the installed distribution and adds the extra's packages, it does not look unirag up on PyPI
    (scripts/package_smoke.sh checks this on the built wheel)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module.split(".")[0]
        raise MissingExtraError(
            f"{purpose} needs the optional package '{missing}', which is not installed: "
            f"pip install 'unirag[{extra}]'"
        ) from None
