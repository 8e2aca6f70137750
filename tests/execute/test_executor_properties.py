"""Property tests of the real async executor, against the sequential reference of test_properties.

Random DAGs run through the public API: `execute_plan` (fail_forward, fail_fast, budgets),
`execute_plan_stream` fed from an async generator, and cancellation of the task running
`execute_plan`. Each step's tool succeeds, fails (a business error), raises, or raises once and
succeeds on its retry, as hypothesis decides, after yielding to the event loop a random number of
times. The tools are instrumented: they count the calls running at every instant (in all and per
tool) and check, when they start, that every dependency already has a succeeded record.

Nothing here measures time: the only clock is the order of event-loop turns, which the drawn data
fixes, so every failure replays.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_properties import reference_run, transitive_dependents

from toolplan import Budget, FunctionTool, PlanResult, ToolResult, execute_plan, tool
from toolplan.execute import PlanEvent, PlanFinished, StepFinished, execute_plan_stream

Behaviour = Literal["ok", "fail", "raise", "flaky"]
TERMINAL = frozenset({"succeeded", "failed", "timed_out", "cancelled", "skipped", "not_run"})
N_TOOLS = 3
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Properties that fail on today's code (issue 14 items 1 and 6): shrinking their failures took one to
# two minutes on a loaded 2-core machine, so they report the first example found (the minimal cases
# are in their docstrings).
NO_SHRINK = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


# -- scenarios ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A random plan: step ``i`` depends on ``deps[i]`` (earlier steps) and behaves as ``behaviour[i]``."""

    deps: list[list[int]]
    behaviour: list[Behaviour]
    yields: list[int]  # times the step's tool awaits asyncio.sleep(0) before it ends
    tool_of: list[int]  # which of the tools t0..t2 the step calls
    syntax: list[list[int]]  # how each dependency is written in the arguments (see `_reference_to`)
    redundant_depends_on: list[bool]  # also list the (data) dependencies in depends_on
    arguments_as_text: list[bool]  # arguments given as a JSON string, as models often do
    tool_limits: list[int | None]  # per-tool concurrency

    @property
    def n(self) -> int:
        return len(self.deps)

    @property
    def failing(self) -> set[int]:
        """Steps whose every attempt fails (a flaky step succeeds on its retry)."""
        return {i for i, b in enumerate(self.behaviour) if b in ("fail", "raise")}

    def plan(self, **extra: Any) -> dict[str, Any]:
        steps: list[dict[str, Any]] = []
        for i, ds in enumerate(self.deps):
            arguments: Any = {"i": i, "inputs": [_reference_to(d, s) for d, s in zip(ds, self.syntax[i], strict=True)]}
            if self.arguments_as_text[i]:
                arguments = json.dumps(arguments)
            step: dict[str, Any] = {"id": f"n{i}", "tool": f"t{self.tool_of[i]}", "arguments": arguments}
            if self.redundant_depends_on[i] and ds:
                step["depends_on"] = [f"n{d}" for d in ds]
            if self.behaviour[i] == "flaky":
                step["retry"] = 1
            steps.append(step)
        return {**extra, "steps": steps}  # plan options first: a streamed plan can apply them before its steps


def _reference_to(dep: int, syntax: int) -> Any:
    """One way of writing a reference to step ``dep``'s output (an int) that `_value` reads back."""
    if syntax == 0:
        return f"$ref:n{dep}"  # a whole-string reference keeps the type
    if syntax == 1:
        return f"{{{{n{dep}}}}}"  # a string that is exactly one template keeps the type too
    if syntax == 2:
        return {"v": f"$ref:n{dep}"}  # a reference nested in an object
    return f"v={{{{n{dep}}}}}"  # interpolated into text


def _value(x: Any) -> int:
    if isinstance(x, dict):
        return int(x["v"])
    if isinstance(x, str):
        return int(x.removeprefix("v="))
    assert isinstance(x, int), f"a reference resolved to {x!r}"
    return x


@st.composite
def scenarios(draw: st.DrawFn, /, *, max_steps: int = 14) -> Scenario:
    n = draw(st.integers(min_value=1, max_value=max_steps))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    behaviour: list[Behaviour] = draw(
        st.lists(st.sampled_from(["ok", "ok", "ok", "fail", "raise", "flaky"]), min_size=n, max_size=n)
    )
    return Scenario(
        deps=deps,
        behaviour=behaviour,
        yields=draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
        tool_of=draw(st.lists(st.integers(0, N_TOOLS - 1), min_size=n, max_size=n)),
        syntax=[draw(st.lists(st.integers(0, 3), min_size=len(ds), max_size=len(ds))) for ds in deps],
        redundant_depends_on=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        arguments_as_text=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        tool_limits=draw(st.lists(st.none() | st.integers(1, 3), min_size=N_TOOLS, max_size=N_TOOLS)),
    )


# -- instrumented tools ---------------------------------------------------------------------------------


@dataclass
class Probe:
    """Tools for a scenario that record what happens at every instant, and the plan's events."""

    sc: Scenario
    active: int = 0
    peak: int = 0
    active_by_tool: list[int] = field(default_factory=lambda: [0] * N_TOOLS)
    peak_by_tool: list[int] = field(default_factory=lambda: [0] * N_TOOLS)
    attempts: Counter[int] = field(default_factory=Counter[int])
    entries: int = 0
    exits: int = 0
    violations: list[str] = field(default_factory=list[str])
    records: dict[str, list[str]] = field(default_factory=dict[str, list[str]])  # step id → statuses recorded
    succeeded: set[int] = field(default_factory=set[int])
    first_failure: str | None = None  # the first step recorded with a status other than succeeded
    started_after_failure: list[int] = field(default_factory=list[int])
    finished: PlanResult | None = None  # from PlanFinished
    on_entry: Callable[[], None] | None = None

    def tools(self) -> list[FunctionTool[Any]]:
        return [tool(name=f"t{k}", concurrency=self.sc.tool_limits[k])(self._body(k)) for k in range(N_TOOLS)]

    def _body(self, k: int) -> Callable[..., Any]:
        sc = self.sc

        async def body(i: int, inputs: list[Any]) -> ToolResult:
            if sc.tool_of[i] != k:
                self.violations.append(f"n{i} called t{k}, its plan says t{sc.tool_of[i]}")
            self.attempts[i] += 1
            self.entries += 1
            if self.first_failure is not None:
                self.started_after_failure.append(i)
            missing = [d for d in sc.deps[i] if d not in self.succeeded]
            if missing:
                self.violations.append(f"n{i} started before {missing} had succeeded")
            self.active += 1
            self.active_by_tool[k] += 1
            self.peak = max(self.peak, self.active)
            self.peak_by_tool[k] = max(self.peak_by_tool[k], self.active_by_tool[k])
            if self.on_entry is not None:
                self.on_entry()
            try:
                for _ in range(sc.yields[i]):
                    await asyncio.sleep(0)
                behaviour = sc.behaviour[i]
                if behaviour == "fail":
                    return ToolResult.failure(f"n{i} fails")
                if behaviour == "raise" or (behaviour == "flaky" and self.attempts[i] == 1):
                    raise ValueError(f"n{i} raises")
                return ToolResult(i + sum(_value(x) for x in inputs))
            finally:
                self.active -= 1
                self.active_by_tool[k] -= 1
                self.exits += 1

        body.__name__ = f"t{k}"
        return body

    def on_event(self, event: PlanEvent) -> None:
        if isinstance(event, StepFinished):
            r = event.result
            self.records.setdefault(r.id, []).append(r.status)
            if r.status == "succeeded":
                self.succeeded.add(int(r.id[1:]))
            elif self.first_failure is None:
                self.first_failure = r.id
        elif isinstance(event, PlanFinished):
            self.finished = event.result

    # -- checks shared by every mode --

    def check_records(self, result: PlanResult | None) -> None:
        """One terminal record per step, in the events and in the result; the instants obeyed the limits."""
        ids = [f"n{i}" for i in range(self.sc.n)]
        assert not self.violations, self.violations
        assert self.entries == self.exits and self.active == 0, "a tool call was still running after the plan"
        assert sorted(self.records) == sorted(ids), f"steps without a record: {set(ids) - set(self.records)}"
        twice = {sid: s for sid, s in self.records.items() if len(s) != 1}
        assert not twice, f"steps recorded more than once: {twice}"
        if result is not None:
            assert list(result.steps) == ids
            assert {sid: r.status for sid, r in result.steps.items()} == {s: v[0] for s, v in self.records.items()}
            bad = {sid: r.status for sid, r in result.steps.items() if r.status not in TERMINAL}
            assert not bad, f"non-terminal records: {bad}"
            json.loads(result.to_model_text())
            json.dumps(result.to_dict(), allow_nan=False, default=str)
        for k, limit in enumerate(self.sc.tool_limits):
            if limit is not None:
                assert self.peak_by_tool[k] <= limit, f"t{k} ran {self.peak_by_tool[k]} calls at once, limit {limit}"

    def check_succeeded_values(self, result: PlanResult) -> None:
        """Every step that succeeded has the reference value (its inputs succeeded, so they are the reference's)."""
        expected = reference_run(self.sc.deps, self.sc.failing)
        for sid, r in result.steps.items():
            if r.ok:
                assert expected[int(sid[1:])] == ("succeeded", r.output), sid


def _statuses(result: PlanResult) -> dict[int, tuple[str, Any]]:
    return {int(sid[1:]): (r.status, r.output if r.ok else None) for sid, r in result.steps.items()}


def _check_matches_reference(probe: Probe, result: PlanResult) -> None:
    sc = probe.sc
    assert _statuses(result) == reference_run(sc.deps, sc.failing)
    skipped = {int(sid[1:]) for sid, r in result.steps.items() if r.status == "skipped"}
    assert skipped == transitive_dependents(sc.deps, sc.failing)
    for i in range(sc.n):
        r = result.steps[f"n{i}"]
        ran = r.status != "skipped"
        expected_attempts = (2 if sc.behaviour[i] == "flaky" else 1) if ran else 0
        assert probe.attempts[i] == expected_attempts, f"n{i} was called {probe.attempts[i]} times"
        assert r.attempts == expected_attempts, f"n{i} records {r.attempts} attempts"
    assert result.status == ("succeeded" if all(r.ok for r in result.steps.values()) else "failed")


# -- fail_forward ---------------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.integers(1, 5), st.none() | st.integers(1, 5))
def test_fail_forward_matches_the_reference_within_every_limit(
    sc: Scenario, max_concurrency: int, plan_limit: int | None
) -> None:
    probe = Probe(sc)
    plan = sc.plan() if plan_limit is None else sc.plan(max_concurrency=plan_limit)
    result = asyncio.run(
        execute_plan(plan, probe.tools(), max_concurrency=max_concurrency, on_event=probe.on_event, retry_delay=0)
    )
    probe.check_records(result)
    _check_matches_reference(probe, result)
    limit = min(max_concurrency, plan_limit or max_concurrency)
    assert probe.peak <= limit, f"{probe.peak} calls ran at once, limit {limit}"


@SETTINGS
@given(scenarios(), st.integers(0, 8), st.booleans(), st.integers(1, 5))
def test_the_call_budget_is_never_exceeded(sc: Scenario, max_calls: int, in_plan: bool, max_concurrency: int) -> None:
    probe = Probe(sc)
    if in_plan:
        plan, budget = sc.plan(budget={"max_tool_calls": max_calls}), None
    else:
        plan, budget = sc.plan(), Budget(max_tool_calls=max_calls)
    result = asyncio.run(
        execute_plan(
            plan,
            probe.tools(),
            budget=budget,
            max_concurrency=max_concurrency,
            on_event=probe.on_event,
            retry_delay=0,
        )
    )
    probe.check_records(result)
    probe.check_succeeded_values(result)
    calls = sum(probe.attempts.values())
    assert calls <= max_calls, f"{calls} tool calls under max_tool_calls={max_calls}"
    for sid, r in result.steps.items():
        i = int(sid[1:])
        deps_ok = all(result.steps[f"n{d}"].ok for d in sc.deps[i])
        if r.status == "not_run":
            assert deps_ok and probe.attempts[i] == 0, sid
            assert calls == max_calls, f"{sid} was not run with {calls} of {max_calls} calls made"
        elif r.status == "skipped":
            assert not deps_ok and probe.attempts[i] == 0, sid
        else:
            assert deps_ok and probe.attempts[i] >= 1, sid
    if max_calls >= sum(2 if b == "flaky" else 1 for b in sc.behaviour):
        _check_matches_reference(probe, result)


# -- fail_fast ------------------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.integers(1, 5), st.booleans())
def test_fail_fast_stops_at_the_first_failure_and_records_every_step(
    sc: Scenario, max_concurrency: int, in_plan: bool
) -> None:
    probe = Probe(sc)
    if in_plan:
        run = execute_plan(
            sc.plan(failure_mode="fail_fast"),
            probe.tools(),
            max_concurrency=max_concurrency,
            on_event=probe.on_event,
            retry_delay=0,
        )
    else:
        run = execute_plan(
            sc.plan(),
            probe.tools(),
            failure_mode="fail_fast",
            max_concurrency=max_concurrency,
            on_event=probe.on_event,
            retry_delay=0,
        )
    result = asyncio.run(run)  # a KeyError here is the defect of issue 14 item 1
    probe.check_records(result)
    probe.check_succeeded_values(result)
    assert probe.peak <= max_concurrency
    assert not probe.started_after_failure, (
        f"steps {probe.started_after_failure} started after {probe.first_failure} was recorded as failed"
    )
    failed = {int(sid[1:]) for sid, r in result.steps.items() if r.status == "failed"}
    assert failed <= sc.failing
    any_failure = any(s == "failed" for s, _ in reference_run(sc.deps, sc.failing).values())
    assert bool(failed) == any_failure
    assert result.status == ("failed" if any_failure else "succeeded")
    if not any_failure:
        _check_matches_reference(probe, result)
    if probe.first_failure is not None:
        assert result.steps[probe.first_failure].status == "failed"


def test_fail_fast_chaining_plan_whose_first_tool_yields_then_raises() -> None:
    """Issue 14 item 1, minimal: the failure lands in the turn its siblings' workers were created."""

    async def a() -> str:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def b() -> str:
        return "b"

    async def c() -> str:
        return "c"

    plan = {
        "tools": [{"name": "a", "parameters": {}}, {"name": "b", "parameters": {}}, {"name": "c", "parameters": {}}]
    }
    result = asyncio.run(execute_plan(plan, [a, b, c]))
    assert set(result.steps) == {"a", "b", "c"}
    assert result.steps["a"].status == "failed"
    assert all(r.status in TERMINAL for r in result.steps.values())


# -- streamed delivery ----------------------------------------------------------------------------------


async def _pieces(text: str, cuts: list[int], pauses: list[int]) -> AsyncIterator[str]:
    """``text`` cut at ``cuts``, with ``pauses[k]`` event-loop turns before piece ``k``.

    There is always a turn before the first piece, so the run has started before the text is
    complete; a plan that arrives before its run starts has its own test below.
    """
    bounds = [0, *sorted(set(cuts)), len(text)]
    for k, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        for _ in range(max(pauses[k % len(pauses)], 1 if k == 0 else 0)):
            await asyncio.sleep(0)
        if hi > lo:
            yield text[lo:hi]


@st.composite
def streamed(draw: st.DrawFn, /, **extra: Any) -> tuple[Scenario, str, list[int], list[int]]:
    sc = draw(scenarios(max_steps=10))
    text = json.dumps(sc.plan(**extra))
    cuts = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=30))
    pauses = draw(st.lists(st.integers(0, 3), min_size=1, max_size=8))
    return sc, text, cuts, pauses


@SETTINGS
@given(streamed(), st.integers(1, 5))
def test_streamed_plan_matches_the_reference_within_every_limit(
    case: tuple[Scenario, str, list[int], list[int]], max_concurrency: int
) -> None:
    sc, text, cuts, pauses = case
    probe = Probe(sc)
    result = asyncio.run(
        execute_plan_stream(
            _pieces(text, cuts, pauses), probe.tools(), max_concurrency=max_concurrency, on_event=probe.on_event
        )
    )
    probe.check_records(result)
    _check_matches_reference(probe, result)
    assert probe.peak <= max_concurrency, f"{probe.peak} calls ran at once, limit {max_concurrency}"


@NO_SHRINK
@given(st.data(), st.integers(1, 3))
def test_streamed_plan_keeps_its_own_max_concurrency(data: st.DataObject, plan_limit: int) -> None:
    """Issue 14 item 6: the plan's own ``max_concurrency`` holds when the plan is streamed.

    Minimal failure today: ``{"max_concurrency": 1, "steps": [n0, n1]}``, two independent steps whose
    tool yields once, streamed in one piece after one event-loop turn: both calls run at once.
    """
    sc, text, cuts, pauses = data.draw(streamed(max_concurrency=plan_limit))
    probe = Probe(sc)
    result = asyncio.run(execute_plan_stream(_pieces(text, cuts, pauses), probe.tools(), on_event=probe.on_event))
    probe.check_records(result)
    assert probe.peak <= plan_limit, f"{probe.peak} calls ran at once under the plan's max_concurrency={plan_limit}"


@NO_SHRINK
@given(streamed(failure_mode="fail_fast"))
def test_streamed_plan_keeps_its_own_failure_mode(case: tuple[Scenario, str, list[int], list[int]]) -> None:
    """Issue 14 item 6: a streamed plan that says fail_fast starts nothing after its first failure.

    Minimal failure today: ``{"failure_mode": "fail_fast", "steps": [...]}`` with independent steps,
    one of which returns a business error: the steps after it still start.
    """
    sc, text, cuts, pauses = case
    probe = Probe(sc)
    result = asyncio.run(execute_plan_stream(_pieces(text, cuts, pauses), probe.tools(), on_event=probe.on_event))
    probe.check_records(result)
    assert not probe.started_after_failure, (
        f"steps {probe.started_after_failure} started after {probe.first_failure} was recorded as failed"
    )


@NO_SHRINK
@given(st.data(), st.integers(0, 4))
def test_streamed_plan_keeps_its_own_budget(data: st.DataObject, max_calls: int) -> None:
    """Issue 14 item 6: the plan's own budget holds while its steps stream in, not only once it is complete.

    Minimal failure today: ``{"budget": {"max_tool_calls": 0}, "steps": [...]}`` cut in two pieces: the
    steps complete in the first piece are called.
    """
    sc, text, cuts, pauses = data.draw(streamed(budget={"max_tool_calls": max_calls}))
    probe = Probe(sc)
    result = asyncio.run(execute_plan_stream(_pieces(text, cuts, pauses), probe.tools(), on_event=probe.on_event))
    probe.check_records(result)
    calls = sum(probe.attempts.values())
    assert calls <= max_calls, f"{calls} tool calls under the streamed plan's max_tool_calls={max_calls}"


def test_streamed_plan_that_arrives_before_its_run_starts() -> None:
    """The whole text in one piece, with no event-loop turn in between, runs each step once."""

    async def one_piece() -> AsyncIterator[str]:
        yield json.dumps({"steps": [{"id": "a", "tool": "echo", "arguments": {"x": 1}}]})

    def echo(x: int) -> int:
        return x

    result = asyncio.run(execute_plan_stream(one_piece(), [echo]))  # raised ValueError: duplicate step 'a'
    assert result.ok and result.outputs == {"a": 1}


# -- cancellation ---------------------------------------------------------------------------------------


def _cancel_after(sc: Scenario, max_concurrency: int, cancel_at: int, *, fail_fast: bool) -> None:
    """Cancel the task running `execute_plan` once ``cancel_at`` tool calls have started, and check the records."""
    probe = Probe(sc)
    reached = asyncio.Event()

    def entry() -> None:
        if probe.entries >= cancel_at:
            reached.set()

    probe.on_entry = entry

    async def main() -> bool:
        task = asyncio.create_task(
            execute_plan(
                sc.plan(),
                probe.tools(),
                max_concurrency=max_concurrency,
                failure_mode="fail_fast" if fail_fast else "fail_forward",
                on_event=probe.on_event,
                retry_delay=0,
            )
        )
        waiter = asyncio.create_task(reached.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()
            return False
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return True

    cancelled = asyncio.run(main())
    assert probe.finished is not None, "no PlanFinished event: the run's records were lost"
    probe.check_records(probe.finished)
    probe.check_succeeded_values(probe.finished)
    assert probe.peak <= max_concurrency
    if cancelled:
        assert probe.finished.status == "cancelled"


@SETTINGS
@given(scenarios(), st.integers(1, 5), st.integers(1, 14))
def test_cancelling_the_run_leaves_one_terminal_record_per_step(
    sc: Scenario, max_concurrency: int, cancel_at: int
) -> None:
    _cancel_after(sc, max_concurrency, cancel_at, fail_fast=False)


@NO_SHRINK
@given(scenarios(), st.integers(1, 5), st.integers(1, 14))
def test_cancelling_a_fail_fast_run_leaves_one_terminal_record_per_step(
    sc: Scenario, max_concurrency: int, cancel_at: int
) -> None:
    """Fails today with the KeyError of issue 14 item 1, for instance (shrunk by hypothesis):

    six steps n0..n5 on one tool, deps ``[[], [], [0], [], [0, 1, 2], [0, 1, 2]]``, n5 returns a
    business error, n0 yields once, ``max_concurrency=3``, cancelled once 2 calls have started.
    """
    _cancel_after(sc, max_concurrency, cancel_at, fail_fast=True)


# -- sync tools -----------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_timed_out_sync_call_keeps_its_concurrency_slot() -> None:
    """Issue 14 item 8: a sync tool's thread keeps counting against ``concurrency=1`` after its timeout.

    The first call blocks until the second one enters, or until a fallback release one second after
    the first call timed out (so the fixed code, which makes the second call wait, does not hang).
    Only the fallback depends on the clock, and it can only hide the defect, never invent it.
    """
    release = threading.Event()
    lock = threading.Lock()
    state = {"active": 0, "peak": 0}

    @tool(concurrency=1)
    def blocking(label: str) -> str:
        with lock:
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
            if state["active"] > 1:
                release.set()
        try:
            release.wait(timeout=30)
            return label
        finally:
            with lock:
                state["active"] -= 1

    loop = asyncio.get_running_loop()

    def on_event(event: PlanEvent) -> None:
        if isinstance(event, StepFinished) and event.result.status == "timed_out":
            loop.call_later(1.0, release.set)

    plan = {
        "steps": [
            {"id": "a", "tool": "blocking", "arguments": {"label": "a"}, "timeout": 0.05},
            {"id": "b", "tool": "blocking", "arguments": {"label": "b"}, "timeout": 0.05},
        ]
    }
    try:
        await execute_plan(plan, [blocking], on_event=on_event)
    finally:
        release.set()
    assert state["peak"] == 1, f"{state['peak']} calls of a concurrency=1 sync tool ran at once"
