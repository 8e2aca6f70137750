"""`resume`: take up a stored run where it stopped."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..execute import (
    Approval,
    ApprovalRule,
    Backend,
    EventHandler,
    PlanResult,
    ResultCache,
    WindowCharge,
    execute_plan,
)
from ..tools import ToolsLike
from ._store import Store

__all__ = ("resume",)


async def resume(
    run_id: str,
    tools: ToolsLike,
    *,
    store: Store,
    rerun_unknown: bool = False,
    on_event: EventHandler | None = None,
    backend: Backend | None = None,
    window: WindowCharge | None = None,
    approval: ApprovalRule | None = None,
    approvals: Mapping[str, Approval] | None = None,
    cache: ResultCache | None = None,
) -> PlanResult:
    """Go on with stored run ``run_id``, with its own plan and limits.

    Steps that ended (succeeded, failed, timed out) are reused and never called again; steps that
    never started run; a step whose call was in flight when its process stopped is called again
    (same idempotency key) only if its tool is ``read_only`` or ``idempotent``, or when
    ``rerun_unknown`` is True; otherwise it ends ``unknown_outcome``. Budget counters and attempts
    go on from their stored values. A finished run is returned as stored, without calling anything.
    ``window`` charges the calls still to make to a budget window (`toolplan.execute.WindowCharge`),
    and ``cache`` answers calls of ``read_only`` tools from a `toolplan.ResultCache` (neither is stored
    with the run: a resume gets the caller's).
    A run that waits for approval resumes with its ``approval`` rule and the ``approvals`` (by step
    id); a step left unanswered waits again (the result's status is ``pending_approval``).

    Raises:
        RunNotFoundError: no run has this id.
        RunConflictError: another live process is running it.
        StoreError: the store cannot be used.
        UserError: the run waits for approval and no ``approval`` rule was given.
        ApprovalError: an answer names a step that does not wait, or its edit does not fit the tool.
    """
    plan, limits = await store.plan_of(run_id)
    if window is not None:  # never stored: the caller's window (the service's, per API key)
        limits = dataclasses.replace(limits, window=window)
    if cache is not None:
        limits = dataclasses.replace(limits, cache=cache)
    return await execute_plan(
        plan,
        tools,
        store=store,
        run_id=run_id,
        rerun_unknown=rerun_unknown,
        on_event=on_event,
        backend=backend,
        limits=limits,
        approval=approval,
        approvals=approvals,
    )
