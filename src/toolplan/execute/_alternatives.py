"""A step whose tool is a group of alternatives: choose a member at dispatch, run it, report how it went.

`run_step` hands such a step here (one check per step when the run has groups at all). The step
then runs as if it named the chosen member: the same calls, retries, fallback and record (whose
``tool`` is the member), and the choice is an event (`ToolChosen`), a row of the run's journal
(``tool_chosen``) and an entry of `PlanResult.choices`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from ..plan import CompiledStep
from ..plan._refs import Ref
from ._choice import FIXED_CHOOSER, Choice, ChoiceOutcome, ChoiceRequest
from ._events import StepStarted, ToolChosen
from ._result import StepResult
from ._step import _call, _end, _recover  # one step's machinery, shared: a chosen member runs as any step

if TYPE_CHECKING:
    from ._run import PlanRun

__all__ = ("choose_member", "observe_member", "run_alternative")


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
    outcome = await _call(run, sid, tool, args, timeout, attempt)
    run.hold_until_done(tool, outcome)
    used_fallback = False
    if outcome.error is not None:
        outcome, attempt, used_fallback = await _recover(run, chosen, args, outcome, attempt, retries, timeout, missed)
    latency = time.perf_counter() - began
    result = _end(run, chosen, outcome, attempt, args, used_fallback, missed)
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
    chooser = run.invoker.chooser or FIXED_CHOOSER
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
    chooser = run.invoker.chooser or FIXED_CHOOSER
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
