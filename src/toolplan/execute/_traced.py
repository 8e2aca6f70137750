"""A traced run's invoker: each tool call attempt is an ``execute_tool {tool}`` span, current while the tool runs.

A `PlanRun` swaps its invoker for one of these only when tracing is on, so an untraced call
takes exactly the path it took before tracing existed: no check, no span.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..tracing._internal import PlanTrace, attempt_span, cancel_attempt, end_attempt, restore_role, tool_role_cleared
from ._invoke import CallOutcome, ToolInvoker

__all__ = ("TracedInvoker", "traced")


class TracedInvoker(ToolInvoker):
    """`ToolInvoker` whose calls make spans under its plan's (a copy sharing the ledger and slots)."""

    __slots__ = ("plan_trace",)
    plan_trace: PlanTrace

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,
        run_id: str = "",
        step_id: str = "",
        attempt: int = 1,
        expires: float | None = None,
        fallback: int = False,
    ) -> CallOutcome:
        span, token = attempt_span(self.plan_trace, tool, run_id, step_id, attempt, fallback, arguments)
        role = tool_role_cleared()  # a plan the tool runs itself (a skill) is a workflow of its own
        try:
            outcome = await super().call(tool, arguments, timeout, run_id, step_id, attempt, expires, fallback)
        except BaseException:
            cancel_attempt(span, token)
            raise
        finally:
            restore_role(role)
        end_attempt(self.plan_trace, span, token, outcome.error, outcome.output)
        return outcome

    def child(self, budget: Any = None) -> ToolInvoker:
        return traced(super().child(budget), self.plan_trace)


def traced(invoker: ToolInvoker, plan_trace: PlanTrace) -> TracedInvoker:
    """A `TracedInvoker` sharing everything with ``invoker`` (ledger, tools, slots)."""
    copy = TracedInvoker.__new__(TracedInvoker)
    for name in ToolInvoker.__slots__:
        setattr(copy, name, getattr(invoker, name))
    copy.plan_trace = plan_trace
    return copy
