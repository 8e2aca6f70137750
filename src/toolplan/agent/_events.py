from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..execute import PlanEvent
from ..models import TextDelta, ToolCall

if TYPE_CHECKING:
    from ._result import AgentResult

__all__ = (
    "AgentEvent",
    "ModelRequestStarted",
    "PlanStreamStarted",
    "RunFinished",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequestStarted:
    """The agent sent request number ``iteration`` (from 1) to the model."""

    kind: Literal["model_request_started"] = "model_request_started"
    iteration: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStarted:
    """A tool call of the model started running."""

    kind: Literal["tool_execution_started"] = "tool_execution_started"
    call: ToolCall


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionFinished:
    """A tool call ended; ``content`` is what the model will read."""

    kind: Literal["tool_execution_finished"] = "tool_execution_finished"
    call: ToolCall
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStreamStarted:
    """The model began streaming a plan; its steps will start as soon as each is complete."""

    kind: Literal["plan_stream_started"] = "plan_stream_started"
    call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """The run ended; ``result`` is what `Agent.run` returns."""

    kind: Literal["run_finished"] = "run_finished"
    result: AgentResult[Any]


AgentEvent: TypeAlias = (
    TextDelta
    | ModelRequestStarted
    | ToolExecutionStarted
    | ToolExecutionFinished
    | PlanStreamStarted
    | PlanEvent
    | RunFinished
)
