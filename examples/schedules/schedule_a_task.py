"""Schedule a task in plain words; at its time the planner makes it a plan, which runs:
python examples/schedules/schedule_a_task.py

A scripted model stands in for a real one here; with a real one, pass "openai:gpt-4o-mini" (or
another "provider:name") to Planner, or run `toolplan scheduler --model openai:gpt-4o-mini ...`.
"""

import asyncio
import json
import tempfile
import time
from pathlib import Path

from toolplan import tool
from toolplan.models import AssistantMessage, ToolCall
from toolplan.planner import SUBMIT_TOOL_NAME, Planner
from toolplan.schedules import Scheduler, ScheduleTools
from toolplan.store import open_store, resume
from toolplan.testing import ScriptedModel


@tool(read_only=True)
def count_orders(day: str) -> int:
    """Count the orders of a day."""
    return 42


# What the model answers when asked the task: a plan, submitted with the planner's submit_plan tool.
PLAN = {"steps": [{"id": "n", "tool": "count_orders", "arguments": {"day": "yesterday"}}]}
MODEL = ScriptedModel(
    [AssistantMessage(tool_calls=(ToolCall(id="p1", name=SUBMIT_TOOL_NAME, arguments=json.dumps(PLAN)),))]
)


class Clock:
    """Wall-clock seconds that this example moves by hand (the scheduler takes any clock)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def main() -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{Path(tmp) / 'runs.db'}") as store:
            planner = Planner(MODEL, [count_orders], store=store)  # keeps each firing's plan in the store
            tools = ScheduleTools(store, [count_orders], clock=clock, planner=planner)
            made = await tools.schedule_create("orders", when="every 1d", task="How many orders came in yesterday?")
            print("scheduled", made["schedule_id"], "task:", made["task"])

            scheduler = Scheduler(store, clock=clock, planner=planner)
            clock.now += 86400  # a day later
            (firing,) = await scheduler.tick()  # the model is asked the task; its plan is queued as a durable run
            print("fired", firing.run_id, "error:", firing.error)

            run_id = await store.claim_next()  # what `toolplan runs work` or the service does
            assert run_id == firing.run_id
            result = await resume(run_id, [count_orders], store=store)
            print("run", result.status, "output", result.steps["n"].output)  # run succeeded output 42


asyncio.run(main())
