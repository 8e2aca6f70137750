"""Property tests of ordering edges (``after``) and resources in the scheduler core.

Random DAGs of dependencies and ``after`` edges, random tools (some on a resource), random failures
and random finishing orders: outcomes are those of the dependencies alone, a step starts only after
its ``after`` steps have ended, and the steps on one resource run one at a time, in plan order.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolplan.execute import Scheduler
from toolplan.plan import compile_plan

TOOLS = ("a", "b", "fs1", "fs2", "db")
RESOURCES = {"fs1": "fs", "fs2": "fs", "db": "db"}


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]], list[str], set[int]]:
    """``(deps, after, tools, failing)``: edges point to earlier steps, so plan order is topological."""
    n = draw(st.integers(min_value=1, max_value=20))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [] for i in range(n)]
    after = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [] for i in range(n)]
    tools = [draw(st.sampled_from(TOOLS)) for _ in range(n)]
    failing = draw(st.sets(st.integers(0, n - 1), max_size=max(1, n // 2)))
    return deps, after, tools, failing


def reference_states(deps: list[list[int]], failing: set[int]) -> dict[int, str]:
    """Outcomes by the dependencies alone (plan order is topological): ordering edges change none."""
    out: dict[int, str] = {}
    for i, ds in enumerate(deps):
        if any(out[d] != "succeeded" for d in ds):
            out[i] = "skipped"
        else:
            out[i] = "failed" if i in failing else "succeeded"
    return out


def drive(
    sched: Scheduler, deps: list[list[int]], after: list[list[int]], tools: list[str], failing: set[int], rnd: Any
) -> list[int]:
    """Run the scheduler to the end with random finishing orders, checking every rule on the way.

    Returns the steps in the order they started.
    """
    terminal = {"succeeded", "failed", "skipped", "not_run", "cancelled"}
    running: list[str] = []
    started: list[int] = []
    while not sched.done:
        ready = sched.take_ready()
        for sid in ready:
            i = int(sid[1:])
            assert all(sched.state(f"n{d}") == "succeeded" for d in deps[i]), "a dependency has not succeeded"
            assert all(sched.state(f"n{a}") in terminal for a in after[i]), "an 'after' step has not ended"
            resource = RESOURCES.get(tools[i])
            if resource is not None:
                others = [r for r in running if RESOURCES.get(tools[int(r[1:])]) == resource]
                assert not others, f"{sid} starts while {others} run on {resource!r}"
            running.append(sid)
            started.append(i)
        assert len(running) <= sched.max_concurrency
        if not running:
            break
        sid = running.pop(rnd.randrange(len(running)))
        sched.finish(sid, succeeded=int(sid[1:]) not in failing)
    assert sched.done, "the scheduler stalled with steps pending"
    assert len(started) == len(set(started))
    return started


def _in_plan_order(started: list[int], tools: list[str]) -> None:
    for resource in set(RESOURCES.values()):
        on = [i for i in started if RESOURCES.get(tools[i]) == resource]
        assert on == sorted(on), f"{resource!r} steps started out of plan order: {on}"


@settings(max_examples=150, deadline=None)
@given(plans(), st.integers(min_value=1, max_value=5), st.randoms(use_true_random=False))
def test_after_and_resources_keep_order_and_outcomes(
    plan: tuple[list[list[int]], list[list[int]], list[str], set[int]], limit: int, rnd: Any
) -> None:
    deps, after, tools, failing = plan
    sched = Scheduler(max_concurrency=limit, resources=RESOURCES)
    for i in range(len(deps)):
        sched.add(f"n{i}", tools[i], [f"n{d}" for d in deps[i]], [f"n{a}" for a in after[i]])
    started = drive(sched, deps, after, tools, failing, rnd)
    expected = reference_states(deps, failing)
    assert {i: sched.state(f"n{i}") for i in range(len(deps))} == expected
    _in_plan_order(started, tools)
    # Every step whose dependencies succeeded ran, whatever the outcome of its 'after' steps.
    assert set(started) == {i for i, s in expected.items() if s != "skipped"}


@settings(max_examples=100, deadline=None)
@given(plans(), st.integers(min_value=1, max_value=5), st.randoms(use_true_random=False))
def test_add_all_orders_like_add(
    plan: tuple[list[list[int]], list[list[int]], list[str], set[int]], limit: int, rnd: Any
) -> None:
    """A compiled plan added at once (`add_all`) keeps the same rules and ends in the same states."""
    deps, after, tools, failing = plan
    compiled = compile_plan(
        {
            "steps": [
                {
                    "id": f"n{i}",
                    "tool": tools[i],
                    "arguments": {},
                    "depends_on": [f"n{d}" for d in deps[i]],
                    "after": [f"n{a}" for a in after[i]],
                }
                for i in range(len(deps))
            ]
        },
        max_steps=len(deps),
    )
    sched = Scheduler(max_concurrency=limit, resources=RESOURCES)
    sched.add_all(compiled.steps, compiled.after)
    started = drive(sched, deps, after, tools, failing, rnd)
    assert {i: sched.state(f"n{i}") for i in range(len(deps))} == reference_states(deps, failing)
    _in_plan_order(started, tools)


@settings(max_examples=100, deadline=None)
@given(plans(), st.integers(min_value=1, max_value=5), st.randoms(use_true_random=False), st.booleans())
def test_shuffled_plans_never_stall(
    plan: tuple[list[list[int]], list[list[int]], list[str], set[int]], limit: int, rnd: Any, bulk: bool
) -> None:
    """Steps written out of order (a step using a later one's output): the resource chains close no cycle.

    Added at once they follow a topological order; added one by one (a streamed plan's late steps)
    a chain link that would close a cycle is dropped. Either way nothing stalls and the
    dependencies' rules hold.
    """
    deps, after, tools, failing = plan
    order = list(range(len(deps)))
    rnd.shuffle(order)
    sched = Scheduler(max_concurrency=limit, resources=RESOURCES)
    if bulk:
        compiled = compile_plan(
            {
                "steps": [
                    {
                        "id": f"n{i}",
                        "tool": tools[i],
                        "arguments": {},
                        "depends_on": [f"n{d}" for d in deps[i]],
                        "after": [f"n{a}" for a in after[i]],
                    }
                    for i in order
                ]
            },
            max_steps=len(deps),
        )
        sched.add_all(compiled.steps, compiled.after)
    else:
        for i in order:
            sched.add(f"n{i}", tools[i], [f"n{d}" for d in deps[i]], [f"n{a}" for a in after[i]])
    drive(sched, deps, after, tools, failing, rnd)
    assert {i: sched.state(f"n{i}") for i in range(len(deps))} == reference_states(deps, failing)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=12), st.sets(st.integers(0, 11)), st.randoms(use_true_random=False))
def test_max_concurrency_one_runs_in_plan_order(n: int, failing: set[int], rnd: Any) -> None:
    """``max_concurrency: 1``: one step at a time, in plan order (among the steps that run)."""
    sched = Scheduler(max_concurrency=1)
    for i in range(n):
        sched.add(f"n{i}", rnd.choice(TOOLS[:2]), [])
    started = drive(sched, [[] for _ in range(n)], [[] for _ in range(n)], ["a"] * n, failing, rnd)
    assert started == list(range(n))


def test_a_skipped_step_hands_its_place_on_the_resource_to_the_one_before() -> None:
    """b is skipped while a still runs: c (after b on the resource) waits for a, not for b."""
    sched = Scheduler(max_concurrency=5, resources={"fs": "fs"})
    sched.add("x", "other", [])
    sched.add("a", "fs", [])
    sched.add("b", "fs", ["x"])
    sched.add("c", "fs", [])
    assert sched.take_ready() == ["x", "a"]
    sched.finish("x", succeeded=False)
    assert sched.state("b") == "skipped"
    assert sched.take_ready() == []  # c waits for a
    sched.finish("a", succeeded=False)
    assert sched.take_ready() == ["c"]


def test_after_a_step_added_later() -> None:
    """A streamed step may name in 'after' a step not added yet: it waits for that one to end."""
    sched = Scheduler(resources={})
    sched.add("b", "t", [], ["a"])
    assert sched.take_ready() == []
    sched.add("a", "t", [])
    assert sched.take_ready() == ["a"]
    sched.finish("a", succeeded=False)
    assert sched.take_ready() == ["b"]
