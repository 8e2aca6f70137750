"""The budget ledger of a run: `BudgetMeter` counts calls and cost against a `Budget`, reserved at dispatch.

Pure bookkeeping: `ToolInvoker` reserves each call here before it starts (and gives the reservation
back if the call never starts); `PlanRun` tells the run's event handler when a ledger warns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..plan import Budget
from ._events import BudgetWarning, EventHandler

__all__ = ("BudgetMeter", "WarningHandler", "watch_budget")


#: Told when a ledger first reaches its budget's ``warn_at`` share of a limit: ``(limit, used, cap, tool)``.
WarningHandler = Callable[[str, float, float, "str | None"], None]


@dataclass(slots=True)
class BudgetMeter:
    """Counts calls and cost against a `Budget` (pure bookkeeping): one ledger, reserved at dispatch.

    A meter may have a ``parent`` (a plan's own budget inside an agent run's): a call must fit both
    and is charged to both. When the budget has ``warn_at``, ``on_warning`` is told once per limit
    when a reservation first reaches that share of it.
    """

    budget: Budget = field(default_factory=Budget)
    calls: int = 0
    cost: float = 0.0
    calls_by_tool: dict[str, int] = field(default_factory=dict[str, int])
    parent: BudgetMeter | None = None
    on_warning: WarningHandler | None = None
    warned: set[tuple[str, str | None]] | None = None
    # Why every call is refused (a nested plan its caller's budget cannot cover), or None.
    closed: str | None = None

    def refusal(self, tool: str, cost: float) -> str | None:
        """Why a call to ``tool`` may not start, or None if the budget (and its parents') allows it."""
        if self.closed is not None:
            return self.closed
        meter: BudgetMeter | None = self
        while meter is not None:
            b = meter.budget
            if b.max_tool_calls is not None or b.max_cost is not None or b.max_tool_calls_per_tool:
                reason = meter._refusal_here(b, tool, cost)
                if reason is not None:
                    return reason
            meter = meter.parent
        return None

    def exhausted(self) -> str | None:
        """The limit this ledger has used up, whatever the next call: ``max_tool_calls``, ``max_cost`` or None.

        Per-tool limits and a call's own cost are `refusal`'s business.
        """
        b = self.budget
        if b.max_tool_calls is not None and self.calls >= b.max_tool_calls:
            return "max_tool_calls"
        if b.max_cost is not None and self.cost >= b.max_cost:
            return "max_cost"
        return None

    def _refusal_here(self, b: Budget, tool: str, cost: float) -> str | None:
        if b.max_tool_calls is not None and self.calls >= b.max_tool_calls:
            return f"Budget exhausted: max_tool_calls={b.max_tool_calls} calls already made."
        per_tool = b.max_tool_calls_per_tool.get(tool)
        if per_tool is not None and self.calls_by_tool.get(tool, 0) >= per_tool:
            return (
                f"Budget exhausted: at most {per_tool} calls of {tool!r} are allowed "
                f"(max_tool_calls_per_tool), and {self.calls_by_tool.get(tool, 0)} were made."
            )
        if b.max_cost is not None and self.cost + cost > b.max_cost + 1e-12:
            return (
                f"Budget exhausted: a call of {tool!r} costs {cost:g} and "
                f"{self.cost:g} of max_cost={b.max_cost:g} is already spent."
            )
        return None

    def spend(self, tool: str, cost: float) -> str | None:
        """Reserve one call, or return why it is refused (nothing is charged then)."""
        if self.parent is None:  # one ledger (a plain plan run): what `refusal` and the loop below do
            b = self.budget
            if b.max_tool_calls is not None or b.max_cost is not None or b.max_tool_calls_per_tool:
                reason = self._refusal_here(b, tool, cost)
                if reason is not None:
                    return reason
                if b.warn_at is not None:  # a budget that warns: charge, then look at the shares
                    self._charge(tool, cost)
                    self._warn(b, tool)
                    return None
            self.calls += 1
            self.cost += cost
            try:
                self.calls_by_tool[tool] += 1
            except KeyError:  # the tool's first call
                self.calls_by_tool[tool] = 1
            return None
        reason = self.refusal(tool, cost)
        if reason is not None:
            return reason
        meter: BudgetMeter | None = self
        while meter is not None:
            meter._charge(tool, cost)
            if meter.budget.warn_at is not None:
                meter._warn(meter.budget, tool)
            meter = meter.parent
        return None

    def cover(self, counts: Mapping[str, int], cost: float) -> str | None:
        """Why this ledger (or a parent) cannot take ``counts`` more calls (by tool) costing ``cost``, or None."""
        total = sum(counts.values())
        meter: BudgetMeter | None = self
        while meter is not None:
            b = meter.budget
            if b.max_tool_calls is not None and meter.calls + total > b.max_tool_calls:
                left = max(b.max_tool_calls - meter.calls, 0)
                return (
                    f"Budget exhausted: this nested plan needs up to {total} calls, and the calling run has "
                    f"{left} left of max_tool_calls={b.max_tool_calls}; it was not run."
                )
            if b.max_cost is not None and meter.cost + cost > b.max_cost + 1e-12:
                return (
                    f"Budget exhausted: this nested plan's calls cost {cost:g}, and the calling run has "
                    f"{max(b.max_cost - meter.cost, 0):g} left of max_cost={b.max_cost:g}; it was not run."
                )
            for tool, count in counts.items():
                cap = b.max_tool_calls_per_tool.get(tool)
                if cap is not None and meter.calls_by_tool.get(tool, 0) + count > cap:
                    return (
                        f"Budget exhausted: this nested plan calls {tool!r} up to {count} times, and the calling run "
                        f"may make {max(cap - meter.calls_by_tool.get(tool, 0), 0)} more (max_tool_calls_per_tool)."
                    )
            meter = meter.parent
        return None

    def _charge(self, tool: str, cost: float) -> None:
        self.calls += 1
        self.cost += cost
        by_tool = self.calls_by_tool
        by_tool[tool] = by_tool.get(tool, 0) + 1

    def _warn(self, b: Budget, tool: str) -> None:
        """Tell ``on_warning`` of each limit whose ``warn_at`` share was reached for the first time."""
        share = b.warn_at
        assert share is not None
        crossed: list[tuple[str, str | None, float, float]] = []
        if b.max_tool_calls and self.calls >= share * b.max_tool_calls:
            crossed.append(("max_tool_calls", None, self.calls, b.max_tool_calls))
        cap = b.max_tool_calls_per_tool.get(tool)
        if cap and self.calls_by_tool.get(tool, 0) >= share * cap:
            crossed.append(("max_tool_calls_per_tool", tool, self.calls_by_tool[tool], cap))
        if b.max_cost and self.cost >= share * b.max_cost - 1e-12:
            crossed.append(("max_cost", None, self.cost, b.max_cost))
        if not crossed:
            return
        if self.warned is None:
            self.warned = set()
        for limit, which, used, of in crossed:
            if (limit, which) not in self.warned:
                self.warned.add((limit, which))
                if self.on_warning is not None:
                    self.on_warning(limit, used, of, which)

    def release(self, tool: str, cost: float) -> None:
        """Give back a reservation whose call never started."""
        meter: BudgetMeter | None = self
        while meter is not None:
            meter.calls -= 1
            meter.cost -= cost
            meter.calls_by_tool[tool] -= 1
            meter = meter.parent


def watch_budget(meter: BudgetMeter, emit: EventHandler, run_id: str) -> None:
    """Emit a `BudgetWarning` when a ledger reaches its budget's ``warn_at`` share of a limit.

    Every ledger from ``meter`` (a plan run's) up the chain that warns and has no one to tell yet
    (an agent run tells its own).
    """
    own = meter
    ledger: BudgetMeter | None = meter
    while ledger is not None:
        if ledger.budget.warn_at is not None and ledger.on_warning is None:
            ledger.on_warning = _warner(emit, run_id, "plan" if ledger is own and ledger.parent is not None else "run")
        ledger = ledger.parent


def _warner(emit: EventHandler, run_id: str, scope: str) -> WarningHandler:
    """A ledger's warning handler that emits `BudgetWarning` (a closure over the handler, not the run)."""

    def warn(limit: str, used: float, cap: float, tool: str | None) -> None:
        emit(BudgetWarning(run_id=run_id, limit=limit, used=used, cap=cap, tool=tool, scope=scope, at=time.time()))

    return warn
