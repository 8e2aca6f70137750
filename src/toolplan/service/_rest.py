"""The REST API under ``/v1`` (OpenAPI at ``/docs``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from .._defaults import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from .._json import dumps
from .._ui import graph_view
from ._approvals import AnswerIn, ApprovalIn, parse_answers, rule_of
from ._core import Service, check_text
from ._errors import ApiError
from ._events import event_stream
from ._idem import Outcome, idempotent
from ._keep import Finish

__all__ = ("router",)

MAX_EVENT_ID = 2**63 - 1  # the largest number a store's integer column holds


class RequestIn(BaseModel):
    """A question to plan."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, description="The question, in natural language.")


class PlanIn(BaseModel):
    """A plan to validate and store, in any dialect (a JSON object, or its text)."""

    model_config = ConfigDict(extra="forbid")
    plan: dict[str, Any] | str
    dialect: Literal["native", "chaining", "batch"] | None = None


class ExecuteIn(BaseModel):
    """Options of an execution (the body may be left out)."""

    model_config = ConfigDict(extra="forbid")
    approval: ApprovalIn | None = Field(
        None, description="Which steps wait for a person's answer before their tool is called."
    )


class ApprovalsIn(BaseModel):
    """Answers for the steps an execution waits for, by step id."""

    model_config = ConfigDict(extra="forbid")
    answers: dict[str, AnswerIn] = Field(
        description='Step id -> {"approve": true}, {"approve": true, "arguments": {...}} or {"reject": "reason"}.'
    )


async def service(request: Request) -> Service:  # async: FastAPI would run a plain def in a worker thread
    svc: Service = request.app.state.service
    return svc


Svc = Annotated[Service, Depends(service)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Rows per page.")]
Cursor = Annotated[str | None, Query(max_length=400, description="The next_cursor of the previous page.")]
IdemHeader = Annotated[
    str | None,
    Header(alias="Idempotency-Key", description="The same key and body give the same response, done once."),
]
Wait = Annotated[float, Query(ge=0, description="Seconds to wait for the result (bounded).")]


router = APIRouter(prefix="/v1")
Record = dict[str, Any]  # a read's JSON object, as the OpenAPI document describes it


def encoded(record: Record) -> Response:
    """``record`` as a JSON response, encoded once: FastAPI would first copy every value through its encoder."""
    return Response(dumps(record).encode(), media_type="application/json")


@router.post("/requests", status_code=201, tags=["requests"])
async def create_request(body: RequestIn, request: Request, svc: Svc, _key: IdemHeader = None) -> JSONResponse:
    """Plan a question: the request id, the plan id and the plan (422 if it is invalid after one repair)."""
    planner = svc.check_query(body.query)

    async def action(_reserved: str, _finish: Finish | None) -> Outcome:
        return 201, await svc.plan_query(planner, body.query, getattr(request.state, "api_key", None))

    return await idempotent(request, svc.data, "req", action)


@router.get("/requests/{request_id}", tags=["requests"], response_model=Record)
async def get_request(request_id: str, svc: Svc) -> Response:
    """A planning request: its question and every version of its plan (a repair names its parent)."""
    return encoded(await svc.request_view(request_id))


@router.get("/requests", tags=["requests"])
async def list_requests(svc: Svc, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> dict[str, Any]:
    """Planning requests, newest first."""
    page = await svc.data.page("requests", limit=limit, cursor=cursor)
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.post("/requests/{request_id}/executions", status_code=202, tags=["requests"])
async def execute_request(
    request_id: str,
    request: Request,
    svc: Svc,
    wait: Wait = 0,
    body: ExecuteIn | None = None,
    _key: IdemHeader = None,
) -> JSONResponse:
    """Run a request's final plan (as ``POST /v1/plans/{plan_id}/executions``)."""
    return await _execute(request, svc, await svc.plan_of_request(request_id), wait, body)


@router.post("/plans", status_code=201, tags=["plans"])
async def create_plan(body: PlanIn, request: Request, svc: Svc, _key: IdemHeader = None) -> JSONResponse:
    """Validate a plan against the catalogue and store it (422 with every issue if invalid)."""
    check_text(body.plan, "plan")  # before anything is kept, idempotency records too

    async def action(reserved: str, finish: Finish | None) -> Outcome:
        return 201, await svc.post_plan(reserved, body.plan, body.dialect, finish=finish)

    return await idempotent(request, svc.data, "plan", action, optimistic=True)


@router.post("/plans/dry-run", tags=["plans"])
async def dry_run_plan(body: PlanIn, svc: Svc) -> dict[str, Any]:
    """What a plan would do, without doing it; no tool runs and nothing is stored.

    Its graph, each step's tool and annotations, the budget's worst case against the service's
    limits, the expected duration from the store's latencies.
    """
    return await svc.dry_run(body.plan, body.dialect)


@router.post("/plans/{plan_id}/dry-run", tags=["plans"])
async def dry_run_stored_plan(plan_id: str, svc: Svc) -> dict[str, Any]:
    """A dry run of a stored plan (as ``POST /v1/plans/dry-run``): no tool runs; nothing is stored."""
    return await svc.dry_run_stored(plan_id)


@router.get("/plans/{plan_id}", tags=["plans"], response_model=Record)
async def get_plan(plan_id: str, svc: Svc) -> Response:
    """A stored plan (posted, or a planner's version) with its issues."""
    return encoded(await svc.data.plan_info(plan_id))


@router.get("/plans", tags=["plans"])
async def list_plans(
    svc: Svc, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None, request_id: str | None = None
) -> dict[str, Any]:
    """Stored plans, newest first; ``request_id`` keeps a request's versions."""
    page = await svc.data.page("plans", limit=limit, cursor=cursor, filters={"request_id": request_id})
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.post("/plans/{plan_id}/executions", status_code=202, tags=["executions"])
async def execute_plan_by_id(
    plan_id: str,
    request: Request,
    svc: Svc,
    wait: Wait = 0,
    body: ExecuteIn | None = None,
    _key: IdemHeader = None,
) -> JSONResponse:
    """Run a stored plan: 202 with the execution id, or 200 with the execution if it ends within ``wait``.

    With ``approval`` in the body, the steps it marks wait for an answer (status ``pending_approval``,
    which also ends the ``wait``).
    """
    return await _execute(request, svc, plan_id, wait, body)


async def _execute(request: Request, svc: Service, plan_ref: str, wait: float, body: ExecuteIn | None) -> JSONResponse:
    """Run ``plan_ref`` once per idempotency key, waiting up to ``wait`` seconds for its end."""
    rule = rule_of(body.approval if body is not None else None)

    async def action(reserved: str, finish: Finish | None) -> Outcome:
        return await svc.execute(reserved, plan_ref, request.state.api_key, wait, rule, finish=finish)

    return await idempotent(request, svc.data, "exec", action, optimistic=not wait > 0)


@router.get("/executions/{execution_id}", tags=["executions"], response_model=Record)
async def get_execution(execution_id: str, svc: Svc) -> Response:
    """An execution: status, the table of its steps, and its outputs once it has finished."""
    return Response(await svc.views.execution(execution_id), media_type="application/json")


@router.get("/executions/{execution_id}/graph", tags=["executions"])
async def get_execution_graph(execution_id: str, svc: Svc) -> dict[str, Any]:
    """The execution's plan as a graph: ``steps`` (``id``, ``tool``, ``deps``) and ``output_steps``.

    What the live page at ``/ui/executions/{execution_id}`` draws.
    """
    return graph_view(execution_id, (await svc.store.get_run(execution_id)).plan)


@router.get("/executions", tags=["executions"])
async def list_executions(
    svc: Svc,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
    status: Literal["queued", "running", "pending_approval", "succeeded", "failed", "cancelled"] | None = None,
    plan_id: str | None = None,
) -> dict[str, Any]:
    """Executions, newest first, optionally by status or by the plan id they were asked to run."""
    page = await svc.data.page(
        "executions", limit=limit, cursor=cursor, filters={"status": status, "source_plan_id": plan_id}
    )
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.post("/executions/{execution_id}/cancel", status_code=202, tags=["executions"])
async def cancel_execution(execution_id: str, request: Request, svc: Svc, _key: IdemHeader = None) -> JSONResponse:
    """Cancel an execution: a queued one at once, a running one at its process's next look."""

    async def action(_reserved: str, _finish: Finish | None) -> Outcome:
        return 202, await svc.cancel(execution_id)

    return await idempotent(request, svc.data, "cancel", action)


@router.post("/executions/{execution_id}/resume", status_code=202, tags=["executions"])
async def resume_execution(execution_id: str, request: Request, svc: Svc, _key: IdemHeader = None) -> JSONResponse:
    """Resume a cancelled or stopped execution: steps that ended are kept, the rest run."""

    async def action(_reserved: str, _finish: Finish | None) -> Outcome:
        return 202, await svc.resume(execution_id)

    return await idempotent(request, svc.data, "resume", action)


@router.post("/executions/{execution_id}/approvals", status_code=202, tags=["executions"])
async def approve_execution(
    execution_id: str, body: ApprovalsIn, request: Request, svc: Svc, _key: IdemHeader = None
) -> JSONResponse:
    """Answer the steps an execution waits for (status ``pending_approval``); it goes on at once.

    Steps that ran are not run again; a step left unanswered waits again. A bad answer (a step that
    does not wait, edited arguments that do not fit the tool) is 400 ``invalid_approval`` and
    nothing changes. The key needs the ``approve`` permission.
    """
    await svc.keys.require(request.state.api_key, "approve")
    answers = parse_answers(body.answers)

    async def action(_reserved: str, _finish: Finish | None) -> Outcome:
        return 202, await svc.approve(execution_id, answers)

    return await idempotent(request, svc.data, "approve", action)


@router.get("/budget", tags=["executions"])
async def get_budget(request: Request, svc: Svc) -> dict[str, Any]:
    """What the caller's API key spent of its budget window (``serve --key-budget-*``), and what is left."""
    return await svc.budget(request.state.api_key)


@router.get("/executions/{execution_id}/events", tags=["executions"], response_class=EventSourceResponse)
async def execution_events(
    execution_id: str,
    svc: Svc,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0)] = None,
    after: Annotated[int, Query(ge=0, description="Start after this event number (as Last-Event-ID).")] = 0,
) -> EventSourceResponse:
    """Server-sent events of an execution; each event's id is its number. Reconnect with Last-Event-ID."""
    await svc.data.status_of(execution_id)  # 404 before the stream starts
    start = last_event_id if last_event_id is not None else after
    if start > MAX_EVENT_ID:
        raise ApiError(
            400,
            "invalid_event_id",
            f"Event number {start} is past the largest an execution can have ({MAX_EVENT_ID}): send the id of "
            "the last event received (Last-Event-ID or ?after=), or 0 for all.",
        )
    return EventSourceResponse(event_stream(svc, execution_id, start), ping=15)
