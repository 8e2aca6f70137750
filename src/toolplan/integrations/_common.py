"""What every adapter shares: run one plan over the host's tools, within the host's tool-call limit."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .._errors import PlanValidationError
from ..agent import PlanTool
from ..agent._internal import _plan_schema
from ..execute import EventHandler, PlanResult, RunLimits
from ..plan import Budget
from ..tools import ToolRegistry, ToolsLike

__all__ = ("PlanOutcome", "plan_schema", "require", "run_plan")


def require(module: str, extra: str, framework: str) -> ModuleType:
    """Import ``module`` or raise an ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"toolplan's {framework} integration needs {framework}: pip install 'toolplan[{extra}]'"
        ) from exc


def plan_schema(registry: ToolRegistry | None) -> dict[str, Any]:
    """The plan tool's schema over ``registry`` (None: tools known only at call time, so not named).

    A small catalog's schema spells out each tool's arguments (see `DETAILED_PLAN_SCHEMA_MAX_TOOLS`).
    """
    if registry is None:
        return _plan_schema(())
    definitions = registry.definitions()
    return _plan_schema(
        [d.name for d in definitions], parameters={d.name: d.parameters_json_schema for d in definitions}
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOutcome:
    """One ``execute_tool_plan`` call: the model's text, whether it is an error, and the full record.

    ``result`` is None when the plan was invalid (nothing ran); ``problems`` then lists every issue.
    """

    text: str
    is_error: bool
    result: PlanResult | None = None
    problems: Mapping[str, Any] | None = None

    def artifact(self) -> dict[str, Any]:
        """A JSON-able form of the whole outcome (every step's record, or the validation problems)."""
        if self.result is None:
            return {"status": "invalid", **dict(self.problems or {})}
        return self.result.to_dict()


async def run_plan(
    tools: ToolsLike,
    arguments: Mapping[str, Any],
    *,
    limits: RunLimits | None,
    max_value_chars: int,
    tool_calls_left: int | None = None,
    on_event: EventHandler | None = None,
) -> PlanOutcome:
    """Validate and run the plan in ``arguments`` over ``tools`` (the host's tools, adapted).

    ``tool_calls_left`` is what remains of the host's tool-call limit: each step reserves one call
    before it starts, and steps beyond it end ``not_run`` (the model is told so).
    """
    budget = None if tool_calls_left is None else Budget(max_tool_calls=max(tool_calls_left, 0))
    meta = PlanTool(tools, limits=limits, budget=budget, max_value_chars=max_value_chars, on_event=on_event)
    try:
        result = await meta.run(dict(arguments))
    except PlanValidationError as exc:
        return PlanOutcome(text=exc.message, is_error=True, problems=exc.to_dict())
    return PlanOutcome(text=result.to_model_text(max_value_chars=max_value_chars), is_error=False, result=result)
