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

import json
from collections.abc import Iterator
from typing import Any

import strawberry
from fastapi import APIRouter, Request, Response
from fastapi.routing import APIWebSocketRoute
from graphql import GraphQLError
from strawberry.extensions import MaxAliasesLimiter, QueryDepthLimiter, SchemaExtension
from strawberry.fastapi import GraphQLRouter
from strawberry.fastapi import router as _strawberry_router
from strawberry.scalars import JSON
from strawberry.types import ExecutionContext

from .._defaults import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from ._approvals import answers_json, rule_json
from ._core import Service, execution_view
from ._errors import INTERNAL_MESSAGE, ApiError, coded, log_bug
from ._graphql_types import (
    Context,
    Execution,
    ExecutionChange,
    ExecutionPage,
    ExecutionStatus,
    GqlInfo,
    KeyBudget,
    Plan,
    PlanDialect,
    PlanDraft,
    PlanningRequest,
    PlanPage,
    RequestPage,
    _execution_row,
    _field,
    _Ids,
    _mutation,
    _plan_row,
    _request_row,
    _Row,
)
from ._idem import HEADER as IDEMPOTENCY_HEADER
from ._idem import Outcome, idempotent
from ._keep import Finish

__all__ = ("MAX_ALIASES", "MAX_DEPTH", "MAX_TOKENS", "graphql_router")

MAX_DEPTH = 10
MAX_ALIASES = 20
MAX_TOKENS = 2_000


# What Strawberry's views raise for a request they cannot read (bad JSON, a mutation over GET, ...). The
# class has moved between packages (strawberry.http.exceptions, lia, cross_web); its router catches it
# under this name in every version.
_StrawberryHTTPError: type[Exception] = vars(_strawberry_router)["HTTPException"]


def _page_size(first: int) -> int:
    if not 1 <= first <= MAX_PAGE_SIZE:
        raise ApiError(400, "invalid_request", f"first is {first}: ask for 1 to {MAX_PAGE_SIZE} items a page.")
    return first


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

    @_field(
        "What a plan would do, without doing it (as POST /v1/plans/dry-run, or POST /v1/plans/{id}/dry-run with "
        "planId): its graph, steps, the budget's worst case and the expected duration, as JSON. No tool runs."
    )
    async def dry_run(
        self, info: GqlInfo, plan: JSON | None = None, plan_id: str | None = None, dialect: PlanDialect | None = None
    ) -> JSON:
        svc = info.context.service
        if (plan is None) == (plan_id is None):
            raise ApiError(400, "invalid_request", "dryRun takes a plan or a planId: give exactly one of them.")
        if plan_id is not None:
            report = await svc.dry_run_stored(plan_id)
        else:
            report = await svc.dry_run(plan, dialect.value if dialect is not None else None)
        return JSON(report)

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


async def _execute(info: GqlInfo, plan_ref: str, wait: float, approval: JSON | None) -> Execution:
    ctx = info.context
    out = await ctx.service.execute(ctx.ids.new("exec"), plan_ref, ctx.api_key, wait, rule_json(approval))
    _, body = out  # the full view if it finished within wait, else its id, plan id and status
    return Execution(row=_execution_row(ctx.service, body))


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
        return PlanDraft.of(await svc.plan_query(planner, query, info.context.api_key))

    @_mutation("Validate a plan (JSON) and store it (as POST /v1/plans); error invalid_plan.")
    async def create_plan(self, info: GqlInfo, plan: JSON, dialect: PlanDialect | None = None) -> Plan:
        svc = info.context.service
        out = await svc.post_plan(info.context.ids.new("plan"), plan, dialect.value if dialect is not None else None)
        known = {"plan_id": out["plan_id"], "plan": out["plan"], "dialect": out["dialect"], "issues": out["warnings"]}
        return Plan(row=_plan_row(svc, known | {"request_id": None, "parent_id": None, "valid": True}))

    @_mutation(
        "Run a stored plan (as POST /v1/plans/{id}/executions); wait up to wait seconds (bounded) for it to finish. "
        'approval (e.g. {"destructive": true, "tools": ["charge"], "timeout": 600}) makes the steps it marks '
        "wait for an answer (approveExecution)."
    )
    async def execute_plan(
        self, info: GqlInfo, plan_id: str, wait: float = 0, approval: JSON | None = None
    ) -> Execution:
        return await _execute(info, plan_id, wait, approval)

    @_mutation("Run a planning request's final plan (as POST /v1/requests/{id}/executions); wait as executePlan.")
    async def execute_by_request_id(
        self, info: GqlInfo, request_id: str, wait: float = 0, approval: JSON | None = None
    ) -> Execution:
        return await _execute(info, await info.context.service.plan_of_request(request_id), wait, approval)

    @_mutation(
        "Cancel an execution (as POST /v1/executions/{id}/cancel): a queued one at once, a running one "
        "at its process's next look. A finished one: error run_conflict."
    )
    async def cancel_execution(self, info: GqlInfo, execution_id: str) -> ExecutionChange:
        svc = info.context.service
        return _change(svc, await svc.cancel(execution_id))

    @_mutation(
        "Resume a cancelled or stopped execution (as POST /v1/executions/{id}/resume): steps that ended "
        "are kept, the rest run."
    )
    async def resume_execution(self, info: GqlInfo, execution_id: str) -> ExecutionChange:
        svc = info.context.service
        return _change(svc, await svc.resume(execution_id))

    @_mutation(
        "Answer the steps an execution waits for (as POST /v1/executions/{id}/approvals): answers maps a step "
        'id to {"approve": true}, {"approve": true, "arguments": {...}} or {"reject": "reason"}. A bad answer: '
        "error invalid_approval, nothing changes. The key needs the approve permission (error forbidden)."
    )
    async def approve_execution(self, info: GqlInfo, execution_id: str, answers: JSON) -> ExecutionChange:
        svc = info.context.service
        await svc.keys.require(info.context.api_key, "approve")
        out = await svc.approve(execution_id, answers_json(answers))
        return _change(svc, out)


# -- errors and limits -----------------------------------------------------------------------------


def _is_bug(error: GraphQLError) -> bool:
    """An error in a resolver that is no coded error (a request-level error has no path)."""
    original = error.original_error
    return error.path is not None and (original is None or coded(original) is None)


class _Schema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """Log the bugs only: a coded error or a refused query is an answer, not a fault of the service."""
        for error in errors:
            if _is_bug(error):
                log_bug(error.original_error or error, " in GraphQL")


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
                code, message, details, retry = "internal_error", INTERNAL_MESSAGE, None, True
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

        async def action(reserved: str, _finish: Finish | None) -> Outcome:
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
