"""A run as Agent Client Protocol ``session/update`` notifications, so an ACP client (an editor) can show it.

`AcpExporter` is an event handler: pass it as ``on_event`` and it sends, as the run goes,

- a ``plan`` update (every entry each time, as ACP wants) when the run starts and whenever a step
  starts or ends: one entry per step (or per declared call), ``pending``, ``in_progress`` or
  ``completed``; output steps are ``high`` priority, the others ``medium``;
- a ``tool_call`` when a step's tool is called, and a ``tool_call_update`` when the step ends
  (``completed`` or ``failed``, with its output or error as text content).

With a declaration (the ACP tool-coordination proposal's ``ToolCallPlan``), each ``plan`` update
also carries it under ``_meta.toolCallPlan``: its ``planId``, the plan it ``replaces`` and its
``executionState`` as the run moves (``Planned``, ``InProgress`` with the calls completed,
``Complete``, or ``Failed`` with the reason).

`acp_updates` gives the same notifications for a run that has ended (a `PlanResult`).
Notifications are JSON-RPC 2.0 objects: ``{"jsonrpc": "2.0", "method": "session/update",
"params": {"sessionId": ..., "update": {...}}}``. No extra is needed: the module imports no ACP package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._json import dumps, json_safe
from ..execute import (
    DEFAULT_MAX_VALUE_CHARS,
    PlanEvent,
    PlanFinished,
    PlanResult,
    PlanStarted,
    StepFinished,
    StepResult,
    StepStarted,
    ToolChosen,
)
from ..plan import Plan
from ..policy import Declaration, ExecutionState
from ..tools import ToolRegistry, ToolsLike

__all__ = ("AcpExporter", "acp_updates")

_MAX_TEXT = DEFAULT_MAX_VALUE_CHARS  # the cap of a value shown to a client, as to a model
_DONE = frozenset(
    {"succeeded", "failed", "timed_out", "cancelled", "skipped", "not_run", "unknown_outcome", "rejected"}
)


def _notification(session_id: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(json_safe(value))
    return text if len(text) <= _MAX_TEXT else f"{text[: _MAX_TEXT - 1]}…"


class AcpExporter:
    """Turns a run's events into ACP ``session/update`` notifications and hands each to ``send``.

    Args:
        session_id: The ACP session the run belongs to.
        send: Called with each notification (a JSON-RPC dict), e.g. to write it to the client.
        declaration: When given, the plan entries are its declared calls (their rationale as
            content) rather than the run's steps.
        tools: The run's tools, to give each tool call an ACP ``kind`` (``read`` for read-only tools,
            ``delete`` for destructive ones, ``edit`` for others); without them, ``other``.
        output_steps: Steps whose entries are ``high`` priority (default: the plan's outputs, once known).
        plan: The plan being run, when at hand: its steps' tools, rationales and outputs fill the
            entries from the start.
    """

    def __init__(
        self,
        session_id: str,
        send: Callable[[dict[str, Any]], None],
        *,
        declaration: Declaration | None = None,
        tools: ToolsLike | None = None,
        output_steps: tuple[str, ...] = (),
        plan: Plan | None = None,
    ) -> None:
        self.session_id = session_id
        self.send = send
        self.declaration = declaration
        self.registry = ToolRegistry.of(tools) if tools is not None else None
        self.output_steps = set(output_steps)
        self.steps: list[str] = []  # step ids in plan order
        self.tools: dict[str, str] = {}  # step id -> the tool it calls
        self.status: dict[str, str] = {}  # step id -> pending / in_progress / completed
        self.run_id = ""
        self.notes: dict[str, str] = {}  # step id -> its rationale
        self.ended: dict[str, tuple[str, str | None]] = {}  # step id -> (status, error) once it ended
        if plan is not None:
            self.output_steps |= set(plan.outputs)
            for step in plan.steps:
                self.tools[step.id] = step.tool
                if step.rationale:
                    self.notes[step.id] = step.rationale

    def __call__(self, event: PlanEvent) -> None:
        """Handle one `PlanEvent` (use the exporter as ``on_event``)."""
        if isinstance(event, PlanStarted):
            self.run_id = event.run_id
            for sid in event.steps:
                self._know(sid)
            self._plan()
        elif isinstance(event, ToolChosen):
            self.tools[event.step_id] = event.choice.chosen
        elif isinstance(event, StepStarted):
            self._know(event.step_id)
            first = self.status.get(event.step_id) != "in_progress"
            self.status[event.step_id] = "in_progress"
            self.tools[event.step_id] = event.tool
            if first:
                self._plan()
            self._send(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": self._call_id(event.step_id),
                    "title": f"{event.tool} ({event.step_id})"
                    + (f", attempt {event.attempt}" if event.attempt > 1 else ""),
                    "kind": self._kind(event.tool),
                    "status": "in_progress",
                }
            )
        elif isinstance(event, StepFinished):
            self._finished(event.result)
        elif isinstance(event, PlanFinished):
            self.output_steps |= set(event.result.output_steps)
            for sid, r in event.result.steps.items():
                self._know(sid)
                self.status[sid] = "completed" if r.status in _DONE else self.status.get(sid, "pending")
            self._plan()

    def _know(self, sid: str) -> None:
        if sid not in self.status:
            self.steps.append(sid)
            self.status[sid] = "pending"

    def _call_id(self, sid: str) -> str:
        return f"{self.run_id}:{sid}" if self.run_id else sid

    def _kind(self, tool: str) -> str:
        if self.registry is None or tool not in self.registry:
            return "other"
        safety = self.registry.definition(tool).annotations.safety_class
        return {"read_only": "read", "destructive": "delete"}.get(safety, "edit")

    def _finished(self, r: StepResult) -> None:
        self._know(r.id)
        self.ended[r.id] = (r.status, r.error.message if r.error is not None else None)
        ran = r.attempts > 0 or r.status in ("succeeded", "failed", "timed_out")
        self.status[r.id] = "completed"
        if ran:
            update: dict[str, Any] = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": self._call_id(r.id),
                "status": "completed" if r.ok else "failed",
            }
            if r.ok:
                update["content"] = [{"type": "content", "content": {"type": "text", "text": _text(r.output)}}]
                update["rawOutput"] = json_safe(r.output)
            else:
                message = r.error.message if r.error is not None else r.status
                update["content"] = [{"type": "content", "content": {"type": "text", "text": _text(message)}}]
            self._send(update)
        self._plan()

    def _entries(self) -> list[dict[str, Any]]:
        if self.declaration is not None and self.declaration.calls:
            # Declared calls in order; each takes the status of the step at its position (or its own id).
            entries = []
            for n, call in enumerate(self.declaration.calls):
                sid = self._declared_step(n)
                content = call.rationale or call.expected_outcome or f"Call {call.tool}"
                entries.append(
                    {
                        "content": f"{content} ({call.tool})",
                        "priority": "high" if sid in self.output_steps else "medium",
                        "status": self.status.get(sid, "pending") if sid is not None else "pending",
                    }
                )
            return entries
        return [
            {
                "content": f"{self.notes[sid]} ({self.tools.get(sid, 'step')})"
                if sid in self.notes
                else f"{self.tools.get(sid, 'step')} ({sid})",
                "priority": "high" if sid in self.output_steps else "medium",
                "status": self.status[sid],
            }
            for sid in self.steps
        ]

    def _declared_step(self, n: int) -> str | None:
        """The step the declaration's ``n``-th call became: its own id, else the step at its position."""
        assert self.declaration is not None
        call = self.declaration.calls[n]
        return call.id if call.id in self.status else (self.steps[n] if n < len(self.steps) else None)

    def state(self) -> ExecutionState:
        """The declaration's execution state so far (``Planned`` without a declaration)."""
        if self.declaration is None:
            return ExecutionState()
        completed, started = 0, False
        for n, call in enumerate(self.declaration.calls):
            sid = self._declared_step(n)
            if sid is None:
                continue
            started = started or self.status.get(sid, "pending") != "pending"
            status, error = self.ended.get(sid, ("", None))
            if status == "succeeded":
                completed += 1
            elif status:
                why = f": {error}" if error else ""
                reason = f"declared call {call.id} ({call.tool!r}, step {sid!r}) ended {status}{why}"
                return ExecutionState(state="Failed", completed=completed, reason=reason)
        if self.declaration.calls and completed == len(self.declaration.calls):
            return ExecutionState(state="Complete", completed=completed)
        return ExecutionState(state="InProgress", completed=completed) if started else ExecutionState()

    def _plan(self) -> None:
        update: dict[str, Any] = {"sessionUpdate": "plan", "entries": self._entries()}
        if self.declaration is not None:
            d = self.declaration
            declared: dict[str, Any] = {"executionState": self.state().to_dict()}
            if d.plan_id is not None:
                declared["planId"] = d.plan_id
            if d.replaces is not None:
                declared["replaces"] = d.replaces
            update["_meta"] = {"toolCallPlan": declared}
        self._send(update)

    def _send(self, update: dict[str, Any]) -> None:
        self.send(_notification(self.session_id, update))


def acp_updates(
    result: PlanResult,
    *,
    session_id: str,
    declaration: Declaration | None = None,
    tools: ToolsLike | None = None,
) -> list[dict[str, Any]]:
    """The notifications `AcpExporter` would have sent while ``result``'s run went, in time order.

    Each tool call carries the step's resolved arguments as ``rawInput``.
    """
    sent: list[dict[str, Any]] = []
    exporter = AcpExporter(
        session_id, sent.append, declaration=declaration, tools=tools, output_steps=result.output_steps
    )
    exporter.tools.update({sid: r.tool for sid, r in result.steps.items()})
    exporter(PlanStarted(run_id=result.run_id, steps=tuple(result.steps), at=result.started_at))
    chosen = {c.step_id: c for c in result.choices}
    timeline: list[tuple[float, int, StepResult]] = []  # (when, 0 start / 1 end, step)
    for r in result.steps.values():
        if r.started_at is not None and r.attempts > 0:
            timeline.append((r.started_at, 0, r))
        timeline.append((r.ended_at if r.ended_at is not None else result.ended_at, 1, r))
    for _at, end, r in sorted(timeline, key=lambda item: (item[0], item[1])):
        if end:
            exporter(StepFinished(run_id=result.run_id, result=r))
            continue
        if r.id in chosen:
            exporter(ToolChosen(run_id=result.run_id, step_id=r.id, choice=chosen[r.id], at=_at))
        exporter(StepStarted(run_id=result.run_id, step_id=r.id, tool=r.tool, attempt=1, at=_at))
        if r.arguments is not None:
            sent[-1]["params"]["update"]["rawInput"] = json_safe(r.arguments)
    exporter(PlanFinished(run_id=result.run_id, result=result))
    return sent
