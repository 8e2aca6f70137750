"""The ``declare_plan`` meta-tool: the model declares its plan before acting, for the audit.

With ``Agent(declare_plan=True)`` the model is asked (a prompt section) to call ``declare_plan``
with its intended calls before it calls any tool. Nothing runs: the declaration is recorded in
``AgentResult.declarations`` (with a ``planId``: the model's own, else ``plan_1``, ``plan_2``...,
and the time it was declared), and ``result.audit()`` compares it with what the run did, so
declared intents that were never executed, and calls never declared ("planning theater"), show
up as findings. A declaration that names the plan it ``replaces`` is a replan: each call is
judged against the declaration in force when it was made.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._errors import PlanValidationError
from ..execute import PlanResult
from ..policy import Declaration, parse_declaration
from ..tools import ToolAnnotations, ToolDefinition
from ._metatools import MetaCall, MetaToolBase

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
        f"`{DECLARE_TOOL_NAME}` again with the whole new plan and `replaces` set to the planId of the plan "
        "it replaces before you go on. Each call is audited against the plan in force when you made it."
    )


def _schema(tool_names: Sequence[str]) -> dict[str, Any]:
    tool_name: dict[str, Any] = {"type": "string", "description": "The tool you intend to call."}
    if tool_names:
        tool_name["enum"] = list(tool_names)
    return {
        "type": "object",
        "properties": {
            "planId": {"type": "string", "description": "An id for this plan (one is given if you leave it out)."},
            "replaces": {"type": "string", "description": "When you replan: the planId of the plan this replaces."},
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
                        "description": "How alternatives are chosen, e.g. 'ThompsonSampling', "
                        "'EpsilonGreedy, explorationRate=0.1' or 'prefer_general_methods'.",
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


class DeclarePlanTool(MetaToolBase):
    """The ``declare_plan`` meta-tool: records the model's declared plan (nothing runs).

    Args:
        tool_names: The tools the model may declare (its schema's enum).
    """

    _name = DECLARE_TOOL_NAME

    def __init__(self, tool_names: Sequence[str] = ()) -> None:
        self.tool_names = tuple(tool_names)
        self.declarations: list[Declaration] = []

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
        return self._declare(arguments)[:2]

    def _declare(self, arguments: Mapping[str, Any]) -> tuple[str, bool, Declaration | None]:
        try:
            declaration = parse_declaration(dict(arguments))
        except PlanValidationError as exc:
            return exc.message, True, None
        known = [d.plan_id for d in self.declarations]
        if declaration.plan_id in known:
            return (
                f"A plan with planId {declaration.plan_id!r} was already declared. Give the new plan another "
                f"planId, and set 'replaces' to {declaration.plan_id!r} if it replaces that one.",
                True,
                None,
            )
        if declaration.replaces is not None and declaration.replaces not in known:
            listed = ", ".join(repr(k) for k in known) or "none yet"
            return (
                f"'replaces' names plan {declaration.replaces!r}, which was not declared (declared: {listed}). "
                "Name the planId of the plan this one replaces, or leave 'replaces' out.",
                True,
                None,
            )
        unknown = sorted({c.tool for c in declaration.calls} - set(self.tool_names)) if self.tool_names else []
        if unknown:
            return (
                f"The plan declares {', '.join(map(repr, unknown))}, which is not one of your tools "
                f"({', '.join(self.tool_names)}). Declare only tools you can call.",
                True,
                None,
            )
        plan_id = declaration.plan_id
        if plan_id is None:
            n = len(self.declarations) + 1
            while f"plan_{n}" in known:
                n += 1
            plan_id = f"plan_{n}"
        declaration = replace(declaration, plan_id=plan_id, declared_at=time.time())
        self.declarations.append(declaration)
        count = len(declaration.calls)
        replan = f", replacing {declaration.replaces!r}" if declaration.replaces else ""
        text = f"Plan {plan_id!r} declared{replan}: {count} call{'s' if count != 1 else ''}. Go ahead and make them."
        return text, False, declaration

    async def answer(self, arguments: Mapping[str, Any], ctx: MetaCall) -> tuple[str, bool, PlanResult | None]:
        """Record the declaration; with a store, keep it under the agent run's id (``toolplan audit``).

        What is stored is the declaration as sent, with its ``planId`` (given when the model gave none).
        """
        text, is_error, declaration = self._declare(arguments)
        save = getattr(ctx.store, "save_declaration", None)
        if declaration is not None and save is not None and ctx.parent:
            await save(ctx.parent, {**arguments, "planId": declaration.plan_id})
        return text, is_error, None
