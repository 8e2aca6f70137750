"""The spans toolplan makes: a plan's, one per tool call attempt, an agent run's and a model request's.

Only code that found tracing on (`get_tracer` returned a tracer) gets here, so this module may
import `opentelemetry` at the top: it is imported lazily, by the first traced run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from . import _semconv as sc
from ._config import capture_content, content_limit

__all__ = (
    "PlanTrace",
    "agent_span",
    "as_tool_call",
    "attempt_span",
    "cancel_attempt",
    "chat_span",
    "end_attempt",
    "in_agent",
    "plan_span",
    "record_draft",
    "record_response",
    "record_run",
    "restore_role",
    "set_run_id",
    "tool_role_cleared",
)

# What the agent says about the plans it runs next (a tool call of the model's, or its direct calls).
# None (the default): a standalone run, whose plan span is an `invoke_workflow` root.
_ROLE: ContextVar[tuple[str, str, Mapping[str, str]] | None] = ContextVar("toolplan_trace_role", default=None)


@contextmanager
def as_tool_call(tool: str, call_id: str = "", call_ids: Mapping[str, str] | None = None) -> Iterator[None]:
    """Plans started inside are the model's tool call ``tool`` (``call_id``), not a workflow of their own.

    ``tool="" `` marks the agent's direct calls: no plan span, one tool span per call, whose
    ``gen_ai.tool.call.id`` ``call_ids`` maps from the step id.
    """
    token = _ROLE.set((tool, call_id, call_ids or {}))
    try:
        yield
    finally:
        _ROLE.reset(token)


def tool_role_cleared() -> Token[tuple[str, str, Mapping[str, str]] | None]:
    """Inside a tool call: plans the tool starts are not the model's tool call (undo with `restore_role`)."""
    return _ROLE.set(None)


def restore_role(token: Token[tuple[str, str, Mapping[str, str]] | None]) -> None:
    _ROLE.reset(token)


def in_agent() -> bool:
    """True inside an agent run's tool calls."""
    return _ROLE.get() is not None


def _text(value: Any) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    limit = content_limit()
    if len(text) <= limit:
        return text
    keep = limit - 32  # room for the marker
    head = keep * 2 // 3
    tail = keep - head
    return f"{text[:head]}…[{len(text) - head - tail} chars cut]…{text[len(text) - tail :]}"


class PlanTrace:
    """A plan run's tracing: its span (if it has one) and the context its tool calls' spans start in."""

    __slots__ = ("call_ids", "capture", "parent", "span", "tracer")

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.span: Span | None = None
        self.capture = capture_content()
        self.parent = otel_context.get_current()
        self.call_ids: Mapping[str, str] = {}

    def start(self, run_id: str, steps: tuple[str, ...]) -> None:
        """The plan began: its span starts (under the span current now)."""
        role = _ROLE.get()
        parent = otel_context.get_current()
        if role is not None and not role[0]:  # an agent's direct calls: the calls' spans only
            self.call_ids = role[2]
            self.parent = parent
            return
        if role is None:
            name = sc.INVOKE_WORKFLOW
            attributes: dict[str, str | int] = {sc.OPERATION_NAME: sc.INVOKE_WORKFLOW}
            kind = SpanKind.INTERNAL
        else:
            name = f"{sc.EXECUTE_TOOL} {role[0]}"
            attributes = {sc.OPERATION_NAME: sc.EXECUTE_TOOL, sc.TOOL_NAME: role[0], sc.TOOL_TYPE: "function"}
            if role[1]:
                attributes[sc.TOOL_CALL_ID] = role[1]
            kind = SpanKind.INTERNAL
        attributes[sc.RUN_ID] = run_id
        if steps:  # a streamed plan's count is set when it ends
            attributes[sc.PLAN_STEPS] = len(steps)
        span = self.tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        self.span = span
        self.parent = trace.set_span_in_context(span, parent)

    def finish(self, result: Any, calls: int, cost: float) -> None:
        """The plan ended with ``result`` (a `PlanResult`): steps that called no tool become events."""
        span = self.span
        if span is None:
            return
        for step in result.steps.values():
            if step.attempts == 0 and not step.reused and step.status != "succeeded":
                attributes: dict[str, Any] = {sc.STEP_ID: step.id, sc.TOOL_NAME: step.tool, sc.STATUS: step.status}
                if step.error is not None:
                    attributes[sc.ERROR_MESSAGE] = step.error.message
                at = step.ended_at if step.ended_at is not None else result.ended_at
                span.add_event(sc.STEP_NOT_CALLED, attributes, timestamp=int(at * 1e9))
        span.set_attribute(sc.STATUS, result.status)
        span.set_attribute(sc.PLAN_STEPS, len(result.steps))
        path = result.critical_path
        if path:
            span.set_attribute(sc.CRITICAL_PATH, list(path))
        span.set_attribute(sc.PARALLELISM, round(result.parallelism, 3))
        span.set_attribute(sc.BUDGET_CALLS, calls)
        if cost:
            span.set_attribute(sc.BUDGET_COST, cost)
        if result.status != "succeeded":
            failed = [s.id for s in result.steps.values() if not s.ok]
            span.set_status(Status(StatusCode.ERROR, f"{result.status}: steps {', '.join(failed)} did not succeed"))
            span.set_attribute(sc.ERROR_TYPE, result.status)
        span.end()
        self.span = None


def attempt_span(
    trace_: PlanTrace, tool: str, run_id: str, step_id: str, attempt: int, fallback: int, arguments: Any
) -> tuple[Span, object]:
    """The span of one attempt of a tool call, made current; returns it and the token to detach."""
    attributes: dict[str, Any] = {
        sc.OPERATION_NAME: sc.EXECUTE_TOOL,
        sc.TOOL_NAME: tool,
        sc.TOOL_TYPE: "function",
        sc.TOOL_CALL_ID: trace_.call_ids.get(step_id) or f"{run_id}:{step_id}",
        sc.RUN_ID: run_id,
        sc.STEP_ID: step_id,
        sc.ATTEMPT: attempt,
    }
    if fallback:
        attributes[sc.FALLBACK] = True
    if trace_.capture:
        attributes[sc.TOOL_CALL_ARGUMENTS] = _text(arguments)
    span = trace_.tracer.start_span(f"{sc.EXECUTE_TOOL} {tool}", context=trace_.parent, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span, trace_.parent))
    return span, token


def end_attempt(trace_: PlanTrace, span: Span, token: object, error: Any, output: Any) -> None:
    """End an attempt's span: ``error`` is its `StepError` or None; the context before it is restored."""
    otel_context.detach(token)  # type: ignore[arg-type]  # the token `attach` returned
    if error is None:
        span.set_attribute(sc.STATUS, "succeeded")
        if trace_.capture:
            span.set_attribute(sc.TOOL_CALL_RESULT, _text(output))
    else:
        span.set_attribute(sc.STATUS, "timed_out" if error.kind == "timeout" else "failed")
        span.set_attribute(sc.ERROR_KIND, error.kind)
        span.set_attribute(sc.ERROR_TYPE, error.kind)
        span.set_status(Status(StatusCode.ERROR, error.message))
    span.end()


def cancel_attempt(span: Span, token: object) -> None:
    """An attempt was cancelled (its run ends): its span ends with an error status."""
    otel_context.detach(token)  # type: ignore[arg-type]
    span.set_attribute(sc.STATUS, "cancelled")
    span.set_attribute(sc.ERROR_TYPE, "cancelled")
    span.set_status(Status(StatusCode.ERROR, "cancelled"))
    span.end()


@contextmanager
def agent_span(tracer: Tracer, name: str, model: str) -> Iterator[Span]:
    """An agent run's span, current for the run; tokens are set on it by the caller."""
    attributes = {sc.OPERATION_NAME: sc.INVOKE_AGENT, sc.AGENT_NAME: name, sc.REQUEST_MODEL: model}
    with tracer.start_as_current_span(
        f"{sc.INVOKE_AGENT} {name}", attributes=attributes, record_exception=True, set_status_on_exception=True
    ) as span:
        yield span


@contextmanager
def chat_span(tracer: Tracer, model: str) -> Iterator[Span]:
    """A model request's span, current while the request runs."""
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    attributes = {sc.OPERATION_NAME: sc.CHAT, sc.REQUEST_MODEL: name}
    if provider:
        attributes[sc.PROVIDER_NAME] = provider
    with tracer.start_as_current_span(
        f"{sc.CHAT} {name}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield span


@contextmanager
def plan_span(tracer: Tracer, model: str, request_id: str) -> Iterator[Span]:
    """The planner's span for one request: its model requests (the repair too) are ``chat`` spans under it."""
    attributes = {sc.OPERATION_NAME: sc.PLAN, sc.REQUEST_MODEL: model, sc.PLAN_REQUEST_ID: request_id}
    with tracer.start_as_current_span(
        sc.PLAN, attributes=attributes, record_exception=True, set_status_on_exception=True
    ) as span:
        yield span


def record_draft(span: Span, plan_id: str, valid: bool, repaired: bool, input_tokens: int, output_tokens: int) -> None:
    """Put a planner's outcome and token usage on its span."""
    span.set_attribute(sc.PLAN_ID, plan_id)
    span.set_attribute(sc.PLAN_VALID, valid)
    span.set_attribute(sc.PLAN_REPAIRED, repaired)
    span.set_attribute(sc.USAGE_INPUT_TOKENS, input_tokens)
    span.set_attribute(sc.USAGE_OUTPUT_TOKENS, output_tokens)


def set_run_id(run_id: str) -> None:
    """Name the agent run on its span (current now)."""
    trace.get_current_span().set_attribute(sc.RUN_ID, run_id)


def record_run(span: Span, input_tokens: int, output_tokens: int, status: str) -> None:
    """Put an agent run's token usage and status on its span."""
    span.set_attribute(sc.USAGE_INPUT_TOKENS, input_tokens)
    span.set_attribute(sc.USAGE_OUTPUT_TOKENS, output_tokens)
    span.set_attribute(sc.STATUS, status)


def record_response(span: Span, response: Any) -> None:
    """Put a `ModelResponse`'s model, finish reason and token usage on its chat span."""
    if response.model_name:
        span.set_attribute(sc.RESPONSE_MODEL, response.model_name)
    if response.finish_reason:
        span.set_attribute(sc.RESPONSE_FINISH_REASONS, [response.finish_reason])
    span.set_attribute(sc.USAGE_INPUT_TOKENS, response.usage.input_tokens)
    span.set_attribute(sc.USAGE_OUTPUT_TOKENS, response.usage.output_tokens)
