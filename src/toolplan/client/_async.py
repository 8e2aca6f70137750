"""`AsyncClient`: the planner service's API from asyncio code (the same operations as `Client`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import httpx
from httpx_sse import aconnect_sse

from .._defaults import DEFAULT_PAGE_SIZE
from ..execute import Approval, ApprovalRule
from ..plan import Plan
from . import _calls as calls
from ._calls import DEFAULT_RETRY, DEFAULT_TIMEOUT, Call, Page, RetryPolicy
from ._types import (
    Event,
    Execution,
    ExecutionSummary,
    Planned,
    PlanSummary,
    Request,
    RequestSummary,
    StoredPlan,
)

__all__ = ("AsyncClient",)

T = TypeVar("T")


class AsyncClient:
    """A client of a toolplan planner service for asyncio code: `Client`'s operations, awaited.

    Listings and `events` are async iterators. Leaving `events` early (``break``) closes its
    connection when the iterator is closed: wrap it in ``contextlib.aclosing`` to do that at once.

    ```python
    from toolplan.client import AsyncClient

    async with AsyncClient("http://127.0.0.1:8000", api_key="tpk_...") as client:
        stored = await client.create_plan({"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]})
        execution = await client.execute(stored.plan_id)
        async for event in client.events(execution.execution_id):
            print(event.seq, event.type, event.step_id)
        print((await client.get_execution(execution.execution_id)).outputs)  # {'a': 3}
    ```

    Takes `Client`'s arguments; ``transport`` is an ``httpx.AsyncBaseTransport`` here.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        options = calls.http_options(base_url, api_key, timeout)
        self.base_url: str = options["base_url"]
        self.retry = retry
        self._timeout: httpx.Timeout = options["timeout"]
        self._http = httpx.AsyncClient(transport=transport, **options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (the client cannot be used after)."""
        await self._http.aclose()

    # -- sending -----------------------------------------------------------------------------------

    async def _send(self, call: Call[T]) -> T:
        send = calls.Send(call, self.base_url, self.retry, self._timeout)
        while True:
            try:
                response = await self._http.request(**send.request)
            except httpx.TransportError as exc:
                send.lost(exc)
            else:
                if send.done(response):
                    return calls.answer(call, response)
            await asyncio.sleep(send.delay())

    def _pages(self, make: Callable[[str | None], Call[Page[T]]]) -> AsyncIterator[T]:
        first = make(None)  # arguments are checked now, not at the first step of the iteration

        async def pages() -> AsyncIterator[T]:
            page = await self._send(first)
            while True:
                for item in page.items:
                    yield item
                if page.next_cursor is None:
                    return
                page = await self._send(make(page.next_cursor))

        return pages()

    # -- requests (questions to plan) --------------------------------------------------------------

    async def plan(self, query: str, *, idempotency_key: str | None = None) -> Planned:
        """As `Client.plan`: a question to a stored, valid plan (``POST /v1/requests``)."""
        return await self._send(calls.plan(query, idempotency_key))

    async def get_request(self, request_id: str) -> Request:
        """As `Client.get_request`."""
        return await self._send(calls.get_request(request_id))

    def list_requests(self, *, page_size: int = DEFAULT_PAGE_SIZE) -> AsyncIterator[RequestSummary]:
        """As `Client.list_requests`: every planning request, newest first."""
        return self._pages(lambda cursor: calls.list_requests(page_size, cursor))

    async def execute_request(
        self, request_id: str, *, wait: float = 0, idempotency_key: str | None = None
    ) -> Execution:
        """As `Client.execute_request`."""
        return await self._send(calls.execute_request(request_id, wait, idempotency_key))

    # -- plans -------------------------------------------------------------------------------------

    async def create_plan(
        self,
        plan: Mapping[str, Any] | str | Plan,
        *,
        dialect: str | None = None,
        idempotency_key: str | None = None,
    ) -> StoredPlan:
        """As `Client.create_plan`: validate and store a plan (``POST /v1/plans``)."""
        return await self._send(calls.create_plan(plan, dialect, idempotency_key))

    async def dry_run(
        self,
        plan: Mapping[str, Any] | str | Plan | None = None,
        *,
        plan_id: str | None = None,
        dialect: str | None = None,
    ) -> dict[str, Any]:
        """As `Client.dry_run`: what a plan would do, without doing it."""
        return await self._send(calls.dry_run(plan, plan_id, dialect))

    async def get_plan(self, plan_id: str) -> StoredPlan:
        """As `Client.get_plan`."""
        return await self._send(calls.get_plan(plan_id))

    def list_plans(
        self, *, request_id: str | None = None, page_size: int = DEFAULT_PAGE_SIZE
    ) -> AsyncIterator[PlanSummary]:
        """As `Client.list_plans`."""
        return self._pages(lambda cursor: calls.list_plans(page_size, cursor, request_id))

    # -- executions --------------------------------------------------------------------------------

    async def execute(
        self,
        plan_id: str,
        *,
        wait: float = 0,
        idempotency_key: str | None = None,
        approval: ApprovalRule | None = None,
    ) -> Execution:
        """As `Client.execute`: run a stored plan, waiting up to ``wait`` seconds for its end."""
        return await self._send(calls.execute(plan_id, wait, idempotency_key, approval))

    async def get_execution(self, execution_id: str) -> Execution:
        """As `Client.get_execution`."""
        return await self._send(calls.get_execution(execution_id))

    def list_executions(
        self, *, status: str | None = None, plan_id: str | None = None, page_size: int = DEFAULT_PAGE_SIZE
    ) -> AsyncIterator[ExecutionSummary]:
        """As `Client.list_executions`: every execution, newest first (all pages)."""
        return self._pages(lambda cursor: calls.list_executions(page_size, cursor, status, plan_id))

    async def cancel(self, execution_id: str, *, idempotency_key: str | None = None) -> str:
        """As `Client.cancel`."""
        return await self._send(calls.cancel(execution_id, idempotency_key))

    async def approve(
        self, execution_id: str, answers: Mapping[str, Approval], *, idempotency_key: str | None = None
    ) -> str:
        """As `Client.approve`."""
        return await self._send(calls.approve(execution_id, answers, idempotency_key))

    async def resume(self, execution_id: str, *, idempotency_key: str | None = None) -> str:
        """As `Client.resume`."""
        return await self._send(calls.resume(execution_id, idempotency_key))

    def events(self, execution_id: str, *, after: int = 0) -> AsyncIterator[Event]:
        """As `Client.events`: the events after ``after``, live, reconnecting from the last one seen."""
        path = calls.events_path(execution_id)
        return self._events(execution_id, path, after)

    async def _events(self, execution_id: str, path: str, after: int) -> AsyncIterator[Event]:
        follow = calls.Follow(execution_id, after, self.retry)
        timeout = calls.stream_timeout(self._timeout)
        while True:
            try:
                async with aconnect_sse(self._http, "GET", path, headers=follow.headers(), timeout=timeout) as source:
                    if not source.response.is_success:
                        await source.response.aread()
                        follow.refused(source.response)
                    else:
                        async for sse in source.aiter_sse():
                            event = follow.take(sse.data)
                            if event is not None:
                                yield event
                                if event.final:
                                    return
                        if await self._finished(execution_id):  # it ended earlier: no later event will come
                            return
                        follow.ended_early()
            except httpx.TransportError as exc:
                follow.lost(exc)
            await asyncio.sleep(follow.delay())

    async def _finished(self, execution_id: str) -> bool:
        # one try: a failure means reconnect
        return calls.finished(await self._http.get(calls.get_execution(execution_id).path))
