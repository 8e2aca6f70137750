"""The engine keeps its promises in less-trodden modes: each test failed before the fix."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

from toolplan import CallContext, RunLimits, ToolResult, UserError, current_call, tool
from toolplan.execute import (
    Backend,
    InProcessBackend,
    execute_plan,
    execute_plan_stream,
    no_retry_backoff,
)
from toolplan.plan import Budget
from toolplan.tools import Tool, ToolDefinition

# -- 1. fail_fast never crashes, every step gets one record -------------------------------------


async def test_fail_fast_when_a_step_fails_in_the_turn_its_siblings_were_started() -> None:
    @tool
    async def first() -> int:
        await asyncio.sleep(0)
        raise RuntimeError("first failed")

    @tool
    async def other(n: int = 0) -> int:
        await asyncio.sleep(0)
        return n

    plan = {
        "tools": [
            {"name": "first", "parameters": {}},
            {"name": "other", "parameters": {"n": 1}},
            {"name": "other", "parameters": {"n": 2}},
        ]
    }  # chaining: fail_fast by default
    result = await execute_plan(plan, [first, other])
    assert set(result.steps) == {"first", "other", "other_2"}
    assert result.steps["first"].status == "failed"
    assert {r.status for r in result.steps.values()} <= {"failed", "cancelled", "not_run", "succeeded"}
    assert result.status == "failed"


async def test_fail_fast_records_steps_whose_tasks_never_started() -> None:
    gate = asyncio.Event()

    @tool
    async def fails() -> int:
        raise RuntimeError("no")

    @tool
    async def waits(i: int) -> int:
        await gate.wait()
        return i

    steps = [{"id": "bad", "tool": "fails", "arguments": {}}]
    steps += [{"id": f"w{i}", "tool": "waits", "arguments": {"i": i}} for i in range(5)]
    result = await execute_plan({"steps": steps, "failure_mode": "fail_fast"}, [fails, waits])
    assert len(result.steps) == 6
    assert result.steps["bad"].status == "failed"
    assert all(result.steps[f"w{i}"].status in ("cancelled", "not_run") for i in range(5))


# -- 2. a step whose arguments cannot be built fails; the run goes on ---------------------------


class _Raw(Tool):
    """A custom tool whose output is whatever the test sets (a self-referencing dict, deep text...)."""

    def __init__(self, output: Any) -> None:
        self.output = output

    def definitions(self) -> Sequence[ToolDefinition]:
        return (
            ToolDefinition(name="raw", description="Return a raw value.", parameters_json_schema={"type": "object"}),
        )

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(self.output)


@tool
def take(x: Any = None) -> str:
    """Take anything."""
    return "took"


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    ("output", "argument"),
    [
        ("[" * 1000 + "]" * 1000, "$ref:page.0"),
        (10**5000, "number {{page}}"),
        (_cyclic(), "text {{page}}"),
    ],
    ids=["deep-json-text", "huge-int", "cyclic"],
)
async def test_a_hostile_output_fails_its_dependents_not_the_run(output: Any, argument: str) -> None:
    plan = {
        "steps": [
            {"id": "page", "tool": "raw", "arguments": {}},
            {"id": "use", "tool": "take", "arguments": {"x": argument}},
            {"id": "after", "tool": "take", "arguments": {"x": "$ref:use"}},
            {"id": "sibling", "tool": "take", "arguments": {}},
        ]
    }
    result = await execute_plan(plan, [_Raw(output), take])
    use = result.steps["use"]
    assert use.status == "failed" and use.error is not None and use.error.kind == "reference"
    assert "could not be built" in use.error.message
    assert result.steps["after"].status == "skipped"
    assert result.steps["sibling"].status == "succeeded"
    json.loads(result.to_model_text())


# -- 5. a plan's own budget holds inside an agent ------------------------------------------------


async def test_a_plans_own_budget_holds_inside_an_agent() -> None:
    from toolplan import Agent
    from toolplan.models import AssistantMessage, ToolCall
    from toolplan.testing import ScriptedModel

    calls: list[int] = []

    @tool
    def step(i: int) -> int:
        """Count a call."""
        calls.append(i)
        return i

    plan = {
        "steps": [{"id": f"s{i}", "tool": "step", "arguments": {"i": i}} for i in range(3)],
        "budget": {"max_tool_calls": 1},
    }
    later = AssistantMessage(tool_calls=(ToolCall(id="2", name="step", arguments='{"i": 9}'),))
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name="execute_tool_plan", arguments=json.dumps(plan)),)),
            later,
            "done",
        ]
    )
    result = await Agent(model, tools=[step], tool_planning=True, max_concurrent_tools=1).run("go")
    statuses = [r.status for r in result.plan_results[0].steps.values()]
    assert statuses == ["succeeded", "not_run", "not_run"]
    # The plan's budget binds that plan only: a later direct call runs.
    assert calls == [0, 9]


async def test_the_agents_budget_counts_calls_of_plans_and_direct_calls_together() -> None:
    from toolplan import Agent
    from toolplan.models import AssistantMessage, ToolCall
    from toolplan.testing import ScriptedModel

    @tool
    def step(i: int) -> int:
        """Echo."""
        return i

    plan = {"steps": [{"id": f"s{i}", "tool": "step", "arguments": {"i": i}} for i in range(3)]}
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name="step", arguments='{"i": 0}'),)),
            AssistantMessage(tool_calls=(ToolCall(id="2", name="execute_tool_plan", arguments=json.dumps(plan)),)),
            "done",
        ]
    )
    agent = Agent(model, tools=[step], tool_planning=True, budget=Budget(max_tool_calls=2), max_concurrent_tools=1)
    result = await agent.run("go")
    assert [r.status for r in result.plan_results[0].steps.values()] == ["succeeded", "not_run", "not_run"]


# -- 6. streamed plans apply the plan's own limits ----------------------------------------------


async def _pieces(text: str, size: int = 7) -> AsyncIterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]
        await asyncio.sleep(0)


async def test_a_streamed_plan_keeps_its_max_concurrency() -> None:
    running = peak = 0

    @tool
    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await asyncio.sleep(0)
        running -= 1
        return i

    plan = {"max_concurrency": 1, "steps": [{"id": f"s{i}", "tool": "work", "arguments": {"i": i}} for i in range(6)]}
    result = await execute_plan_stream(_pieces(json.dumps(plan)), [work])
    assert result.ok and peak == 1


async def test_a_streamed_plan_keeps_its_failure_mode_and_budget() -> None:
    ran: list[int] = []

    @tool
    async def work(i: int) -> int:
        ran.append(i)
        await asyncio.sleep(0)
        if i == 0:
            raise RuntimeError("first fails")
        return i

    plan = {
        "failure_mode": "fail_fast",
        "budget": {"max_tool_calls": 3},
        "max_concurrency": 1,
        "steps": [{"id": f"s{i}", "tool": "work", "arguments": {"i": i}} for i in range(5)],
    }
    result = await execute_plan_stream(_pieces(json.dumps(plan)), [work])
    assert ran == [0]  # fail_fast: nothing starts after the first failure
    assert result.steps["s0"].status == "failed"

    ran.clear()
    plan["failure_mode"] = "fail_forward"
    result = await execute_plan_stream(_pieces(json.dumps(plan)), [work])
    assert ran == [0, 1, 2]  # the budget of 3 calls, applied from the moment it arrived
    assert [r.status for r in result.steps.values()][3:] == ["not_run", "not_run"]


# -- 7. an agent run's max_latency is one deadline for the whole run, code included -------------


async def test_the_agent_runs_deadline_spans_turns() -> None:
    from toolplan import Agent
    from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
    from toolplan.testing import ScriptedModel

    never = asyncio.Event()

    @tool
    async def hang() -> str:
        """Wait forever."""
        await never.wait()
        return "never"

    @tool
    def quick() -> str:
        """Return at once."""
        return "quick"

    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="1", name="hang", arguments="{}"),)),
            AssistantMessage(tool_calls=(ToolCall(id="2", name="quick", arguments="{}"),)),
            "done",
        ]
    )
    agent = Agent(model, tools=[hang, quick], budget=Budget(max_latency=0.2), on_limit="return")
    result = await agent.run("go")
    replies = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert "deadline" in replies[0].content  # the first call ran into the run's deadline
    assert replies[1].is_error and "Not started" in replies[1].content  # the second turn has no time left


class _CallsTwice:
    """A code runner that makes two tool calls, as model code would, and reports what it saw."""

    name = "fake"

    def __init__(self) -> None:
        self.wall_time: float | None = None
        self.errors: list[str] = []

    def describe(self) -> str:
        return "fake"

    async def run(self, code: str, *, call_tool: Any, limits: Any = None) -> Any:
        from toolplan import ToolError
        from toolplan.sandbox import CodeResult

        self.wall_time = None if limits is None else limits.wall_time
        for name in ("hang", "quick"):
            try:
                await call_tool(name, {})
            except ToolError as exc:
                self.errors.append(exc.message)
        return CodeResult()


async def test_code_mode_calls_share_the_agent_runs_deadline() -> None:
    import time

    from toolplan import ToolError
    from toolplan.agent._code import CodeTool
    from toolplan.execute import ToolInvoker
    from toolplan.tools import ToolRegistry

    never = asyncio.Event()

    @tool
    async def hang() -> str:
        """Wait forever."""
        await never.wait()
        return "never"

    @tool
    def quick() -> str:
        """Return at once."""
        return "quick"

    registry = ToolRegistry([hang, quick])
    runner = _CallsTwice()
    code = CodeTool(runner, registry)
    invoker = ToolInvoker(registry)
    # The deadline must leave time for the first call to start even on a loaded machine (with 0.2 s,
    # a CI machine under load 9 once passed it before the call began, so that call ended not_run).
    _, plan = await code.run_code({"code": "x"}, invoker=invoker, expires=time.monotonic() + 1.0)
    assert runner.wall_time is not None and runner.wall_time <= 1.0  # the code's own time is cut too
    assert "deadline" in runner.errors[0] and runner.errors[1].startswith("Not started")
    assert [r.status for r in plan.steps.values()] == ["timed_out", "not_run"]
    with pytest.raises(ToolError, match="deadline has passed"):
        await code.run_code({"code": "x"}, invoker=invoker, expires=time.monotonic() - 1)


# -- 8. sync tools: an abandoned thread keeps its limits until it ends --------------------------


async def test_a_timed_out_sync_tool_keeps_its_concurrency_slot_until_its_thread_ends() -> None:
    # The second call lets the first go when it enters: if it could start while the first call's
    # thread still ran (the defect), both are inside at once. With the fix, the first thread gives
    # up waiting, ends, and only then does the second call start.
    release = threading.Event()
    inside = peak = 0
    lock = threading.Lock()

    @tool(concurrency=1, timeout=0.05)
    def blocking(i: int) -> int:
        """Block (the first call) until the next call enters."""
        nonlocal inside, peak
        with lock:
            inside += 1
            peak = max(peak, inside)
        if i == 0:
            release.wait(0.5)
        else:
            release.set()
        with lock:
            inside -= 1
        return i

    plan = {"steps": [{"id": f"s{i}", "tool": "blocking", "arguments": {"i": i}} for i in range(3)]}
    result = await execute_plan(plan, [blocking])
    assert peak == 1
    first = result.steps["s0"]
    assert first.status == "timed_out" and first.error is not None
    assert "still running in its worker thread" in first.error.message
    assert "was cancelled" not in first.error.message
    assert result.steps["s1"].ok and result.steps["s2"].ok


async def test_a_retry_does_not_overlap_the_attempt_it_replaces() -> None:
    release = threading.Event()
    active = peak = attempts = 0
    lock = threading.Lock()

    @tool(timeout=0.05, retry=1, idempotent=True)
    def slow() -> str:
        """Block the first time until the retry enters."""
        nonlocal active, peak, attempts
        with lock:
            attempts += 1
            first = attempts == 1
            active += 1
            peak = max(peak, active)
        if first:
            release.wait(0.5)
        else:
            release.set()
        with lock:
            active -= 1
        return "ok"

    with no_retry_backoff():
        result = await execute_plan({"steps": [{"id": "s", "tool": "slow", "arguments": {}}]}, [slow])
    assert peak == 1 and result.steps["s"].ok and result.steps["s"].attempts == 2


# -- 9. SystemExit from a tool fails the step ----------------------------------------------------


@tool
def exits_sync() -> str:
    """Exit, as argparse does on bad input."""
    raise SystemExit(2)


@tool
async def exits_async() -> str:
    """Exit from a coroutine."""
    raise SystemExit("bye")


async def test_system_exit_from_a_tool_fails_the_step() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "exits_sync", "arguments": {}},
            {"id": "b", "tool": "exits_async", "arguments": {}},
        ]
    }
    result = await execute_plan(plan, [exits_sync, exits_async])
    for sid in ("a", "b"):
        error = result.steps[sid].error
        assert error is not None and error.kind == "infrastructure" and "SystemExit" in error.message


# -- the call context, the limits object and the backend seam -----------------------------------


async def test_a_tool_sees_its_call_context_with_a_stable_idempotency_key() -> None:
    seen: list[CallContext] = []

    @tool(retry=2, idempotent=True)
    async def flaky() -> str:
        """Fail twice, then succeed."""
        seen.append(current_call())
        if len(seen) < 3:
            raise RuntimeError("transient")
        return "ok"

    with no_retry_backoff():
        result = await execute_plan({"steps": [{"id": "pay", "tool": "flaky", "arguments": {}}]}, [flaky], timeout=30)
    assert result.ok
    assert [c.attempt for c in seen] == [1, 2, 3]
    assert {c.idempotency_key for c in seen} == {f"{result.run_id}:pay"}
    assert all(c.step_id == "pay" and c.tool == "flaky" for c in seen)
    assert all(c.deadline is not None and (c.remaining() or 0) > 0 for c in seen)


def test_current_call_outside_a_tool_call_says_what_to_do() -> None:
    with pytest.raises(UserError, match="outside a tool call"):
        current_call()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": True}, "max_concurrency"),
        ({"deadline": float("nan")}, "deadline"),
        ({"step_timeout": -1.0}, "step_timeout"),
        ({"budget": Budget(max_cost=float("nan"))}, "budget.max_cost"),
        ({"budget": Budget(max_latency=float("inf"))}, "budget.max_latency"),
        ({"max_steps": -(10**5000)}, "max_steps"),  # its message must not print 5,000 digits
        ({"deadline": 10**5000}, "deadline"),  # too big for a float
    ],
)
def test_run_limits_refuse_bad_values_naming_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError, match=field.replace(".", r"\.")):
        RunLimits(**options)


async def test_execute_plan_refuses_a_bad_option_before_running_anything() -> None:
    ran: list[str] = []

    @tool
    def t() -> str:
        """Run."""
        ran.append("t")
        return "t"

    with pytest.raises(UserError, match="deadline"):
        await execute_plan({"steps": [{"id": "a", "tool": "t", "arguments": {}}]}, [t], timeout=float("nan"))
    assert ran == []


async def test_a_plans_limits_merge_with_the_callers_the_tighter_wins() -> None:
    limits = RunLimits(max_concurrency=4, budget=Budget(max_tool_calls=5))
    running = peak = 0

    @tool
    async def w(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        running -= 1
        return i

    plan = {
        "steps": [{"id": f"s{i}", "tool": "w", "arguments": {"i": i}} for i in range(8)],
        "max_concurrency": 10,
        "budget": {"max_tool_calls": 6},
    }
    result = await execute_plan(plan, [w], limits=limits)
    assert peak <= 4
    assert sum(r.ok for r in result.steps.values()) == 5


class _RecordingBackend:
    """A backend that runs calls in process and records them (what a distributed backend plugs into)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.inner = InProcessBackend()

    async def invoke(self, tool: Tool, name: str, arguments: Mapping[str, Any], call: CallContext) -> ToolResult:
        self.calls.append((name, dict(arguments), call.idempotency_key))
        return await self.inner.invoke(tool, name, arguments, call)


async def test_tool_calls_go_through_the_backend_seam() -> None:
    @tool
    def double(n: int) -> int:
        """Double."""
        assert current_call().step_id in ("a", "b")
        return 2 * n

    backend = _RecordingBackend()
    assert isinstance(backend, Backend)
    plan = {
        "steps": [
            {"id": "a", "tool": "double", "arguments": {"n": 2}},
            {"id": "b", "tool": "double", "arguments": {"n": "$ref:a"}},
        ]
    }
    result = await execute_plan(plan, [double], backend=backend)
    assert result.outputs == {"a": 4, "b": 8}
    assert [(n, a) for n, a, _ in backend.calls] == [("double", {"n": 2}), ("double", {"n": 4})]
    assert backend.calls[0][2] == f"{result.run_id}:a"


def test_a_tool_name_with_a_trailing_newline_is_refused() -> None:
    def f() -> str:
        return "x"

    with pytest.raises(UserError):
        tool(name="get\n")(f)


def test_a_finished_run_leaves_nothing_for_the_cycle_collector() -> None:
    # Reference cycles (a bound method kept by the object it belongs to) hold every record of a run
    # until the garbage collector runs: many small plans then pay for full collections.
    import gc

    @tool
    async def hop(x: int = 0) -> int:
        """Return x."""
        return x

    plan = {
        "steps": [{"id": f"s{i}", "tool": "hop", "arguments": {"x": f"$ref:s{i - 1}"} if i else {}} for i in range(5)]
    }

    async def runs() -> None:
        for _ in range(3):
            await execute_plan(plan, [hop])
            await execute_plan_stream(_pieces(json.dumps(plan)), [hop])

    asyncio.run(runs())  # warm up: first-use caches
    gc.collect()
    gc.disable()
    try:
        asyncio.run(runs())
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0
