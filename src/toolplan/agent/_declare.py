"""The ``declare_plan`` meta-tool: the model declares its plan before acting, for the audit.

With ``Agent(declare_plan=True)`` the model is asked (a prompt section) to call ``declare_plan``
with its intended calls before it calls any tool. Nothing runs: the declaration is recorded in
``AgentResult.declarations``, and ``result.audit()`` compares the last one with what the run did,
so declared intents that were never executed, and calls never declared ("planning theater"), show
up as findings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import PlanValidationError
from ..execute import EventHandler, PlanResult, RunStore, ToolInvoker
from ..policy import Declaration, parse_declaration
from ..tools import ToolAnnotations, ToolDefinition, ToolResult

__all__ = ("DECLARE_TOOL_NAME", "DeclarePlanTool", "declare_instructions")

DECLARE_TOOL_NAME = "declare_plan"


def declare_instructions() -> str:
    """The system-prompt section that asks the model to declare its plan first."""
    return (
        "## Declare your plan\n"
        f"Before you call any tool, call `{DECLARE_TOOL_NAME}` once with the calls you intend to make, in "
        "order: for each, `toolName`, a one-line `rationale`, the `expectedOutcome` and, if useful, "
        "`fallbackOnFailure` (another tool). Put your goal, limits and tool-choice policy in "
        "`planningContext`. Then make exactly those calls. If a result changes what you need, call "
        f"`{DECLARE_TOOL_NAME}` again with the whole new plan before you go on. Your calls are audited "
        "against your last declaration."
    )


def _schema(tool_names: Sequence[str]) -> dict[str, Any]:
    tool_name: dict[str, Any] = {"type": "string", "description": "The tool you intend to call."}
    if tool_names:
        tool_name["enum"] = list(tool_names)
    return {
        "type": "object",
        "properties": {
            "planningContext": {
                "type": "object",
                "properties": {
                    "goal": {"type": "string", "description": "What the calls are for."},
                    "constraints": {
                        "type": "object",
                        "description": "Limits you will keep: maxToolCalls, maxLatency (seconds), maxCost.",
                    },
                    "policy": {
                        "type": "string",
                        "description": "How alternatives are chosen, e.g. 'thompson' or 'prefer_general_methods'.",
                    },
                },
                "required": ["goal"],
            },
            "plannedSequence": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "toolName": tool_name,
                        "rationale": {"type": "string"},
                        "expectedOutcome": {"type": "string"},
                        "fallbackOnFailure": {"type": "string", "description": "A tool to call if this one fails."},
                    },
                    "required": ["toolName", "rationale"],
                },
            },
        },
        "required": ["planningContext", "plannedSequence"],
    }


class DeclarePlanTool:
    """The ``declare_plan`` meta-tool: records the model's declared plan (nothing runs).

    Args:
        tool_names: The tools the model may declare (its schema's enum).
    """

    def __init__(self, tool_names: Sequence[str] = ()) -> None:
        self.tool_names = tuple(tool_names)
        self.declarations: list[Declaration] = []

    @property
    def name(self) -> str:
        """``declare_plan``."""
        return DECLARE_TOOL_NAME

    def definitions(self) -> Sequence[ToolDefinition]:
        """The one function the model sees."""
        return (
            ToolDefinition(
                name=DECLARE_TOOL_NAME,
                description="Declare the tool calls you intend to make, before making them. Nothing runs; "
                "your calls are audited against your last declaration.",
                parameters_json_schema=_schema(self.tool_names),
                annotations=ToolAnnotations(read_only=True, cost=0.0),
            ),
        )

    def declare(self, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """Record a declaration; returns (text for the model, is_error)."""
        try:
            declaration = parse_declaration(dict(arguments))
        except PlanValidationError as exc:
            return exc.message, True
        unknown = sorted({c.tool for c in declaration.calls} - set(self.tool_names)) if self.tool_names else []
        if unknown:
            return (
                f"The plan declares {', '.join(map(repr, unknown))}, which is not one of your tools "
                f"({', '.join(self.tool_names)}). Declare only tools you can call.",
                True,
            )
        self.declarations.append(declaration)
        count = len(declaration.calls)
        return f"Plan declared: {count} call{'s' if count != 1 else ''}. Go ahead and make them.", False

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Record the declaration in ``arguments``."""
        text, is_error = self.declare(arguments)
        return ToolResult.failure(text) if is_error else ToolResult(text)

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        invoker: ToolInvoker,
        on_event: EventHandler | None = None,
        expires: float | None = None,
        store: RunStore | None = None,
        parent: str | None = None,
    ) -> tuple[str, bool, PlanResult | None]:
        """Record the declaration; with a store, keep it under the agent run's id (``toolplan audit``)."""
        text, is_error = self.declare(arguments)
        save = getattr(store, "save_declaration", None)
        if not is_error and save is not None and parent:
            await save(parent, arguments)
        return text, is_error, None
