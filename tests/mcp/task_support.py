"""The tasks/* requests of an MCP client (the SDK's `ClientSession` has no helpers for them: raw requests)."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
from mcp.client.session import ClientSession

PLAN_TOOL = "execute_tool_plan"


async def start_task(session: ClientSession, arguments: dict[str, Any], ttl: int | None = 60_000) -> mt.Task:
    request = mt.CallToolRequest(
        params=mt.CallToolRequestParams(name=PLAN_TOOL, arguments=arguments, task=mt.TaskMetadata(ttl=ttl))
    )
    return (await session.send_request(request, mt.CreateTaskResult)).task


async def get_task(session: ClientSession, task_id: str) -> mt.GetTaskResult:
    request = mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id=task_id))
    return await session.send_request(request, mt.GetTaskResult)


async def task_result(session: ClientSession, task_id: str) -> mt.CallToolResult:
    request = mt.GetTaskPayloadRequest(params=mt.GetTaskPayloadRequestParams(task_id=task_id))
    return await session.send_request(request, mt.CallToolResult)


async def cancel_task(session: ClientSession, task_id: str) -> mt.CancelTaskResult:
    request = mt.CancelTaskRequest(params=mt.CancelTaskRequestParams(task_id=task_id))
    return await session.send_request(request, mt.CancelTaskResult)


async def list_tasks(session: ClientSession) -> list[mt.Task]:
    return (await session.send_request(mt.ListTasksRequest(), mt.ListTasksResult)).tasks
