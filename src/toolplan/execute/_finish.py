"""A run's `PlanResult`, made from the records of its steps once every step has ended."""

from __future__ import annotations

from collections.abc import Mapping

from .._records import maker
from ..plan import CompiledPlan, CompiledStep, Plan
from ._choice import Choice
from ._result import PlanResult, PlanStatus, StepResult

__all__ = ("plan_result",)

_new_plan_result = maker(PlanResult)


def plan_result(
    compiled: CompiledPlan | None,
    added: Mapping[str, CompiledStep],
    results: Mapping[str, StepResult],
    forced: PlanStatus | None,
    *,
    run_id: str,
    started_at: float,
    ended_at: float,
    choices: tuple[Choice, ...],
) -> PlanResult:
    """The result of a run of ``compiled``, whose steps' records are ``results``.

    ``compiled`` is None for an aborted incremental run: the result holds the steps ``added`` and
    its status is ``forced``, else ``cancelled``.
    """
    if compiled is None:  # an aborted incremental run: what was added
        compiled = CompiledPlan(
            plan=Plan(steps=tuple(cs.step for cs in added.values())),
            steps=added,
            deps={sid: cs.deps for sid, cs in added.items()},
        )
        forced = forced or "cancelled"
    plan = compiled.plan
    steps: dict[str, StepResult] = {}
    succeeded = True  # every step (one loop: no generator to set up per run)
    for sid in compiled.steps:
        r = steps[sid] = results[sid]
        if r.status != "succeeded" and not (r.error is not None and r.error.kind == "condition"):
            succeeded = False  # (a step skipped by a false condition did what the plan asked)
    outputs = plan.outputs
    if forced is not None:  # an aborted run may lack some output steps
        outputs = tuple(o for o in outputs if o in steps)
    status: PlanStatus = forced or ("succeeded" if succeeded else "failed")
    return _new_plan_result(
        status=status,
        steps=steps,
        output_steps=outputs,
        run_id=run_id,
        dialect=plan.dialect,
        started_at=started_at,
        ended_at=ended_at,
        deps=compiled.deps,
        warnings=compiled.warnings,
        choices=choices,
    )
