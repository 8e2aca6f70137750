"""Property tests: random DAGs with random failures, against a simple sequential reference."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolplan import ToolResult, tool
from toolplan.execute import Scheduler, execute_plan
from toolplan.plan import compile_plan


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], set[int]]:
    n = draw(st.integers(min_value=1, max_value=25))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    failing = draw(st.sets(st.integers(0, n - 1), max_size=max(1, n // 3)))
    return deps, failing


def transitive_dependents(deps: list[list[int]], failing: set[int]) -> set[int]:
    """Steps downstream of a step that actually failed (a failing step behind a failure is skipped)."""
    skipped: set[int] = set()
    failed: set[int] = set()
    for i, ds in enumerate(deps):  # indices are a topological order
        if any(d in failed or d in skipped for d in ds):
            skipped.add(i)
        elif i in failing:
            failed.add(i)
    return skipped


def reference_run(deps: list[list[int]], failing: set[int]) -> dict[int, tuple[str, Any]]:
    """Sequential, obviously correct semantics."""
    out: dict[int, tuple[str, Any]] = {}
    for i, ds in enumerate(deps):
        if any(out[d][0] != "succeeded" for d in ds):
            out[i] = ("skipped", None)
        elif i in failing:
            out[i] = ("failed", None)
        else:
            out[i] = ("succeeded", i + sum(out[d][1] for d in ds))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(min_value=1, max_value=6), st.randoms(use_true_random=False))
def test_random_dags_match_the_sequential_reference(
    dag: tuple[list[list[int]], set[int]], concurrency: int, rnd: Any
) -> None:
    deps, failing = dag
    started: list[int] = []
    finished_ok: set[int] = set()

    @tool
    async def node(i: int, inputs: list[int]) -> ToolResult:
        assert all(d in finished_ok for d in deps[i]), f"{i} started before its dependencies succeeded"
        started.append(i)
        for _ in range(rnd.randint(0, 3)):
            await asyncio.sleep(0)
        if i in failing:
            return ToolResult.failure(f"node {i} fails")
        finished_ok.add(i)
        return ToolResult(i + sum(inputs))

    plan = {
        "steps": [
            {"id": f"n{i}", "tool": "node", "arguments": {"i": i, "inputs": [f"$ref:n{d}" for d in ds]}}
            for i, ds in enumerate(deps)
        ]
    }
    result = asyncio.run(execute_plan(plan, [node], max_concurrency=concurrency))

    assert len(started) == len(set(started)), "a step ran twice"
    expected = reference_run(deps, failing)
    got = {int(sid[1:]): (r.status, r.output if r.ok else None) for sid, r in result.steps.items()}
    assert got == expected
    skipped = {int(sid[1:]) for sid, r in result.steps.items() if r.status == "skipped"}
    assert skipped == transitive_dependents(deps, failing)


@settings(max_examples=300, deadline=None)
@given(dags(), st.integers(min_value=1, max_value=4), st.randoms(use_true_random=False), st.booleans())
def test_scheduler_core(dag: tuple[list[list[int]], set[int]], limit: int, rnd: Any, fail_fast: bool) -> None:
    """The pure core: limits hold, steps start once and only after their dependencies succeeded."""
    deps, failing = dag
    sched = Scheduler(max_concurrency=limit, fail_fast=fail_fast)
    for i, ds in enumerate(deps):
        sched.add(f"n{i}", "t", [f"n{d}" for d in ds])
    running: list[str] = []
    started: list[str] = []
    while not sched.done:
        ready = sched.take_ready()
        started += ready
        running += ready
        assert len(running) <= limit
        if not running:
            break
        sid = running.pop(rnd.randrange(len(running)))
        assert all(sched.state(f"n{d}") == "succeeded" for d in deps[int(sid[1:])])
        sched.finish(sid, succeeded=int(sid[1:]) not in failing)
        if sched.stopped is not None:
            for other in running:
                sched.cancel(other, "stopped")
            running.clear()
    assert sched.done
    assert len(started) == len(set(started))
    states = {int(s[1:]): sched.state(s) for s in sched.order}
    failed = {i for i, s in states.items() if s == "failed"}
    assert failed <= failing
    skipped = {i for i, s in states.items() if s == "skipped"}
    if not fail_fast:
        assert skipped == transitive_dependents(deps, failing)
        assert failed == failing - skipped
    else:
        assert len(failed) <= 1 + limit
        assert all(s != "pending" for s in states.values())


@settings(max_examples=200, deadline=None)
@given(
    dags(),
    st.integers(min_value=1, max_value=3),
    st.randoms(use_true_random=False),
    st.booleans(),
    st.booleans(),
)
def test_take_one_is_take_ready_of_one(
    dag: tuple[list[list[int]], set[int]], limit: int, rnd: Any, two_tools: bool, tool_limit: bool
) -> None:
    """`Scheduler.take_one` starts the same step `take_ready(1)` would, in the same states."""
    deps, failing = dag
    limits = {"b": 1} if tool_limit else None
    one, ref = (Scheduler(max_concurrency=limit, tool_limits=limits) for _ in range(2))
    for sched in (one, ref):
        for i, ds in enumerate(deps):
            sched.add(f"n{i}", "b" if two_tools and i % 2 else "a", [f"n{d}" for d in ds])
    running: list[str] = []
    while not ref.done:
        taken = one.take_one()
        assert ([] if taken is None else [taken]) == ref.take_ready(1)
        if taken is not None:
            running.append(taken)
            continue
        if not running:
            break
        sid = running.pop(rnd.randrange(len(running)))
        for sched in (one, ref):
            sched.finish(sid, succeeded=int(sid[1:]) not in failing)
    assert one.done == ref.done
    assert {s: one.state(s) for s in one.order} == {s: ref.state(s) for s in ref.order}


@settings(max_examples=200, deadline=None)
@given(dags(), st.randoms(use_true_random=False), st.integers(min_value=1, max_value=4), st.booleans())
def test_add_all_is_add_of_each_step(
    dag: tuple[list[list[int]], set[int]], rnd: Any, limit: int, two_tools: bool
) -> None:
    """`Scheduler.add_all` (a whole compiled plan at once) ends in the states `add` of each step would.

    The steps are shuffled, so some depend on steps after them in the plan.
    """
    deps, failing = dag
    order = list(range(len(deps)))
    rnd.shuffle(order)
    plan = {
        "steps": [
            {"id": f"n{i}", "tool": "b" if two_tools and i % 2 else "a", "depends_on": [f"n{d}" for d in deps[i]]}
            for i in order
        ]
    }
    compiled = compile_plan(plan, max_steps=len(deps))
    bulk, each = (Scheduler(max_concurrency=limit, tool_limits={"b": 1}) for _ in range(2))
    bulk.add_all(compiled.steps)
    for sid, cs in compiled.steps.items():
        each.add(sid, cs.step.tool, cs.deps)
    running: list[str] = []
    while not each.done:
        assert {s: bulk.state(s) for s in each.order} == {s: each.state(s) for s in each.order}
        taken = bulk.take_ready()
        assert taken == each.take_ready()
        running += taken
        if not running:
            break
        sid = running.pop(rnd.randrange(len(running)))
        for sched in (bulk, each):
            sched.finish(sid, succeeded=int(sid[1:]) not in failing)
    assert bulk.done and each.done
    assert list(bulk.order) == list(each.order)
    assert {s: bulk.state(s) for s in each.order} == {s: each.state(s) for s in each.order}
