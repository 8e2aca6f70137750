"""Budget windows beyond one run: in memory and in the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from toolplan import Budget, RunLimits, UserError, execute_plan, execute_plan_sync, tool
from toolplan.agent import Agent
from toolplan.execute import BudgetWindow, MemoryWindow, ToolInvoker, WindowCharge, WindowLimits
from toolplan.models import AssistantMessage, SpendWindow, ToolCall, ToolReturnMessage, Usage
from toolplan.store import StoreWindow, open_store
from toolplan.store._codec import decode, encode
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolRegistry


@tool(read_only=True, cost=2)
def ping() -> str:
    """Ping."""
    return "pong"


def _plan(n: int) -> dict[str, Any]:
    return {"steps": [{"id": f"p{i}", "tool": "ping", "arguments": {}} for i in range(n)]}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_memory_window_counts_across_runs_and_restarts_with_the_next_window() -> None:
    clock = Clock(7200.0)
    window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=3), clock=clock)
    limits = RunLimits(window=WindowCharge(window, "alice"))
    first = execute_plan_sync(_plan(2), [ping], limits=limits)
    second = execute_plan_sync(_plan(2), [ping], limits=limits)
    assert [r.status for r in (*first.steps.values(), *second.steps.values())] == ["succeeded"] * 3 + ["not_run"]
    error = second.steps["p1"].error
    assert error is not None and error.kind == "limit"
    assert error.message == (
        "Budget window exhausted: max_tool_calls=3 per 3600s for this key, 3 already made. "
        "The window restarts at 1970-01-01 03:00:00 UTC."
    )
    other = execute_plan_sync(_plan(1), [ping], limits=RunLimits(window=WindowCharge(window, "bob")))
    assert other.ok  # another key, another count
    clock.now += 3600
    assert execute_plan_sync(_plan(3), [ping], limits=limits).ok
    usage = asyncio.run(window.usage("alice")).to_dict()
    assert usage == {
        "key": "alice",
        "window_start": 10800.0,
        "window_end": 14400.0,
        "calls": 3,
        "cost": 6.0,
        "max_tool_calls": 3,
        "max_cost": None,
        "calls_left": 0,
        "cost_left": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "money": 0.0,
        "max_input_tokens": None,
        "max_output_tokens": None,
        "max_total_tokens": None,
        "max_money": None,
        "total_tokens_left": None,
        "money_left": None,
    }


def test_the_runs_own_budget_refuses_first_and_the_window_is_not_charged_then() -> None:
    window = MemoryWindow(WindowLimits(period=60, max_cost=100))
    limits = RunLimits(budget=Budget(max_tool_calls=1), window=WindowCharge(window, "k"))
    result = execute_plan_sync(_plan(3), [ping], limits=limits)
    assert [r.status for r in result.steps.values()] == ["succeeded", "not_run", "not_run"]
    assert asyncio.run(window.usage("k")).calls == 1


def test_a_window_refusal_gives_the_runs_budget_back() -> None:
    window = MemoryWindow(WindowLimits(period=60, max_tool_calls=1))
    result = execute_plan_sync(
        _plan(3), [ping], limits=RunLimits(budget=Budget(max_tool_calls=2), window=WindowCharge(window, "k"))
    )
    assert [r.status for r in result.steps.values()] == ["succeeded", "not_run", "not_run"]


def test_an_agent_run_is_charged_to_its_window() -> None:
    window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=2))
    calls = tuple(ToolCall(id=str(i), name="ping", arguments="{}") for i in range(3))
    model = ScriptedModel([AssistantMessage(tool_calls=calls), "done"])
    agent = Agent(model, tools=[ping], limits=RunLimits(window=WindowCharge(window, "team-a")))
    result = agent.run_sync("go")
    replies = [m.content for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert all("pong" in r for r in replies[:2])
    assert "Budget window exhausted" in replies[2]
    assert asyncio.run(window.usage("team-a")).calls == 2


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"period": 0}, "period must be a number of seconds > 0"),
        ({"period": float("inf")}, "period must be a number of seconds > 0"),
        ({"period": 60, "max_tool_calls": -1}, "max_tool_calls must be a whole number >= 0"),
        ({"period": 60, "max_cost": float("nan")}, "max_cost must be a finite number >= 0"),
        ({"period": 10**400}, "period must be a number of seconds > 0"),  # too big for a float: no OverflowError
        ({"period": 60, "max_cost": 10**400}, "max_cost must be a finite number >= 0"),
    ],
)
def test_window_limits_are_checked(options: dict[str, Any], says: str) -> None:
    with pytest.raises(UserError, match=says):
        WindowLimits(**options)


def test_a_window_charge_is_checked_and_never_stored() -> None:
    with pytest.raises(UserError, match="must be a BudgetWindow"):
        WindowCharge(object(), "k")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="1 to 256 characters"):
        WindowCharge(MemoryWindow(WindowLimits(period=1)), "")
    with pytest.raises(UserError, match=r"window must be a toolplan\.execute\.WindowCharge"):
        RunLimits(window="k")  # type: ignore[arg-type]
    limits = RunLimits(max_concurrency=3, window=WindowCharge(MemoryWindow(WindowLimits(period=1)), "k"))
    assert "window" not in encode(limits) and "warn_at" not in encode(RunLimits())
    assert decode(encode(limits)) == RunLimits(max_concurrency=3)


async def test_a_store_window_is_shared_by_every_store_object_and_survives_a_restart(stats_url: str) -> None:
    limits = WindowLimits(period=3600, max_cost=7)
    clock = Clock(1_000_000.0)
    async with open_store(stats_url) as store:
        window = StoreWindow(store, limits, clock=clock)
        assert isinstance(window, BudgetWindow)
        result = await execute_plan(_plan(2), [ping], limits=RunLimits(window=WindowCharge(window, "k")))
        assert result.ok
    async with open_store(stats_url) as store:  # a restart, or another worker
        window = StoreWindow(store, limits, clock=clock)
        result = await execute_plan(_plan(2), [ping], limits=RunLimits(window=WindowCharge(window, "k")))
        assert [r.status for r in result.steps.values()] == ["succeeded", "not_run"]
        error = result.steps["p1"].error
        assert error is not None and "6 of max_cost=7 per 3600s is already spent" in error.message
        usage = await window.usage("k")
        assert (usage.calls, usage.cost, usage.window_start) == (3, 6.0, 997200.0)
        clock.now += 3600  # the next window: the old row goes
        assert await window.reserve("k", "ping", 2) is None
        assert (await window.usage("k")).calls == 1


async def test_parallel_reservations_in_the_store_never_overshoot(stats_url: str) -> None:
    async with open_store(stats_url) as store:
        window = StoreWindow(store, WindowLimits(period=3600, max_tool_calls=5))
        refusals = await asyncio.gather(*(window.reserve("k", "ping", 1) for _ in range(12)))
        assert sum(r is None for r in refusals) == 5
        await window.release("k", "ping", 1)
        assert (await window.usage("k")).calls == 4


class _Watched:
    """A store window that says when a reservation is asked for."""

    def __init__(self, window: StoreWindow) -> None:
        self.window = window
        self.limits = window.limits
        self.reserving = asyncio.Event()

    async def reserve(self, key: str, tool: str, cost: float) -> str | None:
        self.reserving.set()
        return await self.window.reserve(key, tool, cost)

    async def release(self, key: str, tool: str, cost: float) -> None:
        await self.window.release(key, tool, cost)

    async def usage(self, key: str) -> Any:
        return await self.window.usage(key)


async def test_a_call_cancelled_while_its_reservation_is_written_is_not_charged(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        window = _Watched(StoreWindow(store, WindowLimits(period=3600, max_tool_calls=5)))
        await window.usage("k")  # the database is open
        gate = threading.Event()
        blocker = asyncio.ensure_future(store.db.call(lambda engine, raw: gate.wait()))  # holds the store's thread
        limits = RunLimits(budget=Budget(max_tool_calls=3), window=WindowCharge(window, "k"))
        invoker = ToolInvoker.for_limits(ToolRegistry([ping]), limits)
        call = asyncio.ensure_future(invoker.call("ping", {}))
        await window.reserving.wait()  # the reservation's write is queued behind the gate
        call.cancel()  # the call is cancelled while its write is under way
        gate.set()  # and then the write commits
        with pytest.raises(asyncio.CancelledError):
            await call
        await blocker
        assert invoker.meter.calls == 0  # the run's budget is given back too
        await store.db.call(lambda engine, raw: None)  # every write queued before has ended
        assert (await window.usage("k")).calls == 0


SPEND = WindowLimits(period=3600, max_input_tokens=1000, max_output_tokens=50, max_total_tokens=1040, max_money=0.5)


async def _spend_in(window: MemoryWindow | StoreWindow, clock: Clock) -> None:
    """Model spend in a window: checked by what a request reads at least, added after each answer."""
    assert isinstance(window, SpendWindow)
    assert await window.spend_refusal("k", 900, 0.1) is None
    await window.charge_spend("k", Usage(requests=1, input_tokens=900, output_tokens=30), 0.25)
    refused = await window.spend_refusal("k", 101, 0.0)
    assert refused is not None and refused.startswith(
        "Model spend window exhausted: a request reading at least 101 input tokens does not fit "
        "max_input_tokens=1000 per 3600s for this key, 900 already read."
    )
    refused = await window.spend_refusal("k", 100, 0.0)  # 930 used + 100 stays under max_total_tokens=1040
    assert refused is None
    assert "max_money=0.5" in str(await window.spend_refusal("k", 10, 0.3))
    await window.charge_spend("k", Usage(requests=1, input_tokens=10, output_tokens=20), 0.01)
    assert "max_output_tokens=50 per 3600s for this key, 50 already written" in str(
        await window.spend_refusal("k", 1, 0.0)
    )
    usage = (await window.usage("k")).to_dict()
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (910, 50, 960)
    assert usage["money"] == pytest.approx(0.26) and usage["total_tokens_left"] == 80
    assert await window.spend_refusal("other", 1000, 0.5) is None  # another key, another count
    clock.now += 3600  # the next window starts empty
    assert await window.spend_refusal("k", 1000, 0.5) is None
    assert (await window.usage("k")).output_tokens == 0


async def test_a_memory_window_caps_model_spend() -> None:
    clock = Clock(7200.0)
    await _spend_in(MemoryWindow(SPEND, clock=clock), clock)


async def test_a_store_window_caps_model_spend(stats_url: str) -> None:
    clock = Clock(7200.0)
    async with open_store(stats_url) as store:
        await _spend_in(StoreWindow(store, SPEND, clock=clock), clock)


async def test_a_version_9_database_gains_the_spend_columns_of_budget_windows(tmp_path: Path) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'old.db'}"
    clock = Clock(7200.0)
    async with open_store(url) as store:
        assert (await StoreWindow(store, SPEND, clock=clock).usage("k")).calls == 0  # the schema is made
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # back to version 9, as toolplan left it before model spend
        for column in ("input_tokens", "output_tokens", "money"):
            conn.execute(sa.text(f"ALTER TABLE toolplan_budget_windows DROP COLUMN {column}"))
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '9' WHERE key = 'schema_version'"))
    engine.dispose()
    async with open_store(url) as store:
        await _spend_in(StoreWindow(store, SPEND, clock=clock), clock)
