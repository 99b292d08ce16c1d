"""unirag: graph-based RAG methods as configurations of one operator pool.

Nothing is imported or computed here on purpose: ``unirag --help`` and a cold
``unirag query`` must start fast, so heavy libraries load lazily where used.
The Python API is exported lazily (module ``__getattr__``): ``from unirag
import UniRAG`` imports :mod:`unirag.api` on first use, ``import unirag`` alone
imports nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: What ``__version__`` is when no installed distribution describes this code (a source tree on
#: ``sys.path`` that pip never installed): a valid PEP 440 version that sorts below every release.
UNKNOWN_VERSION = "0+unknown"

#: Public name -> (module, attribute), imported on first access. Each public name is the
#: class's own name, so ``repr()``, tracebacks and the docs call a value what users import.
_EXPORTS: dict[str, tuple[str, str]] = {
    "UniRAG": ("unirag.api", "UniRAG"),
    "Settings": ("unirag.config", "Settings"),
    "AnswerDelta": ("unirag.api_types", "AnswerDelta"),
    "QueryDone": ("unirag.api_types", "QueryDone"),
    "QueryEvent": ("unirag.api_types", "QueryEvent"),
    "DocumentInfo": ("unirag.api_types", "DocumentInfo"),
    "MethodInfo": ("unirag.api_types", "MethodInfo"),
    "QueryResult": ("unirag.methods.runner", "QueryResult"),
    "ContextItem": ("unirag.operators.context", "ContextItem"),
    "StageUsage": ("unirag.llm.base", "StageUsage"),
    "IndexReport": ("unirag.pipeline", "IndexReport"),
    "DeleteReport": ("unirag.pipeline", "DeleteReport"),
    "UniragError": ("unirag.errors", "UniragError"),
    "QuestionError": ("unirag.errors", "QuestionError"),
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from unirag.api import UniRAG
    from unirag.api_types import AnswerDelta, DocumentInfo, MethodInfo, QueryDone, QueryEvent
    from unirag.config import Settings
    from unirag.errors import QuestionError, UniragError
    from unirag.llm.base import StageUsage
    from unirag.methods.runner import QueryResult
    from unirag.operators.context import ContextItem
    from unirag.pipeline import DeleteReport, IndexReport


def package_version() -> str:
    """The installed distribution's version (``pyproject.toml``'s ``version``, the one source):
    read from the package metadata on demand, so ``import unirag`` reads no file."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("unirag")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first access (PEP 562); ``__version__`` from metadata."""
    if name == "__version__":
        return package_version()
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'unirag' has no attribute {name!r}") from None
    return getattr(import_module(module), attribute)


def __dir__() -> list[str]:
    return sorted(__all__)
