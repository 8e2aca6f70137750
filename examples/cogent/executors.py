"""cogent's executors over a toolplan agent: NativeExecutor, SequentialExecutor and agent.arun.

The model (scripted here) asks for the stock of three items in one turn. ``NativeExecutor`` runs
the three calls at once (at most ``max_concurrent_tools``), ``SequentialExecutor`` one at a time in
the model's order; both return the agent's answer. Run: ``python examples/cogent/executors.py``.
"""

from __future__ import annotations

import asyncio
import json

from toolplan import Agent, NativeExecutor, SequentialExecutor, tool
from toolplan.models import AssistantMessage, ToolCall
from toolplan.testing import ScriptedModel

ITEMS = ("lamp", "desk", "chair")
running = 0
sequential = False
most_at_once = 0
order: list[str] = []
all_started = asyncio.Event()  # set once every call of the turn is running (only if they run at once)


@tool
async def check_inventory(item: str) -> int:
    """Units of an item in stock."""
    global running, most_at_once
    running += 1
    most_at_once = max(most_at_once, running)
    if running == len(ITEMS):
        all_started.set()
    if not sequential:
        await all_started.wait()  # ends only when all three run at once
    running -= 1
    order.append(item)
    return {"lamp": 3, "chair": 8}.get(item, 0)


def agent() -> Agent[None, str]:
    turn = AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name="check_inventory", arguments=json.dumps({"item": i})) for i in ITEMS)
    )
    return Agent(ScriptedModel([turn, "3 lamps, no desks, 8 chairs."]), tools=[check_inventory])


async def main() -> None:
    global most_at_once, sequential
    executor = NativeExecutor(agent(), max_tool_calls_per_turn=50, max_concurrent_tools=20, resilience=True)
    print("native:", await executor.execute("What is in stock?"), f"(at most {most_at_once} calls at once)")

    most_at_once, sequential = 0, True
    order.clear()
    output = await SequentialExecutor(agent()).execute("What is in stock?")
    print("sequential:", output, f"(at most {most_at_once} at once, in order {order})")

    result = await agent().arun("What is in stock?")
    print("arun:", result.output, f"({result.usage.requests} model requests)")


asyncio.run(main())
