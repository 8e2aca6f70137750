"""`Client`: the planner service's API from blocking code."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx
from httpx_sse import connect_sse

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

__all__ = ("Client",)

T = TypeVar("T")


class Client:
    """A client of a toolplan planner service (``toolplan serve``), for blocking code.

    Every operation of the REST API is a method that returns a record (`Execution`, `StoredPlan`,
    `Request`, `Event`, ...), and every error answer raises `toolplan.ServiceError` with the service's
    code. What fails on the way is retried (see `RetryPolicy`): each POST carries an ``Idempotency-Key``
    (a fresh one per call unless you pass ``idempotency_key=``), the same on every retry, so a retry
    never runs anything twice. `events` follows an execution and reconnects from the last event seen.

    ```python
    from toolplan.client import Client

    with Client("http://127.0.0.1:8000", api_key="tpk_...") as client:
        stored = client.create_plan({"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]})
        execution = client.execute(stored.plan_id, wait=30)
        print(execution.status, execution.outputs)  # succeeded {'a': 3}
    ```

    Args:
        base_url: Where the service answers, e.g. ``http://127.0.0.1:8000`` (or its API root,
            ``http://127.0.0.1:8000/v1``).
        api_key: A key of the service (``toolplan keys create``), sent as ``X-API-Key``.
        timeout: Seconds to connect, to send, and to wait for an answer (a call with ``wait=`` waits
            that much longer).
        retry: How requests and event streams are retried.
        transport: An httpx transport to send through instead of the network (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        options = calls.http_options(base_url, api_key, timeout)
        self.base_url: str = options["base_url"]
        self.retry = retry
        self._timeout: httpx.Timeout = options["timeout"]
        self._http = httpx.Client(transport=transport, **options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections (the client cannot be used after)."""
        self._http.close()

    # -- sending -----------------------------------------------------------------------------------

    def _send(self, call: Call[T]) -> T:
        send = calls.Send(call, self.base_url, self.retry, self._timeout)
        while True:
            try:
                response = self._http.request(**send.request)
            except httpx.TransportError as exc:
                send.lost(exc)
            else:
                if send.done(response):
                    return calls.answer(call, response)
            time.sleep(send.delay())

    def _pages(self, make: Callable[[str | None], Call[Page[T]]]) -> Iterator[T]:
        first = make(None)  # arguments are checked now, not at the first next()

        def pages() -> Iterator[T]:
            page = self._send(first)
            while True:
                yield from page.items
                if page.next_cursor is None:
                    return
                page = self._send(make(page.next_cursor))

        return pages()

    # -- requests (questions to plan) --------------------------------------------------------------

    def plan(self, query: str, *, idempotency_key: str | None = None) -> Planned:
        """Turn a question into a stored, valid plan with the service's model (``POST /v1/requests``).

        Raises `toolplan.ServiceError` ``no_model`` (503) when the service has no model, and
        ``plan_invalid`` (422, the drafts in ``details``) when the plan is invalid after one repair.
        """
        return self._send(calls.plan(query, idempotency_key))

    def get_request(self, request_id: str) -> Request:
        """A planning request: its question and every version of its plan."""
        return self._send(calls.get_request(request_id))

    def list_requests(self, *, page_size: int = DEFAULT_PAGE_SIZE) -> Iterator[RequestSummary]:
        """Every planning request, newest first (the pages are fetched as you iterate)."""
        return self._pages(lambda cursor: calls.list_requests(page_size, cursor))

    def execute_request(self, request_id: str, *, wait: float = 0, idempotency_key: str | None = None) -> Execution:
        """Run a request's final plan; as `execute`."""
        return self._send(calls.execute_request(request_id, wait, idempotency_key))

    # -- plans -------------------------------------------------------------------------------------

    def create_plan(
        self,
        plan: Mapping[str, Any] | str | Plan,
        *,
        dialect: str | None = None,
        idempotency_key: str | None = None,
    ) -> StoredPlan:
        """Validate a plan against the service's tools and store it (``POST /v1/plans``).

        ``plan`` is a dict in any dialect, its JSON text, or a `toolplan.Plan`. An invalid plan raises
        `toolplan.ServiceError` ``invalid_plan`` (422) with every issue in ``details``.
        """
        return self._send(calls.create_plan(plan, dialect, idempotency_key))

    def dry_run(
        self,
        plan: Mapping[str, Any] | str | Plan | None = None,
        *,
        plan_id: str | None = None,
        dialect: str | None = None,
    ) -> dict[str, Any]:
        """What a plan (or stored plan ``plan_id``) would do, without doing it (``POST /v1/plans/dry-run``).

        The dry run's report as JSON data (`toolplan.execute.DryRunReport.to_dict`): no tool runs and
        nothing is stored. An invalid plan raises `toolplan.ServiceError` ``invalid_plan`` (422).
        """
        return self._send(calls.dry_run(plan, plan_id, dialect))

    def get_plan(self, plan_id: str) -> StoredPlan:
        """A stored plan with its issues."""
        return self._send(calls.get_plan(plan_id))

    def list_plans(self, *, request_id: str | None = None, page_size: int = DEFAULT_PAGE_SIZE) -> Iterator[PlanSummary]:
        """Every stored plan, newest first; ``request_id`` keeps that request's versions."""
        return self._pages(lambda cursor: calls.list_plans(page_size, cursor, request_id))

    # -- executions --------------------------------------------------------------------------------

    def execute(
        self,
        plan_id: str,
        *,
        wait: float = 0,
        idempotency_key: str | None = None,
        approval: ApprovalRule | None = None,
    ) -> Execution:
        """Run a stored plan (``POST /v1/plans/{plan_id}/executions``).

        With ``wait`` (seconds, bounded by the service) the answer is the finished execution if it
        ends in time; otherwise it is the queued execution's id and status, to follow with `events`
        or `get_execution`. The execution belongs to the service: it runs on whatever the client does.
        ``ServiceError`` ``too_many_executions`` (429) means this key has its limit of executions running.
        With ``approval`` (an `ApprovalRule` without a function) the steps it marks wait for an answer:
        the execution's status is ``pending_approval`` (which also ends ``wait``) and `approve` answers.
        """
        return self._send(calls.execute(plan_id, wait, idempotency_key, approval))

    def get_execution(self, execution_id: str) -> Execution:
        """An execution: its status, every step's record, and its outputs once finished."""
        return self._send(calls.get_execution(execution_id))

    def list_executions(
        self, *, status: str | None = None, plan_id: str | None = None, page_size: int = DEFAULT_PAGE_SIZE
    ) -> Iterator[ExecutionSummary]:
        """Every execution, newest first, optionally with that status or of that plan (all pages)."""
        return self._pages(lambda cursor: calls.list_executions(page_size, cursor, status, plan_id))

    def cancel(self, execution_id: str, *, idempotency_key: str | None = None) -> str:
        """Cancel an execution; returns ``cancelled``, or ``cancelling`` while its process stops it."""
        return self._send(calls.cancel(execution_id, idempotency_key))

    def approve(self, execution_id: str, answers: Mapping[str, Approval], *, idempotency_key: str | None = None) -> str:
        """Answer the steps an execution waits for (``Execution.approval``); it goes on in the service.

        ``answers`` maps step ids to `Approval` (``Approval()``, ``Approval(arguments={...})``,
        ``Approval.reject(reason)``); returns the status (``queued``). A bad answer raises
        `toolplan.ServiceError` ``invalid_approval`` and changes nothing; a key without the
        ``approve`` permission gets ``forbidden`` (403).
        """
        return self._send(calls.approve(execution_id, answers, idempotency_key))

    def resume(self, execution_id: str, *, idempotency_key: str | None = None) -> str:
        """Resume a cancelled execution (finished steps are kept); returns its status (``queued``)."""
        return self._send(calls.resume(execution_id, idempotency_key))

    def events(self, execution_id: str, *, after: int = 0) -> Iterator[Event]:
        """The execution's events after number ``after``, live, until it finishes (``plan_finished``).

        When the stream drops (the service restarts, the network fails), it is reopened from the last
        event seen (``Last-Event-ID``), so each event comes exactly once and in order; after
        ``retry.reconnects`` reopenings in a row without a new event, `toolplan.ServiceError`
        ``stream_lost`` says where to take up.

        ```python
        for event in client.events(execution.execution_id):
            print(event.seq, event.type, event.step_id, event.payload)
        ```
        """
        path = calls.events_path(execution_id)
        return self._events(execution_id, path, after)

    def _events(self, execution_id: str, path: str, after: int) -> Iterator[Event]:
        follow = calls.Follow(execution_id, after, self.retry)
        timeout = calls.stream_timeout(self._timeout)
        while True:
            try:
                with connect_sse(self._http, "GET", path, headers=follow.headers(), timeout=timeout) as source:
                    if not source.response.is_success:
                        source.response.read()
                        follow.refused(source.response)
                    else:
                        for sse in source.iter_sse():
                            event = follow.take(sse.data)
                            if event is not None:
                                yield event
                                if event.final:
                                    return
                        if self._finished(execution_id):  # it ended earlier: no later event will come
                            return
                        follow.ended_early()
            except httpx.TransportError as exc:
                follow.lost(exc)
            time.sleep(follow.delay())

    def _finished(self, execution_id: str) -> bool:
        # one try: a failure means reconnect
        return calls.finished(self._http.get(calls.get_execution(execution_id).path))
