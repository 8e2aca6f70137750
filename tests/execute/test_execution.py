from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from toolplan import ToolResult, tool
from toolplan.execute import (
    PlanEvent,
    PlanFinished,
    StepFinished,
    StepRetrying,
    StepStarted,
    execute_plan,
    no_retry_backoff,
    stream_plan,
)
from toolplan.plan import Budget


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
async def echo(value: Any = None) -> Any:
    """Return the value."""
    return value


@tool
def boom(message: str = "boom") -> str:
    """Always raise."""
    raise RuntimeError(message)


@tool
def lookup(city: str) -> ToolResult:
    """A business error for unknown cities."""
    if city == "Atlantis":
        return ToolResult.failure("City 'Atlantis' not found.")
    return ToolResult({"city": city, "temp": len(city)})


BASIC = [add, echo, boom, lookup]


def ids_of(events: list[PlanEvent], kind: type[Any]) -> list[str]:
    out: list[str] = []
    for e in events:
        if isinstance(e, kind):
            out.append(e.result.id if isinstance(e, StepFinished) else e.step_id)
    return out


async def test_diamond() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 1}},
            {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
            {"id": "c", "tool": "add", "arguments": {"a": "$ref:a", "b": 100}},
            {"id": "d", "tool": "add", "arguments": {"a": "$ref:b", "b": "$ref:c"}},
        ],
        "output_steps": ["d"],
    }
    result = await execute_plan(plan, BASIC)
    assert result.status == "succeeded"
    assert result.outputs == {"d": 114}
    assert result.waves == (("a",), ("b", "c"), ("d",))
    assert result.critical_path[0] == "a" and result.critical_path[-1] == "d"


async def test_chain_and_fan_out_fan_in_and_output_selection() -> None:
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "add", "arguments": {"a": 0, "b": 1}}]
    steps += [{"id": f"s{i}", "tool": "add", "arguments": {"a": f"$ref:s{i - 1}", "b": 1}} for i in range(1, 6)]
    steps += [{"id": f"f{i}", "tool": "add", "arguments": {"a": "$ref:s5", "b": i}} for i in range(8)]
    steps.append({"id": "sum", "tool": "echo", "arguments": {"value": [f"$ref:f{i}" for i in range(8)]}})
    result = await execute_plan({"steps": steps, "output_steps": ["sum", "s5"]}, BASIC)
    assert result.outputs == {"sum": [6 + i for i in range(8)], "s5": 6}
    everything = await execute_plan({"steps": steps}, BASIC)
    assert list(everything.outputs) == [s["id"] for s in steps]


async def test_failure_skips_exactly_its_transitive_dependents() -> None:
    plan = {
        "steps": [
            {"id": "s1", "tool": "boom", "arguments": {}},
            {"id": "s2", "tool": "echo", "arguments": {"value": "$ref:s1"}},
            {"id": "s3", "tool": "echo", "arguments": {"value": "{{s2}}"}},
            {"id": "s4", "tool": "echo", "arguments": {"value": "independent"}},
            {"id": "s5", "tool": "echo", "arguments": {"value": "$ref:s4"}},
        ]
    }
    result = await execute_plan(plan, BASIC)
    assert result.status == "failed"
    status = {sid: r.status for sid, r in result.steps.items()}
    assert status == {"s1": "failed", "s2": "skipped", "s3": "skipped", "s4": "succeeded", "s5": "succeeded"}
    assert result.steps["s1"].error is not None and result.steps["s1"].error.kind == "infrastructure"
    assert "RuntimeError: boom" in result.steps["s1"].error.message
    assert result.steps["s2"].error is not None
    assert "Skipped because dependency 's1' failed" in result.steps["s2"].error.message
    assert result.outputs == {"s4": "independent", "s5": "independent"}
    summary = result.summary()
    assert summary["errors"]["s1"].startswith("failed: Tool 'boom' raised RuntimeError")
    assert summary["errors"]["s3"] == "skipped: Skipped because dependency 's2' was skipped."


async def test_business_error_fails_its_step() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "lookup", "arguments": {"city": "Atlantis"}},
            {"id": "b", "tool": "lookup", "arguments": {"city": "Paris"}},
            {"id": "c", "tool": "echo", "arguments": {"value": "$ref:a.temp"}},
        ]
    }
    result = await execute_plan(plan, BASIC)
    a = result.steps["a"]
    assert a.status == "failed" and a.error is not None
    assert (a.error.kind, a.error.message) == ("business", "City 'Atlantis' not found.")
    assert result.steps["b"].output == {"city": "Paris", "temp": 5}
    assert result.steps["c"].status == "skipped"


async def test_invalid_resolved_arguments_fail_the_step() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "arguments": {"value": "not a number"}},
            {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 1}},
        ]
    }
    result = await execute_plan(plan, BASIC)
    err = result.steps["b"].error
    assert err is not None and err.kind == "invalid_arguments"
    assert "argument 'a'" in err.message


async def test_eager_start_does_not_wait_for_a_wave() -> None:
    """A -> C with B independent and slow: C must finish while B is still running."""
    c_done = asyncio.Event()

    @tool
    async def fast(x: int) -> int:
        return x

    @tool
    async def slow_until_c(x: int) -> int:
        # Without eager scheduling C would wait for this wave to end: a deadlock, caught by the timeout.
        await asyncio.wait_for(c_done.wait(), timeout=5)
        return x

    @tool
    async def mark(x: int) -> int:
        c_done.set()
        return x

    events: list[PlanEvent] = []
    plan = {
        "steps": [
            {"id": "A", "tool": "fast", "arguments": {"x": 1}},
            {"id": "B", "tool": "slow_until_c", "arguments": {"x": 2}},
            {"id": "C", "tool": "mark", "arguments": {"x": "$ref:A"}},
        ]
    }
    result = await execute_plan(plan, [fast, slow_until_c, mark], on_event=events.append)
    assert result.status == "succeeded"
    assert ids_of(events, StepFinished) == ["A", "C", "B"]


async def test_step_timeout() -> None:
    never = asyncio.Event()

    @tool
    async def hang() -> None:
        await never.wait()

    plan = {
        "steps": [
            {"id": "h", "tool": "hang", "arguments": {}, "timeout": 0.05},
            {"id": "after", "tool": "echo", "arguments": {"value": "$ref:h"}},
            {"id": "ok", "tool": "echo", "arguments": {"value": 1}},
        ]
    }
    result = await execute_plan(plan, [hang, echo])
    h = result.steps["h"]
    assert h.status == "timed_out" and h.error is not None and h.error.kind == "timeout"
    assert "0.05s" in h.error.message
    assert result.steps["after"].status == "skipped"
    assert result.steps["ok"].status == "succeeded"


async def test_plan_deadline() -> None:
    never = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def hang() -> None:
        started.set()
        await never.wait()

    plan = {
        "steps": [
            {"id": "h", "tool": "hang", "arguments": {}},
            {"id": "next", "tool": "echo", "arguments": {"value": "$ref:h"}},
            {"id": "quick", "tool": "echo", "arguments": {"value": 1}},
        ]
    }
    result = await execute_plan(plan, [hang, echo], timeout=0.1)
    assert started.is_set()
    assert result.steps["h"].status == "timed_out"
    assert result.steps["next"].status == "not_run"
    assert result.steps["quick"].status == "succeeded"
    assert result.status == "failed"


async def test_retries_only_for_idempotent_tools() -> None:
    attempts = {"flaky": 0, "unsafe": 0}

    @tool(idempotent=True)
    def flaky() -> str:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ConnectionError("reset")
        return "ok"

    @tool
    def unsafe() -> str:
        attempts["unsafe"] += 1
        raise ConnectionError("reset")

    events: list[PlanEvent] = []
    plan = {"steps": [{"id": "f", "tool": "flaky"}, {"id": "u", "tool": "unsafe"}]}
    with no_retry_backoff():
        result = await execute_plan(plan, [flaky, unsafe], on_event=events.append)
    assert (result.steps["f"].status, result.steps["f"].attempts) == ("succeeded", 3)
    assert (result.steps["u"].status, result.steps["u"].attempts) == ("failed", 1)
    assert attempts == {"flaky": 3, "unsafe": 1}
    assert [e.attempt for e in events if isinstance(e, StepRetrying)] == [1, 2]


async def test_step_can_ask_for_retries_and_business_errors_are_not_retried() -> None:
    calls = {"n": 0}

    @tool
    def once_broken() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("slow upstream")
        return "fine"

    plan = {
        "steps": [
            {"id": "r", "tool": "once_broken", "retry": 1},
            {"id": "b", "tool": "lookup", "arguments": {"city": "Atlantis"}, "retry": 3},
        ]
    }
    with no_retry_backoff():
        result = await execute_plan(plan, [once_broken, lookup])
    assert (result.steps["r"].status, result.steps["r"].attempts) == ("succeeded", 2)
    assert (result.steps["b"].status, result.steps["b"].attempts) == ("failed", 1)


async def test_fallback_stands_in_for_the_failed_step() -> None:
    plan = {
        "steps": [
            {
                "id": "w",
                "tool": "lookup",
                "arguments": {"city": "Atlantis"},
                "fallback": {"tool": "lookup", "arguments": {"city": "Rome"}},
            },
            {"id": "use", "tool": "echo", "arguments": {"value": "$ref:w.city"}},
            {
                "id": "both",
                "tool": "boom",
                "arguments": {},
                "fallback": {"tool": "boom", "arguments": {"message": "b2"}},
            },
        ]
    }
    result = await execute_plan(plan, BASIC)
    w = result.steps["w"]
    assert (w.status, w.used_fallback, w.output, w.attempts) == ("succeeded", True, {"city": "Rome", "temp": 4}, 2)
    assert result.steps["use"].output == "Rome"
    both = result.steps["both"]
    assert both.status == "failed" and both.error is not None
    assert "RuntimeError: boom" in both.error.message and "b2" in both.error.message


async def test_per_tool_concurrency_limit() -> None:
    active = {"now": 0, "max": 0}

    async def body() -> None:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        for _ in range(3):
            await asyncio.sleep(0)
        active["now"] -= 1

    @tool(concurrency=2)
    async def limited(i: int) -> int:
        await body()
        return i

    @tool
    async def unlimited(i: int) -> int:
        await body()
        return i

    for t, expected in ((limited, 2), (unlimited, 6)):
        active["max"] = 0
        plan = {"steps": [{"id": f"s{i}", "tool": t.name, "arguments": {"i": i}} for i in range(6)]}
        result = await execute_plan(plan, [t])
        assert result.status == "succeeded"
        assert active["max"] == expected


async def test_plan_wide_concurrency_limit() -> None:
    active = {"now": 0, "max": 0}

    @tool
    async def work(i: int) -> int:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0)
        active["now"] -= 1
        return i

    plan = {"steps": [{"id": f"s{i}", "tool": "work", "arguments": {"i": i}} for i in range(10)]}
    await execute_plan(plan, [work], max_concurrency=3)
    assert active["max"] == 3
    active["max"] = 0
    await execute_plan({**plan, "max_concurrency": 2}, [work])
    assert active["max"] == 2


async def test_cancellation_reaches_running_tools_and_records_every_step() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []
    never = asyncio.Event()

    @tool
    async def hang(name: str) -> None:
        started.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    events: list[PlanEvent] = []
    plan = {
        "steps": [
            {"id": "a", "tool": "hang", "arguments": {"name": "a"}},
            {"id": "b", "tool": "hang", "arguments": {"name": "b"}},
            {"id": "c", "tool": "hang", "arguments": {"name": "$ref:a"}},
        ]
    }
    task = asyncio.create_task(execute_plan(plan, [hang], on_event=events.append))
    await started.wait()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]
    final = events[-1]
    assert isinstance(final, PlanFinished)
    assert final.result.status == "cancelled"
    assert {sid: r.status for sid, r in final.result.steps.items()} == {
        "a": "cancelled",
        "b": "cancelled",
        "c": "not_run",
    }


async def test_fail_fast_stops_starting_and_cancels_running() -> None:
    never = asyncio.Event()
    running = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def hang() -> None:
        running.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append("hang")
            raise

    @tool
    async def fail_after_hang_started() -> None:
        await running.wait()
        raise RuntimeError("first failure")

    plan = {
        "steps": [
            {"id": "h", "tool": "hang"},
            {"id": "f", "tool": "fail_after_hang_started"},
            {"id": "queued", "tool": "echo", "arguments": {"value": 1}},
            {"id": "dep", "tool": "echo", "arguments": {"value": "$ref:f"}},
        ]
    }
    result = await execute_plan(
        plan, [hang, fail_after_hang_started, echo], failure_mode="fail_fast", max_concurrency=2
    )
    status = {sid: r.status for sid, r in result.steps.items()}
    assert status == {"h": "cancelled", "f": "failed", "queued": "not_run", "dep": "skipped"}
    assert cancelled == ["hang"]
    assert result.steps["queued"].error is not None
    assert "fail_fast" in result.steps["queued"].error.message


async def test_budget_max_tool_calls_leaves_steps_not_run() -> None:
    plan = {
        "steps": [{"id": f"s{i}", "tool": "echo", "arguments": {"value": i}} for i in range(5)],
        "budget": {"max_tool_calls": 3},
    }
    result = await execute_plan(plan, BASIC, max_concurrency=1)
    assert [r.status for r in result.steps.values()] == ["succeeded"] * 3 + ["not_run"] * 2
    err = result.steps["s4"].error
    assert err is not None and err.kind == "limit" and "max_tool_calls=3" in err.message
    tighter = await execute_plan(plan, BASIC, max_concurrency=1, budget=Budget(max_tool_calls=1))
    assert [r.status for r in tighter.steps.values()].count("succeeded") == 1


async def test_budget_max_cost() -> None:
    @tool(cost=2.5)
    def pricey(i: int) -> int:
        return i

    plan = {"steps": [{"id": f"p{i}", "tool": "pricey", "arguments": {"i": i}} for i in range(3)]}
    result = await execute_plan(plan, [pricey], budget=Budget(max_cost=5), max_concurrency=1)
    assert [r.status for r in result.steps.values()] == ["succeeded", "succeeded", "not_run"]


async def test_sync_tools_run_off_the_event_loop() -> None:
    import threading

    loop_thread = threading.get_ident()

    @tool
    def where() -> bool:
        return threading.get_ident() != loop_thread

    result = await execute_plan({"steps": [{"id": "w", "tool": "where"}]}, [where])
    assert result.outputs == {"w": True}


async def test_events_order_and_stream() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
            {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 2}},
        ]
    }
    kinds: list[str] = []
    async with stream_plan(plan, BASIC) as events:
        async for event in events:
            kinds.append(event.kind)
    assert kinds == [
        "plan_started",
        "step_started",
        "step_finished",
        "step_started",
        "step_finished",
        "plan_finished",
    ]
    assert events.result is not None and events.result.outputs == {"a": 3, "b": 5}


async def test_stream_plan_raises_validation_errors_on_entry() -> None:
    from toolplan import PlanValidationError

    with pytest.raises(PlanValidationError):
        async with stream_plan({"steps": [{"id": "a", "tool": "nope"}]}, BASIC):
            pytest.fail("must not enter")


async def test_model_summary_caps_long_values() -> None:
    plan = {"steps": [{"id": "big", "tool": "echo", "arguments": {"value": "x" * 10_000 + "END"}}]}
    result = await execute_plan(plan, BASIC)
    text = result.summary(max_value_chars=200)["outputs"]["big"]
    assert len(text) < 300
    assert text.startswith("xxx") and text.endswith("END")
    assert "chars cut]" in text
    assert result.outputs["big"].endswith("END")  # the full value stays in the result


def test_started_events_have_attempts() -> None:
    events: list[PlanEvent] = []
    from toolplan.execute import execute_plan_sync

    execute_plan_sync({"steps": [{"id": "a", "tool": "echo"}]}, BASIC, on_event=events.append)
    assert [e.attempt for e in events if isinstance(e, StepStarted)] == [1]


async def test_cancelled_running_steps_report_their_attempts() -> None:
    never = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def hang() -> None:
        started.set()
        await never.wait()

    @tool
    async def fail_when_hang_runs() -> None:
        await started.wait()
        raise RuntimeError("x")

    plan = {"steps": [{"id": "h", "tool": "hang"}, {"id": "f", "tool": "fail_when_hang_runs"}]}
    result = await execute_plan(plan, [hang, fail_when_hang_runs], failure_mode="fail_fast")
    assert (result.steps["h"].status, result.steps["h"].attempts) == ("cancelled", 1)
    timed = await execute_plan({"steps": [{"id": "h", "tool": "hang"}]}, [hang], timeout=0.05)
    assert (timed.steps["h"].status, timed.steps["h"].attempts) == ("timed_out", 1)


async def test_testing_switch_disables_tool_retry_backoff() -> None:
    from toolplan.testing import disable_retry_backoff

    events: list[PlanEvent] = []
    calls = {"n": 0}

    @tool(idempotent=True)
    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("reset")
        return "ok"

    with disable_retry_backoff():
        result = await execute_plan({"steps": [{"id": "f", "tool": "flaky"}]}, [flaky], on_event=events.append)
    assert result.steps["f"].attempts == 3
    assert [e.delay for e in events if isinstance(e, StepRetrying)] == [0.0, 0.0]


async def test_errors_inside_stream_plan_blocks_are_not_wrapped() -> None:
    plan = {"steps": [{"id": "a", "tool": "echo", "arguments": {"value": 1}}]}
    with pytest.raises(KeyError):
        async with stream_plan(plan, BASIC):
            raise KeyError("user code")


async def test_a_long_chain_run_inline_still_lets_the_deadline_fire() -> None:
    """Dependent steps run inline in one task; it must still yield so that a deadline can stop it."""

    @tool
    async def spin(x: int) -> int:
        return x + 1  # never suspends: without periodic yields the whole chain would run in one go

    steps = [{"id": "s0", "tool": "spin", "arguments": {"x": 0}}]
    steps += [{"id": f"s{i}", "tool": "spin", "arguments": {"x": f"$ref:s{i - 1}"}} for i in range(1, 3000)]
    result = await execute_plan({"steps": steps}, [spin], max_steps=3000, timeout=0.005)
    statuses = [r.status for r in result.steps.values()]
    assert statuses[-1] == "not_run" and 0 < statuses.count("succeeded") < 3000


async def test_waiting_for_a_concurrency_slot_does_not_count_toward_the_timeout() -> None:
    from toolplan.execute import ToolInvoker
    from toolplan.tools import ToolRegistry

    gate = asyncio.Event()

    @tool(concurrency=1)
    async def slot(hold: bool) -> str:
        """Hold the tool's only slot until the gate opens."""
        if hold:
            await gate.wait()
        await asyncio.sleep(0)  # one suspension: where an already expired timeout would strike
        return "done"

    invoker = ToolInvoker(ToolRegistry([slot]))
    holder = asyncio.create_task(invoker.call("slot", {"hold": True}, timeout=30))
    waiter = asyncio.create_task(invoker.call("slot", {"hold": False}, timeout=0.05))
    await asyncio.sleep(0.2)  # the waiter has waited for the slot far longer than its timeout
    assert not waiter.done()
    gate.set()
    assert (await holder).ok
    outcome = await waiter
    assert outcome.ok and outcome.output == "done", outcome.error  # its 0.05 s start once it runs


async def test_a_tool_error_that_is_also_a_timeout_error_is_a_business_error() -> None:
    from toolplan import ToolError

    class LateError(ToolError, TimeoutError):
        pass

    @tool(idempotent=True)
    def late() -> str:
        """Fail with an error that is both."""
        raise LateError("The record is locked.")

    result = await execute_plan({"steps": [{"id": "s", "tool": "late"}]}, [late])
    step = result.steps["s"]
    assert (step.status, step.error and step.error.kind, step.attempts) == ("failed", "business", 1)


async def test_steps_that_wait_on_io_all_run_at_once() -> None:
    """Steps share a worker only while their tools return at once; waiting ones each get a task."""
    width = 200
    everyone_started = asyncio.Event()
    started = 0

    @tool
    async def rendezvous(i: int) -> int:
        nonlocal started
        started += 1
        if started == width:
            everyone_started.set()
        await everyone_started.wait()  # deadlocks unless all `width` steps are running together
        return i

    steps = [{"id": f"s{i}", "tool": "rendezvous", "arguments": {"i": i}} for i in range(width)]
    async with asyncio.timeout(10):
        result = await execute_plan({"steps": steps}, [rendezvous], max_steps=width, max_concurrency=width)
    assert result.ok and started == width


async def test_steps_whose_tools_return_at_once_share_a_few_tasks() -> None:
    tasks: set[asyncio.Task[Any]] = set()

    @tool
    async def note(i: int) -> int:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        return i

    n = 1_000
    steps = [{"id": "root", "tool": "note", "arguments": {"i": 0}}]
    steps += [{"id": f"s{i}", "tool": "note", "arguments": {"i": "$ref:root"}} for i in range(n - 1)]
    result = await execute_plan({"steps": steps}, [note], max_steps=n, max_concurrency=n)
    assert result.ok and [r.output for r in result.steps.values()] == [0] * n
    assert tasks == {asyncio.current_task()}  # the caller's task did all the work, not a task per step


async def test_a_deadline_while_steps_wait_for_workers_starts_nothing_more() -> None:
    never = asyncio.Event()
    loop_errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))

    @tool
    async def busy_then_hang(i: int) -> int:
        """Hold the event loop for 1 ms (so the deadline passes while workers are still being added)."""
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
        await never.wait()
        return i

    steps = [{"id": f"s{i}", "tool": "busy_then_hang", "arguments": {"i": i}} for i in range(300)]
    try:
        result = await execute_plan(
            {"steps": steps}, [busy_then_hang], max_steps=300, max_concurrency=300, timeout=0.01
        )
    finally:
        loop.set_exception_handler(None)
    statuses = {r.status for r in result.steps.values()}
    assert statuses <= {"timed_out", "not_run"} and "timed_out" in statuses
    assert loop_errors == []


async def test_cancelling_the_run_is_not_lost_when_the_plan_cancels_a_step_of_its_own() -> None:
    """The caller's task runs steps too: a fail_fast cancel of its step must not swallow the caller's."""
    hanging = asyncio.Event()
    outer: asyncio.Task[Any] | None = None

    @tool
    async def hang() -> None:
        hanging.set()
        await asyncio.Event().wait()

    @tool
    async def fail_and_cancel_the_run() -> None:
        await hanging.wait()
        assert outer is not None
        outer.cancel()  # the caller cancels the run while this step fails (and fail_fast cancels `hang`)
        raise RuntimeError("boom")

    plan = {
        "steps": [{"id": "h", "tool": "hang"}, {"id": "f", "tool": "fail_and_cancel_the_run"}],
        "failure_mode": "fail_fast",
    }
    outer = asyncio.create_task(execute_plan(plan, [hang, fail_and_cancel_the_run]))
    with pytest.raises(asyncio.CancelledError):
        await outer


class _Interrupt(BaseException):
    """Stands for KeyboardInterrupt or SystemExit raised inside a tool."""


async def test_a_base_exception_in_a_tool_propagates_and_starts_no_more_workers() -> None:
    # The caller's task runs `first` itself and `hang` gets a worker of its own. When `first`
    # returns, `a` and `b` become ready together: the caller's task goes on with `a` and a worker
    # for `b` is due at the event loop's next turn. `a` raises a BaseException, which ends the run
    # while `hang` is being cancelled, so that turn comes: it must not try to start `b`.
    hang_started = asyncio.Event()
    loop_errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))

    @tool
    async def first() -> int:
        await hang_started.wait()
        return 1

    @tool
    async def hang() -> None:
        hang_started.set()
        await asyncio.Event().wait()

    @tool
    async def interrupt(x: int) -> int:
        raise _Interrupt

    @tool
    async def after(x: int) -> int:
        return x

    plan = {
        "steps": [
            {"id": "first", "tool": "first"},
            {"id": "hang", "tool": "hang"},
            {"id": "a", "tool": "interrupt", "arguments": {"x": "$ref:first"}},
            {"id": "b", "tool": "after", "arguments": {"x": "$ref:first"}},
        ]
    }
    try:
        with pytest.raises(BaseExceptionGroup) as raised:  # asyncio's TaskGroup wraps it
            await execute_plan(plan, [first, hang, interrupt, after])
    finally:
        loop.set_exception_handler(None)
    assert [type(e) for e in raised.value.exceptions] == [_Interrupt]
    assert loop_errors == []


async def test_a_long_chain_keeps_few_objects_for_the_garbage_collector() -> None:
    # Each object the collector tracks that is still alive counts towards its next collection; at
    # 14 per step, a 10,000-step plan made CPython 3.11 start a full collection of the process heap
    # during the run (docs/benchmarks.md, "Garbage collection at 10,000 steps"). Counted with the
    # collector off, from before validation to the last step: the step, its compiled form, its
    # arguments (4 tuples, the dependency ids among them), its result and the tool's arguments.
    import gc

    n = 1_000
    seen: list[int] = []

    @tool
    async def link(deps: list[Any]) -> int:
        """One link of the chain."""
        return 1

    @tool
    async def last(deps: list[Any]) -> int:
        """The last link: counts the collector's objects."""
        seen.append(gc.get_count()[0])
        return 1

    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "link", "arguments": {"deps": []}}]
    steps += [{"id": f"s{i}", "tool": "link", "arguments": {"deps": [f"$ref:s{i - 1}"]}} for i in range(1, n)]
    steps.append({"id": "end", "tool": "last", "arguments": {"deps": [f"$ref:s{n - 1}"]}})
    plan = {"steps": steps}
    await execute_plan(plan, [link, last], max_steps=n + 1)  # warm-up: caches, first-call objects
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        result = await execute_plan(plan, [link, last], max_steps=n + 1)
    finally:
        gc.enable()
    assert result.ok
    per_step = (seen[-1] - before) / n
    assert 8 <= per_step < 9.2, per_step  # the lower bound checks that the count works
