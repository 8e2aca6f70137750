"""The ``execute_code`` meta-tool: model-written Python calling tools through the plan engine.

Every ``call_tool`` from the code becomes a step of an incremental `PlanRun` that shares the agent
run's invoker, so calls from code get the same validation, concurrency limits, timeouts, retries,
budget and events as plan steps, and show up as steps in the `PlanResult`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ToolError, UnknownToolError
from .._tasks import task_group
from ..execute import EventHandler, PlanResult, PlanRun, ToolInvoker
from ..plan import META_TOOL_NAMES, CompiledStep, Step, compile_calls
from ..plan._refs import literal
from ..tools import ToolAnnotations, ToolDefinition, ToolRegistry, ToolResult

if TYPE_CHECKING:
    from ..sandbox import CodeLimits, CodeResult, CodeRunner

__all__ = ("CODE_TOOL_NAME", "CodeTool", "code_instructions")

CODE_TOOL_NAME = "execute_code"


def code_instructions(runner: CodeRunner) -> str:
    """The system-prompt section on when to write code rather than a plan."""
    return (
        "## Code\n"
        f"`{CODE_TOOL_NAME}` runs Python ({runner.name}) that calls tools with `call_tool(name, args)` and "
        "`call_tools_parallel([(name, args), ...])` and returns a value with `set_result(value)`. Use it "
        "when the work needs loops, conditions or data wrangling between calls; for a fixed set of calls a "
        "plan (or direct calls) is simpler. Only the value you set and short logs come back."
    )


class CodeTool:
    """The ``execute_code`` meta-tool around a `CodeRunner`."""

    def __init__(
        self,
        runner: CodeRunner,
        tools: ToolRegistry,
        *,
        limits: CodeLimits | None = None,
        max_concurrency: int = 20,
    ) -> None:
        self.runner = runner
        self.registry = tools.without(*META_TOOL_NAMES)
        self.limits = limits
        self.max_concurrency = max_concurrency

    @property
    def name(self) -> str:
        """``execute_code``."""
        return CODE_TOOL_NAME

    def definitions(self) -> Sequence[ToolDefinition]:
        """The tool the model sees: ``{code: string}`` and what the runner supports."""
        tools = ", ".join(self.registry.names) or "(none)"
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

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run the code in ``arguments["code"]`` with its own invoker."""
        content, is_error, _ = await self.call(arguments, invoker=ToolInvoker(self.registry))
        return ToolResult.failure(content) if is_error else ToolResult(content)

    async def call(
        self, arguments: Mapping[str, Any], *, invoker: ToolInvoker, on_event: EventHandler | None = None
    ) -> tuple[str, bool, PlanResult | None]:
        """Run the code; return (text for the model, is_error, the record of the code's tool calls)."""
        result, plan = await self.run_code(arguments, invoker=invoker, on_event=on_event)
        return result.for_model(), not result.ok, plan

    async def run_code(
        self, arguments: Mapping[str, Any], *, invoker: ToolInvoker, on_event: EventHandler | None = None
    ) -> tuple[CodeResult, PlanResult]:
        """Run the code and return the runner's result and the plan record of its tool calls."""
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("execute_code needs a non-empty 'code' string with the Python to run.", tool=CODE_TOOL_NAME)
        run = PlanRun(None, invoker, max_concurrency=self.max_concurrency, on_event=on_event)
        counter = itertools.count(1)
        added: list[tuple[str, str, Mapping[str, Any]]] = []
        registry = self.registry

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
                result = await self.runner.run(code, call_tool=call_tool, limits=self.limits)
            finally:
                if run.sched.done:
                    run.seal(compile_calls(added))
                else:  # the code ended (or was killed) with calls still running: they are orphans
                    run.abort("Cancelled: the code that made this call has finished.")
        return result, run_task.result()
