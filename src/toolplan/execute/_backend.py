"""The backend seam: where a tool call's body runs.

The executor keeps every decision (what is ready, budgets, timeouts, retries, fallbacks, records)
in the process that runs the plan. A `Backend` only runs one call: this tool, these arguments,
under this call context, and returns the `ToolResult` (or raises what the tool raised). The
in-process backend is the default; a distributed backend (Ray) implements the same method and the
scheduler's semantics do not change. A backend must never retry on its own: only toolplan knows
which tools may be repeated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from .._context import _CURRENT, CallContext, raw_call
from ..tools import Tool, ToolResult

__all__ = ("Backend", "InProcessBackend")


@runtime_checkable
class Backend(Protocol):
    """Runs the body of one tool call somewhere."""

    async def invoke(self, tool: Tool, name: str, arguments: Mapping[str, Any], call: CallContext) -> ToolResult:
        """Run ``tool``'s function ``name`` with ``arguments``; `current_call()` must give ``call`` meanwhile."""
        ...


class InProcessBackend:
    """Runs calls in this process and event loop (sync tools in the tool thread pool).

    The invoker does the same inline for the default backend (no extra coroutine per call); this
    class is what other code passes around, and the reference for other backends.
    """

    async def invoke(self, tool: Tool, name: str, arguments: Mapping[str, Any], call: CallContext) -> ToolResult:
        """Run the call with ``call`` set as the current call context."""
        token = _CURRENT.set(
            raw_call(None, call.run_id, call.step_id, call.tool, call.attempt, call.deadline, call.fallback)
        )
        try:
            return await tool.execute(name, arguments)
        finally:
            _CURRENT.reset(token)
