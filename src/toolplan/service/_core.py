"""`Service`: the parts a planner service runs on, and the operations both of its APIs share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import PlanIssue, PlanValidationError, RunConflictError, UserError
from .._json import json_safe
from ..execute import Approval, execute_plan
from ..models import Model, SpendCharge, SpendLimits
from ..plan import validate_plan
from ..planner import PlanDraft, Planner, get_request
from ..store import RunInfo, Store
from ..tools import ToolRegistry, ToolsLike
from ._approvals import answer
from ._auth import KeyCheck
from ._config import ServiceConfig
from ._errors import ApiError
from ._keep import Finish
from ._runner import FINISHED, SETTLED, Runner
from ._store import ServiceStore
from ._views import Views

__all__ = ("Service", "draft_view", "execution_view", "issue_view")


class Service:
    """A planner service over ``store``: plans questions with ``model`` (optional) and runs plans over ``tools``.

    Args:
        store: Where requests, plans, executions and their events live (`toolplan.store.open_store`).
        tools: The catalogue the plans call.
        model: The planner's model (a `Model` or ``"provider:name"``); without it ``POST /v1/requests``
            answers 503 and everything else works.
        config: Limits and timings.
        api_keys: Keys accepted besides the store's (e.g. read from ``--api-key-file``).
    """

    def __init__(
        self,
        store: Store,
        tools: ToolsLike,
        *,
        model: Model | str | None = None,
        config: ServiceConfig | None = None,
        api_keys: Iterable[str] = (),
    ) -> None:
        self.store = store
        self.data = ServiceStore(store)
        self.views = Views(self.data, execution_view)  # status reads
        self.tools = ToolRegistry.of(tools)
        self.config = config or ServiceConfig()
        self.planner = Planner(model, self.tools, store=store, spend=self.config.spend) if model is not None else None
        self.runner = Runner(store, self.tools, self.config)
        budget = self.config.key_budget
        # Each key's model spend, in the same window as its tool calls (the store's: every worker's).
        self.spend_window = self.runner.window
        if self.planner is not None and budget is not None and budget.max_money is not None:
            (self.config.spend or SpendLimits()).check(self.planner.model, money=True)
        self.keys = KeyCheck(self.data, api_keys)

    def need_planner(self) -> Planner:
        if self.planner is None:
            raise ApiError(
                503,
                "no_model",
                "This service has no model to plan questions with: start it with --model provider:name "
                "(e.g. --model openai:gpt-4o-mini with OPENAI_API_KEY set, or --model local:smollm2). "
                "Without one, POST /v1/plans takes a plan you write, and runs it.",
            )
        return self.planner

    def check_query(self, query: str) -> Planner:
        """The planner for ``query``, once it is known that there is one and the question fits."""
        check_text(query, "query")
        planner = self.need_planner()
        if not query:
            raise UserError("query is empty: send the question to plan, in natural language.")
        if len(query) > self.config.max_query_chars:
            raise UserError(f"query is {len(query)} characters, over this service's {self.config.max_query_chars}.")
        return planner

    async def plan_query(self, planner: Planner, query: str, api_key: str | None) -> dict[str, Any]:
        """Plan ``query`` (stored under new request and plan ids): the draft, valid.

        The planner's model requests are charged to ``api_key``'s spend window, if the service has one.

        Raises:
            ApiError: 422 ``plan_invalid`` when the plan is invalid even after one repair (its details
                hold the draft, as this returns it); nothing ran.
            UsageLimitExceeded: a spend cap (the service's per request, or the key's window) was reached.
        """
        charge = None
        if self.spend_window is not None:
            money = self.config.key_budget is not None and self.config.key_budget.max_money is not None
            charge = SpendCharge(self.spend_window, api_key or "(no key)", needs_price=money)
        draft = await planner.plan(query, charge=charge)
        out = draft_view(draft)
        if not draft.valid:
            message = "The model's plan is invalid even after one repair; nothing ran. details has the plan and issues."
            raise ApiError(422, "plan_invalid", message, out)
        return out

    async def request_view(self, request_id: str) -> dict[str, Any]:
        """A planning request: its question and every version of its plan (a repair names its parent)."""
        info = await get_request(self.store, request_id)
        return {
            "request_id": info.request_id,
            "query": info.query,
            "plan_id": info.plan_id,
            "created_at": info.created_at,
            "versions": [
                {
                    "plan_id": v.plan_id,
                    "parent_id": v.parent_id,
                    "plan": v.plan.to_dict() if v.plan is not None else None,
                    "issues": [issue_view(i) for i in v.issues],
                    "valid": v.valid,
                }
                for v in info.versions
            ],
        }

    async def plan_of_request(self, request_id: str) -> str:
        """The id of the plan a request's execution runs: its final version."""
        info = await get_request(self.store, request_id)
        if info.plan_id is None:
            raise ApiError(422, "plan_invalid", f"Request {request_id!r} has no plan to run.")
        return info.plan_id

    async def post_plan(
        self, plan_ref: str, source: Any, dialect: str | None, *, finish: Finish | None = None
    ) -> dict[str, Any]:
        """Validate ``source`` against the catalogue and store it as ``plan_ref``.

        ``finish``: the request's Idempotency-Key, whose response (201) is kept as the plan is stored.
        """
        check_text(source, "plan")
        report = validate_plan(source, self.tools, dialect=dialect)  # type: ignore[arg-type]
        if report.plan is None or report.errors:
            raise PlanValidationError(report.errors)
        body = {
            "plan_id": plan_ref,
            "plan": report.plan.to_dict(),
            "dialect": report.plan.dialect,
            "warnings": [issue_view(i) for i in report.warnings],
        }
        try:
            await self.data.save_plan(
                plan_ref, report.plan, report.warnings, keep=None if finish is None else (finish, 201, body)
            )
        except Exception:
            if (await self.data.plan_info(plan_ref))["plan"] is None:  # not stored by an earlier attempt
                raise
        return body

    async def execute(
        self,
        run_id: str,
        plan_ref: str,
        api_key: str,
        wait: float,
        approval: Mapping[str, Any] | None = None,
        *,
        finish: Finish | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Queue an execution of stored plan ``plan_ref`` as ``run_id``; wait up to ``wait`` seconds for it.

        ``approval`` (an `ApprovalRule` as JSON data) makes the steps it marks wait for an answer.
        ``finish``: the request's Idempotency-Key; without ``wait`` its response (202) is kept as the
        execution is queued.
        """
        if not wait >= 0:
            raise UserError(f"wait is {wait!r}: give the seconds to wait for the result, 0 or more.")
        stored = await self._stored_plan(plan_ref)
        report = validate_plan(stored, self.tools)  # the catalogue may have changed since
        if report.plan is None or report.errors:
            raise PlanValidationError(report.errors)
        queued = {"execution_id": run_id, "plan_id": plan_ref, "status": "queued"}
        with contextlib.suppress(RunConflictError):  # queued by an earlier attempt of this idempotent request
            await self.data.enqueue(
                run_id,
                report.plan,
                self.config.limits,
                source_plan_id=plan_ref,
                api_key=api_key,
                max_active=self.config.max_active_per_key,
                approval=approval,
                keep=None if finish is None or wait > 0 else (finish, 202, queued),
            )
        self.runner.wake(queued=True)
        if not wait > 0:
            return 202, queued
        status = await self.runner.wait(run_id, min(wait, self.config.max_wait))
        if status in SETTLED:
            return 200, execution_view(await self.store.get_run(run_id))
        return 202, {"execution_id": run_id, "plan_id": plan_ref, "status": status}

    async def dry_run(self, source: Any, dialect: str | None = None) -> dict[str, Any]:
        """What a plan would do here, as `DryRunReport.to_dict`: nothing runs and nothing is stored.

        The service's limits apply, and the store's latencies give the expected duration.

        Raises:
            PlanValidationError: the plan is invalid (422 with every issue).
        """
        check_text(source, "plan")
        report = await execute_plan(
            source,
            self.tools,
            dialect=dialect,  # type: ignore[arg-type]
            store=self.store,
            limits=self.config.limits,
            dry_run=True,
        )
        return report.to_dict()

    async def dry_run_stored(self, plan_ref: str) -> dict[str, Any]:
        """`dry_run` of stored plan ``plan_ref`` (an invalid draft: 422 ``plan_invalid``, as `execute`)."""
        stored = await self._stored_plan(plan_ref)
        return {"plan_id": plan_ref, **await self.dry_run(stored)}

    async def _stored_plan(self, plan_ref: str) -> Any:
        """Stored plan ``plan_ref``'s body; an invalid draft raises 422 ``plan_invalid``."""
        info = await self.data.plan_info(plan_ref)
        if not info["valid"] or info["plan"] is None:
            raise ApiError(
                422,
                "plan_invalid",
                f"Plan {plan_ref!r} is an invalid draft and cannot run: fix it and POST /v1/plans.",
                info["issues"],
            )
        return info["plan"]

    async def budget(self, api_key: str) -> dict[str, Any]:
        """What ``api_key`` spent of its budget window (``{"key_budget": null}`` when there is none)."""
        window = self.runner.window
        if window is None:
            return {"key_budget": None}
        return {"key_budget": (await window.usage(api_key)).to_dict()}

    async def cancel(self, execution_id: str) -> dict[str, Any]:
        """Cancel an execution: a queued one at once (``cancelled``), a running one soon (``cancelling``).

        A running one stops at once when this process runs it, else at its process's next look.
        """
        status = await self.data.request_cancel(execution_id)
        if status == "running":
            self.runner.cancel(execution_id)  # at once when this process runs it
            status = "cancelling"
        return {"execution_id": execution_id, "status": status}

    async def approve(self, execution_id: str, answers: Mapping[str, Approval]) -> dict[str, Any]:
        """Answer the steps an execution waits for; it goes on in this service's runner."""
        status = await answer(self.store, self.tools, execution_id, answers)
        self.runner.wake()
        return {"execution_id": execution_id, "status": status}

    async def resume(self, execution_id: str) -> dict[str, Any]:
        """Resume a cancelled or stopped execution: steps that ended are kept, the rest run."""
        status = await self.data.requeue(execution_id)
        self.runner.wake()
        return {"execution_id": execution_id, "status": status}


def check_text(value: Any, where: str) -> None:
    r"""Refuse text that is not Unicode (a lone surrogate such as ``\\ud800``): nothing could store or send it.

    Raises:
        ApiError: 400 ``invalid_text``, naming where the first such text is.
    """
    bad = _first_bad_text(value, where)
    if bad is not None:
        raise ApiError(
            400,
            "invalid_text",
            f"{bad} holds a lone surrogate (an escape such as \\ud800 with no pair), which is not Unicode: "
            "send valid text. Nothing was stored.",
        )


def _first_bad_text(value: Any, where: str) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _first_bad_text(key, f"{where} (a key)") or _first_bad_text(item, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_bad_text(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def execution_view(info: RunInfo) -> dict[str, Any]:
    """An execution as the API shows it: status, a table of its steps, and its outputs."""
    s, result = info.summary, info.result
    steps = []
    for r in result.steps.values():
        d = r.to_dict()
        del d["arguments"]  # the API shows a step's record without the arguments it was called with
        steps.append(d)
    finished = s.status in FINISHED
    return {
        "execution_id": s.run_id,
        "plan_id": s.source_plan_id or s.plan_id,
        "status": s.status,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "calls": s.calls,
        "cancel_requested": s.cancel_requested,
        "steps": steps,
        "outputs": json_safe(result.outputs) if finished else {},  # not to_dict(): no critical path per read
        # The steps a budget (the run's, or the key's window) refused: each step and the limit's sentence.
        "refused": [
            {"step_id": r.id, "message": r.error.message}
            for r in result.steps.values()
            if r.error is not None and r.error.kind == "limit"
        ],
        # Status pending_approval: the steps that wait (resolved arguments, annotations, dependents).
        "approval": result.approval.to_dict() if result.approval is not None else None,
    }


def issue_view(issue: PlanIssue) -> dict[str, Any]:
    """A plan issue as the API shows it: ``{"code", "step", "message", "severity"}``."""
    return issue.to_dict(severity=True)


def draft_view(draft: PlanDraft) -> dict[str, Any]:
    """What the planner made of a question, as the API shows it."""
    return {
        "request_id": draft.request_id,
        "plan_id": draft.plan_id,
        "parent_id": draft.parent_id,
        "plan": draft.plan.to_dict() if draft.plan is not None else None,
        "issues": [issue_view(i) for i in draft.issues],
        "valid": draft.valid,
        "repaired": draft.repaired,
        "usage": draft.usage.to_dict(),
        "money": draft.money,
    }
