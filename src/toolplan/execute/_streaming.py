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
from collections.abc import AsyncIterable
from typing import Any

import jiter

from .._errors import PlanIssue, PlanValidationError
from .._tasks import task_group
from ..plan import DEFAULT_MAX_STEPS, META_TOOL_NAMES, Budget, CompiledStep, compile_plan
from ..plan._parse import parse_source
from ..plan._refs import compile_arguments
from ..plan._validate import step_dependencies
from ..tools import ToolRegistry, ToolsLike
from ._events import EventHandler
from ._executor import DEFAULT_MAX_CONCURRENCY, PlanRun
from ._invoke import ToolInvoker
from ._result import PlanResult

__all__ = ("StreamingPlan", "execute_plan_stream")

_STRUCTURAL = frozenset("{}[],")


class StreamingPlan:
    """A native plan that runs while its text arrives: `start`, `feed` pieces, then `finish`."""

    def __init__(
        self,
        registry: ToolRegistry,
        invoker: ToolInvoker,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_steps: int | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        self.registry = registry.without(*META_TOOL_NAMES)
        self.invoker = invoker
        self.max_steps = max_steps or DEFAULT_MAX_STEPS
        self.run = PlanRun(None, invoker, max_concurrency=max_concurrency, on_event=on_event)
        self.text = ""
        self.dispatched: list[str] = []
        self._seen = 0  # complete steps examined so far
        self._task: asyncio.Task[PlanResult] | None = None

    def start(self, tg: asyncio.TaskGroup) -> None:
        """Start the (still empty) run in ``tg``."""
        self._task = tg.create_task(self.run.run(), name="toolplan-streamed-plan")

    def feed(self, piece: str) -> None:
        """Take the next piece of the plan's JSON text; start the steps it completes."""
        self.text += piece
        if not _STRUCTURAL.intersection(piece):
            return  # no bracket or comma: this piece cannot complete a step or start the next one
        try:
            partial = jiter.from_json(self.text.encode(), partial_mode=True)
        except ValueError:
            return  # broken JSON: the complete plan will be rejected with a clear message
        steps = partial.get("steps") if isinstance(partial, dict) else None
        if isinstance(steps, list) and len(steps) - 1 > self._seen:
            self._consider(steps[:-1])  # the last step may still be growing

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
            problems: list[str] = []

            def note(code: str, message: str, problems: list[str] = problems) -> None:
                problems.append(code)

            args, refs, deferred = compile_arguments(step.arguments, ids, warn=note, error=note)
            if problems or registry.argument_problems(step.tool, step.arguments, deferred):
                continue  # a forward reference or a problem: wait for the whole plan
            deps = step_dependencies(step, refs)
            if step.id in deps or any(d not in ids for d in deps):
                continue
            self.run.add(CompiledStep(step=step, arguments=args, fallback_arguments=None, deps=deps))
            self.dispatched.append(step.id)

    def abort(self, reason: str) -> None:
        """Cancel what was started; nothing more starts."""
        self.run.abort(reason)

    async def finish(self, source: Any = None) -> PlanResult:
        """Validate the complete plan (``source``, or the text fed so far) and wait for the run.

        Raises:
            PlanValidationError: the plan is invalid; the steps already started were cancelled.
        """
        assert self._task is not None, "call start() first"
        try:
            compiled = compile_plan(self.text if source is None else source, self.registry, max_steps=self.max_steps)
            for sid in self.dispatched:
                if sid not in compiled.steps or compiled.steps[sid].step != self.run.steps[sid].step:
                    raise PlanValidationError(
                        [PlanIssue(code="stream_mismatch", step=sid, message="The step changed after it was streamed.")]
                    )
        except PlanValidationError:
            self.abort("Cancelled: the streamed plan turned out to be invalid.")
            await self._task
            raise
        if compiled.plan.budget is not None:
            meter = self.invoker.meter
            meter.budget = meter.budget.merged(compiled.plan.budget)
        self.run.seal(compiled)
        return await self._task


async def execute_plan_stream(
    pieces: AsyncIterable[str],
    tools: ToolsLike,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    step_timeout: float | None = None,
    budget: Budget | None = None,
    max_steps: int | None = None,
    on_event: EventHandler | None = None,
) -> PlanResult:
    """Run a native plan whose JSON text arrives in ``pieces``, starting steps as they complete.

    Raises:
        PlanValidationError: the complete plan is invalid (steps already started are cancelled).
    """
    registry = ToolRegistry.of(tools)
    invoker = ToolInvoker(registry, budget=budget, default_timeout=step_timeout)
    plan = StreamingPlan(registry, invoker, max_concurrency=max_concurrency, max_steps=max_steps, on_event=on_event)
    async with task_group() as tg:
        plan.start(tg)
        try:
            async for piece in pieces:
                plan.feed(piece)
        except BaseException:
            plan.abort("Cancelled: the plan's text stopped arriving.")
            raise
        return await plan.finish()
