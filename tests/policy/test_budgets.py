"""Budgets per tool and per cost: cost functions, reservation at dispatch, warnings, in every mode."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolplan
from toolplan import Budget, RunLimits, UserError, execute_plan, execute_plan_sync, tool
from toolplan.agent import Agent, AgentEvent, CodeTool
from toolplan.execute import BudgetWarning, PlanEvent, ToolInvoker, execute_plan_stream
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolRegistry

#: Examples per property: 25 locally, 2,000 under CI (about 15 s each); TOOLPLAN_PROPERTY_EXAMPLES sets it.
_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
EXAMPLES = int(os.environ.get("TOOLPLAN_PROPERTY_EXAMPLES", "2000" if _CI else "25"))


def _chars(arguments: Mapping[str, Any]) -> float:
    return len(str(arguments.get("text", ""))) / 10


@tool(read_only=True, cost_of=_chars)
def translate(text: str) -> str:
    """Translate a text; priced by its length."""
    return text.upper()


@tool(read_only=True)
def ping() -> str:
    """Ping."""
    return "pong"


def _steps(n: int, text: str = "x" * 20) -> dict[str, Any]:
    return {"steps": [{"id": f"t{i}", "tool": "translate", "arguments": {"text": text}} for i in range(n)]}


def test_a_cost_function_prices_each_call_from_its_arguments() -> None:
    result = execute_plan_sync(_steps(6), [translate], limits=RunLimits(budget=Budget(max_cost=9), max_concurrency=1))
    assert [r.status for r in result.steps.values()] == ["succeeded"] * 4 + ["not_run"] * 2
    error = result.steps["t4"].error
    assert error is not None and error.kind == "limit"
    assert error.message == "Budget exhausted: a call of 'translate' costs 2 and 8 of max_cost=9 is already spent."


@pytest.mark.parametrize(
    ("cost_of", "says"),
    [
        (lambda a: 1 / 0, "raised ZeroDivisionError: division by zero"),
        (lambda a: -1, "returned -1, not a finite number >= 0"),
        (lambda a: float("nan"), "returned nan, not a finite number >= 0"),
        (lambda a: "3", "returned '3', not a finite number >= 0"),
        (lambda a: True, "returned True, not a finite number >= 0"),
        (lambda a: 10**400, "not a finite number >= 0"),  # too big for a float: a result, not an OverflowError
        (lambda a: 10**5000, "returned an integer of 16610 bits, not a finite"),  # too long for repr, too
    ],
)
def test_a_failed_cost_function_is_an_error_of_its_own_kind(cost_of: Any, says: str) -> None:
    called: list[int] = []

    @tool(cost_of=cost_of)
    def priced(x: int) -> int:
        """Priced."""
        called.append(x)
        return x

    result = execute_plan_sync({"steps": [{"id": "p", "tool": "priced", "arguments": {"x": 1}}]}, [priced])
    step = result.steps["p"]
    assert step.status == "failed" and step.error is not None and step.error.kind == "cost"
    assert says in step.error.message and "the call was not made" in step.error.message
    assert called == []


def test_cost_of_must_be_callable() -> None:
    with pytest.raises(UserError, match="cost_of must be a function"):
        tool(cost_of=3)(lambda: 1)  # type: ignore[call-overload]


def test_per_tool_limits_say_how_many_were_made() -> None:
    plan = {"steps": [{"id": f"p{i}", "tool": "ping", "arguments": {}} for i in range(3)]}
    limits = RunLimits(budget=Budget(max_tool_calls_per_tool={"ping": 2}), max_concurrency=1)
    result = execute_plan_sync(plan, [ping], limits=limits)
    assert [r.status for r in result.steps.values()] == ["succeeded", "succeeded", "not_run"]
    error = result.steps["p2"].error
    assert error is not None
    assert error.message == (
        "Budget exhausted: at most 2 calls of 'ping' are allowed (max_tool_calls_per_tool), and 2 were made."
    )


def test_warn_at_emits_one_warning_per_limit() -> None:
    events: list[PlanEvent] = []
    budget = Budget(max_tool_calls=10, max_cost=10, max_tool_calls_per_tool={"translate": 5}, warn_at=0.8)
    execute_plan_sync(
        _steps(6), [translate], limits=RunLimits(budget=budget, max_concurrency=1), on_event=events.append
    )
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert [(w.limit, w.tool, w.used, w.cap) for w in warnings] == [
        ("max_tool_calls_per_tool", "translate", 4, 5),
        ("max_cost", None, 8, 10),
    ]
    assert warnings[0].message == (
        "Budget warning: 4 of the 5 calls of 'translate' allowed made (80%). "
        "Spend what is left on the calls that matter most."
    )
    assert warnings[1].scope == "run" and warnings[1].message.startswith("Budget warning: 8 of max_cost=10 spent (80%)")


def test_a_plans_own_warn_at_merges_with_the_callers_the_tighter_wins() -> None:
    assert Budget(warn_at=0.9).merged(Budget(warn_at=0.5)).warn_at == 0.5
    assert Budget(warn_at=0.9).unlimited  # a warning is not a limit


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), "0.8", True])
def test_warn_at_is_a_share(bad: Any) -> None:
    with pytest.raises(UserError, match=r"budget\.warn_at must be a share"):
        RunLimits(budget=Budget(max_tool_calls=3, warn_at=bad))


def test_a_plans_own_json_budget_carries_warn_at() -> None:
    events: list[PlanEvent] = []
    plan = {**_steps(4), "budget": {"max_cost": 8, "warn_at": 0.5}}
    execute_plan_sync(plan, [translate], max_concurrency=1, on_event=events.append)
    assert [(e.limit, e.used, e.cap) for e in events if isinstance(e, BudgetWarning)] == [("max_cost", 4, 8)]


async def test_a_streamed_plans_own_warn_at_applies_as_it_arrives() -> None:
    events: list[PlanEvent] = []
    text = json.dumps({"budget": {"max_cost": 8, "warn_at": 0.5}, **_steps(3)})

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(text), 7):
            yield text[i : i + 7]

    result = await execute_plan_stream(pieces(), [translate], max_concurrency=1, on_event=events.append)
    assert result.ok and [(e.limit, e.used) for e in events if isinstance(e, BudgetWarning)] == [("max_cost", 4)]


@pytest.mark.parametrize(("plan_warn", "caller_warn", "warned_at"), [(0.5, None, 4), (0.5, 0.75, 4), (0.9, 0.25, 2)])
def test_a_plans_warn_at_merges_with_the_callers_and_the_lower_wins(
    plan_warn: float, caller_warn: float | None, warned_at: float
) -> None:
    events: list[PlanEvent] = []
    plan = {**_steps(4), "budget": {"warn_at": plan_warn}}  # a warning alone: the caller's limits apply
    limits = RunLimits(budget=Budget(max_cost=8, warn_at=caller_warn), max_concurrency=1)
    execute_plan_sync(plan, [translate], limits=limits, on_event=events.append)
    assert [(e.limit, e.used) for e in events if isinstance(e, BudgetWarning)] == [("max_cost", warned_at)]


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, 2, "0.8", True, None, [0.8]])
def test_a_plans_warn_at_must_be_a_share(bad: Any) -> None:
    source = {**_steps(1), "budget": {"max_cost": 5, "warn_at": bad}}
    report = toolplan.validate_plan(source, [translate])
    if bad is None:  # null is no warning
        assert report.ok
        return
    [issue] = report.errors
    assert issue.code == "invalid_field" and issue.message.startswith("'budget.warn_at' must be a share")
    assert "Leave the field out" in issue.message
    from toolplan.plan import Plan, parse_plan

    plan = parse_plan(_steps(1))  # a Plan built in Python is checked the same way
    bad_plan = Plan(steps=plan.steps, budget=Budget(max_cost=5, warn_at=bad))
    assert [i.code for i in toolplan.validate_plan(bad_plan, [translate]).errors] == ["invalid_field"]


def test_a_plans_warn_at_round_trips_through_the_native_dialect() -> None:
    from toolplan.plan import dump_plan, parse_plan

    plan = parse_plan({**_steps(1), "budget": {"warn_at": 0.8}})
    assert plan.budget is not None and plan.budget.warn_at == 0.8
    dumped = dump_plan(plan, "native")
    assert isinstance(dumped, dict) and dumped["budget"] == {"warn_at": 0.8}
    assert parse_plan(dumped).budget == plan.budget


async def test_a_streamed_plan_charges_cost_functions_and_warns() -> None:
    events: list[PlanEvent] = []
    text = json.dumps(_steps(4, "x" * 15))

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(text), 7):
            yield text[i : i + 7]

    limits = RunLimits(budget=Budget(max_cost=5, warn_at=0.5), max_concurrency=1)
    result = await execute_plan_stream(pieces(), [translate], limits=limits, on_event=events.append)
    assert [r.status for r in result.steps.values()] == ["succeeded"] * 3 + ["not_run"]
    assert [(e.limit, e.used) for e in events if isinstance(e, BudgetWarning)] == [("max_cost", 3.0)]


def test_an_agent_is_warned_and_the_model_is_told() -> None:
    calls = tuple(ToolCall(id=str(i), name="ping", arguments="{}") for i in range(4))
    model = ScriptedModel([AssistantMessage(tool_calls=calls), "done"])
    events: list[AgentEvent] = []

    async def main() -> None:
        async with Agent(model, tools=[ping], budget=Budget(max_tool_calls=5, warn_at=0.8)).run_stream("go") as stream:
            async for event in stream:
                events.append(event)

    asyncio.run(main())
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert [(w.limit, w.used, w.cap) for w in warnings] == [("max_tool_calls", 4, 5)]
    last_tool_message = [m for m in model.requests[1].messages if isinstance(m, ToolReturnMessage)][-1]
    assert last_tool_message.content.endswith(
        "Budget warning: 4 of max_tool_calls=5 calls made (80%). Spend what is left on the calls that matter most."
    )


async def test_code_mode_pays_by_cost_function_in_the_runs_ledger() -> None:
    code = """
out = []
for n in (10, 20, 30):
    try:
        out.append(call_tool("translate", {"text": "x" * n}))
    except Exception as e:
        out.append("refused")
set_result(out)
"""
    tool_ = CodeTool(SubprocessRunner(), ToolRegistry([translate]))
    invoker = ToolInvoker(tool_.registry, budget=Budget(max_cost=4))
    result, plan = await tool_.run_code({"code": code}, invoker=invoker)
    assert result.result == ["X" * 10, "X" * 20, "refused"]
    assert [s.status for s in plan.steps.values()] == ["succeeded", "succeeded", "not_run"]
    assert invoker.meter.cost == 3.0


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    costs=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12),
    max_cost=st.integers(min_value=0, max_value=20),
    max_calls=st.none() | st.integers(min_value=0, max_value=10),
    concurrency=st.integers(min_value=1, max_value=12),
)
def test_parallel_calls_never_overshoot_at_any_instant(
    costs: list[int], max_cost: int, max_calls: int | None, concurrency: int
) -> None:
    running: list[float] = []  # what the running calls cost, while they run
    seen: list[tuple[float, int]] = []  # (cost spent, calls made) observed by each call while it runs

    @tool(cost_of=lambda a: float(a["cost"]))
    async def work(cost: int) -> int:
        """Costs what it is asked to."""
        running.append(cost)
        seen.append((sum(running), len(running)))
        await asyncio.sleep(0)  # let the other dispatched calls start too
        running.remove(cost)
        return cost

    plan = {"steps": [{"id": f"w{i}", "tool": "work", "arguments": {"cost": c}} for i, c in enumerate(costs)]}
    budget = Budget(max_cost=max_cost, max_tool_calls=max_calls)
    result = asyncio.run(execute_plan(plan, [work], limits=RunLimits(budget=budget, max_concurrency=concurrency)))
    ran = [r for r in result.steps.values() if r.status == "succeeded"]
    assert sum(float(r.output) for r in ran) <= max_cost
    assert max_calls is None or len(ran) <= max_calls
    for spent, calls in seen:
        assert spent <= max_cost and (max_calls is None or calls <= max_calls)
    refused = [r for r in result.steps.values() if r.status == "not_run"]
    assert all(r.error is not None and r.error.kind == "limit" for r in refused)
    assert len(ran) + len(refused) == len(costs)


@pytest.mark.slow  # a Python process of its own
def test_the_example_runs_and_its_window_refuses_the_second_runs_email(
    tmp_path: Path, run_example: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    done = run_example("examples/budgets/budgets.py", f"sqlite:///{tmp_path / 'b.db'}")
    assert "mail1  not_run    Budget window exhausted" in done.stdout
    assert "window: 13.8 of 15 spent this hour, 1.2 left" in done.stdout


@settings(max_examples=max(5, EXAMPLES // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan_costs=st.lists(st.integers(min_value=0, max_value=4), max_size=8),
    code_costs=st.lists(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=4), max_size=3),
    max_cost=st.integers(min_value=0, max_value=16),
    window_calls=st.integers(min_value=0, max_value=12),
    per_tool=st.integers(min_value=0, max_value=10),
)
def test_a_runs_plans_and_code_share_one_ledger_and_no_limit_is_passed_at_any_instant(
    plan_costs: list[int], code_costs: list[list[int]], max_cost: int, window_calls: int, per_tool: int
) -> None:
    """One agent run's ledger and key window, charged at once by a plan and by code calling tools in parallel."""
    from toolplan.agent import PlanTool
    from toolplan.execute import MemoryWindow, WindowCharge, WindowLimits
    from toolplan.sandbox import MontyRunner

    seen: list[tuple[float, int, int]] = []  # (run's cost, run's calls, window's calls) as each call starts

    @tool(cost_of=lambda a: float(a["cost"]))
    async def work(cost: int) -> int:
        """Costs what it is asked to."""
        meter = invoker.meter
        seen.append((meter.cost, meter.calls, window._spent.get("k", (0, 0, 0.0))[1]))
        await asyncio.sleep(0)
        return cost

    registry = ToolRegistry([work])
    window = MemoryWindow(WindowLimits(period=3600, max_tool_calls=window_calls))
    budget = Budget(max_cost=max_cost, max_tool_calls_per_tool={"work": per_tool})
    invoker = ToolInvoker(registry, budget=budget, window=WindowCharge(window, "k"))
    plan = {"steps": [{"id": f"w{i}", "tool": "work", "arguments": {"cost": c}} for i, c in enumerate(plan_costs)]}
    codes = [
        "out = call_tools_parallel([" + ", ".join(f'("work", {{"cost": {c}}})' for c in costs) + "])\nset_result(1)"
        for costs in code_costs
    ]

    async def main() -> None:
        code_tool = CodeTool(MontyRunner(), registry)
        jobs: list[Any] = [code_tool.run_code({"code": code}, invoker=invoker) for code in codes]
        if plan_costs:
            jobs.append(PlanTool(registry).call(plan, invoker=invoker))
        await asyncio.gather(*jobs)

    asyncio.run(main())
    for cost, calls, in_window in seen:
        assert cost <= max_cost and calls <= per_tool and in_window <= window_calls
    assert invoker.meter.cost <= max_cost and invoker.meter.calls == len(seen)
    assert asyncio.run(window.usage("k")).calls == len(seen)
