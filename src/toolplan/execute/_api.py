"""The public way to run a plan: `execute_plan`, its sync twin, and `stream_plan` for events.

Each builds one `RunLimits` from its options (or takes one) and hands it to a `PlanRun`, which
merges the plan's own limits in.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, overload

from typing_extensions import Unpack

from .._errors import StoreError, UserError
from .._tasks import task_group
from ..plan import Budget, CompiledPlan, Dialect, FailureMode, compile_plan
from ..tools import ToolRegistry, ToolsLike
from ._approval import Approval, ApprovalCallback, ApprovalRule
from ._backend import Backend
from ._choice import ToolChooser, warn_forgetful
from ._dryrun import DryRunReport, dry_run_report
from ._events import EventHandler, PlanEvent, PlanFinished
from ._gate import ApprovalGate, resumed
from ._invoke import ToolInvoker, calling_invoker
from ._journal import RunStore, StoredRun, check_run_id
from ._limits import LimitOptions, RunLimits, limits_from
from ._result import PlanResult
from ._run import PlanRun
from ._step import reused_record

__all__ = (
    "PlanStream",
    "execute_compiled",
    "execute_plan",
    "execute_plan_sync",
    "prepare",
    "run_compiled",
    "run_journaled",
    "stream_plan",
)


def prepare(
    plan: Any,
    tools: ToolsLike,
    *,
    limits: RunLimits | None = None,
    step_timeout: float | None = None,
    budget: Budget | None = None,
    max_steps: int | None = None,
    dialect: Dialect | None = None,
    backend: Backend | None = None,
    policy: ToolChooser | None = None,
) -> tuple[CompiledPlan, ToolInvoker]:
    """Validate and compile a plan, and build the invoker that will run its calls.

    The plan's own budget is applied by the run (`PlanRun.apply`), not here. A plan prepared inside
    a tool call (a skill's, or any tool that runs a plan) is nested in that call's run: its calls
    are charged to the caller's ledgers and budget window as well, and it is refused whole when
    they cannot cover its steps.
    """
    limits = RunLimits.of(limits, step_timeout=step_timeout, budget=budget, max_steps=max_steps)
    registry = ToolRegistry.of(tools)
    compiled = compile_plan(plan, registry, dialect=dialect, max_steps=limits.max_steps)
    if compiled.plan.policy is not None and policy is None and registry is not tools:
        compiled = warn_forgetful(compiled, registry)
    invoker = ToolInvoker.for_limits(registry, limits, backend=backend, chooser=policy)
    invoker.exclusive = True  # the run of this plan is the only user of its ledger
    caller = calling_invoker()
    if caller is not None:
        invoker.nest_under(caller, [cs.step.tool for cs in compiled.steps.values()])
    return compiled, invoker


async def execute_compiled(
    compiled: CompiledPlan,
    invoker: ToolInvoker,
    *,
    limits: RunLimits | None = None,
    max_concurrency: int | None = None,
    timeout: float | None = None,
    failure_mode: FailureMode | None = None,
    on_event: EventHandler | None = None,
    retry_delay: float | None = None,
) -> PlanResult:
    """Run an already compiled plan with a given invoker (its budget and per-tool limits)."""
    limits = RunLimits.of(
        limits,
        max_concurrency=max_concurrency,
        deadline=timeout,
        failure_mode=failure_mode,
        retry_delay=retry_delay,
    )
    return await PlanRun(compiled, invoker, limits=limits, on_event=on_event).run()


class _PlanOptions(LimitOptions, total=False):
    """What `execute_plan` takes besides ``dry_run`` (for its overloads; documented there)."""

    dialect: Dialect | None
    on_event: EventHandler | None
    backend: Backend | None
    store: RunStore | None
    run_id: str | None
    rerun_unknown: bool
    policy: ToolChooser | None
    approval: ApprovalRule | None
    on_approval: ApprovalCallback | None
    resume: PlanResult | None
    approvals: Mapping[str, Approval] | None


@overload
async def execute_plan(
    plan: Any, tools: ToolsLike, *, dry_run: Literal[False] = False, **options: Unpack[_PlanOptions]
) -> PlanResult: ...


@overload
async def execute_plan(
    plan: Any, tools: ToolsLike, *, dry_run: Literal[True], **options: Unpack[_PlanOptions]
) -> DryRunReport: ...


@overload
async def execute_plan(
    plan: Any, tools: ToolsLike, *, dry_run: bool, **options: Unpack[_PlanOptions]
) -> PlanResult | DryRunReport: ...


async def execute_plan(
    plan: Any,
    tools: ToolsLike,
    *,
    dialect: Dialect | None = None,
    on_event: EventHandler | None = None,
    backend: Backend | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    rerun_unknown: bool = False,
    policy: ToolChooser | None = None,
    dry_run: bool = False,
    approval: ApprovalRule | None = None,
    on_approval: ApprovalCallback | None = None,
    resume: PlanResult | None = None,
    approvals: Mapping[str, Approval] | None = None,
    **options: Unpack[LimitOptions],
) -> PlanResult | DryRunReport:
    """Validate and run a plan; return every step's record.

    Args:
        plan: A dict, JSON text or `Plan`, in any dialect (detected unless ``dialect`` is given).
        tools: Functions, tools, a list or dict of them, or a `ToolRegistry`.
        dialect: Force ``"native"``, ``"chaining"`` or ``"batch"``.
        on_event: Called synchronously with each `PlanEvent`.
        backend: Where tool calls run (default: in this process).
        store: Make the run durable (`toolplan.store.open_store`): each step's start and result
            commit before the run goes on, and a run that stopped can be resumed. With
            ``dry_run``, only read: the tools' latencies give the expected duration.
        run_id: The run's id (tools see it in `current_call()` and their idempotency keys). With a
            store, an id that is stored already resumes that run: its ended steps are reused.
        rerun_unknown: When resuming, call again the steps whose call was in flight even if their
            tool is neither ``read_only`` nor ``idempotent`` (otherwise they end ``unknown_outcome``).
        policy: Chooses among alternative tools (a step naming a group, or ``{"one_of": [...]}``)
            and learns from how they do: a `toolplan.policy.ToolPolicy`. Without one, a group's
            ``general`` member (else its first) is called; when the plan names a strategy
            (``"policy": "thompson"``), the registry's own policy (`ToolRegistry.default_policy`) chooses.
        dry_run: Call no tool and write no run: validate the plan and return a `DryRunReport` of
            what it would do (its graph, each step's tool, annotations and arguments, the budget's
            worst case against the limits, the expected duration from ``store``'s statistics).
        approval: The steps that need a person's approval before their tool is called
            (`ApprovalRule`). Such a step waits; the others go on. With ``dry_run``, the report lists
            the steps the rule would hold.
        on_approval: Asked (async) with the steps waiting at one moment; returns an `Approval` per
            step id. Without it, or for steps it leaves unanswered, the run returns when nothing
            else can run, with status ``pending_approval`` and the request in ``result.approval``.
        resume: A result that waits for approval: the run goes on from it (with ``approvals``);
            no step that ended runs again.
        approvals: The answers for ``resume``'s waiting steps, by step id (a step left out keeps waiting).
        **options: The limits (`LimitOptions`): ``limits``, ``max_concurrency``, ``timeout``,
            ``step_timeout``, ``failure_mode``, ``budget``, ``max_steps``, ``retry_delay``. The
            plan's own ``max_concurrency``, ``budget`` and ``failure_mode`` merge in: the tighter wins.

    Raises:
        PlanValidationError: the plan is invalid; ``.issues`` lists every problem and no tool ran.
        UserError: an option is unknown or out of range (the message names it).
        RunConflictError: ``run_id`` is stored with another plan, or another process is running it.
        StoreError: the store cannot be used (nothing ran).
        ApprovalError: an answer in ``approvals`` names a step that does not wait, or its edited
            arguments do not fit the tool (nothing ran).
    """
    limits = limits_from(options)
    if dry_run:
        return await _dry_run(plan, tools, limits, dialect, store, approval, run_id)
    compiled, invoker = prepare(plan, tools, limits=limits, dialect=dialect, backend=backend, policy=policy)
    durable = store is not None and run_id is not None
    gate, stored = resumed(compiled, invoker.registry, approval, on_approval, resume, approvals, durable)
    return await run_compiled(
        compiled, invoker, limits, on_event, store, run_id, rerun_unknown, approval=gate, resume=stored
    )


async def _dry_run(
    plan: Any,
    tools: ToolsLike,
    limits: RunLimits,
    dialect: Dialect | None,
    store: object,
    approval: ApprovalRule | None,
    run_id: str | None,
) -> DryRunReport:
    """`execute_plan` with ``dry_run=True``: the report; no tool is called and nothing is written."""
    if run_id is not None:
        raise UserError("A dry run writes no run, so it takes no run_id: leave run_id out.")
    if approval is not None and not callable(getattr(approval, "needs_approval", None)):
        raise UserError(
            f"approval must be a rule with a needs_approval(step, tools) method, got {type(approval).__name__}."
        )
    registry = ToolRegistry.of(tools)
    compiled = compile_plan(plan, registry, dialect=dialect, max_steps=limits.max_steps)
    return await dry_run_report(compiled, registry, limits, store=store, approval=approval)


async def run_compiled(
    compiled: CompiledPlan,
    invoker: ToolInvoker,
    limits: RunLimits,
    on_event: EventHandler | None,
    store: RunStore | None,
    run_id: str | None,
    rerun_unknown: bool = False,
    parent: str | None = None,
    expires: float | None = None,
    expires_note: str = "the run's deadline",
    approval: ApprovalGate | None = None,
    resume: StoredRun | None = None,
) -> PlanResult:
    """Run a compiled plan, durably when a store is given (see `execute_plan`).

    ``parent`` links a stored run to what ran it (an agent run); ``expires`` is an enclosing run's
    deadline (`PlanRun`); ``approval`` holds the steps that need a person's answer; ``resume`` is
    what a run that waited for approval ran (in this process): its ended steps are reused.
    """
    if run_id is not None:
        check_run_id(run_id)
    if store is None:
        if rerun_unknown:
            raise UserError("rerun_unknown=True applies when resuming a durable run: pass store= as well.")
        run = PlanRun(
            compiled,
            invoker,
            limits=limits,
            on_event=on_event,
            expires=expires,
            expires_note=expires_note,
            approval=approval,
            stored=resume,
        )
        if resume is not None:
            run.run_id = resume.run_id
        elif run_id is not None:
            run.run_id = run_id
        return await run.run()
    if resume is not None:
        raise UserError("resume= continues a run held in this process; a stored run resumes by its run_id.")
    journal, stored = await store.begin(run_id, compiled.plan, limits, parent=parent)
    waiting = stored.result if stored is not None and stored.status == "pending_approval" else None
    waits = stored is not None and any(s.status == "pending_approval" for s in stored.steps.values())
    if approval is not None or waits:  # a stored run that waits: its request, the answers
        try:
            if approval is None:
                raise UserError(
                    f"Run {journal.run_id!r} waits for a person's approval: resume it with approval= and "
                    "approvals= (CLI: toolplan runs approve)."
                )
            approval.take_up(waiting, compiled, None if stored is None else stored.approval)
        except UserError:
            with contextlib.suppress(StoreError):  # let go of it as it was
                await journal.close(waiting, stored.calls if stored else 0, stored.cost if stored else 0.0)
            raise
    if stored is not None and stored.finished and stored.result is not None and rerun_unknown and stored.unknown:
        journal, stored = await store.begin(journal.run_id, compiled.plan, limits, parent=parent, reopen=True)
    if stored is not None and stored.finished and stored.result is not None and not (rerun_unknown and stored.unknown):
        steps = {sid: reused_record(r) for sid, r in stored.result.steps.items()}  # nothing runs
        return dataclasses.replace(stored.result, steps=steps)
    run = PlanRun(
        compiled,
        invoker,
        limits=limits,
        on_event=on_event,
        expires=expires,
        expires_note=expires_note,
        journal=journal,
        stored=stored,
        rerun_unknown=rerun_unknown,
        approval=approval,
    )
    return await run_journaled(run)


@overload
def execute_plan_sync(
    plan: Any, tools: ToolsLike, *, dry_run: Literal[False] = False, **options: Any
) -> PlanResult: ...


@overload
def execute_plan_sync(plan: Any, tools: ToolsLike, *, dry_run: Literal[True], **options: Any) -> DryRunReport: ...


@overload
def execute_plan_sync(plan: Any, tools: ToolsLike, *, dry_run: bool, **options: Any) -> PlanResult | DryRunReport: ...


def execute_plan_sync(
    plan: Any, tools: ToolsLike, *, dry_run: bool = False, **options: Any
) -> PlanResult | DryRunReport:
    """`execute_plan` for synchronous code (runs its own event loop); ``dry_run=True`` returns a `DryRunReport`.

    Raises:
        UserError: called from inside a running event loop (use ``await execute_plan(...)`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(execute_plan(plan, tools, dry_run=dry_run, **options))
    raise UserError("execute_plan_sync() cannot run inside an event loop; use `await execute_plan(...)` instead.")


class PlanStream:
    """Events of a running plan, as an async iterator; ``result`` is set when the plan ends."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[PlanEvent | None] = asyncio.Queue()
        self.result: PlanResult | None = None

    def _put(self, event: PlanEvent) -> None:
        if isinstance(event, PlanFinished):
            self.result = event.result
        self._queue.put_nowait(event)

    def _done(self, task: asyncio.Task[PlanResult]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.result = task.result()  # also a finished durable run, returned from the store
        self._queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[PlanEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[PlanEvent]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event


@asynccontextmanager
async def stream_plan(
    plan: Any,
    tools: ToolsLike,
    *,
    dialect: Dialect | None = None,
    on_event: EventHandler | None = None,
    backend: Backend | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    rerun_unknown: bool = False,
    policy: ToolChooser | None = None,
    approval: ApprovalRule | None = None,
    on_approval: ApprovalCallback | None = None,
    **options: Unpack[LimitOptions],
) -> AsyncIterator[PlanStream]:
    """Run a plan in the background of this block and iterate over its events.

    Takes the options of `execute_plan` (``store=``, ``run_id=``, ``approval=`` and ``on_approval=``
    included; a run that waits is resumed with `execute_plan`).

    ```python
    async with stream_plan(plan, tools) as events:
        async for event in events:
            ...
    result = events.result
    ```
    Leaving the block early cancels the plan. Validation errors raise on entry, before any tool runs.
    """
    limits = limits_from(options)
    compiled, invoker = prepare(plan, tools, limits=limits, dialect=dialect, backend=backend, policy=policy)
    gate, _ = resumed(compiled, invoker.registry, approval, on_approval, None, None)
    stream = PlanStream()
    callback: Callable[[PlanEvent], None] | None = on_event

    def put(event: PlanEvent) -> None:
        if callback is not None:
            callback(event)
        stream._put(event)

    async with task_group() as tg:
        task = tg.create_task(run_compiled(compiled, invoker, limits, put, store, run_id, rerun_unknown, approval=gate))
        task.add_done_callback(stream._done)
        try:
            yield stream
        finally:
            if not task.done():
                task.cancel()


async def run_journaled(run: PlanRun) -> PlanResult:
    """``run.run()``, then close the journal: the result commits, and the run's lease is let go.

    A run that was cancelled is stored ``cancelled`` (resumable); one whose store failed is left
    as it is, unfinished, for a later resume.
    """
    journal = run.journal
    assert journal is not None
    meter = run.invoker.meter
    try:
        result = await run.run()
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.shield(journal.close(None, meter.calls, meter.cost))
        raise
    with contextlib.suppress(StoreError):
        await journal.close(None if run.store_failed else result, meter.calls, meter.cost)
    return result
