"""Sync tools whose threads outlive their calls: a late failure never escapes, cancellation is cooperative."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from toolplan import current_call, execute_plan_sync, tool
from toolplan.execute import PlanEvent, PlanFinished, PlanResult, StepRetrying, execute_plan


def test_a_timed_out_read_whose_thread_fails_later_does_not_crash_the_run() -> None:
    # Each attempt blocks until the run moves on from it (its retry starts), then raises: the
    # failure arrives while the retry waits for that thread, or after the run has ended.
    gates = {attempt: threading.Event() for attempt in (1, 2, 3)}

    @tool(idempotent=True, read_only=True, timeout=0.05)
    def read() -> str:
        """A read that times out and then fails in its thread."""
        gate = gates[current_call().attempt]
        gate.wait(5)
        raise ValueError("late failure")

    @tool
    def other() -> str:
        """An independent step."""
        return "fine"

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepRetrying):
            gates[event.attempt].set()  # the attempt that just timed out now fails in its thread

    plan = {"steps": [{"id": "r", "tool": "read", "arguments": {}}, {"id": "o", "tool": "other", "arguments": {}}]}
    try:
        result = execute_plan_sync(plan, [read, other], retry_delay=0, on_event=on_event)
    finally:
        gates[3].set()
    assert result.status == "failed" and result.steps["o"].output == "fine"
    step = result.steps["r"]
    assert step.status == "timed_out" and step.attempts == 3
    assert step.error is not None and step.error.kind == "timeout" and "late failure" not in step.error.message


def test_a_sync_tool_sees_that_its_timed_out_call_was_given_up() -> None:
    stopped = threading.Event()

    @tool(timeout=0.05)
    def poll() -> str:
        """Work in small units until told to stop."""
        assert not current_call().cancelled
        for _ in range(500):
            if current_call().cancelled:
                stopped.set()
                return "stopped"
            time.sleep(0.01)
        return "never told"

    result = execute_plan_sync({"steps": [{"id": "p", "tool": "poll", "arguments": {}}]}, [poll])
    assert result.steps["p"].status == "timed_out"
    assert stopped.wait(5)


async def test_a_cancelled_run_says_which_sync_tools_still_run() -> None:
    entered, gate, told = threading.Event(), threading.Event(), threading.Event()

    @tool
    def stubborn() -> str:
        """Block until released, noting whether it was told to stop."""
        entered.set()
        gate.wait(5)
        if current_call().cancelled:
            told.set()
        return "late"

    @tool
    async def quick() -> str:
        """An async step, cancelled at its await."""
        await asyncio.sleep(5)
        return "never"

    finished: list[PlanFinished] = []
    plan = {"steps": [{"id": "s", "tool": "stubborn", "arguments": {}}, {"id": "q", "tool": "quick", "arguments": {}}]}
    run = asyncio.ensure_future(
        execute_plan(
            plan, [stubborn, quick], on_event=lambda e: finished.append(e) if isinstance(e, PlanFinished) else None
        )
    )
    assert await asyncio.to_thread(entered.wait, 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    (event,) = finished
    result = event.result
    assert result.status == "cancelled" and running(result) == ("s",)
    stuck, cancelled = result.steps["s"], result.steps["q"]
    assert stuck.status == cancelled.status == "cancelled"
    assert stuck.error is not None and "still running in a worker thread" in stuck.error.message
    assert cancelled.error is not None and "worker thread" not in cancelled.error.message
    gate.set()
    assert await asyncio.to_thread(told.wait, 5)
    for _ in range(500):
        if not running(result):
            break
        await asyncio.sleep(0.01)
    assert running(result) == ()


def running(result: PlanResult) -> tuple[str, ...]:
    """``result.still_running`` as of now (a function: the type checker would take it for a constant)."""
    return result.still_running
