"""`StoreWindow`: a budget window kept in the store, shared by every process on the database.

One row per (key, window start) holds the calls and cost reserved in that window, and the model
spend (tokens, money) charged to it. A reservation is one conditional ``UPDATE`` (it adds the call
only if the sums stay within the limits), so concurrent workers cannot overshoot; rows of past
windows of a key are deleted as its new window starts. Model spend is checked before a request and
added after its answer (`spend_refusal`, `charge_spend`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import sqlalchemy as sa

from .._errors import UserError
from ..execute import WindowLimits, WindowUsage
from ..execute._internal import spend_refusal, window_refusal
from ..models import Usage
from . import _schema as t
from ._connect import dialect_insert

if TYPE_CHECKING:
    from ._store import Store

__all__ = ("StoreWindow",)


class StoreWindow:
    """A `toolplan.execute.BudgetWindow` in the store: counts survive restarts and are shared by workers.

    ``clock`` gives seconds since the epoch (`time.time`); tests pass their own.
    """

    def __init__(self, store: Store, limits: WindowLimits, *, clock: Callable[[], float] = time.time) -> None:
        if not isinstance(limits, WindowLimits):
            raise UserError(f"limits must be a toolplan.execute.WindowLimits, got {type(limits).__name__}.")
        self.store = store
        self.limits = limits
        self._clock = clock

    async def reserve(self, key: str, tool: str, cost: float) -> str | None:
        """Reserve one call for ``key`` in the current window, or say why it does not fit."""
        lim = self.limits
        start = lim.start_of(self._clock())
        bw = t.budget_windows
        row_of = (bw.c.key == key) & (bw.c.window_start == start)

        def write(engine: sa.Engine) -> str | None:
            with engine.begin() as conn:
                conn.execute(sa.delete(bw).where((bw.c.key == key) & (bw.c.window_start < start)))
                new = dialect_insert(conn, bw).values(key=key, window_start=start, calls=0, cost=0.0)
                conn.execute(new.on_conflict_do_nothing())
                fits = row_of
                if lim.max_tool_calls is not None:
                    fits = fits & (bw.c.calls + 1 <= lim.max_tool_calls)
                if lim.max_cost is not None:
                    fits = fits & (bw.c.cost + cost <= lim.max_cost + 1e-12)
                done = conn.execute(
                    sa.update(bw).where(fits).values(calls=bw.c.calls + 1, cost=bw.c.cost + cost).returning(bw.c.key)
                ).first()
                if done is not None:
                    return None
                row = conn.execute(sa.select(bw.c.calls, bw.c.cost).where(row_of)).one()
                return window_refusal(lim, row.calls, row.cost, tool, cost, start + lim.period) or (
                    "Budget window exhausted for this key."
                )

        return await self.store.db.transact(write)  # type: ignore[no-any-return]

    async def release(self, key: str, tool: str, cost: float) -> None:
        """Give back a reservation whose call never started."""
        start = self.limits.start_of(self._clock())
        bw = t.budget_windows

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(
                    sa.update(bw)
                    .where((bw.c.key == key) & (bw.c.window_start == start) & (bw.c.calls > 0))
                    .values(calls=bw.c.calls - 1, cost=bw.c.cost - cost)
                )

        await self.store.db.transact(write)

    async def _row(self, key: str, start: float) -> tuple[int, float, tuple[int, int, float]]:
        bw = t.budget_windows

        def read(engine: sa.Engine) -> tuple[int, float, tuple[int, int, float]]:
            with engine.connect() as conn:
                row = conn.execute(
                    sa.select(bw.c.calls, bw.c.cost, bw.c.input_tokens, bw.c.output_tokens, bw.c.money).where(
                        (bw.c.key == key) & (bw.c.window_start == start)
                    )
                ).first()
                if row is None:
                    return 0, 0.0, (0, 0, 0.0)
                return (
                    int(row.calls),
                    float(row.cost),
                    (int(row.input_tokens), int(row.output_tokens), float(row.money)),
                )

        return await self.store.db.read(read)  # type: ignore[no-any-return]

    async def usage(self, key: str) -> WindowUsage:
        """What ``key`` spent in the current window."""
        lim = self.limits
        start = lim.start_of(self._clock())
        calls, cost, spent = await self._row(key, start)
        return lim.usage(key, start, calls, cost, spent)

    async def spend_refusal(self, key: str, input_tokens: int, money: float) -> str | None:
        """Why a model request of ``key`` does not fit its window (`toolplan.models.SpendWindow`)."""
        lim = self.limits
        start = lim.start_of(self._clock())
        _, _, spent = await self._row(key, start)
        return spend_refusal(lim, spent, input_tokens, money, start + lim.period)

    async def charge_spend(self, key: str, usage: Usage, money: float) -> None:
        """Add one model response of ``key`` to its window, in one statement (workers may add at once)."""
        start = self.limits.start_of(self._clock())
        bw = t.budget_windows

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(sa.delete(bw).where((bw.c.key == key) & (bw.c.window_start < start)))
                new = dialect_insert(conn, bw).values(key=key, window_start=start, calls=0, cost=0.0)
                conn.execute(new.on_conflict_do_nothing())
                conn.execute(
                    sa.update(bw)
                    .where((bw.c.key == key) & (bw.c.window_start == start))
                    .values(
                        input_tokens=bw.c.input_tokens + usage.input_tokens,
                        output_tokens=bw.c.output_tokens + usage.output_tokens,
                        money=bw.c.money + money,
                    )
                )

        await self.store.db.transact(write)
