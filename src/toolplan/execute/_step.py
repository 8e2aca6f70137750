"""One step of a run: resolve its arguments, call its tool, retry, fall back, and make its record.

One timeout rule for every call a step makes (first attempt, retries, fallback): the step's own
``timeout``, else the tool's annotation, else the run's ``step_timeout``.

A step whose tool is a group of alternatives chooses a member at dispatch (`run_alternative`), then
runs as if it named the chosen member: the same calls, retries, fallback and record (whose ``tool``
is the member), and the choice is an event (`ToolChosen`), a row of the run's journal
(``tool_chosen``) and an entry of `PlanResult.choices`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .. import _faults
from .._errors import StoreError, ToolplanError
from .._records import maker, positional_maker
from ..plan import CompiledStep, Fallback
from ..plan._internal import ExpressionFailed, Ref, check_condition, null_references, resolve_compiled
from ._choice import FIXED_CHOOSER, Choice, ChoiceOutcome, ChoiceRequest, default_chooser
from ._events import StepRetrying, StepStarted, ToolChosen
from ._invoke import CallOutcome, ended
from ._journal import StoredStep, unknown_outcome
from ._result import StepError, StepResult, StepStatus

if TYPE_CHECKING:
    from ._run import PlanRun

__all__ = (
    "GROUP",
    "SHARED",
    "call",
    "clock",
    "end",
    "fall_back",
    "name_nulls",
    "new_step_result",
    "no_retry_backoff",
    "refused_at_start",
    "retry",
    "reused_record",
    "run_step",
    "set_retry_backoff",
)

new_step_result = maker(StepResult)  # a record per step: cheaper than calling the class
_step_result_at = positional_maker(StepResult)  # the same, its fields by position (the success path)
# What a run knows of a tool besides its retries and timeout (`PlanRun.tool_defaults`): its calls
# may be shared or cached (SHARED), or it is a group of alternatives (GROUP); 0 for any other tool.
SHARED, GROUP = 1, 2
RETRYABLE = frozenset({"infrastructure", "timeout"})
_backoff_enabled = True


def set_retry_backoff(enabled: bool) -> bool:
    """Turn waiting between step retries on or off for the process; returns the previous setting."""
    global _backoff_enabled
    previous, _backoff_enabled = _backoff_enabled, enabled
    return previous


@contextmanager
def no_retry_backoff() -> Iterator[None]:
    """Within this block step retries happen without waiting (for tests)."""
    previous = set_retry_backoff(False)
    try:
        yield
    finally:
        set_retry_backoff(previous)


def _backoff(attempt: int, initial: float) -> float:
    if not _backoff_enabled or initial <= 0:
        return 0.0
    base = min(initial * 2 ** (attempt - 1), 10.0)
    jitter: float = 0.8 + 0.4 * random.random()
    return float(base) * jitter  # jitter, not cryptography


clock = time.perf_counter  # the clock of `PlanRun.now` (a module global: one lookup where a step reads it)

# Tool outputs are outside input: deep, huge or cyclic values must fail the step, not the run.
_RESOLVE_ERRORS = (ToolplanError, ValueError, TypeError, RecursionError, MemoryError)


def _unresolvable(cs: CompiledStep, exc: BaseException) -> StepError:
    detail = exc.message if isinstance(exc, ToolplanError) else f"{type(exc).__name__}: {exc}"
    return StepError(
        kind="reference",
        message=f"The arguments of step {cs.step.id!r} could not be built from its dependencies' outputs "
        f"({detail}). Pass a smaller or simpler value, or a field of it ('$ref:ID.field').",
    )


def _not_computable(cs: CompiledStep, exc: ExpressionFailed, what: str) -> StepError:
    return StepError(
        kind="invalid_expression",
        message=f"The {what} of step {cs.step.id!r} could not be computed: {exc}",
    )


def _unless(run: PlanRun, cs: CompiledStep) -> StepResult | None:
    """The record of a step whose condition is false (``skipped``) or cannot be told (``failed``), else None."""
    try:
        reason = check_condition(cs.condition, run.outputs)
    except ExpressionFailed as exc:
        outcome = CallOutcome(error=_not_computable(cs, exc, "condition ('when')"))
        return _record(run, cs, "failed", outcome, 0, None, False, [])
    except _RESOLVE_ERRORS as exc:
        return _record(run, cs, "failed", CallOutcome(error=_unresolvable(cs, exc)), 0, None, False, [])
    if reason is None:
        return None
    return _record(
        run, cs, "skipped", CallOutcome(error=StepError(kind="condition", message=reason)), 0, None, False, []
    )


def name_nulls(run: PlanRun, outcome: CallOutcome, arguments: Any) -> CallOutcome:
    """A call refused for its arguments: its error names each reference that gave null."""
    error = outcome.error
    if error is None or error.kind != "invalid_arguments":
        return outcome
    nulls = null_references(arguments, run.outputs)
    if not nulls:
        return outcome
    named = dataclasses.replace(error, message=f"{error.message} ({'; '.join(nulls)}.)")
    return dataclasses.replace(outcome, error=named)


def _missed(missed: list[Ref]) -> tuple[str, ...]:
    return tuple(f"{r[3]} resolved to nothing (no such field in {r[1]!r}'s output)." for r in missed)


async def run_step(run: PlanRun, cs: CompiledStep) -> StepResult:
    """Run one step to its end and return its record (never raises, except for cancellation)."""
    step = cs.step
    sid, tool = step.id, step.tool
    attempt = 1
    in_fallback = 0  # the link of the fallback chain a resumed step was calling (0: none)
    if run.stored is not None:  # a resumed run: what the store holds decides
        stored = run.stored.get(sid)
        if stored is not None:
            decision, row = stored
            if decision == "reuse" and row.result is not None:
                return reused_record(row.result)
            if decision == "unknown":
                return _unknown(run, cs, row)
            attempt = row.attempt + 1
            in_fallback = row.fallback if decision == "rerun" and step.fallback is not None else 0
    if cs.condition is not None:  # a `when`: told before the arguments are built
        unmet = _unless(run, cs)
        if unmet is not None:
            return unmet
    missed: list[Ref] = []  # REF nodes of fields the output did not have
    try:
        args = resolve_compiled(cs.arguments, run.outputs, run.missing_field == "null", missed.append)
    except ExpressionFailed as exc:
        outcome = CallOutcome(error=_not_computable(cs, exc, "arguments"))
        return _record(run, cs, "failed", outcome, 0, None, 0, missed)
    except _RESOLVE_ERRORS as exc:
        return _record(run, cs, "failed", CallOutcome(error=_unresolvable(cs, exc)), 0, None, False, missed)
    if run.approval is not None:  # a person may have to answer first (`_gate.py`)
        args = await run.approval.gate(run, cs, args)
        if isinstance(args, StepResult):
            return args
    retries, timeout, special = run.tool_defaults[tool]  # filled in by PlanRun.add
    if step.timeout is not None:
        timeout = step.timeout
    if step.retry is not None:
        retries = step.retry
    if special or in_fallback:  # (rare: the common step pays for this one test)
        if special == GROUP and not in_fallback:  # alternatives: one is chosen now
            return await run_alternative(run, cs, args, attempt, missed)
        if in_fallback:  # its fallback was in flight: the step's own calls had failed before
            message = f"Step {sid!r} failed before a resume."
            failed = CallOutcome(error=StepError(kind="infrastructure", message=message))
            outcome, attempt, used_fallback = await fall_back(run, cs, failed, attempt - 1, missed, in_fallback)
            return end(run, cs, outcome, attempt, args, used_fallback, missed)
        # a read_only and idempotent tool (its calls are shared), or one the run's cache keeps
        assert run.sharing is not None
        shared = await run.sharing.run_step(run, cs, args, attempt, retries, timeout, missed)
        if shared is not None:
            return shared
    run.attempts[sid] = attempt
    if run.on_event is not None:
        run.emit(StepStarted(run_id=run.run_id, step_id=sid, tool=tool, attempt=attempt, at=run.now()))
    if run.journal is None:
        outcome = await run.invoker.call(tool, args, timeout, run.run_id, sid, attempt, run.expires)
    else:
        outcome = await _durable_call(run, sid, tool, args, timeout, attempt, False)
    if outcome.error is None:  # the common case, built here rather than through `_record`
        return _step_result_at(  # (StepResult's fields in order, from id to warnings)
            sid,
            tool,
            "succeeded",
            outcome.output,
            None,
            attempt,
            run.started_at[sid],
            run.clock_offset + clock(),  # ended_at: run.now(), without a call
            args,
            False,
            _missed(missed) if missed else (),
        )
    run.hold_until_done(tool, outcome)
    outcome = name_nulls(run, outcome, cs.arguments)
    outcome, attempt = await retry(run, cs, args, outcome, attempt, retries, timeout)
    used_fallback = 0  # the link of the fallback chain whose result stands (0: none)
    if not refused_at_start(outcome, attempt):
        outcome, attempt, used_fallback = await fall_back(run, cs, outcome, attempt, missed)
    return end(run, cs, outcome, attempt, args, used_fallback, missed)


async def _durable_call(
    run: PlanRun, sid: str, tool: str, args: Any, timeout: float | None, attempt: int, fallback: int
) -> CallOutcome:
    """A call of a durable run: its ``running`` row commits first; a store that fails stops the run."""
    journal = run.journal
    assert journal is not None
    try:
        await journal.started(sid, tool, attempt, fallback, run.now())
    except StoreError as exc:
        run.fail_store(exc)
        return CallOutcome(error=StepError(kind="store", message=f"Not started: {exc.message}"))
    if _faults.ACTIVE:
        _faults.hit("after_claim")
    outcome = await run.invoker.call(tool, args, timeout, run.run_id, sid, attempt, run.expires, fallback)
    if _faults.ACTIVE:
        _faults.hit("after_call")
    return outcome


def reused_record(result: StepResult) -> StepResult:
    """A stored record that stands in a resumed run (marked ``reused``)."""
    return dataclasses.replace(result, reused=True)


def _unknown(run: PlanRun, cs: CompiledStep, row: StoredStep) -> StepResult:
    return new_step_result(
        id=cs.step.id,
        tool=cs.step.tool,
        status="unknown_outcome",
        error=unknown_outcome(run.run_id, row),
        attempts=row.attempt,
        started_at=run.started_at[cs.step.id],
        ended_at=run.now(),
    )


def end(
    run: PlanRun,
    cs: CompiledStep,
    outcome: CallOutcome,
    attempt: int,
    args: Any,
    used_fallback: int,
    missed: list[Ref],
) -> StepResult:
    error = outcome.error
    status: StepStatus
    if error is None:
        status = "succeeded"
    elif refused_at_start(outcome, attempt):
        status, attempt = "not_run", 0
    elif error.kind == "store":
        status = "not_run"
    elif error.kind == "timeout":
        status = "timed_out"
    else:
        status = "failed"
    return _record(run, cs, status, outcome, attempt, args, used_fallback, missed)


def _record(
    run: PlanRun,
    cs: CompiledStep,
    status: StepStatus,
    outcome: CallOutcome,
    attempts: int,
    args: Any,
    used_fallback: int,
    missed: list[Ref],
) -> StepResult:
    """The step's record; ``used_fallback`` is the link of its fallback chain whose result stands (0: none)."""
    return new_step_result(
        id=cs.step.id,
        tool=cs.step.tool,
        status=status,
        output=outcome.output,
        error=outcome.error,
        attempts=attempts,
        started_at=run.started_at[cs.step.id],
        ended_at=run.now(),
        arguments=args,
        used_fallback=used_fallback > 0,
        fallback_link=used_fallback,
        warnings=_missed(missed) if missed else (),
    )


async def call(
    run: PlanRun, sid: str, tool: str, args: Any, timeout: float | None, attempt: int, fallback: int = 0
) -> CallOutcome:
    if run.journal is not None:
        return await _durable_call(run, sid, tool, args, timeout, attempt, fallback)
    return await run.invoker.call(tool, args, timeout, run.run_id, sid, attempt, run.expires, fallback)


async def retry(
    run: PlanRun,
    cs: CompiledStep,
    args: Any,
    outcome: CallOutcome,
    attempt: int,
    retries: int,
    timeout: float | None,
) -> tuple[CallOutcome, int]:
    """After a failed call (number ``attempt``): its retries, for retryable errors; the last outcome and attempt.

    A retry never overlaps the attempt it replaces: if that attempt's thread still runs, it waits for it.
    """
    step = cs.step
    sid = step.id
    while True:
        error = outcome.error
        if error is None or attempt > retries or error.kind not in RETRYABLE:
            break
        delay = _backoff(attempt, run.limits.retry_delay)
        if run.on_event is not None:
            run.emit(StepRetrying(run_id=run.run_id, step_id=sid, attempt=attempt, error=error, delay=delay))
        if run.journal is not None:
            run.journal.event("step_retrying", sid, {"attempt": attempt, "error": error.to_dict(), "delay": delay})
        if outcome.lingering is not None:
            await ended(outcome.lingering)
        await asyncio.sleep(delay)
        attempt += 1
        run.attempts[sid] = attempt
        if run.on_event is not None:
            run.emit(StepStarted(run_id=run.run_id, step_id=sid, tool=step.tool, attempt=attempt, at=run.now()))
        outcome = await call(run, sid, step.tool, args, timeout, attempt)
        run.hold_until_done(step.tool, outcome)
    return outcome, attempt


async def fall_back(
    run: PlanRun, cs: CompiledStep, outcome: CallOutcome, attempt: int, missed: list[Ref], start: int = 1
) -> tuple[CallOutcome, int, int]:
    """The step's fallback chain after its own calls failed (``attempt`` of them), if it has one.

    Each link is tried in turn, from link ``start`` (a resumed step: the one it was calling), until
    one succeeds; returns the outcome, the calls made and the link whose result stands (1 for the
    fallback, 2 for its own fallback...; 0 when none succeeded).
    """
    step = cs.step
    fb = step.fallback
    if fb is None or outcome.error is None or outcome.error.kind == "store":
        return outcome, attempt, 0
    assert cs.fallback_arguments is not None
    links: tuple[tuple[Fallback, Any], ...] = ((fb, cs.fallback_arguments),)  # (link, its compiled arguments)
    if fb.fallback is not None:
        links += tuple(zip(fb.chain[1:], cs.more_fallback_arguments, strict=True))
    message = outcome.error.message
    failed_tool = step.tool
    for n, (link, compiled) in enumerate(links, 1):
        if n < start:
            continue
        try:
            fb_args = resolve_compiled(compiled, run.outputs, run.missing_field == "null", missed.append)
        except ExpressionFailed as exc:
            what = "fallback's arguments" if n == 1 else f"fallback #{n}'s arguments"
            return CallOutcome(error=_not_computable(cs, exc, what)), attempt, 0
        except _RESOLVE_ERRORS as exc:
            return CallOutcome(error=_unresolvable(cs, exc)), attempt, 0
        attempt += 1
        run.attempts[step.id] = attempt
        fb_outcome, fb_tool = await _fallback_call(run, cs, link, n, fb_args, attempt, failed_tool)
        if fb_outcome.error is None:
            return fb_outcome, attempt, n
        fb_error = name_nulls(run, fb_outcome, compiled).error or fb_outcome.error
        which = "The fallback" if n == 1 else f"Fallback #{n}"
        message = f"{message} {which} {fb_tool!r} failed too: {fb_error.message}"
        outcome = CallOutcome(error=StepError(kind=fb_error.kind, message=message))
        if fb_error.kind in ("store", "limit"):  # the store failed, or the budget refused the call: stop here
            break
        failed_tool = fb_tool
    return outcome, attempt, 0


async def _fallback_call(
    run: PlanRun, cs: CompiledStep, link: Fallback, n: int, args: Any, attempt: int, failed_tool: str
) -> tuple[CallOutcome, str]:
    """Link ``n`` of a step's fallback chain: its call (a group's member chosen, leaving out the one that failed)."""
    sid, invoker = cs.step.id, run.invoker
    fb_tool = link.tool
    alternatives = invoker.alternatives(fb_tool)
    if alternatives is not None:  # a group: chosen like a step's, leaving out the member that just failed
        choice = await choose_member(run, sid, fb_tool, *alternatives, exclude=failed_tool)
        fb_tool = choice.chosen
    if run.on_event is not None:
        run.emit(StepStarted(run_id=run.run_id, step_id=sid, tool=fb_tool, attempt=attempt, at=run.now()))
    began = time.perf_counter()
    fb_outcome = await call(run, sid, fb_tool, args, invoker.timeout_for(fb_tool, cs.step.timeout), attempt, n)
    run.hold_until_done(fb_tool, fb_outcome)
    if alternatives is not None:
        await _observe_fallback(run, choice, alternatives[0], fb_outcome, time.perf_counter() - began)
    return fb_outcome, fb_tool


async def _observe_fallback(
    run: PlanRun, choice: Choice, members: tuple[str, ...], outcome: CallOutcome, latency: float
) -> None:
    """Tell the chooser how the fallback's chosen member did (not when the budget or the store refused the call)."""
    error = outcome.error
    if error is not None and error.kind in ("limit", "store"):
        return
    await observe_member(run, choice, members, error is None, latency, 1, None if error is None else error.kind)


def refused_at_start(outcome: CallOutcome, attempt: int) -> bool:
    return attempt == 1 and outcome.error is not None and outcome.error.kind == "limit"


# -- alternatives: a step whose tool is a group ----------------------------------------------------


async def run_alternative(run: PlanRun, cs: CompiledStep, args: Any, attempt: int, missed: list[Ref]) -> StepResult:
    """Choose a member of the step's group, run the step with it, and tell the chooser how it went."""
    step = cs.step
    sid, group = step.id, step.tool
    members, general = run.groups[group]
    choice = await choose_member(run, sid, group, members, general)
    tool = choice.chosen
    chosen = dataclasses.replace(cs, step=dataclasses.replace(step, tool=tool, one_of=()))
    retries, default_timeout = run.tool_settings(tool)
    timeout = step.timeout if step.timeout is not None else default_timeout
    retries = step.retry if step.retry is not None else retries
    run.attempts[sid] = attempt
    if run.on_event is not None:
        run.emit(StepStarted(run_id=run.run_id, step_id=sid, tool=tool, attempt=attempt, at=run.now()))
    began = time.perf_counter()
    first = attempt
    outcome = await call(run, sid, tool, args, timeout, attempt)
    run.hold_until_done(tool, outcome)
    used_fallback = 0
    if outcome.error is not None:
        outcome, attempt = await retry(run, chosen, args, outcome, attempt, retries, timeout)
        if not refused_at_start(outcome, attempt):
            outcome, attempt, used_fallback = await fall_back(run, chosen, outcome, attempt, missed)
    latency = time.perf_counter() - began
    result = end(run, chosen, outcome, attempt, args, used_fallback, missed)
    if result.status != "not_run":  # a call the budget refused says nothing about the tool
        calls = max(attempt - first + 1 - int(used_fallback), 1)
        error = result.error
        ok = result.ok and not used_fallback
        await observe_member(run, choice, members, ok, latency, calls, None if error is None or ok else error.kind)
    return result


async def choose_member(
    run: PlanRun,
    sid: str,
    group: str,
    members: tuple[str, ...],
    general: str | None,
    exclude: str | None = None,
) -> Choice:
    """Ask the run's chooser for a member of ``group`` for step ``sid``, and record the choice.

    The budget narrows the candidates; ``exclude`` (the member that just failed, for a fallback to
    the group) is left out when the group has other members.
    """
    chooser = run.invoker.chooser or default_chooser(run.invoker.registry, run.policy)
    invoker = run.invoker
    meter = invoker.meter
    if exclude is not None and exclude in members and len(members) > 1:
        members = tuple(m for m in members if m != exclude)
        if general == exclude:
            general = None
    allowed = tuple(m for m in members if meter.refusal(m, invoker.annotations(m).cost) is None)
    request = ChoiceRequest(
        group=group,
        candidates=allowed or members,
        general=general,
        strategy=run.policy,
        budget_left=_budget_left(run),
        run_id=run.run_id,
        step_id=sid,
    )
    choice = await chooser.choose(request)
    if choice.chosen not in request.candidates:  # a chooser's bug must not call a tool outside the group
        choice = await FIXED_CHOOSER.choose(request)
    choice = dataclasses.replace(choice, step_id=sid) if choice.step_id != sid else choice
    _record_choice(run, choice)
    return choice


async def observe_member(
    run: PlanRun,
    choice: Choice,
    members: tuple[str, ...],
    ok: bool,
    latency: float,
    calls: int,
    error_kind: str | None,
) -> None:
    """Tell the run's chooser how the ``calls`` calls of ``choice.chosen`` went."""
    chooser = run.invoker.chooser or default_chooser(run.invoker.registry, run.policy)
    invoker = run.invoker
    await chooser.observe(
        choice,
        ChoiceOutcome(
            ok=ok,
            latency=latency,
            cost=calls * invoker.annotations(choice.chosen).cost,
            error_kind=error_kind,
            latency_scale=run.limits.run_deadline,
            cost_scale=_max_cost(run) or max(invoker.annotations(m).cost for m in members),
        ),
    )


def _record_choice(run: PlanRun, choice: Choice) -> None:
    run.choices.append(choice)
    if run.on_event is not None:
        run.emit(ToolChosen(run_id=run.run_id, step_id=choice.step_id, choice=choice, at=run.now()))
    if run.journal is not None:
        run.journal.event("tool_chosen", choice.step_id, choice.to_dict())


def _max_cost(run: PlanRun) -> float | None:
    """The tightest ``max_cost`` over the run's ledgers (a plan's own, the agent run's)."""
    meter: Any = run.invoker.meter
    low: float | None = None
    while meter is not None:
        cap = meter.budget.max_cost
        if cap is not None and (low is None or cap < low):
            low = cap
        meter = meter.parent
    return low


def _budget_left(run: PlanRun) -> float | None:
    """The share left of the tightest limit: calls, cost (every ledger up the chain) and the run's time."""
    shares: list[float] = []
    meter: Any = run.invoker.meter
    while meter is not None:
        b = meter.budget
        if b.max_tool_calls:
            shares.append(1.0 - meter.calls / b.max_tool_calls)
        if b.max_cost:
            shares.append(1.0 - meter.cost / b.max_cost)
        meter = meter.parent
    if run.expires is not None:
        total = run.expires - run._loop0
        if total > 0:
            shares.append((run.expires - time.monotonic()) / total)
    return max(0.0, min(shares)) if shares else None
