"""Every error a client sees: a JSON body ``{"error": {"message": one line, "type": ...}}``.

The body is OpenAI's error shape, so OpenAI clients read our errors too. What a
user caused (unknown method, empty question, a workspace not ready for the
request, an unknown document) maps to a 4xx status, never 500; a 500 says
``internal error`` with the exception's type and first line, nothing more.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from unirag.errors import (
    ConfigError,
    LLMError,
    MethodError,
    QuestionError,
    SourceError,
    StoreDamagedError,
    UniragError,
)
from unirag.store.connect import store_failure

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

log = logging.getLogger("unirag.server")


class ApiError(Exception):
    """An error with its HTTP status, raised by a route."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.code = code


def one_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:500]


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, dict[str, str | None]]:
    return {"error": {"message": one_line(message), "type": kind, "code": code}}


def unirag_status(error: UniragError) -> tuple[int, str]:
    """HTTP status and error type of a library error."""
    if isinstance(error, StoreDamagedError):
        return 500, "server_error"
    if isinstance(error, (MethodError, ConfigError, SourceError, QuestionError)):  # the client's to fix
        return 400, "invalid_request_error"
    if isinstance(error, LLMError):
        return 502, "model_error"
    return 409, "workspace_not_ready"  # WorkspaceError: no corpus, an artifact missing with build off, locked


def error_response(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    from fastapi.responses import JSONResponse

    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(message, kind, code), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Route every failure through :func:`error_response`."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, str(exc), exc.kind, exc.code)

    @app.exception_handler(UniragError)
    async def library_error(request: Request, exc: UniragError) -> JSONResponse:
        status, kind = unirag_status(exc)
        return error_response(status, str(exc), kind)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, validation_message(exc.errors()), "invalid_request_error")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return error_response(exc.status_code, str(exc.detail), kind)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        failure = store_failure(exc)
        if failure is not None:  # the database went away: the operator's to fix, not a bug
            log.error("%s %s: %s", request.method, request.url.path, failure)
            return error_response(503, str(failure), "store_unavailable")
        log.exception("internal error on %s %s", request.method, request.url.path)
        return error_response(500, internal_message(exc), "server_error")


def internal_message(exc: BaseException) -> str:
    """One line for an unexpected failure; a store that stopped answering gets its own line
    (:func:`unirag.store.connect.store_failure`), never ``internal error``."""
    failure = store_failure(exc)
    if failure is not None:
        return str(failure)
    return f"internal error: {type(exc).__name__}: {one_line(str(exc))}"


def validation_message(errors: object) -> str:
    """The first validation problem as ``where: what`` (``body.question: ...``)."""
    first = next(iter(errors), {}) if isinstance(errors, (list, tuple)) else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid request')}" if where else str(first.get("msg", "invalid request"))
