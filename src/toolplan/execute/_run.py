"""`PlanRun`: one run of a plan — its state, its limits, and the workers that run its steps.

A run holds the scheduler (what may start), the records of ended steps and the tasks of running
ones. Its limits are the caller's `RunLimits` merged with the plan's own, applied in one method
(`apply`) whether the plan arrived whole or is still streaming. What one step does (resolve its
arguments, call, retry, fall back) is in `_step.py`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from .. import _faults
from .._context import abandoned_calls
from .._errors import StoreError
from ..plan import CompiledPlan, CompiledStep, Plan, Step
from ..plan._internal import MissingField
from ..tracing._internal import get_tracer
from ._budget import watch_budget
from ._choice import Choice
from ._events import EventHandler, PlanEvent, PlanFinished, PlanStarted, StepFinished
from ._finish import plan_result
from ._gate import waiting_result
from ._invoke import CallOutcome, ToolInvoker
from ._journal import Decision, Journal, StoredRun, StoredStep, take_up
from ._keeper import SlotKeeper
from ._limits import DEFAULT_LIMITS, RunLimits
from ._ordering import resource_of
from ._result import ErrorKind, PlanResult, PlanStatus, StepError, StepResult, StepStatus
from ._scheduler import Scheduler, StepState
from ._share import Sharing, sharing_for, symmetric
from ._step import GROUP, SHARED, clock, new_step_result, run_step

if TYPE_CHECKING:
    from ..tracing._internal import PlanTrace
    from ._gate import ApprovalGate

__all__ = ("PlanRun",)

_YIELD_EVERY = 64  # steps a task runs inline before it lets the event loop run others
_STILL_RUNNING = (
    "Its function is still running in a worker thread (Python cannot stop a thread): it was told through "
    "current_call().cancelled, and whatever it returns is discarded."
)
_KIND: dict[StepState, ErrorKind] = {"skipped": "skipped", "cancelled": "cancelled", "not_run": "not_run"}
_REFUSED = frozenset(("not_run", "rejected", "skipped"))  # step statuses that end without a call's outcome


class PlanRun:
    """One run of a plan. Steps may be added while it runs (streamed plans, code) until `seal` or `abort`.

    Use `execute_compiled` for a complete plan; build a ``PlanRun(None, ...)`` and call `add`,
    then `seal` (or `abort`), to run a plan whose steps arrive one by one.

    Args:
        compiled: The plan, or None for a run whose steps are added one by one.
        invoker: The run's invoker (an agent run's, shared by its plans); the run charges a child
            of it, so a plan's own budget binds this plan only, on top of the run's.
        limits: The caller's limits; the plan's own are merged in (the tighter wins).
        expires: An enclosing run's deadline (`time.monotonic`), e.g. the agent run's.
        expires_note: How messages name that deadline.
        on_event: Called synchronously with each `PlanEvent`.
        journal: A durable run's journal: each step's start and result commit before the run goes on.
        stored: What the store held of this run (a resumed run): ended steps are reused, not run again.
        rerun_unknown: Call again steps whose call was in flight even if their tool may not be repeated.
        approval: Holds the steps an approval rule marks until a person answers (`_gate.py`).
    """

    # Slots: a run is made per plan, so its ~40 fields cost a dict per run without them (-2.6% of
    # the instructions of a whole 10-step run, `bench instructions`).
    __slots__ = (
        "_ending", "_keeper", "_loop0", "_outer", "_own", "_run_task", "_sealed", "_spawn_handle", "_tg", "_timeout",
        "_waiters", "_yielding", "aborted", "approval", "attempts", "cancelled_by_us", "choices", "clock_offset",
        "compiled", "deadline_note", "expires", "groups", "invoker", "journal", "limits", "missing_field", "on_event",
        "outputs", "policy", "results", "run_id", "sched", "sharing", "started_at", "steps", "store_failed", "stored",
        "tasks", "tool_defaults", "trace",
    )  # fmt: skip

    def __init__(
        self,
        compiled: CompiledPlan | None,
        invoker: ToolInvoker,
        *,
        limits: RunLimits = DEFAULT_LIMITS,
        expires: float | None = None,
        expires_note: str = "the run's deadline",
        on_event: EventHandler | None = None,
        journal: Journal | None = None,
        stored: StoredRun | None = None,
        rerun_unknown: bool = False,
        approval: ApprovalGate | None = None,
    ) -> None:
        self.compiled = compiled
        self.approval = approval
        self.invoker = invoker.for_plan()  # this plan's ledger: its own budget arrives with the plan
        self.trace: PlanTrace | None = None
        tracer = get_tracer()
        if tracer is not None:  # traced: the plan's span, and an invoker whose calls make spans
            from ..tracing._internal import PlanTrace
            from ._traced import traced

            self.trace = PlanTrace(tracer)
            self.invoker = traced(self.invoker, self.trace)
        self.limits = limits
        self.on_event = on_event
        self.missing_field: MissingField = "null"
        self.sched = Scheduler(
            max_concurrency=limits.max_concurrency, fail_fast=limits.failure_mode == "fail_fast", on_end=self._ended
        )
        self.run_id = os.urandom(8).hex() if journal is None else journal.run_id
        self.journal = journal
        self.stored: dict[str, tuple[Decision, StoredStep]] | None = None  # a resumed run's steps
        self.store_failed: str | None = None
        if stored is not None:
            plan = None if compiled is None else compiled.plan
            self.stored = take_up(stored, plan, self.invoker.meter, self.invoker.annotations, rerun_unknown)
        # now() = clock_offset + clock(): epoch seconds on a monotonic clock (inlined where a step reads it)
        self.clock_offset = time.time() - clock()
        self._loop0 = time.monotonic()  # set again when the run starts
        self._outer = (expires, expires_note)  # an enclosing run's deadline
        self._own: tuple[float, str] | None = None  # this run's own deadline, in seconds from its start
        self.expires = expires
        self.deadline_note = expires_note
        self._timeout: asyncio.Timeout | None = None
        self._tighten(limits.run_deadline, "the plan deadline of {:g}s")
        self.steps: dict[str, CompiledStep] = {}
        # An incremental run ends once sealed (or aborted); a compiled plan is complete from the start.
        self._sealed: asyncio.Event | None = asyncio.Event() if compiled is None else None
        self._waiters: dict[str, asyncio.Future[StepResult]] = {}
        self.tool_defaults: dict[str, tuple[int, float | None, int]] = {}  # (retries, timeout, SHARED/GROUP/0) per tool
        # Tools of this run's steps that are groups of alternatives: (members, general member).
        self.groups: dict[str, tuple[tuple[str, ...], str | None]] = {}
        self.choices: list[Choice] = []  # made among alternatives, in order
        self.policy: str | None = None  # the plan's own strategy for them
        self.aborted: str | None = None
        self.outputs: dict[str, Any] = {}
        self.results: dict[str, StepResult] = {}
        self.tasks: dict[str, asyncio.Task[Any]] = {}  # the running steps' tasks (workers)
        self.cancelled_by_us: set[str] = set()
        self.started_at: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        # How running steps end when the run ends, and those whose sync function runs on in a thread.
        self._ending: tuple[StepStatus, StepError, frozenset[str]] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._run_task: asyncio.Task[Any] | None = None
        self._spawn_handle: asyncio.Handle | None = None  # a `_spawn` waiting for its turn
        self._yielding = 0  # workers in their periodic yield (not waiting on a tool)
        self._keeper = SlotKeeper()
        self.sharing: Sharing | None = None  # made when a step's call may be shared or cached (`_look_up`)
        if limits.cache is not None:
            limits.cache.check(self.invoker.registry)
        if compiled is not None:
            self.apply(compiled.plan)
        elif on_event is not None:
            watch_budget(self.invoker.meter, on_event, self.run_id)

    # -- limits -----------------------------------------------------------------------------------

    def apply(self, plan: Plan) -> None:
        """Apply a plan's own limits (concurrency, budget, deadline, failure mode): the tighter wins.

        Called once for a complete plan and again as a streamed plan's options arrive; what already
        ran counts against a budget that arrives late.
        """
        limits = self.limits.merged(plan)
        self.missing_field = plan.missing_field
        if plan.policy is not None:
            self.policy = plan.policy
        sched = self.sched
        if limits.max_concurrency < sched.max_concurrency:
            sched.max_concurrency = limits.max_concurrency
        budget = plan.budget
        if budget is not None and (not budget.unlimited or budget.warn_at is not None):
            meter = self.invoker.meter
            meter.budget = meter.budget.merged(budget)
            self._tighten(budget.max_latency, "the plan's max_latency of {:g}s")
        if self.on_event is not None:
            watch_budget(self.invoker.meter, self.on_event, self.run_id)
        if limits.failure_mode == "fail_fast" and not sched.fail_fast:
            self._cancel(sched.set_fail_fast())
        self.limits = limits

    def _tighten(self, seconds: float | None, note: str) -> None:
        """Bring the run's own deadline forward to ``seconds`` after its start, if that is earlier."""
        if seconds is None or (self._own is not None and self._own[0] <= seconds):
            return
        self._own = (seconds, note.format(seconds))
        self._set_expiry()

    def _set_expiry(self) -> None:
        """``expires``: the earlier of the enclosing run's deadline and this run's own."""
        expires, note = self._outer
        if self._own is not None:
            when = self._loop0 + self._own[0]
            if expires is None or when < expires:
                expires, note = when, self._own[1]
        self.expires, self.deadline_note = expires, note
        if self._timeout is not None and expires is not None:
            self._timeout.reschedule(expires - time.monotonic() + asyncio.get_running_loop().time())

    def now(self) -> float:
        """Wall-clock time (epoch seconds) on the run's monotonic clock."""
        return self.clock_offset + clock()

    def emit(self, event: PlanEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    # -- building ---------------------------------------------------------------------------------

    def add(self, cs: CompiledStep, after: tuple[str, ...] = ()) -> None:
        """Add a step; it starts as soon as its dependencies have succeeded (and its ``after`` steps ended)."""
        if cs.step.tool not in self.tool_defaults:
            self._look_up(cs.step)
        self.steps[cs.step.id] = cs
        self.sched.add(cs.step.id, cs.step.tool, cs.deps, after)
        if self._tg is not None:
            self._launch()

    def _add_all(self, steps: Mapping[str, CompiledStep]) -> None:
        """Add those of a plan's steps not added yet.

        Before the run starts, and with none added yet, all at once (what `add` of each does, in one
        loop); else by `add` of each, which starts them when the run is running.
        """
        if not self.steps and self._tg is None:
            defaults = self.tool_defaults
            for cs in steps.values():
                if cs.step.tool not in defaults:
                    self._look_up(cs.step)
            self.steps.update(steps)
            self.sched.add_all(steps, self.compiled.after if self.compiled is not None else {})
            return
        after = self.compiled.after if self.compiled is not None else {}
        for sid, cs in steps.items():
            if sid not in self.steps:
                self.add(cs, after.get(sid, ()) if after else ())

    def _look_up(self, step: Step) -> None:
        """A tool's own settings (retries, timeout, concurrency, alternatives), looked up once per run."""
        tool = step.tool
        invoker = self.invoker
        annotations = invoker.annotations(tool)
        shared = annotations.read_only and (annotations.idempotent or self.limits.cache is not None)
        if shared:  # its calls may be shared within the run, or kept in the run's cache
            shared = sharing_for(self).applies(tool, annotations)
        alternatives = invoker.alternatives(tool, step.one_of)
        special = GROUP if alternatives is not None else SHARED if shared else 0
        self.tool_defaults[tool] = (annotations.retries, invoker.timeout_for(tool), special)
        resource = annotations.resource
        if alternatives is not None:  # a group: its members' own limits apply to the member chosen
            self.groups[tool] = alternatives
            resource = resource_of(alternatives, invoker.annotations)
        else:
            concurrency = invoker.concurrency(tool)
            if concurrency is not None:
                self.sched.tool_limits[tool] = concurrency
        if resource is not None:  # its steps run one at a time, in plan order
            self.sched.set_resource(tool, resource)

    def tool_settings(self, tool: str) -> tuple[int, float | None]:
        """``(retries, timeout)`` of ``tool`` by its annotations and the run's defaults (a chosen member's)."""
        settings = self.tool_defaults.get(tool)
        if settings is None:  # (not kept in tool_defaults: `add` registers a tool's limits when it first sees it)
            invoker = self.invoker
            return invoker.annotations(tool).retries, invoker.timeout_for(tool)
        return settings[0], settings[1]

    def seal(self, compiled: CompiledPlan) -> None:
        """The plan is complete: apply its limits, add the steps not added yet, then finish when all have ended."""
        self.compiled = compiled
        self.apply(compiled.plan)
        self._add_all(compiled.steps)
        if self._sealed is not None:
            self._sealed.set()

    def abort(self, reason: str) -> None:
        """Start nothing more and cancel the running steps (a streamed plan turned out invalid)."""
        self.aborted = reason
        self._cancel(self.sched.stop(reason))
        if self._sealed is not None:
            self._sealed.set()

    def _cancel(self, running: list[str]) -> None:
        """Cancel running steps; each is recorded ``cancelled`` now, whether or not its task has started."""
        reason = (self.sched.stopped or "Cancelled.").replace("Not started", "Cancelled")
        for sid in running:
            task = self.tasks.pop(sid, None)
            self.sched.cancel(sid, reason)  # records it (`_ended`)
            if task is not None:
                self.cancelled_by_us.add(sid)
                task.cancel()

    # -- running ----------------------------------------------------------------------------------

    async def run(self) -> PlanResult:
        """Run until every step has ended (for an incremental run: until sealed or aborted, too)."""
        start = self.now()
        if self.trace is not None:
            self.trace.start(self.run_id, self.compiled.plan.step_ids if self.compiled is not None else ())
        if self.compiled is not None:
            if self.on_event is not None:
                self.emit(PlanStarted(run_id=self.run_id, steps=self.compiled.plan.step_ids, at=start))
            self._add_all(self.compiled.steps)  # (a streamed plan sealed before the run began has them in)
        elif self.on_event is not None:
            self.emit(PlanStarted(run_id=self.run_id, steps=(), at=start))
        loop = asyncio.get_running_loop()
        self._loop0 = time.monotonic()  # the run's own deadline counts from here
        self._set_expiry()
        at = None
        if self.expires is not None:
            left = self.expires - time.monotonic()
            if left <= 0:  # nothing may start (a tool that never waits would beat the timeout)
                self.sched.stop(f"Not started: {self.deadline_note} passed.")
            at = loop.time() + left
        try:
            # A deadline that may still arrive (a streamed plan's budget) needs a Timeout to move.
            deadline = asyncio.timeout_at(at) if at is not None or self._sealed is not None else nullcontext()
            async with deadline as self._timeout, asyncio.TaskGroup() as tg:
                self._tg = tg
                self._run_task = run_task = asyncio.current_task()
                assert run_task is not None
                try:
                    first = self._take()
                    if first is not None:  # this task is the first worker: no task or loop turn of its own
                        self.tasks[first] = run_task
                        await self._work(first)
                    if self._sealed is not None:
                        await self._sealed.wait()
                except BaseException:
                    # The group shuts down (a tool raised a BaseException in this task, or the run was
                    # cancelled) and refuses new tasks while it waits for the others: start no more.
                    self._tg = None
                    raise
        except TimeoutError:
            note = self.deadline_note
            self._end_unfinished(
                f"Not started: {note} passed.",
                "timed_out",
                StepError(kind="timeout", message=f"{note[0].upper()}{note[1:]} passed while the step was running."),
            )
            if self._sealed is not None:  # steps may still be added (code): they end not_run, on record
                await self._sealed.wait()
        except asyncio.CancelledError:
            self._end_unfinished(
                "Not started: the run was cancelled.",
                "cancelled",
                StepError(kind="cancelled", message="The run was cancelled while the step was running."),
            )
            self._finalize(start, "cancelled")
            raise
        finally:
            self._tg = self._timeout = None
            # The scheduler's `on_end` is a bound method of this run: a reference cycle. Steps added
            # from now on (none are expected) end in the scheduler without a record.
            self.sched.on_end = None
            if self._spawn_handle is not None:  # nothing is left to start; let go of this run
                self._spawn_handle.cancel()
                self._spawn_handle = None
        return self._finalize(start, None)

    def _launch(self) -> None:
        """Start a worker task for the ready steps (from outside a worker: the run's start, `add`)."""
        sid = self._take()
        if sid is not None:
            tg = self._tg
            assert tg is not None
            self.tasks[sid] = tg.create_task(self._work(sid))

    def _take(self) -> str | None:
        """The next step that may start, marked running, or None.

        When more steps are waiting, `_spawn` is scheduled: it runs at the event loop's next turn.
        """
        sid = self.sched.take_one()
        if sid is None:
            return None
        self.started_at[sid] = self.clock_offset + clock()  # self.now(), without a call
        if self._spawn_handle is None and self.sched.has_ready:
            self._spawn_handle = asyncio.get_running_loop().call_soon(self._spawn)
        return sid

    def _spawn(self) -> None:
        """A worker for every waiting step: the event loop got a turn, so a running tool is waiting.

        Unless the turn came from a worker's periodic yield: that worker is not waiting on anything
        and goes on with the waiting steps itself (a later `_take` schedules the next `_spawn`).
        So tools that wait on I/O each get their own task at once, and tools that return without
        waiting share one.
        """
        tg, run_task = self._tg, self._run_task
        if tg is None or run_task is None or run_task.cancelling() or self._yielding:
            self._spawn_handle = None
            return  # the run is ending (deadline, cancellation, a BaseException), or no tool is waiting
        # The handle stays set while this runs, so these takes do not schedule another `_spawn`.
        while (sid := self._take()) is not None:
            self.tasks[sid] = tg.create_task(self._work(sid))
        self._spawn_handle = None

    async def _work(self, sid: str) -> None:
        # A worker: it runs steps one after another while steps are ready (a chain, or steps whose
        # tools return without waiting, cost no task and no event-loop round trip per step);
        # `_spawn` adds workers when the loop gets a turn while steps are still waiting.
        task: asyncio.Task[Any] | None = None  # this task, looked up once it runs a step inline
        inline = 0
        while True:
            try:
                if inline and inline % _YIELD_EVERY == 0:
                    self._yielding += 1
                    try:
                        await asyncio.sleep(0)  # a long inline run lets other tasks (and deadlines) in
                    finally:
                        self._yielding -= 1
                result = await run_step(self, self.steps[sid])
                if self.journal is not None and not result.reused:
                    self._commit(result)
            except asyncio.CancelledError:
                if sid not in self.cancelled_by_us:
                    raise
                current = asyncio.current_task()
                assert current is not None
                if current.uncancel():
                    raise  # someone else cancelled this task too (the run itself, when it is the worker)
                return  # `_cancel` recorded the step
            self._finished(sid, result)
            kept = self._take()
            if kept is None:
                return
            if task is None:
                task = asyncio.current_task()
                assert task is not None
            self.tasks[kept] = task
            sid = kept
            inline += 1

    # -- records ----------------------------------------------------------------------------------

    def _commit(self, result: StepResult) -> None:
        """A durable run: the step's result, its event and the budget counters commit in one transaction.

        No dependent's tool is called before that commit: a dependent's ``running`` row is written
        behind it (often in the same transaction) and its call waits for that row's commit.
        """
        journal = self.journal
        assert journal is not None
        meter = self.invoker.meter
        journal.finished(result, meter.calls, meter.cost).add_done_callback(self._committed)

    def _committed(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            if _faults.ACTIVE:
                _faults.hit("after_commit")
        elif isinstance(exc, StoreError):
            self.fail_store(exc)

    def fail_store(self, exc: StoreError) -> None:
        """The store failed: start nothing more (what committed stays; the run can be resumed later)."""
        if self.store_failed is None:
            self.store_failed = exc.message
            self.sched.stop(f"Not started: {exc.message}")

    def hold_until_done(self, tool: str, outcome: CallOutcome) -> None:
        """A timed-out sync tool's thread runs on: it keeps its slots until it ends (see `SlotKeeper`)."""
        if outcome.lingering is not None:
            self._keeper.hold(self.sched, tool, outcome.lingering, self._tg, self._relaunch)

    def _relaunch(self) -> None:
        if self._tg is not None:
            self._launch()

    def _finished(self, sid: str, result: StepResult) -> None:
        """Record how a step ended and tell the scheduler (which may make others ready)."""
        sched = self.sched
        del self.tasks[sid]  # only running steps keep their task (fewer live objects in long plans)
        if result.status == "succeeded":  # the common case: none of the tests below
            self._record(result)
            sched.finish(sid, succeeded=True)
        else:
            if self.approval is not None and self.approval.parks(self, result):
                return  # it waits for a person's answer; its dependents wait with it
            self._record(result)
            status = result.status
            if status in _REFUSED:  # refused at dispatch (budget, a person), or its condition was false
                sched.refuse(sid, result.error.message if result.error else status, unmet=status == "skipped")
                return
            sched.finish(sid, succeeded=False)
            if sched.stopped is not None:
                self._cancel([other for other in self.tasks if sched.state(other) == "running"])
        if self._keeper.unheld is not None and sched.done:  # nothing waits for the slots a thread holds
            self._keeper.release()

    def _ended(self, sid: str, state: StepState, reason: str) -> None:
        """The scheduler ended a step without an outcome of its own (skipped, not run, cancelled)."""
        if sid in self.results:
            return  # recorded already (a call the budget refused)
        started = self.started_at.get(sid)
        unmet = self.sched.unmet
        kind: ErrorKind = "condition" if unmet is not None and sid in unmet else _KIND.get(state, "not_run")
        error = StepError(kind=kind, message=reason)
        status: StepStatus = state  # the three states are step statuses too
        if self._ending is not None and state == "cancelled":
            status, error, threads = self._ending
            if sid in threads:
                error = StepError(kind=error.kind, message=f"{error.message} {_STILL_RUNNING}")
        result = new_step_result(
            id=sid,
            tool=self.steps[sid].step.tool,
            status=status,
            error=error,
            attempts=self.attempts.get(sid, 0),
            started_at=started,
            ended_at=None if started is None else self.now(),
        )
        self._record(result)
        stored = self.stored.get(sid) if self.stored is not None else None
        if self.journal is not None and (stored is None or stored[1].status != status):  # unless stored already
            self.journal.ended(result)

    def _record(self, result: StepResult) -> None:
        sid = result.id
        self.results[sid] = result
        if result.status == "succeeded":
            self.outputs[sid] = result.output
        if self._waiters:
            waiter = self._waiters.pop(sid, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(result)
        if self.on_event is not None:
            self.emit(StepFinished(run_id=self.run_id, result=result))

    async def wait(self, step_id: str) -> StepResult:
        """The record of ``step_id`` once it has ended."""
        if step_id in self.results:
            return self.results[step_id]
        waiter = self._waiters.get(step_id)
        if waiter is None:
            waiter = self._waiters[step_id] = asyncio.get_running_loop().create_future()
        return await waiter

    def _end_unfinished(self, reason: str, running_status: StepStatus, running_error: StepError) -> None:
        # The step tasks have ended (the task group waited for them): abandoned threads are known.
        threads = frozenset(sid for sid, _ in abandoned_calls(self.run_id))
        self._ending = (running_status, running_error, threads)
        for sid in self.sched.stop(reason):
            self.tasks.pop(sid, None)
            self.sched.cancel(sid, running_error.message)

    def _finalize(self, start: float, forced: PlanStatus | None) -> PlanResult:
        waiting = None if self.approval is None else self.approval.settle(self)
        results = self.results
        if self.sharing is not None:  # a step that made a call names every step that took its outcome
            results = symmetric(results) or results
        result = plan_result(
            None if self.aborted is not None else self.compiled,
            self.steps,
            results,
            forced,
            run_id=self.run_id,
            started_at=start,
            ended_at=self.now(),
            choices=tuple(self.choices),
        )
        if waiting is not None:
            result = waiting_result(result, waiting)
        if self.trace is not None:
            meter = self.invoker.meter
            self.trace.finish(result, meter.calls, meter.cost)
        if self.on_event is not None:
            self.emit(PlanFinished(run_id=self.run_id, result=result))
        return result
