"""A long plan as an MCP task: the call answers at once, the client polls, then takes the result.

Run it: ``python examples/mcp/long_plan_task.py`` (needs ``pip install "toolplan[mcp]"``).

The server is toolplan's (`create_server`), in this process; over stdio or HTTP it is the same.
The MCP SDK's client has no helpers for tasks, so the client sends ``tasks/*`` requests itself.
"""

from __future__ import annotations

import asyncio

import mcp.types as mt
from mcp import Client

from toolplan import tool
from toolplan.mcp import create_server


@tool(read_only=True)
async def fetch_report(region: str) -> dict[str, int]:
    """A slow report for one region."""
    await asyncio.sleep(0.3)
    return {"sales": {"north": 120, "south": 95, "east": 143}[region]}


@tool(read_only=True)
def total(values: list[int]) -> int:
    """The sum of some numbers."""
    return sum(values)


PLAN = {
    "steps": [
        {"id": "north", "tool": "fetch_report", "arguments": {"region": "north"}},
        {"id": "south", "tool": "fetch_report", "arguments": {"region": "south"}},
        {"id": "east", "tool": "fetch_report", "arguments": {"region": "east"}},
        {
            "id": "sum",
            "tool": "total",
            "arguments": {"values": ["$ref:north.sales", "$ref:south.sales", "$ref:east.sales"]},
        },
    ],
    "output_steps": ["sum"],
}


async def main() -> None:
    async with Client(create_server([fetch_report, total])) as client:
        session = client.session
        # tools/call with "task": the answer is a task handle, at once
        call = mt.CallToolRequest(
            params=mt.CallToolRequestParams(name="execute_tool_plan", arguments=PLAN, task=mt.TaskMetadata(ttl=60_000))
        )
        task = (await session.send_request(call, mt.CreateTaskResult)).task
        print("task started:", task.status)

        # tasks/get: the status and progress, as often as the client likes
        while True:
            state = await session.send_request(
                mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id=task.task_id)), mt.GetTaskResult
            )
            if state.status != "working":
                break
            await asyncio.sleep((state.poll_interval or 500) / 1000)
        print("task", state.status_message)

        # tasks/result: the same CallToolResult the synchronous call returns
        result = await session.send_request(
            mt.GetTaskPayloadRequest(params=mt.GetTaskPayloadRequestParams(task_id=task.task_id)), mt.CallToolResult
        )
        print("outputs:", result.structured_content["outputs"] if result.structured_content else None)


if __name__ == "__main__":
    asyncio.run(main())
