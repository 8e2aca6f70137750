"""ComplexFuncBench and NESTFUL gold call sequences, replayed through `execute_plan` (slow: a 14 MB download once).

Every call must get exactly its gold arguments, references resolved (see `replay_support`); a
control that points the references elsewhere must fail every sequence that has one.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from replay_support import Dataset, Outcome, data_dir, load, replay

pytestmark = pytest.mark.slow

NESTFUL = ("executable", "non-executable-glaive", "non-executable-sgd")
#: Why a NESTFUL sequence cannot be a plan (each is a fault or a form no plan dialect has; arithmetic
#: over references is a computed argument, or text for a parameter that takes a formula as text, and
#: stays here only when it does not parse):
NOT_EXPRESSIBLE = ("arithmetic over references", "a reference without its closing '$'", "a reference to 'var")


@pytest.fixture(scope="session")
def data() -> Path:
    try:
        return data_dir()
    except RuntimeError as exc:
        pytest.skip(f"the nestful-wrapper data is not available: {exc}")


@pytest.fixture(scope="session")
def complexfuncbench(data: Path) -> Dataset:
    return load(data, "complexfuncbench")


def _report(name: str, outcome: Outcome, seconds: float) -> str:
    reasons = Counter(r.split(":")[0] for r in outcome.not_expressible.values())
    return (
        f"{name}: {outcome.replayed} replayed exactly, {len(outcome.refused)} refused (gold breaks the schema), "
        f"{len(outcome.ran_misfit)} ran with gold arguments that break the schema through a reference, "
        f"{len(outcome.not_expressible)} not expressible {dict(reasons)}, {len(outcome.mismatched)} mismatched; "
        f"{outcome.steps} steps, {outcome.refs} references, {seconds:.1f}s"
    )


async def test_complexfuncbench_replays_every_sequence(complexfuncbench: Dataset) -> None:
    start = time.perf_counter()
    outcome = await replay(complexfuncbench)
    print(_report("ComplexFuncBench", outcome, time.perf_counter() - start))
    assert outcome.mismatched == []
    assert outcome.not_expressible == {}
    # Two gold sequences pass a value through a reference that breaks the called function's own
    # schema (a number where the spec says string, a numeric string where it says number): arguments
    # are checked when the step runs, so those steps are refused and their tools never called.
    assert outcome.ran_misfit == {}
    assert set(outcome.refused) == {188, 399}
    assert outcome.replayed == 998
    assert outcome.steps >= 5058 and outcome.refs >= 3058


async def test_complexfuncbench_control_with_broken_references_fails(complexfuncbench: Dataset) -> None:
    outcome = await replay(complexfuncbench, wrong_target=True)
    assert outcome.replayed == 0
    # Every sequence with a reference fails: a wrong value reaches no tool (refused when its step runs,
    # for a wrong type) or reaches it and differs from the gold arguments.
    assert len(outcome.mismatched) + len(outcome.refused) == 750
    assert set(outcome.not_expressible.values()) == {"no reference to break"}


@pytest.mark.parametrize("name", NESTFUL)
async def test_nestful_replays_every_expressible_sequence(data: Path, name: str) -> None:
    dataset = load(data, name)
    start = time.perf_counter()
    outcome = await replay(dataset, made_up=True)
    print(_report(f"NESTFUL {name}", outcome, time.perf_counter() - start))
    assert outcome.mismatched == []
    assert all(r.startswith(NOT_EXPRESSIBLE) for r in outcome.not_expressible.values())
    # A sequence whose gold arguments break a function's schema is refused (a literal value) or
    # runs with exactly its gold arguments (a value through a reference: a list literal holding
    # one, or a made-up value that one call reads as a string and another as a number).
    ran = outcome.replayed + len(outcome.ran_misfit)
    assert ran + len(outcome.refused) + len(outcome.not_expressible) == len(dataset.sequences)
    control = await replay(dataset, made_up=True, wrong_target=True)
    assert control.replayed == 0
    assert len(control.mismatched) + len(control.refused) + len(control.ran_misfit) == ran + len(outcome.refused)
