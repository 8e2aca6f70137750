from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from ..execute import ApprovalRequest, PlanResult
from ..models import ModelMessage, ToolReturnMessage, Usage
from ..policy import Declaration

if TYPE_CHECKING:
    from ..policy import Finding
    from ..tools import ToolsLike

__all__ = ("AgentResult", "RunStatus", "WaitingTurn")

RunStatus = Literal["completed", "max_iterations", "usage_limit", "output_invalid", "pending_approval"]
# The type of `AgentResult.output`: ``str`` unless the agent has an ``output_type``.
OutputT = TypeVar("OutputT", default=str)


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingTurn:
    """A model turn that ended waiting for approval: what `Agent.run` needs to go on with the answers.

    ``replies``: the replies to the turn's tool calls, in order, None for a plan that waits;
    ``plans``: tool call id -> (the plan's arguments, its result that waits).
    """

    replies: tuple[ToolReturnMessage | None, ...]
    plans: Mapping[str, tuple[Mapping[str, Any], PlanResult]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult(Generic[OutputT]):
    """What an agent run produced.

    Attributes:
        output: The model's final answer: its text, or with ``Agent(output_type=...)`` the
            validated value. A run that stops at a limit raises `toolplan.UsageLimitExceeded`, whose
            ``result`` is the partial result: its ``output`` is the last text the model wrote ("" if
            none), or None for a structured ``output_type``.
        status: ``"completed"`` when the model answered. In a partial result (the ``result`` of
            `toolplan.UsageLimitExceeded`, or what ``on_limit="return"`` returns): ``"max_iterations"``
            (the run made ``max_iterations`` model requests), ``"usage_limit"`` (the model asked for
            tools after the run's deadline or budget ran out, or the run reached a model spend cap)
            or ``"output_invalid"`` (in `toolplan.OutputValidationError`); ``error`` then says what
            to do. ``"pending_approval"``: a plan's steps wait for a person's answer (``approval``);
            ``agent.run(resume=result, approvals=...)`` goes on.
        messages: The whole conversation, system prompt first.
        usage: Requests and tokens over the run (input, output, cached input, cache writes).
        money: What the run's model requests cost at the price table of ``Agent(spend=...)``;
            None without a price for the model.
        plan_results: Every plan the model ran (``execute_tool_plan`` / ``execute_plan``), in order.
        tool_calls: Tool calls the model made (a plan counts as one call; its steps are in
            ``plan_results``).
        model_name: The model that answered.
        error: Why the run ended without an answer, if it did.
        new_message_index: Where this run's own messages start in ``messages`` (see `new_messages`).
        call_results: The records of the model's direct tool calls, one `PlanResult` per turn (with
            the choices made among alternative tools).
        declarations: The plans the model declared with ``declare_plan`` (``Agent(declare_plan=True)``).
        approval: For status ``pending_approval``: the steps that wait (`ApprovalRequest`).
        waiting: For status ``pending_approval``: the turn to go on with (see `WaitingTurn`).
    """

    output: OutputT
    status: RunStatus
    messages: tuple[ModelMessage, ...]
    usage: Usage
    plan_results: tuple[PlanResult, ...] = ()
    tool_calls: int = 0
    model_name: str = ""
    error: str | None = None
    new_message_index: int = field(default=0, repr=False)
    call_results: tuple[PlanResult, ...] = field(default=(), repr=False)
    declarations: tuple[Declaration, ...] = ()
    money: float | None = None
    approval: ApprovalRequest | None = None
    waiting: WaitingTurn | None = field(default=None, repr=False)

    def audit(self, *, tools: ToolsLike | None = None) -> list[Finding]:
        """The model's declared plans (``declare_plan``) against what the run did: `toolplan.policy.audit_chain`.

        The last declaration, and the ones it replaces (a replan): each call is judged against the
        declaration in force when it was made. Without a declaration, every call is undeclared.
        """
        from ..policy import audit_chain, trace_of

        return audit_chain(self.declarations or (Declaration(),), trace_of(self), tools=tools)

    def all_messages(self) -> list[ModelMessage]:
        """The whole conversation: the history passed in, then this run's messages.

        Pass it as ``message_history`` to continue the conversation in the next run.
        """
        return list(self.messages)

    def new_messages(self) -> list[ModelMessage]:
        """The messages of this run only: without the ``message_history`` it was given.

        They start with this run's prompt (preceded by the system prompt when the run had no
        history), so the first run's ``new_messages()`` is a complete history for the next run, and
        ``history + result.new_messages()`` is the conversation so far.
        """
        return list(self.messages[self.new_message_index :])
