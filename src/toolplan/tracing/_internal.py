"""What the engine, the agent and the planner may use of tracing's internals: span helpers and its switch.

The span helpers are those `_spans` exports. The layering test refuses any other import of a private
module from outside the package.
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
    from ._spans import in_agent as in_agent
    from ._spans import plan_span as plan_span
    from ._spans import record_draft as record_draft
    from ._spans import record_response as record_response
    from ._spans import record_run as record_run
    from ._spans import restore_role as restore_role
    from ._spans import set_run_id as set_run_id
    from ._spans import tool_role_cleared as tool_role_cleared


def __getattr__(name: str) -> Any:
    """The span helpers, imported on first use: they import opentelemetry, which a run without tracing never loads."""
    if not name.startswith("__"):
        from . import _spans

        if name in _spans.__all__:
            return getattr(_spans, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
