"""Long plans as MCP tasks: ``execute_tool_plan`` called with ``task`` answers at once with a task handle.

The plan runs in the background, in a task group the server's lifespan owns. ``tasks/get`` shows its
status and progress (steps done / total), ``tasks/result`` waits for and returns the same
``CallToolResult`` the synchronous call returns, ``tasks/cancel`` cancels it (running tools are
cancelled; every step ends with a record), ``tasks/list`` lists the tasks the server remembers.

With a store the task id is the durable run id: after a restart a finished task answers from the
store, and an interrupted one is resumed (its finished steps are not run again).

Tasks belong to the client that started them: the auth identity when the request carries one (the
bearer token), else the HTTP session (2025-11-25), else the connection (stdio: the one client of the
process). A task of another owner answers as an unknown one, and ``tasks/list`` shows only the
caller's. The owner's digest is part of the task id, so a stored task keeps its owner after a restart.
A caller with none of these (a 2026-07-28 client over HTTP without a token, which has no session) is
anonymous: anonymous callers share their tasks, whose ids are unguessable.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import RunNotFoundError, ToolplanError
from .._tasks import task_group
from ..agent import PLAN_TOOL_NAME
from ..execute import PlanEvent, PlanFinished, PlanResult, PlanStarted, StepFinished

if TYPE_CHECKING:
    from ..store import Store
    from ..tools import ToolRegistry


__all__ = ("DEFAULT_MAX_TASKS", "MAX_TASK_TTL", "STDIO_OWNER", "TASKS_EXTENSION", "TaskBoard", "task_owner")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
DEFAULT_MAX_TASKS = 32  # plans running at once as tasks, per server
DEFAULT_TASK_TTL = 3_600_000  # ms a task is remembered after it was created, when the request names none
MAX_TASK_TTL = 86_400_000  # the longest ``ttl`` a request may ask for (longer asks get this)
POLL_INTERVAL = 500  # ms, suggested to clients


class _Plans(Protocol):
    """What the board needs of the server's gateway: run a plan, and shape its answers."""

    registry: ToolRegistry

    async def run_plan(
        self, arguments: dict[str, Any], on_event: Callable[[PlanEvent], None], *, run_id: str | None = None
    ) -> mt.CallToolResult: ...

    def plan_result(self, result: PlanResult) -> mt.CallToolResult: ...

    def error(self, message: str) -> mt.CallToolResult: ...

    def plan_body(self, result: PlanResult) -> dict[str, Any]: ...


_KEPT_PER_LIVE = 8  # finished tasks remembered: at most this many per live slot (the oldest go first)
_PREFIX = "mcptask_"  # task ids (and, with a store, run ids) this server made
_MAX_ID = 128

_TERMINAL = ("completed", "failed", "cancelled")

# Set by `serve_stdio`: a stdio server has one client, its parent process (the same after a restart).
STDIO_OWNER: ContextVar[str | None] = ContextVar("toolplan_mcp_stdio_owner", default=None)
_ANONYMOUS = "0" * 16  # the owner of callers with no identity, session or connection
_CONNECTION_KEY = "toolplan_task_owner"


def task_owner(ctx: ServerRequestContext[Any]) -> str:
    """Whose a request's tasks are: a 16-hex digest of its auth identity, HTTP session or connection."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    key: str | None = None
    if headers is not None:  # streamable HTTP
        user = getattr(request, "scope", {}).get("user")
        access = getattr(user, "access_token", None)
        if access is not None:  # the SDK's OAuth: the principal the token names
            key = "principal:" + repr((getattr(access, "client_id", None), getattr(access, "subject", None)))
        elif headers.get("authorization"):
            key = "token:" + headers["authorization"]
        elif headers.get("mcp-session-id"):
            key = "session:" + headers["mcp-session-id"]
    elif (stdio := STDIO_OWNER.get()) is not None:
        key = stdio
    else:
        connection = getattr(ctx.session, "_connection", None)
        state = getattr(connection, "state", None)
        if isinstance(state, dict) and getattr(connection, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            key = state.setdefault(_CONNECTION_KEY, "connection:" + os.urandom(16).hex())  # a handshake's connection
    if key is None:
        return _ANONYMOUS
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _owner_of(task_id: str) -> str | None:
    """The owner digest in a task id (``mcptask_<time>_<owner>_<random>``), None if it has none."""
    parts = task_id.split("_")
    return parts[2] if len(parts) == 4 and len(parts[2]) == 16 else None


def _status(result: mt.CallToolResult) -> mt.TaskStatus:
    """A finished call's task status: ``failed`` for an error or a plan that failed, else ``completed``."""
    body = result.structured_content or {}
    return "failed" if result.is_error or body.get("status") == "failed" else "completed"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True, eq=False)
class _Task:
    task_id: str
    owner: str
    created: float
    ttl: int
    status: mt.TaskStatus = "working"
    message: str = "queued"
    updated: float = 0.0
    done: int = 0
    total: int | None = None
    final: PlanResult | None = None
    result: mt.CallToolResult | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    def view(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "status_message": self.message,
            "created_at": _iso(self.created),
            "last_updated_at": _iso(self.updated or self.created),
            "ttl": self.ttl,
            "poll_interval": POLL_INTERVAL,
        }

    def on_event(self, event: PlanEvent) -> None:
        if isinstance(event, PlanStarted):
            self.total = len(event.steps)
        elif isinstance(event, StepFinished):
            self.done += 1
        elif isinstance(event, PlanFinished):
            self.final = event.result
        else:
            return
        self.updated = time.time()
        self.message = f"running: {self.done}/{self.total if self.total is not None else '?'} steps done"

    def end(self, result: mt.CallToolResult, status: mt.TaskStatus) -> None:
        self.result = result
        self.status = status
        total = self.total if self.total is not None else self.done
        self.message = f"{status}: {self.done}/{total} steps done"
        self.updated = time.time()
        self.finished.set()


class TaskBoard:
    """The tasks of one server: started, watched, cancelled and forgotten here."""

    def __init__(self, gateway: _Plans, store: Store | None, max_tasks: int) -> None:
        self.gateway = gateway
        self.store = store
        self.max_tasks = max_tasks
        self.tasks: dict[str, _Task] = {}
        self._tg: asyncio.TaskGroup | None = None

    # -- ownership -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: background plans live in a task group entered here."""
        if self._tg is not None:  # entered already (one more in-process connection): the outer one owns
            yield {}
            return
        async with task_group() as tg:
            self._tg = tg
            try:
                yield {}
            finally:
                self._tg = None
                for task in self.tasks.values():
                    if task.runner is not None and not task.runner.done():
                        if self.store is not None:  # stored queued, not cancelled: resumed after the restart
                            self.store.hand_back(task.task_id)
                        task.runner.cancel()

    # -- tools/call with ``task`` ------------------------------------------------------------------

    async def middleware(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """Answer a ``tools/call`` that asks for a task with a task handle; anything else goes on."""
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or params.get("task") is None:
            return await call_next(ctx)
        call = mt.CallToolRequestParams.model_validate(params, by_name=False)
        if call.name != PLAN_TOOL_NAME:
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"Tool {call.name[:100]!r} does not run as a task: call it without 'task', or as a step "
                f"of {PLAN_TOOL_NAME}, which does.",
            )
        task = self._start(
            dict(call.arguments or {}), call.task.ttl if call.task is not None else None, task_owner(ctx)
        )
        body = mt.CreateTaskResult(task=mt.Task(**task.view())).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            body["resultType"] = "task"
        return body

    def _start(self, arguments: dict[str, Any], ttl: int | None, owner: str) -> _Task:
        if self._tg is None:
            raise MCPError(code=INVALID_PARAMS, message="The server is stopping: it starts no more tasks.")
        self._forget_expired()
        self._check_room()
        ttl = DEFAULT_TASK_TTL if ttl is None else max(0, min(int(ttl), MAX_TASK_TTL))
        task_id = f"{_PREFIX}{int(time.time())}_{owner}_{os.urandom(16).hex()}"
        task = _Task(task_id=task_id, owner=owner, created=time.time(), ttl=ttl)
        self.tasks[task_id] = task
        task.runner = self._tg.create_task(self._run(task, lambda: self._call(task, arguments)))
        return task

    def _check_room(self) -> None:
        live = sum(1 for t in self.tasks.values() if t.status == "working")
        if live >= self.max_tasks:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"This server runs at most {self.max_tasks} tasks at once and all are working: wait for "
                "one to finish (tasks/result), cancel one (tasks/cancel), or call without 'task'.",
            )

    async def _call(self, task: _Task, arguments: dict[str, Any]) -> mt.CallToolResult:
        return await self.gateway.run_plan(arguments, task.on_event, run_id=task.task_id)

    async def _resume(self, task: _Task) -> mt.CallToolResult:
        from ..store import resume  # only with a store: the store package is not imported otherwise

        assert self.store is not None
        try:
            result = await resume(task.task_id, self.gateway.registry, store=self.store, on_event=task.on_event)
        except ToolplanError as exc:
            return self.gateway.error(exc.message)
        return self.gateway.plan_result(result)

    async def _run(self, task: _Task, call: Callable[[], Awaitable[mt.CallToolResult]]) -> None:
        try:
            result = await call()
        except asyncio.CancelledError:
            body = self.gateway.plan_body(task.final) if task.final is not None else None
            if body is None:
                body = {"status": "cancelled", "outputs": {}, "errors": {}}
            text = "The task was cancelled: steps that had not finished ended cancelled."
            task.end(
                mt.CallToolResult(content=[mt.TextContent(text=text)], structured_content=body, is_error=True),
                "cancelled",
            )
            raise
        task.end(result, _status(result))

    # -- tasks/* -----------------------------------------------------------------------------------

    async def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> _Task:
        self._forget_expired()
        owner = task_owner(ctx)
        stated = _owner_of(task_id)
        if stated is not None and hmac.compare_digest(stated, owner):  # another's task answers as an unknown one
            task = self.tasks.get(task_id)
            if task is not None:
                return task
            if self.store is not None and task_id.startswith(_PREFIX) and len(task_id) <= _MAX_ID:
                task = await self._from_store(task_id, owner)
                if task is not None:
                    return task
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"No task {task_id[:_MAX_ID]!r} on this server: it never existed or its ttl passed "
            "(tasks/list shows the tasks it knows).",
        )

    async def _from_store(self, task_id: str, owner: str) -> _Task | None:
        """A task of an earlier process of this server: answered from the store, resumed if it was cut off."""
        assert self.store is not None
        try:
            info = await self.store.get_run(task_id)
        except (RunNotFoundError, ToolplanError):
            return None
        if task_id in self.tasks:  # looked up twice at once: the first one made it
            return self.tasks[task_id]
        summary = info.summary
        finished = summary.status in ("succeeded", "failed", "cancelled")
        if not finished:
            if self._tg is None:
                raise MCPError(code=INVALID_PARAMS, message="The server is stopping: it resumes no tasks.")
            self._check_room()  # a task resumed after a restart counts as any other
        task = _Task(
            task_id=task_id, owner=owner, created=summary.created_at, ttl=DEFAULT_TASK_TTL, total=summary.steps
        )
        self.tasks[task_id] = task
        if finished:
            task.done = sum(1 for s in info.result.steps.values() if s.status != "not_run")
            result = self.gateway.plan_result(info.result)
            task.end(result, "cancelled" if summary.status == "cancelled" else _status(result))
            task.updated = summary.updated_at
        else:
            assert self._tg is not None
            task.message = "resuming after a restart"
            task.runner = self._tg.create_task(self._run(task, lambda: self._resume(task)))
        return task

    async def get(self, ctx: ServerRequestContext[Any], params: mt.GetTaskRequestParams) -> mt.GetTaskResult:
        return mt.GetTaskResult(**(await self._find(ctx, params.task_id)).view())

    async def result(self, ctx: ServerRequestContext[Any], params: mt.GetTaskPayloadRequestParams) -> mt.CallToolResult:
        task = await self._find(ctx, params.task_id)
        await task.finished.wait()
        assert task.result is not None
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
        return task.result.model_copy(update={"meta": {**(task.result.meta or {}), **related}})

    async def cancel(self, ctx: ServerRequestContext[Any], params: mt.CancelTaskRequestParams) -> mt.CancelTaskResult:
        task = await self._find(ctx, params.task_id)
        if task.status in _TERMINAL:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Task {task.task_id!r} has ended ({task.status}): there is nothing to cancel.",
            )
        if task.runner is not None:
            if self.store is not None:
                self.store.keep(task.task_id)  # a cancel asked for: stored cancelled, never resumed
            task.runner.cancel()
            await task.finished.wait()
        return mt.CancelTaskResult(**task.view())

    async def list(self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams) -> mt.ListTasksResult:
        self._forget_expired()
        owner = task_owner(ctx)
        return mt.ListTasksResult(tasks=[mt.Task(**t.view()) for t in self.tasks.values() if t.owner == owner])

    def _forget_expired(self) -> None:
        """Forget finished tasks whose ttl passed, and the oldest finished ones beyond the bound."""
        now = time.time()
        ended = [t for t in self.tasks.values() if t.status in _TERMINAL]
        gone = {t.task_id for t in ended if now >= t.created + t.ttl / 1000}
        extra = len(ended) - len(gone) - self.max_tasks * _KEPT_PER_LIVE
        if extra > 0:
            kept = sorted((t for t in ended if t.task_id not in gone), key=lambda t: t.updated)
            gone.update(t.task_id for t in kept[:extra])
        for task_id in gone:
            del self.tasks[task_id]
