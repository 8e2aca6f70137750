"""Budget windows: limits on calls, cost and model spend beyond one run (per hour, per day, per API key, ...).

A run's `Budget` ends with the run. A `BudgetWindow` counts every call of every run charged to a
key within a fixed period (the window restarts at each multiple of ``period`` since the epoch), and
refuses a call that would go past ``max_tool_calls`` or ``max_cost`` of it. Calls are reserved when
dispatched (after the run's own budget allowed them), so parallel calls and concurrent runs cannot
overshoot, and given back when they never start.

`MemoryWindow` keeps the counts in this process; ``toolplan.store.StoreWindow`` keeps them in the
store, shared by every process on the database (the service's workers).

A window may also cap the model spend of a key (tokens, money): both kinds of window are a
`toolplan.models.SpendWindow` too. A model request is checked against it before it is sent (the
tokens its input reads at least) and its usage is added after the answer; concurrent requests of a
key may together pass a cap by what they use, never start once it is reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._errors import UserError
from .._numbers import finite_number
from ..models import Usage
from ..plan._internal import _show

__all__ = (
    "BudgetWindow",
    "MemoryWindow",
    "WindowCharge",
    "WindowLimits",
    "WindowUsage",
    "spend_refusal",
    "window_refusal",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowLimits:
    """What one key may spend per window.

    Attributes:
        period: The window's length in seconds (3600: per hour; 86400: per day).
        max_tool_calls: Most calls per window, or None for no limit.
        max_cost: Most cost per window (the tools' ``cost`` or cost functions), or None.
        max_input_tokens: Most model input tokens per window (a planner's or agent's requests), or None.
        max_output_tokens: Most model output tokens per window, or None.
        max_total_tokens: Most model input plus output tokens per window, or None.
        max_money: Most money spent on the model per window (at the run's `toolplan.SpendLimits`
            prices, which must then price the model), or None.
    """

    period: float
    max_tool_calls: int | None = None
    max_cost: float | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_money: float | None = None

    def __post_init__(self) -> None:
        p = self.period
        if not finite_number(p) or p <= 0:
            raise UserError(f"WindowLimits.period must be a number of seconds > 0, got {_show(p)}.")
        n = self.max_tool_calls
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise UserError(f"WindowLimits.max_tool_calls must be a whole number >= 0 or None, got {_show(n)}.")
        c = self.max_cost
        if c is not None and (not finite_number(c) or c < 0):
            raise UserError(f"WindowLimits.max_cost must be a finite number >= 0 or None, got {_show(c)}.")
        for name in ("max_input_tokens", "max_output_tokens", "max_total_tokens"):
            n = getattr(self, name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
                raise UserError(f"WindowLimits.{name} must be a whole number >= 0 or None, got {_show(n)}.")
        m = self.max_money
        if m is not None and (not finite_number(m) or m < 0):
            raise UserError(f"WindowLimits.max_money must be a finite number >= 0 or None, got {_show(m)}.")

    def start_of(self, now: float) -> float:
        """The start of the window that holds ``now`` (seconds since the epoch)."""
        return float(math.floor(now / self.period) * self.period)

    def usage(self, key: str, start: float, calls: int, cost: float, spent: Spent = (0, 0, 0.0)) -> WindowUsage:
        """``key``'s usage of the window that starts at ``start``, with these limits."""
        return WindowUsage(
            key=key,
            window_start=start,
            window_end=start + self.period,
            calls=calls,
            cost=cost,
            max_tool_calls=self.max_tool_calls,
            max_cost=self.max_cost,
            input_tokens=spent[0],
            output_tokens=spent[1],
            money=spent[2],
            max_input_tokens=self.max_input_tokens,
            max_output_tokens=self.max_output_tokens,
            max_total_tokens=self.max_total_tokens,
            max_money=self.max_money,
        )


Spent = tuple[int, int, float]
"""Model spend in a window: input tokens, output tokens, money."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowUsage:
    """What a key spent in the current window, and what it may."""

    key: str
    window_start: float
    window_end: float
    calls: int
    cost: float
    max_tool_calls: int | None
    max_cost: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    money: float = 0.0
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_money: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON data: the fields, and what is left of each limit (None: no limit)."""
        total = self.input_tokens + self.output_tokens
        return {
            "key": self.key,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "calls": self.calls,
            "cost": self.cost,
            "max_tool_calls": self.max_tool_calls,
            "max_cost": self.max_cost,
            "calls_left": None if self.max_tool_calls is None else max(0, self.max_tool_calls - self.calls),
            "cost_left": None if self.max_cost is None else max(0.0, self.max_cost - self.cost),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": total,
            "money": self.money,
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_money": self.max_money,
            "total_tokens_left": None if self.max_total_tokens is None else max(0, self.max_total_tokens - total),
            "money_left": None if self.max_money is None else max(0.0, self.max_money - self.money),
        }


@runtime_checkable
class BudgetWindow(Protocol):
    """Counts calls and cost per key and window; `MemoryWindow` and ``toolplan.store.StoreWindow`` implement it."""

    limits: WindowLimits

    async def reserve(self, key: str, tool: str, cost: float) -> str | None:
        """Reserve one call of ``tool`` costing ``cost`` for ``key``, or say why the window refuses it."""
        ...

    async def release(self, key: str, tool: str, cost: float) -> None:
        """Give back a reservation whose call never started."""
        ...

    async def usage(self, key: str) -> WindowUsage:
        """What ``key`` spent in the current window."""
        ...


def window_refusal(limits: WindowLimits, calls: int, cost: float, tool: str, price: float, end: float) -> str | None:
    """Why one more call (``tool``, costing ``price``) does not fit a window that holds ``calls`` and ``cost``."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(end))
    if limits.max_tool_calls is not None and calls + 1 > limits.max_tool_calls:
        return (
            f"Budget window exhausted: max_tool_calls={limits.max_tool_calls} per {limits.period:g}s for this key, "
            f"{calls} already made. The window restarts at {when}."
        )
    if limits.max_cost is not None and cost + price > limits.max_cost + 1e-12:
        return (
            f"Budget window exhausted: a call of {tool!r} costs {price:g} and {cost:g} of max_cost={limits.max_cost:g} "
            f"per {limits.period:g}s is already spent for this key. The window restarts at {when}."
        )
    return None


def spend_refusal(limits: WindowLimits, spent: Spent, input_tokens: int, money: float, end: float) -> str | None:
    """Why a model request does not fit a window that holds ``spent``.

    The request reads at least ``input_tokens`` and costs at least ``money``.
    """
    used_in, used_out, used_money = spent
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(end))
    per = f"per {limits.period:g}s for this key"
    again = f"The window restarts at {when}."
    if limits.max_input_tokens is not None and used_in + input_tokens > limits.max_input_tokens:
        return (
            f"Model spend window exhausted: a request reading at least {input_tokens} input tokens does not fit "
            f"max_input_tokens={limits.max_input_tokens} {per}, {used_in} already read. {again}"
        )
    if limits.max_output_tokens is not None and used_out >= limits.max_output_tokens:
        return (
            f"Model spend window exhausted: max_output_tokens={limits.max_output_tokens} {per}, {used_out} "
            f"already written. {again}"
        )
    if limits.max_total_tokens is not None and used_in + used_out + input_tokens >= limits.max_total_tokens:
        return (
            f"Model spend window exhausted: a request reading at least {input_tokens} input tokens does not fit "
            f"max_total_tokens={limits.max_total_tokens} {per}, {used_in + used_out} already used. {again}"
        )
    if limits.max_money is not None and used_money + money > limits.max_money + 1e-12:
        return (
            f"Model spend window exhausted: {used_money:.6g} of max_money={limits.max_money:g} {per} is spent "
            f"and the next request costs at least {money:.6g}. {again}"
        )
    return None


class MemoryWindow:
    """A `BudgetWindow` in this process's memory (lost on restart; not shared between processes).

    ``clock`` gives seconds since the epoch (`time.time`); tests pass their own.
    """

    def __init__(self, limits: WindowLimits, *, clock: Callable[[], float] = time.time) -> None:
        if not isinstance(limits, WindowLimits):
            raise UserError(f"limits must be a toolplan.execute.WindowLimits, got {type(limits).__name__}.")
        self.limits = limits
        self._clock = clock
        self._spent: dict[str, tuple[float, int, float]] = {}  # key -> (window start, calls, cost)
        self._models: dict[str, tuple[float, Spent]] = {}  # key -> (window start, model spend)

    def _current(self, key: str) -> tuple[float, int, float]:
        start = self.limits.start_of(self._clock())
        held = self._spent.get(key)
        if held is None or held[0] != start:
            if len(self._spent) > 100_000:  # bounded: forget the keys of past windows
                self._spent = {k: v for k, v in self._spent.items() if v[0] == start}
            return start, 0, 0.0
        return held

    async def reserve(self, key: str, tool: str, cost: float) -> str | None:
        start, calls, spent = self._current(key)
        refused = window_refusal(self.limits, calls, spent, tool, cost, start + self.limits.period)
        if refused is None:
            self._spent[key] = (start, calls + 1, spent + cost)
        return refused

    async def release(self, key: str, tool: str, cost: float) -> None:
        start, calls, spent = self._current(key)
        if calls > 0:
            self._spent[key] = (start, calls - 1, max(0.0, spent - cost))

    async def usage(self, key: str) -> WindowUsage:
        start, calls, spent = self._current(key)
        return self.limits.usage(key, start, calls, spent, self._model_spend(key, start))

    def _model_spend(self, key: str, start: float) -> Spent:
        held = self._models.get(key)
        if held is None or held[0] != start:
            if len(self._models) > 100_000:  # bounded: forget the keys of past windows
                self._models = {k: v for k, v in self._models.items() if v[0] == start}
            return (0, 0, 0.0)
        return held[1]

    async def spend_refusal(self, key: str, input_tokens: int, money: float) -> str | None:
        """Why a model request of ``key`` does not fit its window (`toolplan.models.SpendWindow`)."""
        start = self.limits.start_of(self._clock())
        return spend_refusal(
            self.limits, self._model_spend(key, start), input_tokens, money, start + self.limits.period
        )

    async def charge_spend(self, key: str, usage: Usage, money: float) -> None:
        """Add one model response of ``key`` to its window."""
        start = self.limits.start_of(self._clock())
        i, o, m = self._model_spend(key, start)
        self._models[key] = (start, (i + usage.input_tokens, o + usage.output_tokens, m + money))


@dataclass(frozen=True, slots=True)
class WindowCharge:
    """A window and the key a run's calls are charged to (``RunLimits.window``)."""

    window: BudgetWindow
    key: str

    def __post_init__(self) -> None:
        if not isinstance(self.window, BudgetWindow):
            raise UserError(f"WindowCharge.window must be a BudgetWindow, got {type(self.window).__name__}.")
        if not isinstance(self.key, str) or not 0 < len(self.key) <= 256:
            raise UserError(f"WindowCharge.key must be a string of 1 to 256 characters, got {_show(self.key)}.")
