from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from toolplan import PlanValidationError, tool
from toolplan.execute import PlanEvent, StepStarted, execute_plan_stream

state: dict[str, asyncio.Event] = {}  # a fresh event per test (events belong to one loop)


@tool
async def source(x: int) -> int:
    """The first step."""
    state["started"].set()
    return x


@tool
async def inc(x: int) -> int:
    """Add one."""
    return x + 1


PLAN = json.dumps(
    {
        "steps": [
            {"id": "a", "tool": "source", "arguments": {"x": 1}},
            {"id": "b", "tool": "inc", "arguments": {"x": "$ref:c"}},  # a forward reference: waits
            {"id": "c", "tool": "inc", "arguments": {"x": "$ref:a"}},
            {"id": "d", "tool": "inc", "arguments": {"x": 10}},
        ],
        "output_steps": ["b", "d"],
    }
)


async def pieces(text: str, *, hold_after: str, log: list[str]) -> AsyncIterator[str]:
    """Send the text in 5-character pieces; after ``hold_after`` is sent, wait for step 'a' to start."""
    cut = text.index(hold_after) + len(hold_after)
    for i in range(0, cut, 5):
        yield text[i : min(i + 5, cut)]
    await asyncio.wait_for(state["started"].wait(), timeout=5)
    log.append("rest of the plan")
    for i in range(cut, len(text), 5):
        yield text[i : i + 5]


async def test_steps_start_before_the_plan_is_complete() -> None:
    state["started"] = asyncio.Event()
    log: list[str] = []

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepStarted):
            log.append(event.step_id)

    result = await execute_plan_stream(pieces(PLAN, hold_after='{"id": "b"', log=log), [source, inc], on_event=on_event)
    assert log[:2] == ["a", "rest of the plan"]
    assert sorted(log[2:]) == ["b", "c", "d"]
    assert result.outputs == {"b": 3, "d": 11}


async def test_an_invalid_streamed_plan_cancels_what_it_started() -> None:
    state["started"] = asyncio.Event()
    never = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def hang() -> None:
        state["started"].set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append("hang")
            raise

    text = json.dumps({"steps": [{"id": "h", "tool": "hang", "arguments": {}}, {"id": "x", "tool": "nope"}]})
    with pytest.raises(PlanValidationError) as info:
        await execute_plan_stream(pieces(text, hold_after='{"id": "x"', log=[]), [hang])
    assert cancelled == ["hang"]
    assert [i.code for i in info.value.issues] == ["unknown_tool"]
