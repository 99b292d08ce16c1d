"""Errors a user can act on.

Every error that reaches the command line is a :class:`UniragError`: its
message is one line that says what went wrong and what to do. The CLI prints
it to stderr without a traceback and exits non-zero.
"""

from __future__ import annotations


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


class MethodError(UniragError):
    """An unknown method, or a method spec that does not validate."""

    exit_code = 2


class LLMError(UniragError):
    """A model call failed for good (after retries)."""


class LLMUnavailableError(LLMError):
    """The model endpoint cannot be reached or keeps failing."""


class RetryableLLMError(LLMError):
    """A transient failure (429, 5xx, timeout, connection reset): retry it."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
