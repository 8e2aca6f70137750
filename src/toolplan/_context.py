"""The call context: what a tool can know about the call it is running in.

While toolplan runs a tool (a plan step, an agent's direct call, a call from code mode), the
context variable here holds a `CallContext`; `current_call()` reads it. It lives at the bottom of
the package because tools, the thread pool and the executor all read or set it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from ._errors import UserError
from ._records import fast_init

__all__ = (
    "CallContext",
    "RawCall",
    "abandon",
    "abandoned_calls",
    "call_key",
    "current_call",
    "current_call_or_none",
    "linger_hook",
    "raw_call",
    "reset_run_deps",
    "run_deps",
    "set_run_deps",
)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """One call of a tool, as the tool sees it.

    Attributes:
        run_id: The run (plan run, or an agent run's plan, batch or code run) the call belongs to.
        step_id: The step within that run (``call_1`` for calls from code, ``call0`` for an agent's
            direct calls).
        tool: The tool's name.
        attempt: 1 for the first attempt, 2 for the first retry, and so on (a fallback is an attempt too).
        deadline: When the call must end, in `time.monotonic` seconds (the tighter of the call's
            timeout and the run's deadline), or None.
        fallback: Truthy when this is a call of the step's fallback chain: the link (1 its fallback,
            2 that one's fallback, ...); 0 (False) for the step's own call.
        trace_context: The OpenTelemetry trace context of the call (W3C ``traceparent`` and
            ``tracestate`` headers) when toolplan traces it, else None. Spans the tool starts
            nest under the call's span by themselves; pass these headers on to carry the trace
            to another process.

    A sync tool runs in a worker thread, which Python cannot stop: when its call is abandoned
    (timed out, its run cancelled or stopped by ``fail_fast``) the function goes on until it
    returns. `cancelled` lets it stop early: check it between units of work and return.
    """

    run_id: str
    step_id: str
    tool: str
    attempt: int = 1
    deadline: float | None = None
    fallback: int = False
    trace_context: Mapping[str, str] | None = None
    _call: int = field(default=0, repr=False, compare=False)  # the id of the call's raw record (0: none)

    @property
    def cancelled(self) -> bool:
        """True once toolplan has given up on this call (timed out or cancelled) while it still runs.

        Only a sync tool's function can see it true (an async tool is cancelled at its next
        ``await`` instead): it should then stop and return; what it returns is discarded.
        """
        return self._call in _ABANDONED

    @property
    def idempotency_key(self) -> str:
        """``"{run_id}:{step_id}"``: the same for every attempt of one step, and after a resume.

        A step's fallback has its own, ``"{run_id}:{step_id}:fallback"`` (it is another call), and
        each further link of a fallback chain too (``":fallback2"``, ``":fallback3"``). Pass it to
        APIs that de-duplicate requests (payments, bookings) so a retried or resumed step cannot
        repeat a side effect that completed.
        """
        return call_key(self.run_id, self.step_id, self.fallback)

    def remaining(self) -> float | None:
        """Seconds left before `deadline` (never negative), or None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


# What the invoker sets for each call is a plain tuple, not a `CallContext`: building a record per
# call would cost more than the rest of the call's bookkeeping, and most tools never ask. The tuple
# is made and read only through the functions below.
RawCall = tuple[
    Callable[[Any, "Future[Any]"], None] | None,  # told about a thread that outlives the call (on_linger)
    str,  # run id
    str,  # step id
    str,  # tool
    int,  # attempt
    float | None,  # deadline (time.monotonic)
    int,  # the link of the step's fallback chain (0: none)
]
_CURRENT: ContextVar[RawCall | None] = ContextVar("toolplan_current_call", default=None)

# Set by `toolplan.tracing` once tracing is first switched on: the current trace context as W3C
# headers, or None outside a trace. Until then no call context looks for one.
trace_carrier: Callable[[], Mapping[str, str] | None] | None = None


def call_key(run_id: str, step_id: str, fallback: int) -> str:
    """The idempotency key of a step's call: its own (``fallback`` 0), or link ``fallback`` of its fallback chain."""
    if not fallback:
        return f"{run_id}:{step_id}"
    return f"{run_id}:{step_id}:fallback" if fallback == 1 else f"{run_id}:{step_id}:fallback{int(fallback)}"


def raw_call(
    on_linger: Callable[[Any, Future[Any]], None] | None,
    run_id: str,
    step_id: str,
    tool: str,
    attempt: int,
    deadline: float | None,
    fallback: int = False,
) -> RawCall:
    """The value the invoker sets in the context variable for one call."""
    return (on_linger, run_id, step_id, tool, attempt, deadline, fallback)


def linger_hook(raw: RawCall) -> Callable[[Any, Future[Any]], None] | None:
    """Who to tell when the call's worker thread outlives the call (None: nobody)."""
    return raw[0]


# Calls toolplan gave up on while their function runs on in a worker thread, by the id of their raw
# record, until the thread ends (the thread's context holds the record, so the id stays its own).
_ABANDONED: dict[int, RawCall] = {}


def abandon(raw: RawCall, future: Future[Any]) -> None:
    """Mark the call ``raw`` as given up on until its thread's ``future`` is done (`CallContext.cancelled`)."""
    key = id(raw)
    _ABANDONED[key] = raw
    future.add_done_callback(lambda _f: _ABANDONED.pop(key, None))


def abandoned_calls(run_id: str) -> list[tuple[str, str]]:
    """``(step id, tool)`` of the calls of run ``run_id`` given up on whose threads still run."""
    return [(raw[2], raw[3]) for raw in list(_ABANDONED.values()) if raw[1] == run_id]


def current_call() -> CallContext:
    """The `CallContext` of the tool call running now.

    Raises:
        UserError: not called while toolplan runs a tool (for example, the function was called
            directly); use `current_call_or_none` where that is expected.
    """
    raw = _CURRENT.get()
    if raw is None:
        raise UserError(
            "current_call() was called outside a tool call run by toolplan. Call it from inside a tool "
            "while a plan or agent runs it, or use current_call_or_none() where the function may be called directly."
        )
    return CallContext(
        run_id=raw[1],
        step_id=raw[2],
        tool=raw[3],
        attempt=raw[4],
        deadline=raw[5],
        fallback=raw[6],
        trace_context=None if trace_carrier is None else trace_carrier(),
        _call=id(raw),
    )


def current_call_or_none() -> CallContext | None:
    """The `CallContext` of the tool call running now, or None outside one."""
    return None if _CURRENT.get() is None else current_call()


# The dependencies of the agent run in progress (``agent.run(..., deps=...)``). The agent sets it for
# the length of a run; tasks and the tool threads copy the context, so every tool call of the run
# (direct, in a plan, a streamed plan or code mode) sees it. None outside an agent run.
_DEPS: ContextVar[Any] = ContextVar("toolplan_run_deps", default=None)


def run_deps() -> Any:
    """The dependencies of the agent run in progress, or None outside one (or when none were given)."""
    return _DEPS.get()


def set_run_deps(deps: Any) -> Token[Any]:
    """Make ``deps`` the run's dependencies in the current context; `reset_run_deps` undoes it."""
    return _DEPS.set(deps)


def reset_run_deps(token: Token[Any]) -> None:
    """Restore the dependencies that were in place before `set_run_deps` returned ``token``."""
    _DEPS.reset(token)
