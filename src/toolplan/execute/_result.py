from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._context import abandoned_calls
from .._errors import PlanIssue
from .._json import dumps, json_safe
from .._records import fast_init
from ..plan import Dialect, critical_path, waves
from ._approval import ApprovalRequest
from ._choice import Choice

__all__ = (
    "DEFAULT_MAX_VALUE_CHARS",
    "ErrorKind",
    "PlanResult",
    "PlanStatus",
    "StepError",
    "StepResult",
    "StepStatus",
    "cap_text",
)

StepStatus = Literal[
    "pending",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "skipped",
    "not_run",
    "unknown_outcome",
    "rejected",  # a person rejected it (or its approval timed out): its tool was not called
    "pending_approval",  # it waits for a person's answer (`PlanResult.approval`)
]
PlanStatus = Literal["succeeded", "failed", "cancelled", "pending_approval"]
ErrorKind = Literal[
    "business",  # the tool returned a ToolResult with an error, or raised ToolError
    "infrastructure",  # the tool raised an unexpected exception
    "invalid_arguments",  # resolved arguments did not match the tool's schema
    "unknown_tool",
    "timeout",
    "cancelled",
    "skipped",
    "not_run",
    "limit",  # a budget or limit refused the call
    "cost",  # the tool's cost function raised or returned no valid cost: the call was not made
    "reference",  # a referenced output could not be inserted into the arguments (ReferenceResolutionError)
    "invalid_expression",  # a computed argument or a condition could not be evaluated (a type, a division by zero)
    "condition",  # skipped on purpose: the step's condition was false, or a dependency's was
    "unknown_outcome",  # a resumed run found the call in flight and may not repeat it (durable runs)
    "store",  # the store failed, so the step could not run durably
    "rejected",  # a person rejected the step, or its approval timed out
    "approval",  # the approval rule's function raised: the step was not run
]

DEFAULT_MAX_VALUE_CHARS = 4000
"""Characters each value and error message of the text a model is given is cut to (head and tail kept)."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StepError:
    """Why a step did not succeed."""

    kind: ErrorKind
    message: str

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "message"}``."""
        return {"kind": self.kind, "message": json_safe(self.message)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepError:
        """The error `to_dict` wrote."""
        return cls(kind=data["kind"], message=data["message"])


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """The record of one step: what ran, how it ended, and what it produced."""

    id: str
    tool: str
    status: StepStatus
    output: Any = None
    error: StepError | None = None
    attempts: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    arguments: Mapping[str, Any] | None = None
    used_fallback: bool = False
    warnings: tuple[str, ...] = ()
    reused: bool = False  # taken from the store by a resumed run, not run again
    fallback_link: int = 0  # the link of the fallback chain whose result stands: 1 its fallback, 2 that one's...
    # The other steps of the run that had the same call (a read_only and idempotent tool, the same
    # arguments): one call was made and each of them got its result. The step that made it has
    # ``attempts`` > 0; the others 0.
    shared_with: tuple[str, ...] = ()
    cached: bool = False  # the result came from a `ResultCache`: no call was made

    @property
    def ok(self) -> bool:
        """True when the step succeeded."""
        return self.status == "succeeded"

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, when the step ran."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data (see `toolplan._json.json_safe`); `from_dict` reads it back.

        The form the CLI's ``--json``, the store and the service (without ``arguments``) show.
        """
        return {
            "id": self.id,
            "tool": self.tool,
            "status": self.status,
            "output": json_safe(self.output),
            "error": self.error.to_dict() if self.error else None,
            "attempts": self.attempts,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "arguments": json_safe(dict(self.arguments)) if self.arguments is not None else None,
            "used_fallback": self.used_fallback,
            "warnings": list(self.warnings),
            "reused": self.reused,
            "fallback_link": self.fallback_link,
            "shared_with": list(self.shared_with),
            "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepResult:
        """The record `to_dict` wrote: ``from_dict(r.to_dict()) == r`` for a record of JSON data.

        Keys it does not know are ignored; a key left out takes the field's default (``id``, ``tool``
        and ``status`` are required), so the forms that leave some out (the service's) read as well.
        """
        error = data.get("error")
        arguments = data.get("arguments")
        return cls(
            id=data["id"],
            tool=data["tool"],
            status=data["status"],
            output=data.get("output"),
            error=StepError.from_dict(error) if error else None,
            attempts=data.get("attempts") or 0,
            started_at=data.get("started_at"),
            ended_at=data.get("ended_at"),
            arguments=dict(arguments) if arguments is not None else None,
            used_fallback=bool(data.get("used_fallback", False)),
            warnings=tuple(data.get("warnings") or ()),
            reused=bool(data.get("reused", False)),
            # (a record written before fallback chains: its one fallback, if it was used)
            fallback_link=int(data["fallback_link"] if "fallback_link" in data else bool(data.get("used_fallback"))),
            shared_with=tuple(data.get("shared_with") or ()),
            cached=bool(data.get("cached", False)),
        )


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail and marking the cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = keep * 2 // 3, keep // 3
    cut = len(text) - head - tail
    return f"{text[:head]}…[{cut} chars cut]…{text[len(text) - tail :]}"


def _cap_value(value: Any, limit: int) -> Any:
    text = value if isinstance(value, str) else dumps(value)
    if len(text) <= limit:
        return value
    return cap_text(text, limit)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult:
    """The record of a plan run: every step's result plus plan-level facts."""

    status: PlanStatus
    steps: Mapping[str, StepResult]
    output_steps: tuple[str, ...]
    run_id: str = ""
    dialect: Dialect = "native"
    started_at: float = 0.0
    ended_at: float = 0.0
    deps: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    warnings: tuple[PlanIssue, ...] = field(default=())
    choices: tuple[Choice, ...] = field(default=())  # made among alternative tools, in order
    # Status ``pending_approval``: the steps that wait for a person's answer (resume with the answers).
    approval: ApprovalRequest | None = None

    # The graph facts below are computed when asked for (O(steps)), not on every run.

    @property
    def waves(self) -> tuple[tuple[str, ...], ...]:
        """Kahn levels of the plan's DAG: wave k holds the steps whose longest dependency chain has k steps."""
        return tuple(tuple(w) for w in waves(self.deps))

    @property
    def critical_path(self) -> tuple[str, ...]:
        """The chain of dependent steps that took longest, by measured step durations."""
        return tuple(self._critical()[0])

    @property
    def critical_path_duration(self) -> float:
        """Seconds the steps of `critical_path` took, summed."""
        return self._critical()[1]

    def _critical(self) -> tuple[list[str], float]:
        return critical_path(self.deps, {sid: r.duration or 0.0 for sid, r in self.steps.items()})

    @property
    def ok(self) -> bool:
        """True when every step succeeded."""
        return self.status == "succeeded"

    @property
    def still_running(self) -> tuple[str, ...]:
        """Steps of this run whose sync function still runs in a worker thread, as of now.

        A sync tool's call that timed out or was cancelled ends its step at once, but Python cannot
        stop the thread: the function goes on (told by ``current_call().cancelled``) and what it
        returns is discarded. Empty once every such thread has ended.
        """
        return tuple(dict.fromkeys(sid for sid, _ in abandoned_calls(self.run_id))) if self.run_id else ()

    @property
    def outputs(self) -> dict[str, Any]:
        """Output step id → value, for the output steps that succeeded (in ``output_steps`` order)."""
        return {sid: self.steps[sid].output for sid in self.output_steps if self.steps[sid].ok}

    @property
    def errors(self) -> dict[str, StepError]:
        """Step id → error, for every step that did not succeed (plan order)."""
        return {sid: r.error for sid, r in self.steps.items() if r.error is not None}

    @property
    def duration(self) -> float:
        """Wall time of the whole plan in seconds."""
        return self.ended_at - self.started_at

    @property
    def parallelism(self) -> float:
        """Achieved parallelism: total step time divided by the plan's wall time (steps reused from a store aside)."""
        busy = sum(r.duration or 0.0 for r in self.steps.values() if not r.reused)
        return busy / self.duration if self.duration > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON data (the CLI's ``--json`` shape): every field, and the facts derived from them.

        `from_dict` reads it back. Values that are not JSON data are made so (see
        `toolplan._json.json_safe`): ``NaN`` and infinities become strings, other objects their
        ``str()``, a value that contains itself is cut. The derived facts (``outputs``, ``duration``,
        ``waves``, ``critical_path``, ``critical_path_duration``, ``parallelism``) are there to read;
        `from_dict` computes them again.
        """
        path, path_duration = self._critical()
        return {
            "status": self.status,
            "run_id": self.run_id,
            "dialect": self.dialect,
            "output_steps": list(self.output_steps),
            "outputs": json_safe(self.outputs),
            "steps": [r.to_dict() for r in self.steps.values()],
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration": self.duration,
            "deps": {sid: list(d) for sid, d in self.deps.items()},
            "waves": [list(w) for w in self.waves],
            "critical_path": path,
            "critical_path_duration": path_duration,
            "parallelism": round(self.parallelism, 3),
            "warnings": [w.to_dict(severity=True) for w in self.warnings],
            "choices": [c.to_dict() for c in self.choices],
            "approval": None if self.approval is None else self.approval.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanResult:
        """The result `to_dict` wrote: ``from_dict(r.to_dict()) == r`` for a result of JSON data.

        The derived facts in ``data`` are ignored (they follow from the fields); so are keys it does
        not know. ``status`` and ``steps`` are required; another key left out takes the field's default.
        """
        steps = {s.id: s for s in map(StepResult.from_dict, data["steps"])}
        return cls(
            status=data["status"],
            steps=steps,
            output_steps=tuple(data.get("output_steps", steps)),
            run_id=data.get("run_id") or "",
            dialect=data.get("dialect") or "native",
            started_at=data.get("started_at", 0.0),
            ended_at=data.get("ended_at", 0.0),
            deps={sid: tuple(d) for sid, d in (data.get("deps") or {}).items()},
            warnings=tuple(PlanIssue.from_dict(w, severity="warning") for w in data.get("warnings") or ()),
            choices=tuple(Choice.from_dict(c) for c in data.get("choices") or ()),
            approval=ApprovalRequest.from_dict(data["approval"]) if data.get("approval") else None,
        )

    def summary(self, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> dict[str, Any]:
        """What goes back to the model: output values (capped) and the errors of failed steps.

        Batch plans (``execute_plan``) get their documented array form instead; see `batch_summary`.
        """
        out: dict[str, Any] = {"status": self.status}
        out["outputs"] = {sid: _cap_value(v, max_value_chars) for sid, v in self.outputs.items()}
        errors = {
            sid: cap_text(f"{self.steps[sid].status}: {e.message}", max_value_chars) for sid, e in self.errors.items()
        }
        if errors:
            out["errors"] = errors
        if self.approval is not None:
            out["pending_approval"] = list(self.approval.step_ids)
        return out

    def batch_summary(self, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> list[dict[str, Any]]:
        """``[{"step", "tool", "status": "ok"|"error", "result"|"error"}]`` in step order."""
        items: list[dict[str, Any]] = []
        for i, r in enumerate(self.steps.values()):
            if r.ok:
                items.append(
                    {
                        "step": i,
                        "tool": r.tool,
                        "status": "ok",
                        "result": _cap_value(r.output, max_value_chars),
                    }
                )
            else:
                message = r.error.message if r.error else r.status
                items.append(
                    {"step": i, "tool": r.tool, "status": "error", "error": cap_text(message, max_value_chars)}
                )
        return items

    def to_model_text(self, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> str:
        """The compact JSON text a meta-tool returns to the model.

        Always valid JSON that encodes as UTF-8 (``NaN`` and infinities as strings, lone surrogates
        replaced), with every value and error message capped at about ``max_value_chars``.
        """
        data: Any = (
            self.batch_summary(max_value_chars=max_value_chars)
            if self.dialect == "batch"
            else self.summary(max_value_chars=max_value_chars)
        )
        return dumps(data)
