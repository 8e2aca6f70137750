"""`encode`'s one pass writes the text the general path writes: stored plans keep their hashes."""

from __future__ import annotations

import enum
import math
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolplan.execute import RunLimits
from toolplan.plan import Budget, Plan, Step, parse_plan
from toolplan.plan._ir import Fallback
from toolplan.store._codec import decode, encode, encode_general


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    pass


TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", '"', "\\", "\n", "é", "€", "𝄞", "$"]))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(4400, 5000).map(lambda digits: -(10**digits)),  # too long to print
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(-0.0),
    TEXT,
    st.just(Level.LOW),
    TEXT.map(Name),
    st.just({1, 2}),  # not JSON: written as its str()
    st.just(Budget(max_tool_calls=2)),  # IR inside data: its str() too
)


def _dicts(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(TEXT, st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False))
    return st.one_of(
        st.dictionaries(TEXT, children, max_size=4),
        st.dictionaries(keys, children, max_size=3),  # keys that are not str (mixed: not sortable)
        st.dictionaries(TEXT, children, max_size=3).map(types.MappingProxyType),
    )


DATA = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.lists(children, max_size=3).map(tuple), _dicts(children)
    ),
    max_leaves=12,
)
MAYBE_TEXT = st.one_of(st.none(), TEXT, TEXT.map(Name))


@st.composite
def fallbacks(draw: st.DrawFn) -> Fallback | None:
    if draw(st.booleans()):
        return None
    return Fallback(tool=draw(TEXT), arguments=draw(st.one_of(_dicts(DATA), DATA)))


@st.composite
def steps(draw: st.DrawFn) -> Step:
    return Step(
        id=draw(TEXT),
        tool=draw(st.one_of(TEXT, TEXT.map(Name))),
        arguments=draw(st.one_of(_dicts(DATA), DATA)),
        depends_on=draw(st.one_of(st.lists(TEXT, max_size=3).map(tuple), DATA)),
        timeout=draw(st.one_of(st.none(), st.floats(), st.integers(), DATA)),
        retry=draw(st.one_of(st.none(), st.integers(-2, 5), st.just(Level.LOW))),
        fallback=draw(fallbacks()),
        rationale=draw(MAYBE_TEXT),
        expected_outcome=draw(MAYBE_TEXT),
        one_of=draw(st.lists(TEXT, max_size=3).map(tuple)),
    )


@st.composite
def budgets(draw: st.DrawFn) -> Budget | None:
    if draw(st.booleans()):
        return None
    return Budget(
        max_tool_calls=draw(st.one_of(st.none(), st.integers(0, 9))),
        max_tool_calls_per_tool=draw(st.one_of(st.dictionaries(TEXT, st.integers(0, 9), max_size=3), _dicts(DATA))),
        max_cost=draw(st.one_of(st.none(), st.floats())),
        max_latency=draw(st.one_of(st.none(), st.floats(0, 100))),
        warn_at=draw(st.one_of(st.none(), st.floats(0.1, 1))),
    )


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    return Plan(
        steps=tuple(draw(st.lists(steps(), max_size=4))),
        output_steps=draw(st.lists(TEXT, max_size=3).map(tuple)),
        goal=draw(MAYBE_TEXT),
        budget=draw(budgets()),
        policy=draw(MAYBE_TEXT),
        max_concurrency=draw(st.one_of(st.none(), st.integers(1, 64))),
        failure_mode=draw(st.sampled_from(["fail_forward", "fail_fast"])),
        dialect=draw(st.sampled_from(["native", "chaining", "batch"])),
        missing_field=draw(st.sampled_from(["null", "keep"])),
    )


def _same(value: Any) -> None:
    try:
        expected: Any = encode_general(value)
    except Exception as exc:  # the general path refuses it: so must the one pass, alike
        with pytest.raises(type(exc)):
            encode(value)
        return
    assert encode(value) == expected


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plans())
def test_a_plan_encodes_as_the_general_path_writes_it(plan: Plan) -> None:
    _same(plan)


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        RunLimits,
        max_concurrency=st.integers(1, 64),
        tool_concurrency=st.dictionaries(TEXT, st.integers(1, 9), max_size=3),
        step_timeout=st.one_of(st.none(), st.floats(0.1, 100)),
        deadline=st.one_of(st.none(), st.floats(0.1, 100)),
        budget=st.builds(
            Budget,
            max_tool_calls=st.one_of(st.none(), st.integers(0, 9)),
            max_tool_calls_per_tool=st.dictionaries(TEXT, st.integers(0, 9), max_size=3),
            max_cost=st.one_of(st.none(), st.floats(0.5, 100)),
            max_latency=st.one_of(st.none(), st.floats(0.5, 100)),
        ),
        failure_mode=st.sampled_from(["fail_forward", "fail_fast"]),
    )
)
def test_limits_encode_as_the_general_path_writes_them(limits: RunLimits) -> None:
    _same(limits)


def test_a_usual_plan_takes_the_one_pass_and_reads_back() -> None:
    plan = parse_plan(
        {
            "steps": [
                {"id": "a", "tool": "search", "arguments": {"q": "café ☕", "n": 3, "x": 1.5, "ok": True}},
                {"id": "b", "tool": "fetch", "arguments": {"url": "$ref:a.url", "z": None, "a": [1, {"k": "v"}]}},
            ],
            "budget": {"max_tool_calls": 4},
        }
    )
    text = encode(plan)
    assert text == encode_general(plan)
    assert decode(text) == plan


def test_data_that_contains_itself_or_nests_deep_is_written_as_before() -> None:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    deep: Any = "x"
    for _ in range(3000):
        deep = [deep]
    for arguments in (loop, {"deep": deep}, {"n": math.nan}, {"n": 10**5000}):
        _same(Plan(steps=(Step(id="s", tool="t", arguments=arguments),)))


# -- a run's records ---------------------------------------------------------------------------------


async def test_a_stored_run_reads_back_as_the_result_the_run_returned(store_url: str) -> None:
    from toolplan import execute_plan, tool
    from toolplan.store import open_store

    @tool
    def echo(text: str) -> dict[str, str]:
        """Echo."""
        return {"text": text}

    @tool
    def broken(text: str) -> str:
        """Fails."""
        raise RuntimeError("down")

    plan = {
        "steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "{{ jinja.name }}"}},  # a warning, not an error
            {
                "id": "b",
                "tool": "broken",
                "arguments": {"text": "$ref:a.text"},
                "fallback": {"tool": "echo", "arguments": {"text": "b"}},
            },
            {"id": "c", "tool": "broken", "arguments": {"text": "x"}},
            {"id": "d", "tool": "echo", "arguments": {"text": "$ref:c"}},
        ],
        "output_steps": ["b", "d"],
    }
    async with open_store(store_url) as store:
        result = await execute_plan(plan, [echo, broken], store=store)
        info = await store.get_run(result.run_id)
    assert result.warnings and {w.severity for w in result.warnings} == {"warning"}
    assert result.steps["b"].used_fallback and result.steps["b"].arguments is not None
    assert (result.steps["c"].status, result.steps["d"].status) == ("failed", "skipped")
    assert info.result == result  # every field of every step, and of the plan
    assert info.result.to_dict() == result.to_dict()
