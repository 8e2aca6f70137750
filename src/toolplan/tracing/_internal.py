"""What the engine, the agent and the planner may use of tracing's internals: span helpers and its switch.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._config import get_tracer as get_tracer

if TYPE_CHECKING:
    from ._spans import PlanTrace as PlanTrace
    from ._spans import agent_span as agent_span
    from ._spans import as_tool_call as as_tool_call
    from ._spans import attempt_span as attempt_span
    from ._spans import cancel_attempt as cancel_attempt
    from ._spans import chat_span as chat_span
    from ._spans import end_attempt as end_attempt
    from ._spans import plan_span as plan_span
    from ._spans import record_draft as record_draft
    from ._spans import record_response as record_response
    from ._spans import record_run as record_run
    from ._spans import restore_role as restore_role
    from ._spans import set_run_id as set_run_id
    from ._spans import tool_role_cleared as tool_role_cleared

_SPANS = frozenset(
    {
        "PlanTrace",
        "agent_span",
        "as_tool_call",
        "attempt_span",
        "cancel_attempt",
        "chat_span",
        "end_attempt",
        "plan_span",
        "record_draft",
        "record_response",
        "record_run",
        "restore_role",
        "set_run_id",
        "tool_role_cleared",
    }
)


def __getattr__(name: str) -> Any:
    """The span helpers, imported on first use: they import opentelemetry, which a run without tracing never loads."""
    if name in _SPANS:
        from . import _spans

        return getattr(_spans, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = (
    "PlanTrace",
    "agent_span",
    "as_tool_call",
    "attempt_span",
    "cancel_attempt",
    "chat_span",
    "end_attempt",
    "get_tracer",
    "plan_span",
    "record_draft",
    "record_response",
    "record_run",
    "restore_role",
    "set_run_id",
    "tool_role_cleared",
)
