"""What one agent run has gathered so far, whether it may make more tool calls, and its budget warnings."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import UsageLimitExceeded
from ..execute import BudgetWarning
from ..models import ModelMessage, ToolReturnMessage, Usage
from ..models._internal import SpendMeter
from ._events import AgentEvent
from ._executors import TurnContext
from ._result import AgentResult, RunStatus

__all__ = ("RunState", "budget_warner", "tell_budget_warnings", "usage_limit")


@dataclass(slots=True, kw_only=True)
class RunState:
    """What one run has gathered so far, to build its result (final or partial) from."""

    messages: list[ModelMessage]
    ctx: TurnContext
    model_name: str
    new_from: int
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    output_failures: int = 0
    meter: SpendMeter | None = None  # the run's model spend, with `Agent(spend=...)`

    async def spend_refusal(self, usage: Usage | None = None) -> tuple[str, str] | None:
        """``(limit, message)`` when the next request (or, given ``usage``, the answer just had) passes a spend cap."""
        assert self.meter is not None
        try:
            if usage is None:
                await self.meter.before(self.messages)
            else:  # before the answer joins the messages: the meter counts what the request sent
                await self.meter.after(self.messages, usage)
        except UsageLimitExceeded as exc:
            return exc.limit, str(exc)
        return None

    def result(self, output: Any, status: RunStatus, *, error: str | None = None) -> AgentResult[Any]:
        """A result from what the run has so far (final, or partial with ``error``)."""
        return AgentResult(
            output=output,
            status=status,
            messages=tuple(self.messages),
            usage=self.usage,
            plan_results=tuple(self.ctx.plan_results),
            tool_calls=self.calls,
            model_name=self.model_name,
            new_message_index=self.new_from,
            error=error,
            call_results=tuple(self.ctx.call_results),
            declarations=tuple(getattr(self.ctx.meta_tools.get("declare_plan"), "declarations", ())),
            money=None if self.meter is None else self.meter.money_spent,
        )


def usage_limit(ctx: TurnContext, run_deadline: float | None) -> tuple[str, str] | None:
    """``(limit, message)`` when the run may not make more tool calls: deadline passed, budget spent."""
    if ctx.expires is not None and time.monotonic() >= ctx.expires:
        return (
            "deadline",
            f"The model asked for more tool calls after the agent run's deadline "
            f"({run_deadline:g} s) had passed. Raise deadline (or budget.max_latency), or ask "
            "the model in the instructions to answer sooner.",
        )
    meter = ctx.invoker.meter
    budget = meter.budget
    spent = meter.exhausted()
    if spent == "max_tool_calls":
        return (
            "max_tool_calls",
            f"The model asked for more tool calls after the run's budget of max_tool_calls="
            f"{budget.max_tool_calls} was spent. Raise budget.max_tool_calls, or ask the model in the "
            "instructions to answer with fewer calls (a plan needs fewer round-trips).",
        )
    if spent == "max_cost":
        return (
            "max_cost",
            f"The model asked for more tool calls after the run's budget of max_cost={budget.max_cost:g} "
            f"was spent ({meter.cost:g}). Raise budget.max_cost, or ask the model in the instructions to "
            "answer with fewer calls.",
        )
    return None


def budget_warner(
    run_id: str, emit: Callable[[AgentEvent], None] | None, warnings: list[BudgetWarning]
) -> Callable[[str, float, float, str | None], None]:
    """The run ledger's warning handler: an event now, and a note for the model after the turn."""

    def warn(limit: str, used: float, cap: float, tool: str | None) -> None:
        warning = BudgetWarning(run_id=run_id, limit=limit, used=used, cap=cap, tool=tool, at=time.time())
        warnings.append(warning)
        if emit is not None:
            emit(warning)

    return warn


def tell_budget_warnings(messages: list[ModelMessage], warnings: list[BudgetWarning]) -> None:
    """Add the turn's budget warnings to its last tool result, where the model reads them next."""
    for i in range(len(messages) - 1, -1, -1):
        last = messages[i]
        if isinstance(last, ToolReturnMessage):
            note = "\n".join(w.message for w in warnings)
            messages[i] = dataclasses.replace(last, content=f"{last.content}\n\n{note}")
            break
    warnings.clear()
