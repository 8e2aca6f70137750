"""The one path every tool call takes: plan steps, fallbacks, code mode and agent calls.

It looks the tool up, charges the budget, holds the tool's concurrency slot, applies the timeout
and turns every way a call can end into a `CallOutcome`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidArgumentsError, ToolError, UnknownToolError
from .._records import fast_init, maker
from ..plan import Budget
from ..tools import ToolAnnotations, ToolRegistry, ToolResult
from ._result import StepError

__all__ = ("BudgetMeter", "CallOutcome", "ToolInvoker")

_DEFAULT_ANNOTATIONS = ToolAnnotations()


@fast_init
@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one tool call ended."""

    output: Any = None
    error: StepError | None = None

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


_new_outcome = maker(CallOutcome)


@dataclass(slots=True)
class BudgetMeter:
    """Counts calls and cost against a `Budget` (pure bookkeeping)."""

    budget: Budget = field(default_factory=Budget)
    calls: int = 0
    cost: float = 0.0
    calls_by_tool: dict[str, int] = field(default_factory=dict[str, int])

    def refusal(self, tool: str, cost: float) -> str | None:
        """Why a call to ``tool`` may not start, or None if the budget allows it."""
        b = self.budget
        if b.max_tool_calls is not None and self.calls >= b.max_tool_calls:
            return f"Budget exhausted: max_tool_calls={b.max_tool_calls} calls already made."
        per_tool = b.max_tool_calls_per_tool.get(tool)
        if per_tool is not None and self.calls_by_tool.get(tool, 0) >= per_tool:
            return f"Budget exhausted: at most {per_tool} calls of {tool!r} are allowed."
        if b.max_cost is not None and self.cost + cost > b.max_cost + 1e-12:
            return (
                f"Budget exhausted: a call of {tool!r} costs {cost:g} and "
                f"{self.cost:g} of max_cost={b.max_cost:g} is already spent."
            )
        return None

    def spend(self, tool: str, cost: float) -> str | None:
        """Charge one call, or return why it is refused (nothing is charged then)."""
        b = self.budget
        if b.max_tool_calls is not None or b.max_cost is not None or b.max_tool_calls_per_tool:
            reason = self.refusal(tool, cost)
            if reason is not None:
                return reason
        self.calls += 1
        self.cost += cost
        self.calls_by_tool[tool] = self.calls_by_tool.get(tool, 0) + 1
        return None


@fast_init
@dataclass(frozen=True, slots=True)
class _Entry:
    """What a call of one tool needs, looked up once per invoker."""

    execute: Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]]
    annotations: ToolAnnotations
    semaphore: asyncio.Semaphore | None


class ToolInvoker:
    """Calls tools with the shared limits of one run (budget, per-tool concurrency, timeouts)."""

    __slots__ = ("_entries", "default_timeout", "meter", "registry")

    def __init__(
        self, registry: ToolRegistry, *, budget: Budget | None = None, default_timeout: float | None = None
    ) -> None:
        self.registry = registry
        self.meter = BudgetMeter(budget or Budget())
        self.default_timeout = default_timeout
        self._entries: dict[str, _Entry] = {}

    def _entry(self, tool: str) -> _Entry | None:
        entry = self._entries.get(tool)
        if entry is None:
            owner = self.registry.owner(tool)
            if owner is None:
                return None
            annotations = self.registry.definition(tool).annotations
            limit = annotations.concurrency
            entry = self._entries[tool] = _Entry(
                owner.execute, annotations, asyncio.Semaphore(limit) if limit is not None else None
            )
        return entry

    def annotations(self, tool: str) -> ToolAnnotations:
        """The tool's annotations (defaults for unknown tools)."""
        entry = self._entry(tool)
        return entry.annotations if entry is not None else _DEFAULT_ANNOTATIONS

    def timeout_for(self, tool: str, step_timeout: float | None = None) -> float | None:
        """The effective timeout: the step's, else the tool's, else the run default."""
        if step_timeout is not None:
            return step_timeout
        annotated = self.annotations(tool).timeout
        return annotated if annotated is not None else self.default_timeout

    async def call(self, tool: str, arguments: Mapping[str, Any], *, timeout: float | None = None) -> CallOutcome:
        """Make one call of ``tool``; never raises for tool failures (only for cancellation).

        The tool's concurrency slot is taken before the timeout starts: waiting for a slot is not
        counted against the call's timeout.
        """
        entry = self._entries.get(tool) or self._entry(tool)
        if entry is None:
            return CallOutcome(
                error=StepError(kind="unknown_tool", message=str(UnknownToolError(tool, self.registry.names)))
            )
        refused = self.meter.spend(tool, entry.annotations.cost)
        if refused is not None:
            return CallOutcome(error=StepError(kind="limit", message=refused))
        sem = entry.semaphore
        deadline: asyncio.Timeout | None = None
        try:
            if sem is not None:
                await sem.acquire()
            try:
                if timeout is None:
                    result = await entry.execute(tool, arguments)
                else:
                    deadline = asyncio.timeout(timeout)  # made after the slot is taken: it starts now
                    async with deadline:
                        result = await entry.execute(tool, arguments)
            finally:
                if sem is not None:
                    sem.release()
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                return CallOutcome(
                    error=StepError(
                        kind="timeout",
                        message=f"Tool {tool!r} did not finish within {timeout:g}s and was cancelled. "
                        "Retry later, or give the step a longer 'timeout'.",
                    )
                )
            return _failure(tool, exc)  # a tool's own TimeoutError included
        if result.error is not None:
            return CallOutcome(result.content, StepError(kind="business", message=result.error))
        return _new_outcome(result.content)  # a maker: cheaper than calling the class


def _failure(tool: str, exc: Exception) -> CallOutcome:
    """How a call that raised ``exc`` ended."""
    if isinstance(exc, InvalidArgumentsError):
        return CallOutcome(error=StepError(kind="invalid_arguments", message=exc.message))
    if isinstance(exc, UnknownToolError):
        return CallOutcome(error=StepError(kind="unknown_tool", message=exc.message))
    if isinstance(exc, ToolError):
        return CallOutcome(error=StepError(kind="business", message=exc.message))
    return _infrastructure(tool, exc)


def _infrastructure(tool: str, exc: BaseException) -> CallOutcome:
    detail = str(exc) or "(no message)"
    return CallOutcome(
        error=StepError(kind="infrastructure", message=f"Tool {tool!r} raised {type(exc).__name__}: {detail}")
    )
