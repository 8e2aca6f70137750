"""`Service`: the parts a planner service runs on, and the operations both of its APIs share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from .._errors import PlanValidationError, RunConflictError
from .._json import json_safe
from ..models import Model
from ..plan import validate_plan
from ..planner import Planner
from ..store import RunInfo, Store
from ..store._service import ServiceStore
from ..tools import ToolRegistry, ToolsLike
from ._auth import KeyCheck
from ._config import ServiceConfig
from ._errors import ApiError
from ._runner import FINISHED, Runner

__all__ = ("Service", "execution_view")


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
        self.tools = ToolRegistry.of(tools)
        self.config = config or ServiceConfig()
        self.planner = Planner(model, self.tools, store=store) if model is not None else None
        self.runner = Runner(store, self.tools, self.config)
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

    async def post_plan(self, plan_ref: str, source: Any, dialect: str | None) -> dict[str, Any]:
        """Validate ``source`` against the catalogue and store it as ``plan_ref``."""
        report = validate_plan(source, self.tools, dialect=dialect)  # type: ignore[arg-type]
        if report.plan is None or report.errors:
            raise PlanValidationError(report.errors)
        try:
            await self.data.save_plan(plan_ref, report.plan)
        except Exception:
            if (await self.data.plan_info(plan_ref))["plan"] is None:  # not stored by an earlier attempt
                raise
        return {
            "plan_id": plan_ref,
            "plan": report.plan.to_dict(),
            "dialect": report.plan.dialect,
            "warnings": [i.to_dict() for i in report.warnings],
        }

    async def execute(self, run_id: str, plan_ref: str, api_key: str, wait: float) -> tuple[int, dict[str, Any]]:
        """Queue an execution of stored plan ``plan_ref`` as ``run_id``; wait up to ``wait`` seconds for it."""
        info = await self.data.plan_info(plan_ref)
        if not info["valid"] or info["plan"] is None:
            raise ApiError(
                422,
                "plan_invalid",
                f"Plan {plan_ref!r} is an invalid draft and cannot run: fix it and POST /v1/plans.",
                info["issues"],
            )
        report = validate_plan(info["plan"], self.tools)  # the catalogue may have changed since
        if report.plan is None or report.errors:
            raise PlanValidationError(report.errors)
        with contextlib.suppress(RunConflictError):  # queued by an earlier attempt of this idempotent request
            await self.data.enqueue(
                run_id,
                report.plan,
                self.config.limits,
                source_plan_id=plan_ref,
                api_key=api_key,
                max_active=self.config.max_active_per_key,
            )
        self.runner.wake()
        status = "queued"
        if wait > 0:
            status = await self.runner.wait(run_id, min(wait, self.config.max_wait))
        if status in FINISHED:
            return 200, execution_view(await self.store.get_run(run_id))
        return 202, {"execution_id": run_id, "plan_id": plan_ref, "status": status}


def execution_view(info: RunInfo) -> dict[str, Any]:
    """An execution as the API shows it: status, a table of its steps, and its outputs."""
    s, result = info.summary, info.result
    steps = []
    for r in result.steps.values():
        d = r.to_dict()
        d.setdefault("reused", False)
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
    }
