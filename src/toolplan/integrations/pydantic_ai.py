"""toolplan in pydantic-ai: ``Agent(..., capabilities=[ToolPlanning()])``.

The capability adds ``execute_tool_plan`` over the agent's own tools and the planning section of the
instructions; at each step the plan tool's schema names the tools the model may plan with (and,
for a small catalog, their arguments), so pydantic-ai's ``TestModel`` sends valid plans. Every
nested call goes through the run's pydantic-ai ``ToolManager`` (argument
validation, ``args_validator``, capability hooks, tracing), each step reserves one unit of the
run's ``UsageLimits.tool_calls_limit`` before it starts (steps beyond it end ``not_run``, and the
model is told), and tools that need approval or are deferred make the plan fail validation.

Needs ``pip install 'toolplan[pydantic-ai]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..agent import PLAN_TOOL_NAME, planning_instructions
from ..agent._internal import _plan_schema
from ..execute import DEFAULT_MAX_VALUE_CHARS, RunLimits
from ..tools import ToolAnnotations, ToolDefinition, ToolResult
from ._common import PlanOutcome, require, run_plan

require("pydantic_ai", "pydantic-ai", "pydantic-ai")

from pydantic import ValidationError  # noqa: E402
from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed  # noqa: E402
from pydantic_ai.messages import ToolCallPart, ToolReturn  # noqa: E402
from pydantic_ai.tools import Tool as PydanticTool  # noqa: E402
from pydantic_ai.tools import ToolDefinition as PydanticToolDefinition  # noqa: E402
from pydantic_ai.tools import ToolDenied  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

if TYPE_CHECKING:
    from pydantic_ai.tool_manager import ToolManager

__all__ = ("ToolPlanning",)


class _HostTools:
    """The run's pydantic-ai tools as one toolplan tool: every call goes through the ToolManager."""

    def __init__(self, manager: ToolManager[Any], call_id: str, exclude: str) -> None:
        self._manager = manager
        self._tools = {name: t for name, t in (manager.tools or {}).items() if name != exclude}
        self._call_id = call_id
        self._calls = 0
        self._definitions = tuple(
            ToolDefinition(
                name=name,
                description=t.tool_def.description or "",
                parameters_json_schema=t.tool_def.parameters_json_schema,
                annotations=ToolAnnotations(),
            )
            for name, t in self._tools.items()
            if t.tool_def.kind != "output"
        )

    def definitions(self) -> Sequence[ToolDefinition]:
        return self._definitions

    def argument_problems(self, name: str, arguments: Mapping[str, Any], deferred: frozenset[str]) -> list[str]:
        """Deferred, hidden and approval-needing tools are refused; literal arguments meet the tool's own validator."""
        tool = self._tools[name]
        if tool.tool_def.defer:
            why = "needs approval" if tool.tool_def.kind == "unapproved" else "runs outside the agent (deferred)"
            return [f"tool {name!r} {why}, which a plan cannot wait for: call it on its own"]
        # A tool pydantic-ai hides until the model finds it (defer_loading): refused before anything runs.
        available = getattr(getattr(self._manager, "ctx", None), "is_tool_available", None)
        if available is not None and not available(tool.tool_def):
            return [f"tool {name!r} is not available yet: search for it first, then plan with it"]
        try:
            tool.args_validator.validate_python(dict(arguments))
        except ValidationError as exc:
            return [
                f"argument {'.'.join(str(p) for p in err['loc'])!r}: {err['msg']}" if err["loc"] else str(err["msg"])
                for err in exc.errors()
                if not (err["loc"] and err["loc"][0] in deferred)
            ]
        except Exception:  # a validator of a kind we do not know: the call itself checks
            return []
        return []

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        self._calls += 1
        part = ToolCallPart(tool_name=name, args=dict(arguments), tool_call_id=f"{self._call_id}.{self._calls}")
        try:
            out = await self._manager.handle_call(part, wrap_validation_errors=False)
        except (ModelRetry, ToolFailed) as exc:
            return ToolResult.failure(exc.message)
        except ValidationError as exc:
            return ToolResult.failure(f"Invalid arguments for {name!r}: {exc}")
        except (ApprovalRequired, CallDeferred):
            return ToolResult.failure(f"Tool {name!r} needs approval or is deferred: call it on its own.")
        if isinstance(out, ToolDenied):
            return ToolResult.failure(f"The call of {name!r} was denied: {out.message}")
        if isinstance(out, ToolReturn):
            out = out.return_value
        return ToolResult(out)


@dataclass
class ToolPlanning(AbstractCapability[Any]):
    """Give a pydantic-ai agent ``execute_tool_plan`` over its own tools.

    ``Agent(model, tools=[...], capabilities=[ToolPlanning()])``: the model may then run several
    of the agent's tools in one turn as a validated dependency graph, and gets back only the
    outputs it asked for.

    Attributes:
        limits: toolplan's limits for each plan (concurrency, timeouts, budget, step count); the
            run's ``UsageLimits.tool_calls_limit`` applies on top.
        max_value_chars: Longest value in the text the model gets back.
        instructions: Add the planning section to the agent's instructions.
        outcomes: Every plan call's outcome, in order (the full per-step records), for inspection.
    """

    limits: RunLimits | None = None
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS
    instructions: bool = True
    outcomes: list[PlanOutcome] | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not serializable into an agent spec (it holds Python objects)."""
        return None

    def get_instructions(self) -> Any:
        """The planning section of the system prompt."""
        return planning_instructions() if self.instructions else None

    def get_toolset(self) -> Any:
        """A toolset with the one ``execute_tool_plan`` tool."""
        toolset: FunctionToolset[Any] = FunctionToolset(
            [
                PydanticTool.from_schema(
                    self._execute,
                    name=PLAN_TOOL_NAME,
                    description=_plan_description(),
                    json_schema=_plan_schema(()),
                    takes_ctx=True,
                )
            ]
        )
        return toolset

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[PydanticToolDefinition]
    ) -> list[PydanticToolDefinition]:
        """Name this step's tools in the plan schema (with their arguments, for a small catalog).

        A model that builds arguments from the schema (pydantic-ai's ``TestModel``, structured
        outputs) then sends a valid plan; with no tool a plan could call, the plan tool is left out.
        """
        plannable = [t for t in tool_defs if t.name != PLAN_TOOL_NAME and t.kind == "function" and not t.defer]
        if not plannable:
            return [t for t in tool_defs if t.name != PLAN_TOOL_NAME]
        schema = _plan_schema(
            [t.name for t in plannable], parameters={t.name: t.parameters_json_schema for t in plannable}
        )
        return [replace(t, parameters_json_schema=schema) if t.name == PLAN_TOOL_NAME else t for t in tool_defs]

    async def _execute(self, ctx: RunContext[Any], **arguments: Any) -> str:
        manager = ctx.tool_manager
        if manager is None:
            raise ToolFailed(f"{PLAN_TOOL_NAME} needs the run's tool manager, which this run does not provide.")
        tools = _HostTools(manager, ctx.tool_call_id or PLAN_TOOL_NAME, PLAN_TOOL_NAME)
        left = None
        limit = ctx.usage_limits.tool_calls_limit if ctx.usage_limits is not None else None
        if limit is not None:
            left = limit - ctx.usage.tool_calls
        outcome = await run_plan(
            [tools], arguments, limits=self.limits, max_value_chars=self.max_value_chars, tool_calls_left=left
        )
        if self.outcomes is not None:
            self.outcomes.append(outcome)
        if outcome.is_error:
            raise ModelRetry(outcome.text)
        return outcome.text


def _plan_description() -> str:
    from ..agent._internal import _PLAN_DESCRIPTION

    return _PLAN_DESCRIPTION
