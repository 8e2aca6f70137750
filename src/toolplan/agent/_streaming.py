"""Streamed plans: start a plan's steps while the model is still writing the plan.

The arguments of an ``execute_tool_plan`` call arrive as JSON text in pieces. After each piece that
can close an object, the text is parsed in jiter's partial mode; every step followed by the start of
another one is complete. A complete step whose tool, arguments and references check out (against the
steps seen so far) is added to a running `PlanRun` and starts as soon as its dependencies succeed.
Anything doubtful (a reference to a step not seen yet, a problem) waits for the complete plan.
When the model's answer is complete, the whole plan is validated as usual: if it is invalid, the
started steps are cancelled and the model gets every problem, like for any invalid plan.
"""

from __future__ import annotations

import asyncio
from typing import Any

import jiter

from .._errors import PlanIssue, PlanValidationError, ToolError
from ..execute import PlanResult, PlanRun, prepare
from ..models import ToolCall, ToolReturnMessage
from ..plan import META_TOOL_NAMES, CompiledStep
from ..plan._parse import parse_source
from ..plan._refs import compile_arguments
from ._executors import TurnContext
from ._metatools import PlanTool

__all__ = ("StreamedPlan",)

_STRUCTURAL = frozenset("{}[],")


class StreamedPlan:
    """The plan of one streamed ``execute_tool_plan`` call, running while it arrives."""

    def __init__(self, tool: PlanTool, ctx: TurnContext, run: PlanRun, task: asyncio.Task[PlanResult]) -> None:
        self.tool = tool
        self.ctx = ctx
        self.run = run
        self.task = task
        self.buffer = ""
        self.seen = 0  # complete steps examined so far
        self.dispatched: list[str] = []

    @classmethod
    def start(cls, tool: PlanTool, ctx: TurnContext, tg: asyncio.TaskGroup, *, call_id: str) -> StreamedPlan:
        """Start an empty incremental run in ``tg`` for the call ``call_id``."""
        run = PlanRun(None, ctx.invoker, max_concurrency=tool.max_concurrency, on_event=ctx.emit)
        task = tg.create_task(run.run(), name=f"toolplan-streamed-plan-{call_id}")
        return cls(tool, ctx, run, task)

    def feed(self, delta: str) -> None:
        """Take the next piece of the arguments' JSON text; start the steps it completes."""
        self.buffer += delta
        if not _STRUCTURAL.intersection(delta):
            return  # no bracket or comma: this piece cannot complete a step or start the next one
        try:
            partial = jiter.from_json(self.buffer.encode(), partial_mode=True)
        except ValueError:
            return  # broken JSON: the complete plan will be rejected with a clear message
        steps = partial.get("steps") if isinstance(partial, dict) else None
        if not isinstance(steps, list):
            return
        complete: list[Any] = steps[:-1]  # the last one may still be growing
        if len(complete) > self.seen:
            self._consider(complete)

    def _consider(self, complete: list[Any]) -> None:
        plan, issues = parse_source({"steps": complete}, dialect="native")
        if plan is None:
            return
        ids = set(plan.step_ids)
        bad = {i.step for i in issues if i.severity == "error"}
        registry = self.tool.registry
        for step in plan.steps[self.seen :]:
            self.seen += 1
            if step.id in bad or step.id in self.run.steps or step.tool in META_TOOL_NAMES or step.tool not in registry:
                continue
            if step.fallback is not None:
                continue  # rare; validated with the whole plan
            problems: list[str] = []

            def note(code: str, message: str, problems: list[str] = problems) -> None:
                problems.append(code)

            args, refs, deferred = compile_arguments(step.arguments, ids, warn=note, error=note)
            literal = {k: v for k, v in step.arguments.items() if k not in deferred}
            if problems or registry.argument_problems(step.tool, literal, deferred):
                continue  # a forward reference or a problem: wait for the whole plan
            deps = tuple(dict.fromkeys([*step.depends_on, *sorted(refs)]))
            if step.id in deps or any(d not in ids for d in deps):
                continue
            self.run.add(CompiledStep(step=step, arguments=args, fallback_arguments=None, deps=deps))
            self.dispatched.append(step.id)

    async def reply(self, call: ToolCall) -> ToolReturnMessage:
        """Validate the complete plan, let the run finish, and answer the model."""
        try:
            arguments = call.parse_arguments()
            compiled, _ = prepare(
                arguments,
                self.tool.registry,
                step_timeout=self.tool.step_timeout,
                budget=self.tool.budget,
                max_steps=self.tool.max_steps,
                dialect="native",
            )
            for sid in self.dispatched:
                if sid not in compiled.steps or compiled.steps[sid].step != self.run.steps[sid].step:
                    raise PlanValidationError(
                        [PlanIssue(code="stream_mismatch", step=sid, message="The step changed after it was streamed.")]
                    )
        except (PlanValidationError, ToolError) as exc:
            started = len(self.dispatched)
            note = f" {started} step(s) that had already started were cancelled." if started else ""
            self.run.abort("Cancelled: the streamed plan turned out to be invalid.")
            await self.task
            return ToolReturnMessage(
                tool_call_id=call.id, name=call.name, content=f"Error: {exc.message}{note}", is_error=True
            )
        self.run.seal(compiled)
        result = await self.task
        self.ctx.plan_results.append(result)
        return ToolReturnMessage(
            tool_call_id=call.id, name=call.name, content=result.to_model_text(max_value_chars=self.ctx.max_value_chars)
        )
