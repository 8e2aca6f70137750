"""`dump_plan`: a plan written in a dialect reads back as the same plan, or is refused with a coded issue."""

from __future__ import annotations

import heapq
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolplan import PlanValidationError, UserError, execute_plan_sync, tool
from toolplan.plan import NOT_EXPRESSIBLE, Plan, dump_plan, parse_plan, validate_plan

TOOL_NAMES = ("alpha", "beta", "gamma")


def _echo(name: str) -> Any:
    def echo(x: Any = None, y: Any = None) -> dict[str, Any]:
        return {"tool": name, "n": len(name), "x": x, "y": y}

    echo.__name__ = name
    echo.__doc__ = f"Echo {name}."
    return tool(echo)


TOOLS = [_echo(name) for name in TOOL_NAMES]
ID_POOL = ("alpha", "beta", "gamma", "alpha_2", "beta_2", "alpha_3", "s1", "s2", "x", "cmp", "jinja_not")


@st.composite
def argument(draw: st.DrawFn, earlier: list[str]) -> Any:
    """A value that may refer to the ``earlier`` steps in every way a native plan can."""
    literals = st.one_of(
        st.integers(-5, 5),
        st.text("ab {}$.", max_size=6),
        st.just("$$ref:literal"),
        st.just("{{jinja.v}} stays text"),
        st.none(),
    )
    if not earlier:
        return draw(literals)
    ref = st.sampled_from(earlier)
    kinds = st.one_of(
        literals,
        ref.map(lambda i: f"$ref:{i}"),
        ref.map(lambda i: f"$ref:{i}.n"),
        ref.map(lambda i: f"$ref: {i}.tool"),
        ref.map(lambda i: f"{{{{{i}}}}}"),
        ref.map(lambda i: f"from {{{{ {i}.tool }}}} and {{{{{i}.n}}}}, $ref:{i} stays text"),
    )
    return draw(
        st.one_of(
            kinds,
            st.lists(kinds, max_size=2),
            st.dictionaries(st.sampled_from(("k", "l")), kinds, max_size=2),
        )
    )


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """A valid native plan over `TOOLS`: steps listed in any order, repeated tools, every kind of reference."""
    n = draw(st.integers(1, 7))
    ids = draw(st.lists(st.sampled_from(ID_POOL), min_size=n, max_size=n, unique=True))
    steps: list[dict[str, Any]] = []
    for i, sid in enumerate(ids):
        earlier = ids[:i]
        step: dict[str, Any] = {
            "id": sid,
            "tool": draw(st.sampled_from(TOOL_NAMES)),
            "arguments": {"x": draw(argument(earlier)), "y": draw(argument(earlier))},
        }
        after = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=2)) if earlier else []
        if after:
            step["depends_on"] = after
        steps.append(step)
    listed = draw(st.permutations(steps))
    data: dict[str, Any] = {"steps": listed}
    outputs = draw(st.lists(st.sampled_from(ids), unique=True, max_size=3))
    if outputs:
        data["output_steps"] = outputs
    data["failure_mode"] = draw(st.sampled_from(["fail_forward", "fail_fast"]))
    return parse_plan(data)


def chaining_names(plan: Plan) -> dict[str, str]:
    """The names the chaining dialect gives ``plan``'s steps: by tool, in order of execution, ties as listed."""
    deps = validate_plan(plan, TOOLS).raise_for_errors().deps
    position = {sid: i for i, sid in enumerate(plan.step_ids)}
    left = {sid: set(d) for sid, d in deps.items()}
    ready = [position[s] for s, d in left.items() if not d]
    heapq.heapify(ready)
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    while ready:
        step = plan.steps[heapq.heappop(ready)]
        k = counts[step.tool] = counts.get(step.tool, 0) + 1
        names[step.id] = step.tool if k == 1 else f"{step.tool}_{k}"
        for other, d in left.items():
            if step.id in d:
                d.discard(step.id)
                if not d:
                    heapq.heappush(ready, position[other])
    assert len(names) == len(plan.steps)
    return names


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_a_plan_in_chaining_reads_back_as_the_same_plan_and_runs_the_same(plan: Plan) -> None:
    data = dump_plan(plan, "chaining")
    assert json.loads(json.dumps(data)) == data  # JSON data
    report = validate_plan(data, TOOLS)
    assert report.errors == () and report.plan is not None and report.plan.dialect == "chaining"
    back = report.plan
    names = chaining_names(plan)
    assert sorted(back.step_ids) == sorted(names.values())
    before = validate_plan(plan, TOOLS).raise_for_errors()
    after = report.raise_for_errors()
    for s in plan.steps:
        assert back.step(names[s.id]).tool == s.tool
        assert after.deps[names[s.id]] == tuple(names[d] for d in before.deps[s.id])
    assert back.output_steps == tuple(names[o] for o in plan.output_steps)
    assert back.failure_mode == plan.failure_mode
    assert dump_plan(back, "chaining") == data  # a fixpoint: written again, the same text

    ran, ran_back = execute_plan_sync(plan, TOOLS), execute_plan_sync(back, TOOLS)
    assert ran.status == ran_back.status == "succeeded"
    assert {names[sid]: v for sid, v in ran.outputs.items()} == ran_back.outputs


@settings(max_examples=60, deadline=None)
@given(plans())
def test_native_and_batch_read_back_exactly(plan: Plan) -> None:
    assert parse_plan(dump_plan(plan)) == plan
    assert parse_plan(json.dumps(dump_plan(plan, "native"))) == plan
    deps = validate_plan(plan).raise_for_errors().deps
    all_out = set(plan.output_steps or plan.step_ids) == set(plan.step_ids)
    batchable = not any(deps.values()) and plan.failure_mode == "fail_forward" and all_out
    if not batchable:
        with pytest.raises(PlanValidationError) as refused:
            dump_plan(plan, "batch")
        assert {i.code for i in refused.value.issues} == {NOT_EXPRESSIBLE}
        return
    back = parse_plan(dump_plan(plan, "batch"))
    assert back.dialect == "batch" and [s.tool for s in back.steps] == [s.tool for s in plan.steps]
    ran, ran_back = execute_plan_sync(plan, TOOLS), execute_plan_sync(back, TOOLS)
    assert list(ran_back.outputs.values()) == [ran.outputs[sid] for sid in plan.step_ids]


def test_the_chaining_form_of_the_weather_plan() -> None:
    plan = parse_plan(
        {
            "steps": [
                {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:tokyo", "b": "{{london.temp}} C"}},
                {"id": "tokyo", "tool": "get_weather", "arguments": {"city": "Tokyo"}},
                {"id": "london", "tool": "get_weather", "arguments": {"city": "London"}, "depends_on": ["tokyo"]},
            ],
            "output_steps": ["cmp"],
            "goal": "compare",  # descriptive only: chaining has no place for it and it is left out
        }
    )
    assert dump_plan(plan, "chaining") == {
        "tools": [
            {"name": "get_weather", "parameters": {"city": "Tokyo"}},
            {"name": "get_weather", "parameters": {"city": "London"}, "dependsOn": ["get_weather"]},
            {
                "name": "compare",
                "parameters": {"a": "{{get_weather}}", "b": "{{get_weather_2.temp}} C"},
                "dependsOn": ["get_weather", "get_weather_2"],
            },
        ],
        "executionOrder": ["get_weather", "get_weather", "compare"],
        "output_steps": ["compare"],
        "failure_mode": "fail_forward",
    }


def test_a_chaining_plan_as_written_by_hand_is_written_back_the_same() -> None:
    written = {
        "tools": [
            {"name": "search", "parameters": {"query": "python"}},
            {"name": "search", "parameters": {"query": "{{search}} and rust"}, "dependsOn": ["search"]},
        ],
        "executionOrder": ["search", "search"],
    }
    assert dump_plan(parse_plan(written), "chaining") == written  # fail_fast, chaining's default, is not written


def _refused(plan: Any, dialect: Any = "chaining") -> list[tuple[str, str | None, str]]:
    with pytest.raises(PlanValidationError) as refused:
        dump_plan(parse_plan(plan), dialect)
    return [(i.code, i.step, i.message) for i in refused.value.issues]


def test_steps_whose_chaining_names_collide_are_refused() -> None:
    # 'alpha' called twice makes 'alpha_2', which is also the name of the step calling tool 'alpha_2'.
    plan = {
        "steps": [
            {"id": "a", "tool": "alpha", "arguments": {}},
            {"id": "b", "tool": "alpha_2", "arguments": {}},
            {"id": "c", "tool": "alpha", "arguments": {}},
        ]
    }
    [(code, step, message)] = _refused(plan)
    assert code == NOT_EXPRESSIBLE and step == "c"
    assert "steps 'b' and 'c' would both be named 'alpha_2'" in message


def test_text_that_would_become_a_reference_is_refused() -> None:
    plan = {
        "steps": [
            {"id": "s1", "tool": "search", "arguments": {"q": "x"}},
            {"id": "s2", "tool": "render", "arguments": {"template": "Hello {{search.name}}"}},
        ]
    }
    [(code, step, message)] = _refused(plan)
    assert code == NOT_EXPRESSIBLE and step == "s2" and "'{{search.name}}' is kept as text" in message


def test_what_changes_how_a_plan_runs_is_refused_outside_native() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "alpha", "arguments": {}, "timeout": 3, "retry": 1},
            {"id": "b", "tool": "beta", "arguments": {}, "fallback": {"tool": "gamma"}},
        ],
        "budget": {"max_tool_calls": 4},
        "max_concurrency": 2,
        "policy": "cheap",
    }
    for dialect in ("chaining", "batch"):
        found = {(step, message.split("'")[-2]) for _, step, message in _refused(plan, dialect)}
        assert found == {
            (None, "budget"),
            (None, "policy"),
            (None, "max_concurrency"),
            ("a", "timeout"),
            ("a", "retry"),
            ("b", "fallback"),
        }
    native = dump_plan(parse_plan(plan))
    assert native["budget"] == {"max_tool_calls": 4} and native["policy"] == "cheap"
    assert parse_plan(native) == parse_plan(plan)


def test_a_tool_name_that_is_no_id_cannot_be_referred_to_in_chaining() -> None:
    alone = {"steps": [{"id": "a", "tool": "web.search", "arguments": {"q": "x"}}]}
    assert dump_plan(parse_plan(alone), "chaining")["tools"][0]["name"] == "web.search"
    used = {
        "steps": [
            {"id": "a", "tool": "web.search", "arguments": {"q": "x"}},
            {"id": "b", "tool": "summarise", "arguments": {"text": "$ref:a.hits"}},
        ]
    }
    [(code, step, message)] = _refused(used)
    assert code == NOT_EXPRESSIBLE and step == "a" and "'web.search', which is not an id" in message


def test_a_reference_path_with_a_brace_keeps_the_ref_form() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "alpha", "arguments": {}},
            {"id": "b", "tool": "beta", "arguments": {"x": "$ref:a.odd}key"}},
        ]
    }
    data = dump_plan(parse_plan(plan), "chaining")
    assert data["tools"][1]["parameters"] == {"x": "$ref:alpha.odd}key"}


def test_an_invalid_plan_is_refused_with_validations_issues() -> None:
    cycle = {
        "steps": [
            {"id": "a", "tool": "alpha", "arguments": {"x": "$ref:b"}},
            {"id": "b", "tool": "beta", "arguments": {"x": "$ref:a"}},
        ]
    }
    assert {code for code, _, _ in _refused(cycle)} == {"cycle"}
    with pytest.raises(UserError, match="Unknown plan dialect 'yaml'"):
        dump_plan(parse_plan(cycle), "yaml")  # type: ignore[arg-type]
