"""Streamed plans: start a plan's steps while its JSON text is still arriving.

The plan arrives as JSON text in pieces (a model streaming the arguments of ``execute_tool_plan``).
After each piece that can close an object, the text is parsed in jiter's partial mode; every step
followed by the start of another one is complete. A complete step whose tool, arguments and
references check out (against the steps seen so far) is added to a running `PlanRun` and starts as
soon as its dependencies succeed. Anything doubtful (a reference to a step not seen yet, a problem)
waits for the complete plan. When the text is complete, the whole plan is validated as usual: if it
is invalid, the started steps are cancelled and `PlanValidationError` lists every problem.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Sequence
from typing import Any

import jiter
from typing_extensions import Unpack

from .._errors import PlanIssue, PlanValidationError, ToolplanError, UserError
from .._tasks import task_group
from ..plan import META_TOOL_NAMES, CompiledStep, compile_plan
from ..plan._internal import compile_arguments, parse_source, step_dependencies
from ..tools import ToolRegistry, ToolsLike
from ._api import run_journaled
from ._approval import ApprovalCallback, ApprovalRule
from ._backend import Backend
from ._choice import ToolChooser
from ._events import EventHandler
from ._gate import ApprovalGate
from ._invoke import ToolInvoker
from ._journal import RunStore, check_run_id
from ._limits import DEFAULT_LIMITS, LimitOptions, RunLimits, limits_from
from ._result import PlanResult
from ._run import PlanRun

__all__ = ("StreamedPlanInvalid", "StreamingPlan", "execute_plan_stream")

_STRUCTURAL = frozenset("{}[],")
# Plan-level keys whose values govern the run: applied as soon as each is complete in the text.
_OPTION_KEYS = ("max_concurrency", "failure_mode", "budget", "share_calls")


class StreamedPlanInvalid(PlanValidationError):
    """A streamed plan turned out invalid after some of its steps had started.

    ``result`` records every step that was started (those that finished keep their outcome; the
    others were cancelled), so nothing that ran is lost and the model can be told exactly what ran.
    """

    def __init__(self, issues: Sequence[PlanIssue], result: PlanResult | None = None) -> None:
        super().__init__(issues)
        self.result = result
        n = len(self.issues)
        started = 0 if result is None else sum(1 for r in result.steps.values() if r.attempts)
        lines = "\n".join(f"- {issue}" for issue in self.issues)
        ToolplanError.__init__(
            self,
            f"The plan is invalid ({n} problem{'s' if n != 1 else ''}) and was stopped, but {started} of its "
            "steps had started while it was streaming (their records are kept). Fix every problem below:\n"
            f"{lines}",
        )


StreamedPlanInvalid.__module__ = "toolplan.execute"  # public there


class StreamingPlan:
    """A native plan that runs while its text arrives: `start`, `feed` pieces, then `finish`."""

    def __init__(
        self,
        registry: ToolRegistry,
        invoker: ToolInvoker,
        *,
        limits: RunLimits = DEFAULT_LIMITS,
        expires: float | None = None,
        expires_note: str = "the run's deadline",
        on_event: EventHandler | None = None,
        store: RunStore | None = None,
        run_id: str | None = None,
        parent: str | None = None,
        approval: ApprovalGate | None = None,
    ) -> None:
        self.registry = registry.without(*META_TOOL_NAMES)
        self.limits = limits
        self.store, self.run_id, self.parent = store, run_id, parent
        self.invoker = invoker
        self.max_steps = limits.max_steps
        self.run = PlanRun(
            None,
            invoker,
            limits=limits,
            expires=expires,
            expires_note=expires_note,
            on_event=on_event,
            approval=approval,
        )
        self._options: dict[str, Any] = {}  # plan-level options applied so far
        self.text = ""
        self.dispatched: list[str] = []
        self._seen = 0  # complete steps examined so far
        self._task: asyncio.Task[PlanResult] | None = None

    def start(self, tg: asyncio.TaskGroup) -> None:
        """Start the (still empty) run in ``tg``."""
        run = self.run.run() if self.store is None else self._durable()
        self._task = tg.create_task(run, name="toolplan-streamed-plan")

    async def _durable(self) -> PlanResult:
        """The run in a store: claimed before its first step starts; its plan is stored once complete."""
        assert self.store is not None
        journal, _ = await self.store.begin(self.run_id, None, self.limits, parent=self.parent)
        self.run.journal = journal
        self.run.run_id = journal.run_id
        if self.run.compiled is not None:  # the whole plan arrived while the run was being claimed
            journal.plan_complete(self.run.compiled.plan)
        return await run_journaled(self.run)

    def feed(self, piece: str) -> None:
        """Take the next piece of the plan's JSON text; start the steps it completes."""
        self.text += piece
        if not _STRUCTURAL.intersection(piece):
            return  # no bracket or comma: this piece cannot complete a step or start the next one
        try:
            partial = jiter.from_json(self.text.encode(), partial_mode=True)
        except ValueError:
            return  # broken JSON: the complete plan will be rejected with a clear message
        if not isinstance(partial, dict):
            return
        self._apply_options(partial)
        steps = partial.get("steps")
        if isinstance(steps, list) and len(steps) - 1 > self._seen:
            self._consider(steps[:-1])  # the last step may still be growing

    def _apply_options(self, partial: dict[str, Any]) -> None:
        """Apply the plan-level limits whose values are complete (a later key follows them).

        So ``max_concurrency``, ``failure_mode`` and ``budget`` govern the steps that start after
        they arrive; written before ``steps`` (as the schema lists them) they govern every step.
        """
        keys = list(partial)
        complete = {k: partial[k] for k in keys[:-1] if k in _OPTION_KEYS and k not in self._options}
        if not complete:
            return
        plan, issues = parse_source({"steps": [{"id": "_", "tool": "_"}], **complete}, dialect="native")
        if plan is None or any(i.severity == "error" for i in issues):
            return  # a bad value: the complete plan will be rejected with a clear message
        self._options.update(complete)
        self.run.apply(plan)

    def _consider(self, complete: list[Any]) -> None:
        plan, issues = parse_source({"steps": complete}, dialect="native")
        if plan is None:
            return
        ids = set(plan.step_ids)
        bad = {i.step for i in issues if i.severity == "error"}
        registry = self.registry
        for step in plan.steps[self._seen :]:
            self._seen += 1
            if step.id in bad or step.id in self.run.steps or step.tool not in registry or step.fallback is not None:
                continue  # validated with the whole plan
            if step.when is not None:
                continue  # a condition: compiled with the whole plan
            problems: list[str] = []

            def note(code: str, message: str, problems: list[str] = problems) -> None:
                problems.append(code)

            args, refs, deferred = compile_arguments(step.arguments, ids, warn=note, error=note)
            if problems or registry.argument_problems(step.tool, step.arguments, deferred):
                continue  # a forward reference or a problem: wait for the whole plan
            deps = step_dependencies(step, refs)
            if step.id in deps or any(d not in ids for d in deps):
                continue
            if step.after or self.run.invoker.annotations(step.tool).resource is not None:
                continue  # ordered: added with the whole plan, in its order
            self.run.add(CompiledStep(step=step, arguments=args, fallback_arguments=None, deps=deps))
            self.dispatched.append(step.id)

    def abort(self, reason: str) -> None:
        """Cancel what was started; nothing more starts."""
        self.run.abort(reason)

    async def finish(self, source: Any = None) -> PlanResult:
        """Validate the complete plan (``source``, or the text fed so far) and wait for the run.

        Raises:
            PlanValidationError: the plan is invalid and no step had been started.
            StreamedPlanInvalid: the plan is invalid and some steps had started; ``.result`` has
                their records (finished ones keep their outcome, running ones were cancelled).
        """
        assert self._task is not None, "call start() first"
        try:
            compiled = compile_plan(self.text if source is None else source, self.registry, max_steps=self.max_steps)
            for sid in self.dispatched:
                if sid not in compiled.steps or compiled.steps[sid].step != self.run.steps[sid].step:
                    raise PlanValidationError(
                        [PlanIssue(code="stream_mismatch", step=sid, message="The step changed after it was streamed.")]
                    )
        except PlanValidationError as exc:
            self.abort("Cancelled: the streamed plan turned out to be invalid.")
            result = await self._task
            if self.dispatched:
                raise StreamedPlanInvalid([*exc.issues, *exc.warnings], result) from None
            raise
        if self.run.journal is not None:
            self.run.journal.plan_complete(compiled.plan)
        self.run.seal(compiled)
        return await self._task


async def execute_plan_stream(
    pieces: AsyncIterable[str],
    tools: ToolsLike,
    *,
    on_event: EventHandler | None = None,
    backend: Backend | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    policy: ToolChooser | None = None,
    approval: ApprovalRule | None = None,
    on_approval: ApprovalCallback | None = None,
    **options: Unpack[LimitOptions],
) -> PlanResult:
    """Run a native plan whose JSON text arrives in ``pieces``, starting steps as they complete.

    Takes the options of `execute_plan`; the plan's own limits apply from the moment they arrive.
    With ``store``, the run is durable: its steps are stored as they run, and its plan once it has
    arrived whole and is valid (from then on the run can be resumed like any other).
    ``approval`` and ``on_approval`` are `execute_plan`'s: a step the rule marks waits for its
    answer while the rest of the plan streams and runs; a run that waits (no callback, or a step it
    left unanswered) returns with status ``pending_approval``, resumed with `execute_plan`.

    Raises:
        PlanValidationError: the complete plan is invalid (`StreamedPlanInvalid`, with the records
            of the steps that had started, when some had).
    """
    limits = limits_from(options)
    registry = ToolRegistry.of(tools)
    invoker = ToolInvoker.for_limits(registry, limits, backend=backend, chooser=policy)
    if run_id is not None:
        check_run_id(run_id)
    gate = None
    if approval is not None or on_approval is not None:
        if not isinstance(approval, ApprovalRule):
            raise UserError(
                f"approval= takes an ApprovalRule, got {type(approval).__name__} (on_approval= needs approval= too)."
            )
        gate = ApprovalGate(approval, registry, on_approval)
    plan = StreamingPlan(registry, invoker, limits=limits, on_event=on_event, store=store, run_id=run_id, approval=gate)
    async with task_group() as tg:
        plan.start(tg)
        try:
            async for piece in pieces:
                plan.feed(piece)
        except BaseException:
            plan.abort("Cancelled: the plan's text stopped arriving.")
            raise
        return await plan.finish()
