"""The GraphQL API's types (Strawberry): the request context, records loaded on demand, the object types.

The operations, the error handling and the router are in `._graphql`.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import strawberry
from fastapi import Request
from strawberry.fastapi import BaseContext
from strawberry.scalars import JSON
from strawberry.types import Info

from ..planner import new_id
from ._core import Service, execution_view

__all__ = (
    "Context",
    "Execution",
    "ExecutionChange",
    "ExecutionPage",
    "ExecutionStatus",
    "GqlInfo",
    "KeyBudget",
    "Plan",
    "PlanDialect",
    "PlanDraft",
    "PlanPage",
    "PlanningRequest",
    "RequestPage",
)

_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


# -- context ---------------------------------------------------------------------------------------


class _Ids:
    """New ids for what the mutations of one document create.

    Under an Idempotency-Key they derive from the id it reserved (the first one takes its digits,
    the n-th a hash of it and n), so a retry of a document whose first attempt died creates the
    same ids, in the same order, and finds what that attempt stored.
    """

    def __init__(self, reserved: str | None = None) -> None:
        self.reserved = reserved
        self.count = 0

    def new(self, prefix: str) -> str:
        if self.reserved is None:
            return new_id(prefix)
        _, ms, digits = self.reserved.split("_")
        if self.count:
            n = int.from_bytes(hashlib.sha256(f"{self.reserved}:{self.count}".encode()).digest()[:8], "big")
            digits = "".join(_B36[(n // 36**i) % 36] for i in range(8))
        self.count += 1
        return f"{prefix}_{ms}_{digits}"


class Context(BaseContext):
    """What the resolvers of one GraphQL request share."""

    def __init__(self, service: Service) -> None:
        super().__init__()
        self.service = service
        self.ids = _Ids()
        self.retry = False  # an error worth retrying (429, 5xx) happened: an Idempotency-Key keeps no answer

    @property
    def api_key(self) -> str:
        """The id of the caller's API key (the key check put it on the request)."""
        assert isinstance(self.request, Request)
        key: str = self.request.state.api_key
        return key


GqlInfo = Info[Context, None]


# -- rows ------------------------------------------------------------------------------------------


class _Row:
    """The fields known of a record, and how to load the rest, once, when a query asks for them.

    A listing knows a few fields of each record; ``steps`` (say) loads the record's full view. Fields
    known already keep their values, so one record answers consistently.
    """

    def __init__(self, known: dict[str, Any], load: Callable[[], Awaitable[dict[str, Any]]] | None = None) -> None:
        self.known = known
        self._load = load
        self._lock = asyncio.Lock()

    async def get(self, key: str) -> Any:
        if key not in self.known and self._load is not None:
            async with self._lock:
                if self._load is not None:
                    for k, v in (await self._load()).items():
                        self.known.setdefault(k, v)
                    self._load = None
        return self.known[key]


def _execution_row(service: Service, known: dict[str, Any]) -> _Row:
    async def load() -> dict[str, Any]:
        return execution_view(await service.store.get_run(known["execution_id"]))

    return _Row(known, load)


def _plan_row(service: Service, known: dict[str, Any]) -> _Row:
    async def load() -> dict[str, Any]:
        return await service.data.plan_info(known["plan_id"])

    return _Row(known, load)


def _request_row(service: Service, known: dict[str, Any]) -> _Row:
    async def load() -> dict[str, Any]:
        return await service.request_view(known["request_id"])

    return _Row(known, load)


_F = TypeVar("_F", bound=Callable[..., Any])


def _field(description: str) -> Callable[[_F], _F]:
    """``@strawberry.field(description=...)``, typed (Strawberry's overload for it returns Any)."""
    decorate: Callable[[_F], _F] = strawberry.field(description=description)
    return decorate


def _mutation(description: str) -> Callable[[_F], _F]:
    """``@strawberry.mutation(description=...)``, typed."""
    decorate: Callable[[_F], _F] = strawberry.mutation(description=description)
    return decorate


# -- types -----------------------------------------------------------------------------------------


@strawberry.type(description="One problem found in a plan: a stable code, the step it concerns, what to do.")
class Issue:
    code: str
    message: str
    step: str | None
    severity: str = strawberry.field(description="error (the plan cannot run) or warning.")

    @staticmethod
    def of(d: dict[str, Any]) -> Issue:
        return Issue(code=d["code"], message=d["message"], step=d.get("step"), severity=d.get("severity", "error"))


@strawberry.type(description="Why a step failed: its kind (business, infrastructure, timeout, ...) and message.")
class StepError:
    kind: str
    message: str


@strawberry.type(description="The record of one step of an execution.")
class StepResult:
    id: str
    tool: str
    status: str = strawberry.field(
        description="pending, running, succeeded, failed, timed_out, cancelled, skipped or not_run."
    )
    output: JSON | None = strawberry.field(description="What the tool returned (JSON data).")
    error: StepError | None
    attempts: int
    started_at: float | None = strawberry.field(description="Unix time, seconds.")
    ended_at: float | None = strawberry.field(description="Unix time, seconds.")
    reused: bool = strawberry.field(description="Taken from the store by a resumed execution, not run again.")
    used_fallback: bool = strawberry.field(description="The step's fallback ran and its result stands in.")
    fallback_link: int = strawberry.field(
        description="The link of the fallback chain whose result stands: 0 none, 1 the fallback, 2 its fallback..."
    )
    warnings: list[str]
    shared_with: list[str] = strawberry.field(
        description="Other steps of the execution with the same call of a read-only tool: one call was made for all."
    )
    cached: bool = strawberry.field(description="The result came from the result cache: no call was made.")

    @staticmethod
    def of(d: dict[str, Any]) -> StepResult:
        """From a step of `execution_view` (`toolplan.StepResult.to_dict`'s form)."""
        error = d["error"]
        return StepResult(
            id=d["id"],
            tool=d["tool"],
            status=d["status"],
            output=d["output"],
            error=StepError(kind=error["kind"], message=error["message"]) if error else None,
            attempts=d["attempts"],
            started_at=d["started_at"],
            ended_at=d["ended_at"],
            reused=d["reused"],
            used_fallback=d["used_fallback"],
            fallback_link=int(d.get("fallback_link") or 0),
            warnings=d["warnings"],
            shared_with=d.get("shared_with") or [],
            cached=bool(d.get("cached")),
        )


@strawberry.type(description="A step a budget refused (the run's, or the API key's window), and why.")
class Refusal:
    step_id: str
    message: str


@strawberry.type(description="What an API key spent of its budget window, and what is left (null: no limit).")
class KeyBudget:
    key: str
    window_start: float = strawberry.field(description="Unix time, seconds.")
    window_end: float = strawberry.field(description="Unix time, seconds: the next window starts then.")
    calls: int
    cost: float
    max_tool_calls: int | None
    max_cost: float | None
    calls_left: int | None
    cost_left: float | None
    input_tokens: int = strawberry.field(description="Model input tokens of the key's planning requests.")
    output_tokens: int = strawberry.field(description="Model output tokens of the key's planning requests.")
    total_tokens: int
    money: float = strawberry.field(description="What the key's planning requests cost, at the service's prices.")
    max_input_tokens: int | None
    max_output_tokens: int | None
    max_total_tokens: int | None
    max_money: float | None
    total_tokens_left: int | None
    money_left: float | None


@strawberry.type(description="An execution of a stored plan: its status, a table of its steps, its outputs.")
class Execution:
    row: strawberry.Private[_Row]

    @_field("exec_...")
    async def execution_id(self) -> str:
        return str(await self.row.get("execution_id"))

    @_field("The plan it was asked to run.")
    async def plan_id(self) -> str:
        return str(await self.row.get("plan_id"))

    @_field("queued, running, succeeded, failed or cancelled.")
    async def status(self) -> str:
        return str(await self.row.get("status"))

    @_field("Unix time, seconds.")
    async def created_at(self) -> float:
        return float(await self.row.get("created_at"))

    @_field("Unix time, seconds.")
    async def updated_at(self) -> float:
        return float(await self.row.get("updated_at"))

    @_field("Tool calls its steps began (what its budget has spent).")
    async def calls(self) -> int:
        return int(await self.row.get("calls"))

    @_field("A cancel was asked and its process has not stopped it yet.")
    async def cancel_requested(self) -> bool:
        return bool(await self.row.get("cancel_requested"))

    @_field("Its steps, in plan order.")
    async def steps(self) -> list[StepResult]:
        return [StepResult.of(d) for d in await self.row.get("steps")]

    @_field("The values of its output steps by step id, once it has finished ({} before).")
    async def outputs(self) -> JSON:
        value: JSON = await self.row.get("outputs")
        return value

    @_field("The steps a budget refused (the run's own, or the API key's window), with the limit's sentence.")
    async def refused(self) -> list[Refusal]:
        return [Refusal(step_id=d["step_id"], message=d["message"]) for d in await self.row.get("refused")]

    @_field(
        "Status pending_approval: the steps that wait for an answer (each with its tool, resolved arguments, "
        "annotations, rationale and dependents), as JSON; null otherwise. approveExecution answers them."
    )
    async def approval(self) -> JSON | None:
        value: JSON | None = await self.row.get("approval")
        return value


@strawberry.type(description="A stored plan (posted, or a planner's version) with its issues.")
class Plan:
    row: strawberry.Private[_Row]

    @_field("plan_...")
    async def plan_id(self) -> str:
        return str(await self.row.get("plan_id"))

    @_field("The plan in the native dialect (JSON); null for a draft that did not parse.")
    async def plan(self) -> JSON | None:
        value: JSON | None = await self.row.get("plan")
        return value

    @_field("The dialect it was written in: native, chaining or batch.")
    async def dialect(self) -> str | None:
        value: str | None = await self.row.get("dialect")
        return value

    @_field("The planning request it belongs to; null for a posted plan.")
    async def request_id(self) -> str | None:
        value: str | None = await self.row.get("request_id")
        return value

    @_field("The version it repairs; null for a first version or a posted plan.")
    async def parent_id(self) -> str | None:
        value: str | None = await self.row.get("parent_id")
        return value

    @_field("True when it has no errors and may run.")
    async def valid(self) -> bool:
        return bool(await self.row.get("valid"))

    @_field("Its errors and warnings.")
    async def issues(self) -> list[Issue]:
        return [Issue.of(d) for d in await self.row.get("issues")]

    @_field("Unix time, seconds.")
    async def created_at(self) -> float:
        return float(await self.row.get("created_at"))


@strawberry.type(description="One version of a request's plan: the first draft, or the repair of its parent.")
class PlanVersion:
    plan_id: str
    parent_id: str | None
    plan: JSON | None
    issues: list[Issue]
    valid: bool

    @staticmethod
    def of(d: dict[str, Any]) -> PlanVersion:
        return PlanVersion(
            plan_id=d["plan_id"],
            parent_id=d["parent_id"],
            plan=d["plan"],
            issues=[Issue.of(i) for i in d["issues"]],
            valid=d["valid"],
        )


@strawberry.type(name="Request", description="A planning request: a question and every version of its plan.")
class PlanningRequest:
    row: strawberry.Private[_Row]

    @_field("req_...")
    async def request_id(self) -> str:
        return str(await self.row.get("request_id"))

    @_field("The question, in natural language.")
    async def query(self) -> str:
        return str(await self.row.get("query"))

    @_field("Its final plan version (the one executeByRequestId runs).")
    async def plan_id(self) -> str | None:
        value: str | None = await self.row.get("plan_id")
        return value

    @_field("Unix time, seconds.")
    async def created_at(self) -> float:
        return float(await self.row.get("created_at"))

    @_field("Every version of its plan, oldest first (a repair names its parent).")
    async def versions(self) -> list[PlanVersion]:
        return [PlanVersion.of(v) for v in await self.row.get("versions")]


@strawberry.type(description="Model requests and tokens a planning took.")
class Usage:
    requests: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = strawberry.field(description="Of the input tokens, those read from the cache.")
    cache_write_tokens: int = strawberry.field(description="Of the input tokens, those written to the cache.")
    total_tokens: int = strawberry.field(description="Input plus output tokens.")


@strawberry.type(description="What the planner made of a question (valid: an invalid one is a plan_invalid error).")
class PlanDraft:
    request_id: str
    plan_id: str = strawberry.field(description="The final version (the repair, after a repair).")
    parent_id: str | None = strawberry.field(description="The first version, when the plan was repaired.")
    plan: JSON | None
    issues: list[Issue]
    valid: bool
    repaired: bool = strawberry.field(description="True when a repair request was made.")
    usage: Usage
    money: float | None = strawberry.field(description="What the planning cost, at the service's prices.")

    @staticmethod
    def of(d: dict[str, Any]) -> PlanDraft:
        u = d["usage"]
        return PlanDraft(
            request_id=d["request_id"],
            plan_id=d["plan_id"],
            parent_id=d["parent_id"],
            plan=d["plan"],
            issues=[Issue.of(i) for i in d["issues"]],
            valid=d["valid"],
            repaired=d["repaired"],
            usage=Usage(
                requests=u["requests"],
                input_tokens=u["input_tokens"],
                output_tokens=u["output_tokens"],
                cached_input_tokens=u["cached_input_tokens"],
                cache_write_tokens=u["cache_write_tokens"],
                total_tokens=u["total_tokens"],
            ),
            money=d["money"],
        )


@strawberry.type(description="What cancelExecution or resumeExecution did.")
class ExecutionChange:
    execution_id: str
    status: str = strawberry.field(
        description="Now: cancelled, cancelling (its process stops it at its next look), queued or running."
    )
    row: strawberry.Private[_Row]

    @_field("The execution, read after the change.")
    async def execution(self) -> Execution:
        return Execution(row=self.row)


@strawberry.type(description="A page of executions, newest first.")
class ExecutionPage:
    items: list[Execution]
    next_cursor: str | None = strawberry.field(description="Pass as after for the next page; null at the end.")


@strawberry.type(description="A page of planning requests, newest first.")
class RequestPage:
    items: list[PlanningRequest]
    next_cursor: str | None = strawberry.field(description="Pass as after for the next page; null at the end.")


@strawberry.type(description="A page of stored plans, newest first.")
class PlanPage:
    items: list[Plan]
    next_cursor: str | None = strawberry.field(description="Pass as after for the next page; null at the end.")


@strawberry.enum(description="An execution's status, to filter a listing by.")
class ExecutionStatus(enum.Enum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


@strawberry.enum(description="A plan's dialect (omitted: told from the plan's shape).")
class PlanDialect(enum.Enum):
    native = "native"
    chaining = "chaining"
    batch = "batch"
