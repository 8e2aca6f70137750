"""The resume rule is a pure function of the stored step rows: property-tested."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolplan.execute import StoredStep
from toolplan.execute._journal import decide_resume

STATUSES = [
    "pending",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "skipped",
    "not_run",
    "unknown_outcome",
]
TOOLS = ["read", "idem", "pay", "mail"]
SAFE = {"read", "idem"}

rows = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3),
    st.tuples(st.sampled_from(STATUSES), st.sampled_from(TOOLS), st.integers(0, 5), st.booleans()),
    max_size=30,
)


def _steps(raw: dict[str, tuple[str, str, int, bool]]) -> dict[str, StoredStep]:
    return {
        sid: StoredStep(id=sid, status=status, call_tool=tool, attempt=attempt, fallback=fb)
        for sid, (status, tool, attempt, fb) in raw.items()
    }


@given(rows, st.booleans())
def test_the_resume_rule(raw: dict[str, tuple[str, str, int, bool]], rerun_unknown: bool) -> None:
    steps = _steps(raw)
    decisions = decide_resume(steps, lambda tool: tool in SAFE, rerun_unknown=rerun_unknown)
    assert set(decisions) == set(steps)
    for sid, step in steps.items():
        d = decisions[sid]
        if step.status in ("succeeded", "failed", "timed_out"):
            assert d == "reuse"  # an outcome that committed is never run again
        elif step.status == "unknown_outcome":  # run again only when the caller says it checked
            assert d == ("rerun" if rerun_unknown else "reuse")
        elif step.status in ("running", "cancelled"):  # the call may have happened
            if step.call_tool in SAFE or rerun_unknown:
                assert d == "rerun"
            else:
                assert d == "unknown"  # never called twice without being asked
        else:  # it never called its tool
            assert d == "run"
    # The same rows always give the same decisions, whatever their order.
    again = decide_resume(dict(reversed(list(steps.items()))), lambda tool: tool in SAFE, rerun_unknown=rerun_unknown)
    assert again == decisions


@given(rows)
def test_a_non_repeatable_call_in_flight_is_never_rerun_unasked(raw: dict[str, tuple[str, str, int, bool]]) -> None:
    decisions = decide_resume(_steps(raw), lambda tool: tool in SAFE)
    for sid, (status, tool, _a, _f) in raw.items():
        if tool not in SAFE:
            assert decisions[sid] != "rerun"
        if status == "unknown_outcome":
            assert decisions[sid] == "reuse"


def test_calls_made_counts_every_call_begun_by_tool() -> None:
    from toolplan.execute._journal import calls_made
    from toolplan.plan import parse_plan

    plan = parse_plan(
        {
            "steps": [
                {"id": "a", "tool": "read"},
                {"id": "b", "tool": "pay", "retry": 2, "fallback": {"tool": "mail", "arguments": {}}},
                {"id": "c", "tool": "pay"},
                {"id": "d", "tool": "read"},
            ]
        }
    )
    steps = {
        "a": StoredStep(id="a", status="succeeded", call_tool="read", attempt=1),
        "b": StoredStep(id="b", status="running", call_tool="mail", attempt=3, fallback=True),  # 2 pays, 1 mail
        "c": StoredStep(id="c", status="not_run", call_tool="pay", attempt=0),  # refused: no call
    }
    assert sorted(calls_made(steps, plan)) == [("mail", 1), ("pay", 2), ("read", 1)]
