"""The client's operations, written once for `Client` and `AsyncClient`.

Each operation is a `Call`: the request to send (method, path, query, body, idempotency key) and how
to read a successful answer. The two clients only send calls, retry them by `RetryPolicy`, and follow
event streams; what a call means lives here.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from .._errors import ServiceError, UserError
from .._version import __version__
from ..execute import Approval, ApprovalRule
from ..plan import Plan
from . import _types
from ._types import Event, Execution, ExecutionSummary, Planned, PlanSummary, Request, RequestSummary, StoredPlan

__all__ = ("DEFAULT_RETRY", "DEFAULT_TIMEOUT", "Call", "Page", "RetryPolicy")

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0  # seconds to connect, send, or wait for an answer (plus ``wait`` where a call has one)
STREAM_READ_TIMEOUT = 45.0  # the service pings an event stream every 15 s: silence this long means it is gone
IDEMPOTENCY_HEADER = "Idempotency-Key"
KEY_HEADER = "X-API-Key"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a client retries what failed on the way (never what the service refused).

    A request is sent again when no answer came (connection refused or dropped, a timeout), or when
    the service answered 502/503/504 or "this Idempotency-Key is in use" (409). A POST is sent again
    with the same ``Idempotency-Key``, so a retry never does the work twice. An event stream that
    drops is reopened from the last event seen (``Last-Event-ID``).

    Attributes:
        attempts: Tries of one request, the first included.
        reconnects: Reopenings of an event stream in a row without a new event before giving up.
        backoff: Seconds before the first retry; each next one waits twice as long (with jitter).
        max_backoff: The longest wait between two tries.
    """

    attempts: int = 4
    reconnects: int = 10
    backoff: float = 0.1
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        for name in ("attempts", "reconnects"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "attempts" else 0):
                raise UserError(f"RetryPolicy.{name} must be a whole number (attempts at least 1), not {value!r}.")
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 600:
                raise UserError(f"RetryPolicy.{name} must be seconds from 0 to 600, not {value!r}.")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first): doubling, capped, with jitter."""
        wait: float = min(self.max_backoff, self.backoff * 2.0 ** min(retry, 30))
        return wait * random.uniform(0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing and the cursor of the next (None on the last)."""

    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Call(Generic[T]):
    """One operation: the request, and how its successful answer is read."""

    method: Literal["GET", "POST"]
    path: str
    read: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict[str, Any])
    body: Any = None
    idempotency_key: str | None = None
    wait: float = 0.0  # seconds the service may hold the answer back (added to the read timeout)

    def headers(self) -> dict[str, str]:
        return {IDEMPOTENCY_HEADER: self.idempotency_key} if self.idempotency_key is not None else {}

    def timeout(self, base: httpx.Timeout) -> httpx.Timeout:
        if not self.wait or base.read is None:
            return base
        return httpx.Timeout(base.connect, read=base.read + self.wait, write=base.write, pool=base.pool)


def _id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{what} must be a non-empty string (an id the service gave), not {value!r}.")
    return quote(value, safe="")


def _key(idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return str(uuid.uuid4())
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 255:
        raise UserError(f"idempotency_key must be a string of 1 to 255 characters, not {idempotency_key!r}.")
    return idempotency_key


def _wait(wait: float) -> dict[str, Any]:
    if isinstance(wait, bool) or not isinstance(wait, int | float) or wait < 0:
        raise UserError(f"wait must be seconds (0 or more), not {wait!r}.")
    return {"wait": wait} if wait else {}


def _status(data: Any) -> str:
    return str(data["status"])


def _page(read: Callable[[Any], T]) -> Callable[[Any], Page[T]]:
    def page(data: Any) -> Page[T]:
        return Page([read(row) for row in data["items"]], data.get("next_cursor"))

    return page


DEFAULT_RETRY = RetryPolicy()


def http_options(base_url: str, api_key: str, timeout: float) -> dict[str, Any]:
    """What both clients give their httpx client (checked once)."""
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise UserError(f"base_url must be the service's http:// or https:// URL, not {base_url!r}.")
    if not isinstance(api_key, str) or not api_key.strip():
        raise UserError("api_key must be an API key of the service (make one with `toolplan keys create`).")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise UserError(f"timeout must be seconds (more than 0), not {timeout!r}.")
    return {
        # Every path starts with /v1: a base_url that names the API root itself ("…/v1") works too.
        "base_url": base_url.rstrip("/").removesuffix("/v1"),
        "headers": {KEY_HEADER: api_key, "User-Agent": f"toolplan-client/{__version__}"},
        "timeout": httpx.Timeout(timeout),
    }


def stream_timeout(base: httpx.Timeout) -> httpx.Timeout:
    """An event stream may be quiet between pings: its read timeout is at least `STREAM_READ_TIMEOUT`."""
    read = max(base.read or 0.0, STREAM_READ_TIMEOUT)
    return httpx.Timeout(base.connect, read=read, write=base.write, pool=base.pool)


# -- the operations --------------------------------------------------------------------------------


def plan(query: str, idempotency_key: str | None) -> Call[Planned]:
    return Call(
        method="POST",
        path="/v1/requests",
        read=Planned.from_json,
        body={"query": query},
        idempotency_key=_key(idempotency_key),
    )


def get_request(request_id: str) -> Call[Request]:
    return Call(method="GET", path=f"/v1/requests/{_id(request_id, 'request_id')}", read=Request.from_json)


def list_requests(page_size: int, cursor: str | None) -> Call[Page[RequestSummary]]:
    return _list("/v1/requests", RequestSummary.from_json, page_size, cursor, {})


def create_plan(
    plan: Mapping[str, Any] | str | Plan, dialect: str | None, idempotency_key: str | None
) -> Call[StoredPlan]:
    source: Any = plan.to_dict() if isinstance(plan, Plan) else plan
    if not isinstance(source, Mapping | str):
        raise UserError(f"plan must be a plan as a dict, its JSON text, or a toolplan.Plan, not {type(plan).__name__}.")
    body: dict[str, Any] = {"plan": dict(source) if isinstance(source, Mapping) else source}
    if dialect is not None:
        body["dialect"] = dialect
    return Call(
        method="POST", path="/v1/plans", read=StoredPlan.from_json, body=body, idempotency_key=_key(idempotency_key)
    )


def _report(data: Any) -> dict[str, Any]:
    return dict(data)


def dry_run(
    plan: Mapping[str, Any] | str | Plan | None, plan_id: str | None, dialect: str | None
) -> Call[dict[str, Any]]:
    if plan_id is not None and plan is None:
        return Call(method="POST", path=f"/v1/plans/{_id(plan_id, 'plan_id')}/dry-run", read=_report)
    if plan is None or plan_id is not None:
        raise UserError("dry_run takes a plan or a plan_id: give exactly one of them.")
    return Call(method="POST", path="/v1/plans/dry-run", read=_report, body=create_plan(plan, dialect, None).body)


def get_plan(plan_id: str) -> Call[StoredPlan]:
    return Call(method="GET", path=f"/v1/plans/{_id(plan_id, 'plan_id')}", read=StoredPlan.from_json)


def list_plans(page_size: int, cursor: str | None, request_id: str | None) -> Call[Page[PlanSummary]]:
    return _list("/v1/plans", PlanSummary.from_json, page_size, cursor, {"request_id": request_id})


def execute(
    plan_id: str, wait: float, idempotency_key: str | None, approval: ApprovalRule | None = None
) -> Call[Execution]:
    return _start(f"/v1/plans/{_id(plan_id, 'plan_id')}/executions", wait, idempotency_key, approval)


def execute_request(
    request_id: str, wait: float, idempotency_key: str | None, approval: ApprovalRule | None = None
) -> Call[Execution]:
    return _start(f"/v1/requests/{_id(request_id, 'request_id')}/executions", wait, idempotency_key, approval)


def _start(path: str, wait: float, idempotency_key: str | None, approval: ApprovalRule | None) -> Call[Execution]:
    """Start an execution (of a plan or a request's plan) at ``path``."""
    body = None
    if approval is not None:
        if not isinstance(approval, ApprovalRule) or approval.to_dict() is None:
            raise UserError(
                "approval must be an ApprovalRule without a when= function (a function cannot be sent to a service)."
            )
        body = {"approval": approval.to_dict()}
    return Call(
        method="POST",
        path=path,
        read=Execution.from_json,
        params=_wait(wait),
        body=body,
        idempotency_key=_key(idempotency_key),
        wait=wait,
    )


def approve(execution_id: str, answers: Mapping[str, Approval], idempotency_key: str | None) -> Call[str]:
    """Answer the steps an execution waits for (`Approval` per step id)."""
    if not isinstance(answers, Mapping) or not answers:
        raise UserError("answers must be a non-empty dict of step id to Approval (Approval(), Approval.reject(...)).")
    sent: dict[str, Any] = {}
    for sid, a in answers.items():
        if not isinstance(a, Approval):
            raise UserError(f"The answer for step {sid!r} must be an Approval, not {type(a).__name__}.")
        if not a.approved:
            sent[sid] = {"reject": a.reason or "rejected by the approver"}
        elif a.arguments is not None:
            sent[sid] = {"approve": True, "arguments": dict(a.arguments)}
        else:
            sent[sid] = {"approve": True}
    path = f"/v1/executions/{_id(execution_id, 'execution_id')}/approvals"
    return Call(method="POST", path=path, read=_status, body={"answers": sent}, idempotency_key=_key(idempotency_key))


def get_execution(execution_id: str) -> Call[Execution]:
    return Call(method="GET", path=f"/v1/executions/{_id(execution_id, 'execution_id')}", read=Execution.from_json)


def list_executions(
    page_size: int, cursor: str | None, status: str | None, plan_id: str | None
) -> Call[Page[ExecutionSummary]]:
    return _list(
        "/v1/executions", ExecutionSummary.from_json, page_size, cursor, {"status": status, "plan_id": plan_id}
    )


def cancel(execution_id: str, idempotency_key: str | None) -> Call[str]:
    path = f"/v1/executions/{_id(execution_id, 'execution_id')}/cancel"
    return Call(method="POST", path=path, read=_status, idempotency_key=_key(idempotency_key))


def resume(execution_id: str, idempotency_key: str | None) -> Call[str]:
    path = f"/v1/executions/{_id(execution_id, 'execution_id')}/resume"
    return Call(method="POST", path=path, read=_status, idempotency_key=_key(idempotency_key))


def events_path(execution_id: str) -> str:
    return f"/v1/executions/{_id(execution_id, 'execution_id')}/events"


def _list(
    path: str, read: Callable[[Any], T], page_size: int, cursor: str | None, filters: dict[str, str | None]
) -> Call[Page[T]]:
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 200:
        raise UserError(f"page_size must be a whole number from 1 to 200, not {page_size!r}.")
    params: dict[str, Any] = {"limit": page_size, **{k: v for k, v in filters.items() if v is not None}}
    if cursor is not None:
        params["cursor"] = cursor
    return Call(method="GET", path=path, read=_page(read), params=params)


# -- answers ---------------------------------------------------------------------------------------


def error_of(response: httpx.Response) -> ServiceError:
    """The `ServiceError` of an error answer (read already)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str) and isinstance(body.get("message"), str):
        return ServiceError(body["code"], body["message"], body.get("details"), response.status_code)
    text = " ".join(response.text.split())[:200]
    return ServiceError(
        "http_error",
        f"The service answered {response.status_code} without a JSON error body ({text!r}): check that "
        "base_url points at a toolplan service (`toolplan serve`).",
        None,
        response.status_code,
    )


def retryable(response: httpx.Response) -> bool:
    """An error answer worth sending again (the same request, the same Idempotency-Key)."""
    status = response.status_code
    if status in (502, 504):
        return True
    if status not in (409, 503):
        return False
    try:
        code = str(response.json().get("code"))
    except (ValueError, AttributeError):
        return status == 503
    return code == "idempotency_key_in_use" if status == 409 else code != "no_model"


def answer(call: Call[T], response: httpx.Response) -> T:
    """The value of a successful answer; `ServiceError` for an error answer."""
    if not response.is_success:
        raise error_of(response)
    try:
        data = response.json()
        return call.read(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ServiceError(
            "invalid_answer",
            f"{call.method} {call.path} answered {response.status_code} with a body this client cannot read "
            f"({type(exc).__name__}: {exc}): is the service a toolplan of the same version?",
            None,
            response.status_code,
        ) from exc


def unreachable(base_url: str, tries: int, exc: Exception) -> ServiceError:
    return ServiceError(
        "unreachable",
        f"No answer from the service at {base_url} after {tries} tr{'y' if tries == 1 else 'ies'} "
        f"({type(exc).__name__}: {exc or 'no detail'}). Check that it runs (`toolplan serve`) and that "
        "base_url is right.",
        None,
        None,
    )


def stream_lost(execution_id: str, last: int, tries: int, why: str) -> ServiceError:
    return ServiceError(
        "stream_lost",
        f"The event stream of {execution_id} dropped and {tries} reconnections in a row brought no new event "
        f"({why}). The last event seen is {last}: call events({execution_id!r}, after={last}) once the service "
        "is back.",
        {"execution_id": execution_id, "last_event_id": last},
        None,
    )


def event_of(data: str) -> Event:
    return Event.from_json(json.loads(data))


def finished(response: httpx.Response) -> bool:
    """Whether an answer to `get_execution` says the execution has ended (False: look again later)."""
    if not response.is_success:
        if retryable(response):
            return False
        raise error_of(response)
    return str(response.json().get("status")) in _types.FINISHED


class Send(Generic[T]):
    """Where sending one call stands, for both clients' ``_send`` (as `Follow` is for ``events``).

    The clients send `request` (the arguments of httpx's ``request``) and say how each try ended:
    `lost` (no answer; raises ``unreachable`` after the last try) or `done` (an answer: True when it
    is the one to read); `delay` is the wait before the next try.
    """

    __slots__ = ("attempt", "base_url", "request", "retry")

    def __init__(self, call: Call[T], base_url: str, retry: RetryPolicy, timeout: httpx.Timeout) -> None:
        self.base_url = base_url
        self.retry = retry
        self.attempt = 0
        self.request: dict[str, Any] = {
            "method": call.method,
            "url": call.path,
            "params": call.params,
            "json": call.body,
            "headers": call.headers(),
            "timeout": call.timeout(timeout),
        }

    def _last(self) -> bool:
        return self.attempt + 1 == self.retry.attempts

    def lost(self, exc: httpx.TransportError) -> None:
        if self._last():
            raise unreachable(self.base_url, self.retry.attempts, exc) from exc

    def done(self, response: httpx.Response) -> bool:
        return self._last() or not retryable(response)

    def delay(self) -> float:
        """The seconds to wait before the next try."""
        self.attempt += 1
        return self.retry.delay(self.attempt - 1)


class Follow:
    """Where following an execution's event stream stands, for both clients' ``events``.

    The clients open the stream with `headers` (from the last event seen), hand each message's data
    to `take` and say how a connection ended (`refused`, `ended_early`, `lost`); `delay` is the wait
    before reconnecting, and raises ``stream_lost`` after ``retry.reconnects`` failures in a row.
    """

    __slots__ = ("execution_id", "failures", "last", "retry", "why")

    def __init__(self, execution_id: str, after: int, retry: RetryPolicy) -> None:
        self.execution_id = execution_id
        self.last = after
        self.retry = retry
        self.failures = 0
        self.why = ""

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": str(self.last)}

    def take(self, data: str) -> Event | None:
        """The event in a message's data; None for an empty message or an event seen already (never twice)."""
        if not data:
            return None
        event = event_of(data)
        if event.seq <= self.last:
            return None
        self.last, self.failures = event.seq, 0
        return event

    def refused(self, response: httpx.Response) -> None:
        """The service did not open the stream (its answer read already): raise unless it is worth another try."""
        if not retryable(response):
            raise error_of(response)
        self.why = f"the service answered {response.status_code}"

    def ended_early(self) -> None:
        self.why = "the stream ended before the execution did"

    def lost(self, exc: httpx.TransportError) -> None:
        self.why = f"{type(exc).__name__}: {exc}"

    def delay(self) -> float:
        """One more failure in a row: the seconds to wait before reconnecting."""
        self.failures += 1
        if self.failures > self.retry.reconnects:
            raise stream_lost(self.execution_id, self.last, self.failures - 1, self.why)
        return self.retry.delay(self.failures - 1)
