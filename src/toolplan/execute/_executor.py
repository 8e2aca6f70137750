"""The async shell around the scheduler: one task group per plan, eager dataflow, fail-forward."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any

from .._errors import UserError
from .._records import maker
from .._tasks import task_group
from ..plan import DEFAULT_MAX_STEPS, Budget, CompiledPlan, CompiledStep, Dialect, FailureMode, Plan, compile_plan
from ..plan._ir import MissingField
from ..plan._refs import Ref, resolve_compiled
from ..tools import ToolRegistry, ToolsLike
from ._events import (
    EventHandler,
    PlanEvent,
    PlanFinished,
    PlanStarted,
    StepFinished,
    StepRetrying,
    StepStarted,
)
from ._invoke import CallOutcome, ToolInvoker
from ._result import ErrorKind, PlanResult, PlanStatus, StepError, StepResult, StepStatus
from ._scheduler import Scheduler

__all__ = (
    "DEFAULT_MAX_CONCURRENCY",
    "PlanRun",
    "PlanStream",
    "execute_compiled",
    "execute_plan",
    "execute_plan_sync",
    "no_retry_backoff",
    "prepare",
    "set_retry_backoff",
    "stream_plan",
)

DEFAULT_MAX_CONCURRENCY = 20
RETRYABLE = frozenset({"infrastructure", "timeout"})
_new_result = maker(StepResult)  # a record per step: cheaper than calling the class
_new_plan_result = maker(PlanResult)
_YIELD_EVERY = 64  # steps a task runs inline before it lets the event loop run others
_backoff_enabled = True


def set_retry_backoff(enabled: bool) -> bool:
    """Turn waiting between step retries on or off for the process; returns the previous setting."""
    global _backoff_enabled
    previous, _backoff_enabled = _backoff_enabled, enabled
    return previous


@contextmanager
def no_retry_backoff() -> Iterator[None]:
    """Within this block step retries happen without waiting (for tests)."""
    previous = set_retry_backoff(False)
    try:
        yield
    finally:
        set_retry_backoff(previous)


def _backoff(attempt: int, initial: float) -> float:
    if not _backoff_enabled or initial <= 0:
        return 0.0
    base = min(initial * 2 ** (attempt - 1), 10.0)
    jitter: float = 0.8 + 0.4 * random.random()
    return float(base) * jitter  # jitter, not cryptography


class PlanRun:
    """One run of a plan. Steps may be added while it runs (streamed plans) until `seal` or `abort`.

    Use `execute_compiled` for a complete plan; build a ``PlanRun(None, ...)`` and call `add`,
    then `seal` (or `abort`), to run a plan whose steps arrive one by one.
    """

    def __init__(
        self,
        compiled: CompiledPlan | None,
        invoker: ToolInvoker,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        deadline: float | None = None,
        failure_mode: FailureMode | None = None,
        on_event: EventHandler | None = None,
        retry_delay: float = 0.1,
    ) -> None:
        self.compiled = compiled
        self.invoker = invoker
        self.deadline = deadline
        self.on_event = on_event
        self.retry_delay = retry_delay
        plan = compiled.plan if compiled is not None else None
        if plan is not None and plan.max_concurrency is not None:
            max_concurrency = min(max_concurrency, plan.max_concurrency)
        mode = failure_mode or (plan.failure_mode if plan is not None else "fail_forward")
        self.missing_field: MissingField = plan.missing_field if plan is not None else "null"
        self.sched = Scheduler(max_concurrency=max_concurrency, fail_fast=mode == "fail_fast")
        self.steps: dict[str, CompiledStep] = {}
        # An incremental run ends once sealed (or aborted); a compiled plan is complete from the start.
        self._sealed: asyncio.Event | None = asyncio.Event() if compiled is None else None
        self._waiters: dict[str, asyncio.Future[StepResult]] = {}
        self._tool_defaults: dict[str, tuple[int, float | None]] = {}  # (retries, timeout) per tool
        self.aborted: str | None = None
        self.outputs: dict[str, Any] = {}
        self.results: dict[str, StepResult] = {}
        self.tasks: dict[str, asyncio.Task[Any]] = {}  # the running steps' tasks (workers)
        self.cancelled_by_us: set[str] = set()
        self.started_at: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        self.run_id = os.urandom(8).hex()
        self._mono0 = time.perf_counter()
        self._epoch0 = time.time()
        self._tg: asyncio.TaskGroup | None = None
        self._run_task: asyncio.Task[Any] | None = None
        self._spawn_handle: asyncio.Handle | None = None  # a `_spawn` waiting for its turn
        self._yielding = 0  # workers in their periodic yield (not waiting on a tool)
        self._reported = 0

    def now(self) -> float:
        return self._epoch0 + (time.perf_counter() - self._mono0)

    def emit(self, event: PlanEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def add(self, cs: CompiledStep) -> None:
        """Add a step; it starts as soon as its dependencies have succeeded."""
        tool = cs.step.tool
        if tool not in self._tool_defaults:  # a tool's own settings, looked up once per run
            annotations = self.invoker.annotations(tool)
            self._tool_defaults[tool] = (annotations.retries, self.invoker.timeout_for(tool))
            if annotations.concurrency is not None:
                self.sched.tool_limits[tool] = annotations.concurrency
        self.steps[cs.step.id] = cs
        self.sched.add(cs.step.id, tool, cs.deps)
        if self._tg is not None:
            self._report_ended()
            self._launch()

    def seal(self, compiled: CompiledPlan) -> None:
        """The plan is complete: add the steps not added yet, then finish when all have ended."""
        self.compiled = compiled
        self.missing_field = compiled.plan.missing_field
        for sid, cs in compiled.steps.items():
            if sid not in self.steps:
                self.add(cs)
        if self._sealed is not None:
            self._sealed.set()

    def abort(self, reason: str) -> None:
        """Start nothing more and cancel the running steps (a streamed plan turned out invalid)."""
        self.aborted = reason
        for sid in self.sched.stop(reason):
            if sid in self.tasks:
                self.cancelled_by_us.add(sid)
                self.tasks[sid].cancel()
        if self._sealed is not None:
            self._sealed.set()

    async def run(self) -> PlanResult:
        """Run until every step has ended (for an incremental run: until sealed or aborted, too)."""
        start = self.now()
        if self.compiled is not None:
            if self.on_event is not None:
                self.emit(PlanStarted(run_id=self.run_id, steps=self.compiled.plan.step_ids, at=start))
            for cs in self.compiled.steps.values():
                self.add(cs)
        elif self.on_event is not None:
            self.emit(PlanStarted(run_id=self.run_id, steps=(), at=start))
        try:
            deadline = asyncio.timeout(self.deadline) if self.deadline is not None else nullcontext()
            async with deadline, asyncio.TaskGroup() as tg:
                self._tg = tg
                self._run_task = run_task = asyncio.current_task()
                assert run_task is not None
                try:
                    self._report_ended()
                    first = self._take()
                    if first is not None:  # this task is the first worker: no task or loop turn of its own
                        self.tasks[first] = run_task
                        await self._step(first)
                    if self._sealed is not None:
                        await self._sealed.wait()
                except BaseException:
                    # The group shuts down (a tool raised a BaseException in this task, or the run was
                    # cancelled) and refuses new tasks while it waits for the others: start no more.
                    self._tg = None
                    raise
        except TimeoutError:
            self._end_unfinished(
                f"Not started: the plan deadline of {self.deadline:g}s passed.",
                "timed_out",
                StepError(
                    kind="timeout",
                    message=f"The plan deadline of {self.deadline:g}s passed while the step was running.",
                ),
            )
        except asyncio.CancelledError:
            self._end_unfinished(
                "Not started: the run was cancelled.",
                "cancelled",
                StepError(kind="cancelled", message="The run was cancelled while the step was running."),
            )
            self._finalize(start, "cancelled")
            raise
        finally:
            if self._spawn_handle is not None:  # nothing is left to start; let go of this run
                self._spawn_handle.cancel()
                self._spawn_handle = None
        return self._finalize(start, None)

    # -- scheduling -----------------------------------------------------------------------------

    def _launch(self) -> None:
        """Start a worker task for the ready steps (from outside a worker: the run's start, `add`)."""
        sid = self._take()
        if sid is not None:
            tg = self._tg
            assert tg is not None
            self.tasks[sid] = tg.create_task(self._step(sid))

    def _take(self) -> str | None:
        """The next step that may start, marked running, or None.

        When more steps are waiting, `_spawn` is scheduled: it runs at the event loop's next turn.
        """
        ready = self.sched.take_ready(1)
        if not ready:
            return None
        sid = ready[0]
        self.started_at[sid] = self.now()
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
            self.tasks[sid] = tg.create_task(self._step(sid))
        self._spawn_handle = None

    def _report_ended(self) -> None:
        """Create records for steps the scheduler ended without running them (skipped, not run)."""
        ended = self.sched.ended_unrun
        while self._reported < len(ended):
            sid = ended[self._reported]
            self._reported += 1
            if sid in self.results:
                continue  # the executor recorded it (a refused or cancelled call)
            state = self.sched.state(sid)
            kind: ErrorKind = "skipped" if state == "skipped" else "cancelled" if state == "cancelled" else "not_run"
            self._record(
                _new_result(
                    id=sid,
                    tool=self.steps[sid].step.tool,
                    status=state,
                    error=StepError(kind=kind, message=self.sched.reasons.get(sid, state)),
                )
            )

    async def wait(self, step_id: str) -> StepResult:
        """The record of ``step_id`` once it has ended."""
        if step_id in self.results:
            return self.results[step_id]
        waiter = self._waiters.get(step_id)
        if waiter is None:
            waiter = self._waiters[step_id] = asyncio.get_running_loop().create_future()
        return await waiter

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

    async def _step(self, sid: str) -> None:
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
                result = await self._execute(self.steps[sid])
            except asyncio.CancelledError:
                if sid not in self.cancelled_by_us:
                    raise
                current = asyncio.current_task()
                assert current is not None
                if current.uncancel():
                    raise  # someone else cancelled this task too (the run itself, when it is the worker)
                self._cancelled(sid)
                return
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

    def _finished(self, sid: str, result: StepResult) -> None:
        """Record how a step ended and tell the scheduler (which may make others ready)."""
        sched = self.sched
        if result.status == "not_run":
            sched.refuse(sid, result.error.message if result.error else "not run")
        else:
            sched.finish(sid, succeeded=result.status == "succeeded")
        del self.tasks[sid]  # only running steps keep their task (fewer live objects in long plans)
        self._record(result)
        if sched.stopped is not None and result.status != "succeeded":
            for other, task in self.tasks.items():
                if sched.state(other) == "running":
                    self.cancelled_by_us.add(other)
                    task.cancel()
        if self._reported < len(sched.ended_unrun):
            self._report_ended()

    def _cancelled(self, sid: str) -> None:
        """Record a step the plan cancelled while it ran (fail_fast or an aborted streamed plan)."""
        reason = self.sched.stopped or "Cancelled."
        self.sched.cancel(sid, reason)
        del self.tasks[sid]
        self._record(
            _new_result(
                id=sid,
                tool=self.steps[sid].step.tool,
                status="cancelled",
                error=StepError(kind="cancelled", message=reason.replace("Not started", "Cancelled")),
                attempts=self.attempts.get(sid, 0),
                started_at=self.started_at[sid],
                ended_at=self.now(),
            )
        )
        self._report_ended()

    def _end_unfinished(self, reason: str, running_status: StepStatus, running_error: StepError) -> None:
        running = self.sched.stop(reason)
        ended = self.now()
        for sid in running:
            self.sched.cancel(sid, running_error.message)
            self._record(
                _new_result(
                    id=sid,
                    tool=self.steps[sid].step.tool,
                    status=running_status,
                    error=running_error,
                    attempts=self.attempts.get(sid, 0),
                    started_at=self.started_at.get(sid),
                    ended_at=ended,
                )
            )
        self._report_ended()

    def _finalize(self, start: float, forced: PlanStatus | None) -> PlanResult:
        self._report_ended()
        compiled = self.compiled
        if compiled is None or self.aborted is not None:  # an aborted incremental run: what was added
            compiled = CompiledPlan(
                plan=Plan(steps=tuple(cs.step for cs in self.steps.values())),
                steps=self.steps,
                deps={sid: cs.deps for sid, cs in self.steps.items()},
            )
            forced = forced or "cancelled"
        plan = compiled.plan
        steps = {sid: self.results[sid] for sid in compiled.steps}
        status: PlanStatus = forced or ("succeeded" if all(r.ok for r in steps.values()) else "failed")
        result = _new_plan_result(
            status=status,
            steps=steps,
            output_steps=plan.outputs,
            run_id=self.run_id,
            dialect=plan.dialect,
            started_at=start,
            ended_at=self.now(),
            deps=compiled.deps,
            warnings=compiled.warnings,
        )
        if self.on_event is not None:
            self.emit(PlanFinished(run_id=self.run_id, result=result))
        return result

    # -- one step -------------------------------------------------------------------------------

    async def _execute(self, cs: CompiledStep) -> StepResult:
        step = cs.step
        sid, tool = step.id, step.tool
        missed: list[Ref] = []  # REF nodes of fields the output did not have
        args = resolve_compiled(cs.arguments, self.outputs, self.missing_field == "null", missed.append)
        defaults = self._tool_defaults[tool]  # filled in by add()
        timeout = step.timeout if step.timeout is not None else defaults[1]
        self.attempts[sid] = 1
        if self.on_event is not None:
            self.emit(StepStarted(run_id=self.run_id, step_id=sid, tool=tool, attempt=1, at=self.now()))
        outcome = await self.invoker.call(tool, args, timeout=timeout)
        attempt, used_fallback = 1, False
        error = outcome.error
        status: StepStatus = "succeeded"
        if error is not None:
            retries = step.retry if step.retry is not None else defaults[0]
            outcome, attempt, used_fallback = await self._recover(cs, args, outcome, retries, timeout, missed)
            error = outcome.error
            if error is None:
                status = "succeeded"
            elif _refused_at_start(outcome, attempt):
                status, attempt = "not_run", 0
            elif error.kind == "timeout":
                status = "timed_out"
            else:
                status = "failed"
        return _new_result(
            id=sid,
            tool=tool,
            status=status,
            output=outcome.output,
            error=error,
            attempts=attempt,
            started_at=self.started_at[sid],
            ended_at=self.now(),
            arguments=args,
            used_fallback=used_fallback,
            warnings=tuple(f"{r[3]} resolved to nothing (no such field in {r[1]!r}'s output)." for r in missed)
            if missed
            else (),
        )

    async def _recover(
        self,
        cs: CompiledStep,
        args: Any,
        outcome: CallOutcome,
        retries: int,
        timeout: float | None,
        missed: list[Ref],
    ) -> tuple[CallOutcome, int, bool]:
        """After a failed first call: retries (for retryable errors), then the fallback, if any.

        Returns the final outcome, the attempts made and whether the fallback's result stands.
        """
        step = cs.step
        sid, invoker = step.id, self.invoker
        attempt = 1
        while True:
            error = outcome.error
            if error is None or attempt > retries or error.kind not in RETRYABLE:
                break
            delay = _backoff(attempt, self.retry_delay)
            if self.on_event is not None:
                self.emit(StepRetrying(run_id=self.run_id, step_id=sid, attempt=attempt, error=error, delay=delay))
            await asyncio.sleep(delay)
            attempt += 1
            self.attempts[sid] = attempt
            if self.on_event is not None:
                self.emit(StepStarted(run_id=self.run_id, step_id=sid, tool=step.tool, attempt=attempt, at=self.now()))
            outcome = await invoker.call(step.tool, args, timeout=timeout)
        fb = step.fallback
        if outcome.error is None or fb is None or _refused_at_start(outcome, attempt):
            return outcome, attempt, False
        assert cs.fallback_arguments is not None
        fb_args = resolve_compiled(cs.fallback_arguments, self.outputs, self.missing_field == "null", missed.append)
        attempt += 1
        self.attempts[sid] = attempt
        if self.on_event is not None:
            self.emit(StepStarted(run_id=self.run_id, step_id=sid, tool=fb.tool, attempt=attempt, at=self.now()))
        fb_outcome = await invoker.call(fb.tool, fb_args, timeout=invoker.timeout_for(fb.tool, step.timeout))
        if fb_outcome.error is None:
            return fb_outcome, attempt, True
        message = f"{outcome.error.message} The fallback {fb.tool!r} failed too: {fb_outcome.error.message}"
        return CallOutcome(error=StepError(kind=fb_outcome.error.kind, message=message)), attempt, False


def _refused_at_start(outcome: CallOutcome, attempt: int) -> bool:
    return attempt == 1 and outcome.error is not None and outcome.error.kind == "limit"


async def execute_compiled(
    compiled: CompiledPlan,
    invoker: ToolInvoker,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    timeout: float | None = None,
    failure_mode: FailureMode | None = None,
    on_event: EventHandler | None = None,
    retry_delay: float = 0.1,
) -> PlanResult:
    """Run an already compiled plan with a given invoker (shared budget and limits)."""
    budget_latency = invoker.meter.budget.max_latency
    deadlines = [d for d in (timeout, budget_latency) if d is not None]
    run = PlanRun(
        compiled,
        invoker,
        max_concurrency=max_concurrency,
        deadline=min(deadlines) if deadlines else None,
        failure_mode=failure_mode or compiled.plan.failure_mode,
        on_event=on_event,
        retry_delay=retry_delay,
    )
    return await run.run()


def prepare(
    plan: Any,
    tools: ToolsLike,
    *,
    step_timeout: float | None = None,
    budget: Budget | None = None,
    max_steps: int | None = None,
    dialect: Dialect | None = None,
) -> tuple[CompiledPlan, ToolInvoker]:
    """Validate and compile a plan, and build the invoker that will run its calls."""
    registry = ToolRegistry.of(tools)
    compiled = compile_plan(plan, registry, dialect=dialect, max_steps=max_steps or DEFAULT_MAX_STEPS)
    effective = (budget or Budget()).merged(compiled.plan.budget)
    return compiled, ToolInvoker(registry, budget=effective, default_timeout=step_timeout)


async def execute_plan(
    plan: Any,
    tools: ToolsLike,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    timeout: float | None = None,
    step_timeout: float | None = None,
    failure_mode: FailureMode | None = None,
    budget: Budget | None = None,
    max_steps: int | None = None,
    dialect: Dialect | None = None,
    on_event: EventHandler | None = None,
    retry_delay: float = 0.1,
) -> PlanResult:
    """Validate and run a plan; return every step's record.

    Args:
        plan: A dict, JSON text or `Plan`, in any dialect (detected unless ``dialect`` is given).
        tools: Functions, tools, a list or dict of them, or a `ToolRegistry`.
        max_concurrency: Steps running at once (the plan's own ``max_concurrency`` may lower it).
        timeout: Plan deadline in seconds: unstarted steps end ``not_run``, running ones ``timed_out``.
        step_timeout: Default per-call timeout (a step's or tool's own timeout wins).
        failure_mode: ``"fail_forward"`` (siblings go on) or ``"fail_fast"``; default from the plan.
        budget: Limits on calls, cost and latency (combined with the plan's own, the tighter wins).
        max_steps: Most steps a plan may have (default 50; batch plans are always limited to 50).
        dialect: Force ``"native"``, ``"chaining"`` or ``"batch"``.
        on_event: Called synchronously with each `PlanEvent`.
        retry_delay: First retry backoff in seconds (doubles each attempt, with jitter).

    Raises:
        PlanValidationError: the plan is invalid; ``.issues`` lists every problem and no tool ran.
    """
    if max_concurrency < 1:
        raise UserError(f"max_concurrency must be >= 1, got {max_concurrency}.")
    compiled, invoker = prepare(
        plan, tools, step_timeout=step_timeout, budget=budget, max_steps=max_steps, dialect=dialect
    )
    return await execute_compiled(
        compiled,
        invoker,
        max_concurrency=max_concurrency,
        timeout=timeout,
        failure_mode=failure_mode,
        on_event=on_event,
        retry_delay=retry_delay,
    )


def execute_plan_sync(plan: Any, tools: ToolsLike, **options: Any) -> PlanResult:
    """`execute_plan` for synchronous code (runs its own event loop).

    Raises:
        UserError: called from inside a running event loop (use ``await execute_plan(...)`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(execute_plan(plan, tools, **options))
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

    def __aiter__(self) -> AsyncIterator[PlanEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[PlanEvent]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event


@asynccontextmanager
async def stream_plan(plan: Any, tools: ToolsLike, **options: Any) -> AsyncIterator[PlanStream]:
    """Run a plan in the background of this block and iterate over its events.

    ```python
    async with stream_plan(plan, tools) as events:
        async for event in events:
            ...
    result = events.result
    ```
    Leaving the block early cancels the plan. Validation errors raise on entry, before any tool runs.
    """
    prepare_keys = ("step_timeout", "budget", "max_steps", "dialect")
    compiled, invoker = prepare(plan, tools, **{k: options.pop(k) for k in prepare_keys if k in options})
    stream = PlanStream()
    callback: Callable[[PlanEvent], None] | None = options.pop("on_event", None)

    def on_event(event: PlanEvent) -> None:
        if callback is not None:
            callback(event)
        stream._put(event)

    async with task_group() as tg:
        task = tg.create_task(execute_compiled(compiled, invoker, on_event=on_event, **options))
        task.add_done_callback(lambda _t: stream._queue.put_nowait(None))
        try:
            yield stream
        finally:
            if not task.done():
                task.cancel()
