"""Alternatives: registry groups and one_of steps, validated against every member, chosen at dispatch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolplan import Budget, ToolRegistry, UserError, execute_plan, execute_plan_sync, tool, validate_plan
from toolplan.execute import PlanEvent, ToolChosen
from toolplan.policy import ToolPolicy
from toolplan.store import open_store


@tool(read_only=True)
def bing(query: str) -> str:
    """Search with Bing."""
    return f"bing:{query}"


@tool(read_only=True, general=True, cost=0.5)
def ddg(query: str) -> str:
    """Search with DuckDuckGo."""
    return f"ddg:{query}"


@tool(read_only=True, cost=3.0)
def premium(query: str, *, depth: int = 1) -> str:
    """A costly search."""
    return f"premium:{query}"


@tool
def write_note(query: str) -> str:
    """Writes somewhere."""
    return "written"


@tool(destructive=True)
def wipe(query: str) -> str:
    """Deletes things."""
    return "gone"


@tool(read_only=True)
def count(n: int) -> int:
    """Takes an integer."""
    return n


def registry() -> ToolRegistry:
    r = ToolRegistry([bing, ddg, premium, write_note, wipe, count])
    r.add_group("search", ["bing", "ddg"])
    return r


def test_a_group_is_one_tool_for_the_model_and_hides_its_members() -> None:
    r = registry()
    names = [d.name for d in r.definitions()]
    assert "search" in names and "bing" not in names and "ddg" not in names
    group = r.group("search")
    assert group is not None and group.general == "ddg" and group.default == "ddg"
    definition = r.definition("search")
    assert definition.parameters_json_schema == r.definition("ddg").parameters_json_schema
    assert definition.annotations.read_only and definition.annotations.cost == 1.0
    assert "bing" in r and "search" in r.names  # members stay callable by name


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (["bing", "write_note"], "share a safety class"),
        (["bing", "wipe"], "destructive"),
        (["bing"], "at least two"),
        (["bing", "nope"], "'nope', which is not registered"),
        (["bing", "bing"], "more than once"),
    ],
)
def test_bad_groups_are_refused(members: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        registry().add_group("other", members)


def test_two_general_members_are_refused() -> None:
    @tool(read_only=True, general=True)
    def other(query: str) -> str:
        return query

    r = ToolRegistry([ddg, other])
    with pytest.raises(UserError, match="At most one alternative may be marked general"):
        r.add_group("g", ["ddg", "other"])


def step(tool_: Any, arguments: dict[str, Any] | None = None, sid: str = "s") -> dict[str, Any]:
    return {"id": sid, "tool": tool_, "arguments": arguments if arguments is not None else {"query": "q"}}


def codes(plan: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.code, e.message) for e in validate_plan(plan, registry()).errors]


def test_one_of_is_validated_against_every_alternative() -> None:
    assert codes({"steps": [step({"one_of": ["bing", "premium"]})]}) == []
    bad = codes({"steps": [step({"one_of": ["bing", "count"]})]})
    assert [c for c, _ in bad] == ["invalid_arguments"] * 2
    assert "for alternative 'count'" in bad[0][1]
    assert codes({"steps": [step({"one_of": ["bing", "write_note"]})]})[0][0] == "invalid_alternatives"
    assert codes({"steps": [step({"one_of": ["bing", "wipe"]})]})[0][0] == "invalid_alternatives"
    assert codes({"steps": [step({"one_of": ["bing"]})]})[0][0] == "invalid_alternatives"
    assert codes({"steps": [step({"one_of": ["bing", "nope"]})]})[0][0] == "unknown_tool"
    assert codes({"steps": [step({"one_of": ["bing", "execute_code"]})]})[0][0] == "meta_tool"
    assert codes({"steps": [step({"oneof": ["bing", "ddg"]})]})[0][0] == "invalid_field"
    assert codes({"steps": [step("search", {"depth": 2})]})[0][0] == "invalid_arguments"


def test_a_one_of_step_round_trips_through_to_dict() -> None:
    plan = validate_plan({"steps": [step({"one_of": ["ddg", "bing"]})]}, registry()).plan
    assert plan is not None
    assert plan.steps[0].tool == "bing|ddg" and plan.steps[0].one_of == ("ddg", "bing")
    assert plan.to_dict()["steps"][0]["tool"] == {"one_of": ["ddg", "bing"]}


async def test_without_a_policy_the_general_member_runs_and_the_choice_is_recorded() -> None:
    events: list[PlanEvent] = []
    result = await execute_plan({"steps": [step("search")]}, registry(), on_event=events.append)
    assert result.steps["s"].tool == "ddg" and result.steps["s"].output == "ddg:q"
    chosen = [e for e in events if isinstance(e, ToolChosen)]
    assert len(chosen) == 1 and chosen[0].choice == result.choices[0]
    assert result.choices[0].to_dict() == {
        "group": "search",
        "chosen": "ddg",
        "strategy": "fixed",
        "probability": 1.0,
        "candidates": ["bing", "ddg"],
        "step": "s",
        "general": "ddg",
    }
    assert result.to_dict()["choices"][0]["chosen"] == "ddg"


async def test_a_plan_names_its_strategy_and_the_policy_learns() -> None:
    policy = ToolPolicy("thompson", seed=1)
    plan = {"policy": "greedy", "steps": [step({"one_of": ["bing", "premium"]}, sid=f"s{i}") for i in range(4)]}
    result = await execute_plan(plan, registry(), policy=policy, max_concurrency=1)
    assert {c.strategy for c in result.choices} == {"greedy"}
    assert [c.chosen for c in result.choices][:2] == ["bing", "premium"]  # each untried one first
    stats = policy.stats("bing|premium")
    assert sum(s.n for s in stats.values()) == pytest.approx(4, abs=1e-3)


async def test_the_budget_narrows_the_candidates_and_a_tight_budget_prefers_the_general_tool() -> None:
    policy = ToolPolicy("ucb1", seed=0)
    plan = {"steps": [step({"one_of": ["premium", "ddg"]}, sid="a")]}
    result = await execute_plan(plan, registry(), policy=policy, budget=Budget(max_cost=1.0))
    assert result.choices[0].candidates == ("ddg",)  # premium costs 3
    assert result.steps["a"].tool == "ddg"
    plan = {"steps": [step({"one_of": ["bing", "ddg"]}, sid=f"s{i}") for i in range(5)]}
    result = await execute_plan(plan, registry(), policy=policy, budget=Budget(max_tool_calls=5), max_concurrency=1)
    last = result.choices[-1]
    assert (last.chosen, last.strategy) == ("ddg", "prefer_general_methods") and "budget is tight" in last.reason


async def test_a_failing_member_is_observed_as_a_failure_and_retries_keep_the_member() -> None:
    calls: list[str] = []

    @tool(read_only=True, idempotent=True, retry=1)
    def broken(query: str) -> str:
        calls.append("broken")
        raise RuntimeError("down")

    @tool(read_only=True)
    def fine(query: str) -> str:
        calls.append("fine")
        return "ok"

    r = ToolRegistry([broken, fine])
    r.add_group("g", ["broken", "fine"])
    policy = ToolPolicy("greedy", seed=0)
    result = await execute_plan({"steps": [step("g")]}, r, policy=policy, retry_delay=0)
    assert result.steps["s"].status == "failed" and result.steps["s"].tool == "broken"
    assert calls == ["broken", "broken"] and result.steps["s"].attempts == 2
    assert policy.stats("g")["broken"].success_rate == 0.0


async def test_a_durable_run_records_each_choice_as_an_event(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        result = await execute_plan({"steps": [step("search")]}, registry(), store=store)
        events = await store.events(result.run_id)
        info = await store.get_run(result.run_id)
    chosen = [e for e in events if e.type == "tool_chosen"]
    assert [e.payload["chosen"] for e in chosen] == ["ddg"] and chosen[0].step_id == "s"
    assert [e.type for e in events].index("tool_chosen") < [e.type for e in events].index("step_started")
    assert info.result.steps["s"].tool == "ddg"


def fallback_plan(tool_: str, fallback: str = "search", sid: str = "s") -> dict[str, Any]:
    return {
        "id": sid,
        "tool": tool_,
        "arguments": {"query": "q"},
        "fallback": {"tool": fallback, "arguments": {"query": "q"}},
    }


async def test_a_group_as_a_fallback_is_chosen_like_a_step_and_recorded() -> None:
    @tool
    def fails(query: str) -> str:
        raise RuntimeError("no")

    r = registry()
    r.add(fails)
    events: list[PlanEvent] = []
    result = await execute_plan({"steps": [fallback_plan("fails")]}, r, on_event=events.append)
    assert result.steps["s"].ok and result.steps["s"].output == "ddg:q" and result.steps["s"].used_fallback
    assert [(c.group, c.chosen, c.strategy, c.step_id) for c in result.choices] == [("search", "ddg", "fixed", "s")]
    assert [e.choice for e in events if isinstance(e, ToolChosen)] == list(result.choices)


async def test_a_fallback_to_a_group_asks_the_policy_and_it_learns_from_the_call() -> None:
    @tool
    def fails(query: str) -> str:
        raise RuntimeError("no")

    @tool(read_only=True)
    def broken_search(query: str) -> str:
        raise RuntimeError("search is down")

    r = ToolRegistry([fails, broken_search, bing])
    r.add_group("search", ["broken_search", "bing"])
    policy = ToolPolicy("greedy", seed=0)
    plan = {"steps": [fallback_plan("fails", sid=f"s{i}") for i in range(3)]}
    result = await execute_plan(plan, r, policy=policy, max_concurrency=1)
    chosen = [c.chosen for c in result.choices]
    assert chosen[:2] == ["broken_search", "bing"] and chosen[2] == "bing"  # each untried first, then the best
    assert [result.steps[f"s{i}"].ok for i in range(3)] == [False, True, True]
    assert "search is down" in (result.steps["s0"].error.message if result.steps["s0"].error else "")
    stats = policy.stats("search")
    assert stats["broken_search"].success_rate == 0.0 and stats["bing"].success_rate == 1.0


async def test_a_fallback_to_its_own_group_leaves_out_the_member_that_failed() -> None:
    calls: list[str] = []

    @tool(read_only=True, general=True)
    def first(query: str) -> str:
        calls.append("first")
        raise RuntimeError("down")

    @tool(read_only=True)
    def second(query: str) -> str:
        calls.append("second")
        return "second:" + query

    r = ToolRegistry([first, second])
    r.add_group("g", ["first", "second"])
    result = await execute_plan({"steps": [fallback_plan("first", fallback="g")]}, r)
    assert calls == ["first", "second"] and result.steps["s"].output == "second:q"
    assert result.choices[0].candidates == ("second",) and result.choices[0].general is None


async def test_a_durable_run_counts_the_fallback_member_it_called(tmp_path: Path) -> None:
    @tool
    def fails(query: str) -> str:
        raise RuntimeError("no")

    r = registry()
    r.add(fails)
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        result = await execute_plan({"steps": [fallback_plan("fails")]}, r, store=store)
        events = await store.events(result.run_id)
    assert result.steps["s"].ok
    assert [e.payload["chosen"] for e in events if e.type == "tool_chosen"] == ["ddg"]
    from toolplan.execute._journal import StoredStep, calls_made
    from toolplan.plan import parse_plan

    plan = parse_plan({"steps": [fallback_plan("fails")]})
    row = StoredStep(id="s", status="running", attempt=2, call_tool="ddg", fallback=True)
    assert sorted(calls_made({"s": row}, plan)) == [("ddg", 1), ("fails", 1)]  # a resumed budget charges the member


def test_the_model_facing_plan_schema_offers_one_of_when_the_registry_has_alternatives() -> None:
    from toolplan.agent import PlanTool

    @tool(read_only=True)
    def bing(query: str) -> str:
        """Bing."""
        return "b"

    @tool(read_only=True)
    def ddg(query: str) -> str:
        """DuckDuckGo."""
        return "d"

    plain = ToolRegistry([bing, ddg])
    step = PlanTool(plain).definitions()[0].parameters_json_schema["properties"]["steps"]["items"]
    assert step["properties"]["tool"]["enum"] == ["bing", "ddg"]  # no alternatives: a name, as before
    grouped = ToolRegistry([bing, ddg])
    grouped.add_group("search", ["bing", "ddg"])
    step = PlanTool(grouped).definitions()[0].parameters_json_schema["properties"]["steps"]["items"]
    name, alternatives = step["properties"]["tool"]["anyOf"]
    assert alternatives["required"] == ["one_of"] and alternatives["properties"]["one_of"]["items"] == name
    plan = {"steps": [{"id": "s", "tool": {"one_of": ["bing", "ddg"]}, "arguments": {"query": "q"}}]}
    assert execute_plan_sync(plan, grouped).steps["s"].output in {"b", "d"}
