"""Every error the service answers is JSON ``{"code", "message", "details"}`` with a fitting status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .._errors import (
    ConcurrencyLimitError,
    ModelConnectionError,
    ModelHTTPError,
    PlanNotFoundError,
    PlanValidationError,
    RunConflictError,
    RunNotFoundError,
    StoreError,
    ToolplanError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
    UserError,
)

__all__ = ("INTERNAL_MESSAGE", "ApiError", "coded", "error_body", "install_error_handlers", "log_bug")

log = logging.getLogger("toolplan.service")

INTERNAL_MESSAGE = "The service failed unexpectedly; its log has the details."  # a bug's answer: the log has it


def log_bug(exc: BaseException, where: str = "") -> None:
    """Log an error that is no coded error (a fault of the service) with its traceback."""
    log.error("toolplan service: unexpected error%s", where, exc_info=exc)


class ApiError(Exception):
    """An error answer: HTTP ``status``, a stable ``code``, a message that says what to do."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details}


_STATUS: tuple[tuple[type[ToolplanError], int], ...] = (
    (ModelHTTPError, 502),  # the planner's model failed: the service is a gateway to it
    (ModelConnectionError, 502),
    (UnexpectedModelBehavior, 502),
    (RunNotFoundError, 404),
    (PlanNotFoundError, 404),
    (RunConflictError, 409),
    (ConcurrencyLimitError, 429),
    (UsageLimitExceeded, 429),  # a model spend cap: the key's window, or the service's per request
    (StoreError, 503),
    (PlanValidationError, 422),
    (UserError, 400),
)


def status_of(error: ToolplanError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def coded(exc: BaseException) -> tuple[int, str, str, Any] | None:
    """``(status, code, message, details)`` of an error the API answers as such, or None for a bug.

    The one mapping of both APIs: REST answers ``status`` with ``{"code", "message", "details"}``;
    GraphQL puts ``code`` and ``details`` in the error's extensions.
    """
    if isinstance(exc, ApiError):
        return exc.status, exc.code, exc.message, exc.details
    if isinstance(exc, ToolplanError):
        details: Any = None
        if isinstance(exc, PlanValidationError):
            details = [i.to_dict() for i in exc.issues]
        elif isinstance(exc, UsageLimitExceeded) and exc.usage is not None:
            details = {"limit": exc.limit, "usage": exc.usage.to_dict(), "money": exc.money}
        return status_of(exc), exc.code, str(exc), details
    return None


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error as JSON; an unexpected one is logged and answered 500 without internals."""

    async def known_error(_request: Request, exc: Exception) -> JSONResponse:
        parts = coded(exc)
        assert parts is not None
        status, code, message, details = parts
        return _json(status, error_body(code, message, details))

    async def invalid_request(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"where": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")} for e in exc.errors()
        ]
        shown = "; ".join(f"{e['where']}: {e['message']}" for e in errors[:5])
        return _json(
            422,
            error_body("invalid_request", f"The request is not what this route takes: {shown}. See /docs.", errors),
        )

    async def http_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 404:
            message = "No such route: the API is under /v1 (see /docs)."
        return _json(exc.status_code, error_body(code, message), getattr(exc, "headers", None))

    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log_bug(exc)
        return _json(500, error_body("internal_error", INTERNAL_MESSAGE))

    app.add_exception_handler(ApiError, known_error)
    app.add_exception_handler(ToolplanError, known_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
