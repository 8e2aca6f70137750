"""A process-wide switch that forbids requests to real model providers (for test suites)."""

from __future__ import annotations

from .._errors import UserError

__all__ = ("check_model_requests_allowed", "model_requests_allowed", "set_model_requests_allowed")

_allowed = True


def model_requests_allowed() -> bool:
    """False while `toolplan.testing.forbid_model_requests` is in force."""
    return _allowed


def set_model_requests_allowed(allowed: bool) -> bool:
    """Allow or forbid real model requests; returns the previous value."""
    global _allowed
    previous, _allowed = _allowed, bool(allowed)
    return previous


def check_model_requests_allowed(model: str) -> None:
    """Raise before any network I/O when real model requests are forbidden."""
    if not _allowed:
        raise UserError(
            f"Real model requests are forbidden (toolplan.testing.forbid_model_requests() is in force), "
            f"but {model} was asked to make one. Use TestModel, FunctionModel or ScriptedModel from "
            "toolplan.testing in tests, or allow requests with forbid_model_requests(False)."
        )
