"""Repeated calls within a run, and the run's result cache.

Steps of one run that call the same tool, both ``read_only`` and ``idempotent``, with the same
arguments (canonical JSON: sorted keys, no whitespace) make one call. The first step to get there
makes it (with its retries); a step that arrives while it is in flight waits for it, one that
arrives after it ended takes its outcome, failures included. Each step gets its own copy of the
output and then goes on as usual (a fallback of its own, if the shared call failed). Both records
say so in ``shared_with``; the steps that made no call have ``attempts`` 0 and charge no budget.

A run with a `ResultCache` looks a call of a ``read_only`` tool up before making it, and keeps what
a successful call returned.

`PlanRun` makes a `Sharing` only when either applies, and marks the tools it applies to once per
run (``tool_defaults``): a step of any other tool pays one flag check.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ToolplanError
from ..plan import CompiledStep
from ..plan._internal import Ref
from ..tools._internal import owned
from ._cache import ResultCache, call_key
from ._events import CacheHit, StepStarted
from ._invoke import CallOutcome
from ._result import StepResult
from ._step import call, end, fall_back, name_nulls, refused_at_start, retry

if TYPE_CHECKING:
    from ..tools import ToolAnnotations
    from ._run import PlanRun

__all__ = ("Sharing", "sharing_for", "symmetric")

# What a shared call gave: its outcome, the attempts it took, whether it came from the cache.
_Got = tuple[CallOutcome, int, bool]


class _Call:
    """One call that steps share: the step that makes it, the steps that took its outcome, and that outcome."""

    __slots__ = ("future", "owner", "sharers")

    def __init__(self, owner: str, future: asyncio.Future[_Got]) -> None:
        self.owner = owner
        self.sharers: list[str] = []
        self.future = future


class Sharing:
    """The calls a run's steps share (by tool and canonical arguments), and its result cache."""

    __slots__ = ("cache", "calls", "share", "tools")

    def __init__(self, share: bool, cache: ResultCache | None) -> None:
        self.share = share
        self.cache = cache
        self.calls: dict[str, _Call] = {}
        self.tools: dict[str, tuple[bool, float]] = {}  # tool -> (calls shared, cache time to live)

    def applies(self, tool: str, annotations: ToolAnnotations) -> bool:
        """Whether steps of ``tool`` take the shared path (looked up once per tool and run)."""
        shared = self.share and annotations.read_only and annotations.idempotent and annotations.share_calls
        ttl = self.cache.ttl_for(tool, annotations) if self.cache is not None else 0.0
        self.tools[tool] = (shared, ttl)
        return shared or ttl > 0

    def seed(self, result: StepResult, annotations: ToolAnnotations) -> None:
        """A resumed run: a step that ended before stands for its call (later sharers take it, not a new call)."""
        if not (result.ok and result.attempts > 0 and result.arguments is not None and not result.used_fallback):
            return
        if not self.applies(result.tool, annotations) or not self.tools[result.tool][0]:
            return
        key = call_key(result.tool, result.arguments)
        if key is None or key in self.calls:
            return
        future: asyncio.Future[_Got] = asyncio.get_running_loop().create_future()
        future.set_result((CallOutcome(output=result.output), result.attempts, result.cached))
        self.calls[key] = _Call(result.id, future)

    async def run_step(
        self,
        run: PlanRun,
        cs: CompiledStep,
        args: Any,
        attempt: int,
        retries: int,
        timeout: float | None,
        missed: list[Ref],
    ) -> StepResult | None:
        """Run a step whose call may be shared or cached; None: neither applies to this call (run it as usual)."""
        sid, tool = cs.step.id, cs.step.tool
        shared, ttl = self.tools[tool]
        shared = shared and run.limits.share_calls  # (a streamed plan may turn sharing off late)
        if not shared and ttl <= 0:
            return None
        key = call_key(tool, args)
        if key is None:  # not JSON data, or too long to compare
            return None
        entry: _Call | None = None
        if shared:
            entry = self.calls.get(key)
            if entry is not None:
                entry.sharers.append(sid)
                try:
                    got = await asyncio.shield(entry.future)
                except asyncio.CancelledError:
                    entry.sharers.remove(sid)
                    task = asyncio.current_task()
                    if not entry.future.cancelled() or (task is not None and task.cancelling()):
                        raise
                    # The step making the call was cancelled (not this one): make the call here.
                    return await self.run_step(run, cs, args, attempt, retries, timeout, missed)
                return await _finish(run, cs, args, got, missed, (entry.owner,), 0)
            entry = self.calls[key] = _Call(sid, asyncio.get_running_loop().create_future())
        try:
            got, warning = await _first_call(run, cs, args, attempt, retries, timeout, key, ttl, self.cache)
        except BaseException:
            if entry is not None:
                if self.calls.get(key) is entry:
                    del self.calls[key]
                entry.future.cancel()
            raise
        if entry is not None:
            entry.future.set_result(got)
        result = await _finish(run, cs, args, got, missed, (), got[1])
        if entry is not None and entry.sharers:
            result = dataclasses.replace(result, shared_with=tuple(entry.sharers))
        if warning is not None:
            result = dataclasses.replace(result, warnings=(*result.warnings, warning))
        return result


async def _first_call(
    run: PlanRun,
    cs: CompiledStep,
    args: Any,
    attempt: int,
    retries: int,
    timeout: float | None,
    key: str,
    ttl: float,
    cache: ResultCache | None,
) -> tuple[_Got, str | None]:
    """The call itself (the cache first, when it keeps this tool), with its retries; and a warning, if any."""
    sid, tool = cs.step.id, cs.step.tool
    warning: str | None = None
    if ttl > 0 and cache is not None:
        try:
            hit = await cache.get(key)
        except ToolplanError as exc:
            hit, warning = None, f"The result cache could not be read ({exc.message}); the tool was called."
        if hit is not None:
            value, age = hit
            if run.on_event is not None:
                run.emit(CacheHit(run_id=run.run_id, step_id=sid, tool=tool, age=age, at=run.now()))
            if run.journal is not None:
                run.journal.event("cache_hit", sid, {"tool": tool, "age": age})
            return (CallOutcome(output=value), 0, True), warning
    run.attempts[sid] = attempt
    if run.on_event is not None:
        run.emit(StepStarted(run_id=run.run_id, step_id=sid, tool=tool, attempt=attempt, at=run.now()))
    outcome = await call(run, sid, tool, args, timeout, attempt)
    if outcome.error is not None:
        run.hold_until_done(tool, outcome)
        outcome = name_nulls(run, outcome, cs.arguments)
        outcome, attempt = await retry(run, cs, args, outcome, attempt, retries, timeout)
    elif ttl > 0 and cache is not None:
        try:
            await cache.put(key, tool, outcome.output, ttl)
        except ToolplanError as exc:
            warning = f"The result could not be kept in the result cache ({exc.message})."
    return (outcome, attempt, False), warning


async def _finish(
    run: PlanRun,
    cs: CompiledStep,
    args: Any,
    got: _Got,
    missed: list[Ref],
    shared_with: tuple[str, ...],
    attempts: int,
) -> StepResult:
    """The step's record from the call's outcome (its own fallback after a failure); ``attempts``: calls it made."""
    outcome, made, cached = got
    if shared_with:  # another step's call: a copy of its own, and no thread of that call to wait for
        outcome = CallOutcome(output=owned(outcome.output), error=outcome.error)
    used_fallback = 0  # the link of the fallback chain whose result stands (0: none)
    if outcome.error is not None and not refused_at_start(outcome, made):
        outcome, attempts, used_fallback = await fall_back(run, cs, outcome, attempts, missed)
    result = end(run, cs, outcome, made if not used_fallback else attempts, args, used_fallback, missed)
    if result.attempts != attempts or shared_with or cached:
        result = dataclasses.replace(
            result, attempts=0 if result.status == "not_run" else attempts, shared_with=shared_with, cached=cached
        )
    return result


def symmetric(results: Mapping[str, StepResult]) -> dict[str, StepResult] | None:
    """Records whose ``shared_with`` name each other both ways; None when nothing changes.

    A step that made a call then names every step that took its outcome, also those that came
    after its own record was made.
    """
    missing: dict[str, list[str]] = {}
    for sid, r in results.items():
        for other in r.shared_with:
            target = results.get(other)
            if target is not None and sid not in target.shared_with:
                missing.setdefault(other, []).append(sid)
    if not missing:
        return None
    fixed = dict(results)
    for sid, more in missing.items():
        r = fixed[sid]
        fixed[sid] = dataclasses.replace(r, shared_with=(*r.shared_with, *more))
    return fixed


def sharing_for(run: PlanRun) -> Sharing:
    """The run's `Sharing`, made when its first step of a tool it may apply to is added.

    A resumed run's steps that ended stand for their calls: a step not run yet with the same call
    takes their outcome rather than calling again.
    """
    sharing = run.sharing
    if sharing is None:
        sharing = run.sharing = Sharing(run.limits.share_calls, run.limits.cache)
        if run.stored is not None and run.limits.share_calls:
            annotations = run.invoker.annotations
            for decision, row in run.stored.values():
                if decision == "reuse" and row.result is not None:
                    sharing.seed(row.result, annotations(row.result.tool))
    return sharing
