"""The ``execute_code`` meta-tool: model-written Python calling tools through the plan engine.

Every ``call_tool`` from the code becomes a step of an incremental `PlanRun` that shares the agent
run's invoker, so calls from code get the same validation, concurrency limits, timeouts, retries,
budget and events as plan steps, and show up as steps in the `PlanResult`.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._errors import ToolError, UnknownToolError
from .._tasks import task_group
from ..execute import ApprovalCallback, ApprovalRule, EventHandler, PlanResult, RunLimits, ToolInvoker
from ..execute._internal import ApprovalGate, PlanRun
from ..plan import META_TOOL_NAMES, CompiledStep, Step
from ..plan._internal import compile_calls, literal
from ..tools import ToolAnnotations, ToolDefinition, ToolRegistry
from ._metatools import MetaCall, MetaToolBase

if TYPE_CHECKING:
    from ..sandbox import CodeLimits, CodeResult, CodeRunner

__all__ = ("CODE_TOOL_NAME", "CodeBackend", "CodeTool", "code_instructions", "runner_for")

CODE_TOOL_NAME = "execute_code"


@runtime_checkable
class CodeBackend(Protocol):
    """A backend that can also run code mode's sandbox where its tool calls run (`RayBackend`)."""

    code_on_workers: bool

    def code_runner(self, runner: CodeRunner) -> CodeRunner:
        """``runner``, run on the backend's workers."""
        ...


def runner_for(runner: CodeRunner, backend: object) -> CodeRunner:
    """The runner an agent uses: on the backend's workers if it offers that and has it on, else ``runner``."""
    if isinstance(backend, CodeBackend) and backend.code_on_workers:
        return backend.code_runner(runner)
    return runner


def code_instructions(runner: CodeRunner) -> str:
    """The system-prompt section on when to write code rather than a plan."""
    return (
        "## Code\n"
        f"`{CODE_TOOL_NAME}` runs Python ({runner.name}) that calls tools with `call_tool(name, args)` and "
        "`call_tools_parallel([(name, args), ...])` and returns a value with `set_result(value)`. Use it "
        "when the work needs loops, conditions or data wrangling between calls; for a fixed set of calls a "
        "plan (or direct calls) is simpler. Only the value you set and short logs come back."
    )


class CodeTool(MetaToolBase):
    """The ``execute_code`` meta-tool around a `CodeRunner`.

    Args:
        runner: Where the code runs.
        tools: What the code may call.
        limits: The code's own limits (time, memory, output...); default: the runner's.
        run_limits: Limits of the code's tool calls (concurrency, timeouts, budget, deadline), as for
            a plan; inside an agent run, the run's budget and deadline apply on top.
    """

    _name = CODE_TOOL_NAME

    def __init__(
        self,
        runner: CodeRunner,
        tools: ToolRegistry,
        *,
        limits: CodeLimits | None = None,
        run_limits: RunLimits | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.runner = runner
        self.registry = tools.without(*META_TOOL_NAMES)
        self.limits = limits
        self.run_limits = RunLimits.of(run_limits, max_concurrency=max_concurrency)

    def definitions(self) -> Sequence[ToolDefinition]:
        """The tool the model sees: ``{code: string}`` and what the runner supports."""
        tools = ", ".join(self.registry.visible_names) or "(none)"
        if self.registry.deferred_names:
            tools += " (and the tools search_tools finds)"
        return (
            ToolDefinition(
                name=CODE_TOOL_NAME,
                description=f"{self.runner.describe()}\nTools callable with call_tool: {tools}.",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "Python source to run."}},
                    "required": ["code"],
                },
                annotations=ToolAnnotations(cost=0.0),
            ),
        )

    async def answer(self, arguments: Mapping[str, Any], ctx: MetaCall) -> tuple[str, bool, PlanResult | None]:
        """Run the code; return (text for the model, is_error, the record of the code's tool calls).

        Outside an agent run (no ``ctx.invoker``) with an invoker of its own. Code runs are not stored
        (``ctx.store`` is not used): code is not made of steps a resume could reuse one by one.
        ``ctx.approval`` and ``ctx.on_approval`` as in `run_code`.
        """
        invoker = ToolInvoker.for_limits(self.registry, self.run_limits) if ctx.invoker is None else ctx.invoker
        result, plan = await self.run_code(
            arguments,
            invoker=invoker,
            on_event=ctx.on_event,
            expires=ctx.expires,
            approval=ctx.approval,
            on_approval=ctx.on_approval,
        )
        return result.for_model(), not result.ok, plan

    async def run_code(
        self,
        arguments: Mapping[str, Any],
        *,
        invoker: ToolInvoker,
        on_event: EventHandler | None = None,
        expires: float | None = None,
        approval: ApprovalRule | None = None,
        on_approval: ApprovalCallback | None = None,
    ) -> tuple[CodeResult, PlanResult]:
        """Run the code and return the runner's result and the plan record of its tool calls.

        ``expires`` (an agent run's deadline, `time.monotonic`) bounds the code's wall time and its
        calls, as do ``run_limits.deadline`` and its budget's ``max_latency``.

        ``approval``: a call the rule marks waits (the code with it) for ``on_approval``'s answer;
        approved, it is made (with the edited arguments, if any); rejected, or without a callback to
        ask, it is not made and the code gets a failed call (`ToolError`) saying why, and goes on.
        """
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("execute_code needs a non-empty 'code' string with the Python to run.", tool=CODE_TOOL_NAME)
        registry = self.registry
        run = PlanRun(
            None,
            invoker.with_budget(self.run_limits.budget),
            limits=self.run_limits,
            expires=expires,
            expires_note="the agent run's deadline",
            on_event=on_event,
            approval=None if approval is None else ApprovalGate(approval, registry, on_approval, park=False),
        )
        code_limits = self._code_limits(run.expires)
        counter = itertools.count(1)
        added: list[tuple[str, str, Mapping[str, Any]]] = []

        async def call_tool(name: str, args: dict[str, Any]) -> Any:
            if name in META_TOOL_NAMES:
                raise ToolError(
                    f"Code cannot call {name!r}: plans and code do not nest. Call the tools you need directly.",
                    tool=name,
                )
            if name not in registry:
                raise UnknownToolError(name, registry.names)
            sid = f"call_{next(counter)}"
            added.append((sid, name, args))
            run.add(
                CompiledStep(
                    step=Step(id=sid, tool=name, arguments=args),
                    arguments=literal(args),
                    fallback_arguments=None,
                    deps=(),
                )
            )
            step = await run.wait(sid)
            if step.ok:
                return step.output
            raise ToolError(step.error.message if step.error else step.status, tool=name)

        async with task_group() as tg:
            run_task = tg.create_task(run.run())
            try:
                result = await self.runner.run(code, call_tool=call_tool, limits=code_limits)
            finally:
                if run.sched.done:
                    run.seal(compile_calls(added))
                else:  # the code ended (or was killed) with calls still running: they are orphans
                    run.abort("Cancelled: the code that made this call has finished.")
        return result, run_task.result()

    def _code_limits(self, expires: float | None) -> CodeLimits | None:
        """The code's limits, its wall time cut to what is left before the run's deadline."""
        if expires is None:
            return self.limits
        left = expires - time.monotonic()
        if left <= 0:
            raise ToolError(
                "The agent run's deadline has passed: no more code can run. Answer with what you have.",
                tool=CODE_TOOL_NAME,
            )
        limits = self.limits or getattr(self.runner, "limits", None)
        if limits is None:
            from ..sandbox import CodeLimits

            limits = CodeLimits()
        return dataclasses.replace(limits, wall_time=min(limits.wall_time, left)) if left < limits.wall_time else limits
