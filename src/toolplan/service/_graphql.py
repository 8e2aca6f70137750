"""GraphQL at ``/graphql`` (Strawberry), over the same operations as the REST API.

The seed system's names are first-class: ``createPlanWithRequestId(query)`` plans a question and
``executeByRequestId(requestId)`` runs its plan; beside them the queries ``request``, ``plan``,
``execution``, ``executions`` (and ``requests``, ``plans``) and the mutations ``createPlan``,
``executePlan``, ``cancelExecution``, ``resumeExecution``. Every resolver calls the operation its
REST route calls (`Service`, `ServiceStore`), so the two APIs cannot drift apart.

- A coded error (``run_not_found``, ``invalid_plan``, ``no_model``, ...) is a GraphQL error with
  ``extensions: {"code", "details"}``, the code and details REST answers; a query the schema refuses
  (syntax, unknown field, too deep) has the code ``invalid_request``; a bug is ``internal_error``,
  logged, its message kept from the client.
- Documents are bounded (hostile input): depth 10 (introspection aside), 20 aliases, 2,000 tokens;
  the body limit of every route applies too.
- ``Idempotency-Key`` on a POST covers the whole document: the same key and body give the same
  answer, done once; the ids the mutations create are derived from the id the key reserved, so a
  retry after a crash finds what the first attempt stored.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import strawberry
from fastapi import APIRouter, Request, Response
from fastapi.routing import APIWebSocketRoute
from graphql import GraphQLError
from strawberry.extensions import MaxAliasesLimiter, QueryDepthLimiter, SchemaExtension
from strawberry.fastapi import BaseContext, GraphQLRouter
from strawberry.fastapi import router as _strawberry_router
from strawberry.scalars import JSON
from strawberry.types import ExecutionContext, Info

from .._defaults import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from ..planner import new_id
from ._core import Service, execution_view
from ._errors import ApiError, coded
from ._idem import HEADER as IDEMPOTENCY_HEADER
from ._idem import Outcome, idempotent

__all__ = ("MAX_ALIASES", "MAX_DEPTH", "MAX_TOKENS", "graphql_router")

log = logging.getLogger("toolplan.service")

MAX_DEPTH = 10
MAX_ALIASES = 20
MAX_TOKENS = 2_000
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


# What Strawberry's views raise for a request they cannot read (bad JSON, a mutation over GET, ...). The
# class has moved between packages (strawberry.http.exceptions, lia, cross_web); its router catches it
# under this name in every version.
_StrawberryHTTPError: type[Exception] = vars(_strawberry_router)["HTTPException"]


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


def _page_size(first: int) -> int:
    if not 1 <= first <= MAX_PAGE_SIZE:
        raise ApiError(400, "invalid_request", f"first is {first}: ask for 1 to {MAX_PAGE_SIZE} items a page.")
    return first


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
    warnings: list[str]

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
            warnings=d["warnings"],
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
            usage=Usage(requests=u["requests"], input_tokens=u["input_tokens"], output_tokens=u["output_tokens"]),
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


# -- operations ------------------------------------------------------------------------------------


@strawberry.type
class Query:
    @_field("A planning request by id (as GET /v1/requests/{id}).")
    async def request(self, info: GqlInfo, request_id: str) -> PlanningRequest:
        svc = info.context.service
        return PlanningRequest(row=_Row(await svc.request_view(request_id)))

    @_field("A stored plan by id (as GET /v1/plans/{id}).")
    async def plan(self, info: GqlInfo, plan_id: str) -> Plan:
        svc = info.context.service
        return Plan(row=_Row(await svc.data.plan_info(plan_id)))

    @_field("An execution by id (as GET /v1/executions/{id}).")
    async def execution(self, info: GqlInfo, execution_id: str) -> Execution:
        svc = info.context.service
        return Execution(row=_Row(execution_view(await svc.store.get_run(execution_id))))

    @_field("What the caller's API key spent of its budget window (as GET /v1/budget); null without one.")
    async def key_budget(self, info: GqlInfo) -> KeyBudget | None:
        usage = (await info.context.service.budget(info.context.api_key))["key_budget"]
        return None if usage is None else KeyBudget(**usage)

    @_field("Executions, newest first, by status or by the plan they were asked to run.")
    async def executions(
        self,
        info: GqlInfo,
        status: ExecutionStatus | None = None,
        plan_id: str | None = None,
        first: int = DEFAULT_PAGE_SIZE,
        after: str | None = None,
    ) -> ExecutionPage:
        svc = info.context.service
        filters = {"status": status.value if status is not None else None, "source_plan_id": plan_id}
        page = await svc.data.page("executions", limit=_page_size(first), cursor=after, filters=filters)
        return ExecutionPage(
            items=[Execution(row=_execution_row(svc, item)) for item in page.items], next_cursor=page.next_cursor
        )

    @_field("Planning requests, newest first.")
    async def requests(self, info: GqlInfo, first: int = DEFAULT_PAGE_SIZE, after: str | None = None) -> RequestPage:
        svc = info.context.service
        page = await svc.data.page("requests", limit=_page_size(first), cursor=after)
        return RequestPage(
            items=[PlanningRequest(row=_request_row(svc, item)) for item in page.items], next_cursor=page.next_cursor
        )

    @_field("Stored plans, newest first; requestId keeps a request's versions.")
    async def plans(
        self, info: GqlInfo, request_id: str | None = None, first: int = DEFAULT_PAGE_SIZE, after: str | None = None
    ) -> PlanPage:
        svc = info.context.service
        filters = {"request_id": request_id}
        page = await svc.data.page("plans", limit=_page_size(first), cursor=after, filters=filters)
        return PlanPage(items=[Plan(row=_plan_row(svc, item)) for item in page.items], next_cursor=page.next_cursor)


def _execution_of(svc: Service, outcome: Outcome) -> Execution:
    _, body = outcome  # the full view if it finished within wait, else its id, plan id and status
    return Execution(row=_execution_row(svc, body))


def _change(svc: Service, out: dict[str, Any]) -> ExecutionChange:
    execution_id = out["execution_id"]
    return ExecutionChange(
        execution_id=execution_id, status=out["status"], row=_execution_row(svc, {"execution_id": execution_id})
    )


@strawberry.type
class Mutation:
    @_mutation(
        "Plan a question with the service's model; stored under new request and plan ids "
        "(as POST /v1/requests). No model: error no_model; invalid after one repair: error plan_invalid."
    )
    async def create_plan_with_request_id(self, info: GqlInfo, query: str) -> PlanDraft:
        svc = info.context.service
        planner = svc.check_query(query)
        return PlanDraft.of(await svc.plan_query(planner, query))

    @_mutation("Validate a plan (JSON) and store it (as POST /v1/plans); error invalid_plan.")
    async def create_plan(self, info: GqlInfo, plan: JSON, dialect: PlanDialect | None = None) -> Plan:
        svc = info.context.service
        out = await svc.post_plan(info.context.ids.new("plan"), plan, dialect.value if dialect is not None else None)
        known = {"plan_id": out["plan_id"], "plan": out["plan"], "dialect": out["dialect"], "issues": out["warnings"]}
        return Plan(row=_plan_row(svc, known | {"request_id": None, "parent_id": None, "valid": True}))

    @_mutation(
        "Run a stored plan (as POST /v1/plans/{id}/executions); wait up to wait seconds (bounded) for it to finish."
    )
    async def execute_plan(self, info: GqlInfo, plan_id: str, wait: float = 0) -> Execution:
        ctx = info.context
        return _execution_of(ctx.service, await ctx.service.execute(ctx.ids.new("exec"), plan_id, ctx.api_key, wait))

    @_mutation("Run a planning request's final plan (as POST /v1/requests/{id}/executions); wait as executePlan.")
    async def execute_by_request_id(self, info: GqlInfo, request_id: str, wait: float = 0) -> Execution:
        ctx = info.context
        plan_ref = await ctx.service.plan_of_request(request_id)
        return _execution_of(ctx.service, await ctx.service.execute(ctx.ids.new("exec"), plan_ref, ctx.api_key, wait))

    @_mutation(
        "Cancel an execution (as POST /v1/executions/{id}/cancel): a queued one at once, a running one "
        "at its process's next look. A finished one: error run_conflict."
    )
    async def cancel_execution(self, info: GqlInfo, execution_id: str) -> ExecutionChange:
        svc = info.context.service
        out = await svc.cancel(execution_id)
        return ExecutionChange(
            execution_id=execution_id, status=out["status"], row=_execution_row(svc, {"execution_id": execution_id})
        )

    @_mutation(
        "Resume a cancelled or stopped execution (as POST /v1/executions/{id}/resume): steps that ended "
        "are kept, the rest run."
    )
    async def resume_execution(self, info: GqlInfo, execution_id: str) -> ExecutionChange:
        svc = info.context.service
        out = await svc.resume(execution_id)
        return ExecutionChange(
            execution_id=execution_id, status=out["status"], row=_execution_row(svc, {"execution_id": execution_id})
        )


# -- errors and limits -----------------------------------------------------------------------------

_INTERNAL = "The service failed unexpectedly; its log has the details."


def _is_bug(error: GraphQLError) -> bool:
    """An error in a resolver that is no coded error (a request-level error has no path)."""
    original = error.original_error
    return error.path is not None and (original is None or coded(original) is None)


class _Schema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """Log the bugs only: a coded error or a refused query is an answer, not a fault of the service."""
        for error in errors:
            if _is_bug(error):
                log.error("toolplan service: unexpected error in GraphQL", exc_info=error.original_error or error)


class _CodedErrors(SchemaExtension):
    """Each error gets ``extensions: {code, details}``; a bug's message is replaced (the log has it)."""

    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        if result is None or not getattr(result, "errors", None):
            return
        context = self.execution_context.context
        errors: list[GraphQLError] = []
        for error in result.errors or ():
            parts = coded(error.original_error) if error.original_error is not None else None
            if parts is not None:
                status, code, message, details = parts
                retry = status >= 500 or status == 429
            elif _is_bug(error):
                code, message, details, retry = "internal_error", _INTERNAL, None, True
            else:  # the document, its variables or its limits
                code, message, details, retry = "invalid_request", error.message, None, False
            if retry and isinstance(context, Context):
                context.retry = True
            errors.append(
                GraphQLError(
                    message,
                    nodes=error.nodes,
                    source=error.source,
                    positions=error.positions,
                    path=error.path,
                    original_error=None,
                    extensions={"code": code, "details": details},
                )
            )
        result.errors = errors


class _DepthLimit(QueryDepthLimiter):
    def __init__(self, *, execution_context: ExecutionContext | None = None) -> None:
        super().__init__(max_depth=MAX_DEPTH)


class _AliasLimit(MaxAliasesLimiter):
    def __init__(self, *, execution_context: ExecutionContext | None = None) -> None:
        super().__init__(max_alias_count=MAX_ALIASES)


class _TokenLimit(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        self.execution_context.parse_options["max_tokens"] = MAX_TOKENS
        yield


SCHEMA = _Schema(
    query=Query,
    mutation=Mutation,
    extensions=[_TokenLimit, _DepthLimit, _AliasLimit, _CodedErrors],
)


# -- the router ------------------------------------------------------------------------------------


class _Router(GraphQLRouter[Context, None]):
    """Strawberry's router, with Idempotency-Key on POST and JSON errors for requests it cannot read."""

    def __init__(self, service: Service) -> None:
        def context() -> Context:
            return Context(service)

        # No GraphiQL page: it loads its files from a CDN (blank offline); any GraphQL client works.
        super().__init__(SCHEMA, context_getter=context, subscription_protocols=(), graphql_ide=None)
        self.service = service
        # No subscriptions: no websocket route (the API key check reads an HTTP request).
        self.routes = [r for r in self.routes if not isinstance(r, APIWebSocketRoute)]

    async def run(self, request: Any, context: Any = None, root_value: Any = None) -> Any:
        assert isinstance(context, Context)
        if request.method == "GET" and "query" not in request.query_params:
            raise ApiError(
                400,
                "invalid_request",
                "GET /graphql takes a query (?query=...; queries only): POST /graphql a JSON object with query "
                "and variables for mutations. This service serves no GraphQL IDE page: use any GraphQL client "
                "with the X-API-Key header, or the REST API's /docs.",
            )
        if request.method != "POST" or IDEMPOTENCY_HEADER not in request.headers:
            return await self._answer(request, context, root_value)

        async def action(reserved: str) -> Outcome:
            context.ids = _Ids(reserved)
            response = await self._answer(request, context, root_value)
            return response.status_code, json.loads(bytes(response.body))

        return await idempotent(request, self.service.data, "gql", action, keep=lambda _outcome: not context.retry)

    def decode_json(self, data: str | bytes) -> object:
        """The request body's JSON; nested too deep for Python's reader is the client's error, not ours."""
        try:
            return json.loads(data)
        except RecursionError:
            raise ApiError(
                400,
                "invalid_request",
                "The request body is JSON nested too deeply to read: send a plan and variables nested less deeply.",
            ) from None

    async def _answer(self, request: Request, context: Context, root_value: Any) -> Response:
        try:
            response: Response = await super().run(request, context, root_value)
        except _StrawberryHTTPError as exc:
            status: int = getattr(exc, "status_code", 400)
            reason = str(getattr(exc, "reason", exc)).rstrip(".")
            raise ApiError(
                status,
                "invalid_request",
                f"{reason}: POST /graphql a JSON object with query (a string) and variables "
                "(an object); see docs/service-graphql.md.",
            ) from exc
        return response


def graphql_router(service: Service) -> APIRouter:
    """The GraphQL endpoint of ``service``: mount it with a prefix (``/graphql``) behind the API key check.

    GET takes queries (``?query=...``); POST takes queries and mutations. No in-browser IDE is served.
    """
    return _Router(service)
