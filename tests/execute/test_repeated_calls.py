"""Repeated calls: identical calls of read_only + idempotent tools in a run are made once; a cache across runs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from toolplan import Budget, ResultCache, RunLimits, ToolError, UncacheableToolError, execute_plan, tool
from toolplan.agent import Agent, CodeTool
from toolplan.execute import CacheHit, PlanEvent, StepResult, StepStarted, ToolInvoker, execute_plan_stream
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import ScriptedModel
from toolplan.tools import ToolRegistry

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()


@tool(read_only=True, idempotent=True)
async def weather(city: str, unit: str = "C") -> dict[str, Any]:
    """Weather in a city (read-only)."""
    CALLS[city] += 1
    await asyncio.sleep(0)
    return {"city": city, "temp": len(city), "tags": ["x"]}


@tool(read_only=True)
def lookup(key: str) -> str:
    """Read-only, not idempotent."""
    CALLS[key] += 1
    return key.upper()


@tool(idempotent=True)
def put(key: str) -> str:
    """Idempotent, not read-only."""
    CALLS[key] += 1
    return key


@tool(read_only=True, idempotent=True, share_calls=False)
def now(label: str) -> int:
    """Read-only and idempotent, but each call must be made."""
    CALLS[label] += 1
    return CALLS[label]


@tool(read_only=True, idempotent=True)
def missing(city: str) -> str:
    """Always fails (a business error)."""
    CALLS[city] += 1
    raise ToolError(f"no city {city!r}")


@tool(read_only=True, idempotent=True)
def backup(city: str) -> str:
    """A fallback."""
    return f"backup for {city}"


TOOLS = [weather, lookup, put, now, missing, backup]


def step(sid: str, tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": sid, "tool": tool_name, "arguments": arguments}


async def test_two_steps_with_the_same_call_make_one_and_both_records_say_so() -> None:
    steps = [step("a", "weather", city="Oslo"), step("b", "weather", city="Oslo"), step("c", "weather", city="Rome")]
    plan = {"steps": steps}
    result = await execute_plan(plan, TOOLS)
    assert result.ok and CALLS == {"Oslo": 1, "Rome": 1}
    a, b, c = result.steps["a"], result.steps["b"], result.steps["c"]
    assert a.shared_with == ("b",) and b.shared_with == ("a",) and c.shared_with == ()
    assert (a.attempts, b.attempts, c.attempts) == (1, 0, 1)
    assert a.output == b.output == {"city": "Oslo", "temp": 4, "tags": ["x"]}
    assert a.output is not b.output and a.output["tags"] is not b.output["tags"]  # each its own copy
    assert b.to_dict()["shared_with"] == ["a"] and StepResult.from_dict(b.to_dict()) == b


async def test_canonical_arguments_key_order_does_not_matter() -> None:
    plan = {
        "steps": [
            {"id": "a", "tool": "weather", "arguments": {"city": "Oslo", "unit": "C"}},
            {"id": "b", "tool": "weather", "arguments": '{"unit": "C", "city": "Oslo"}'},
            {"id": "c", "tool": "weather", "arguments": {"city": "Oslo", "unit": "F"}},
        ]
    }
    result = await execute_plan(plan, TOOLS)
    assert CALLS["Oslo"] == 2
    assert result.steps["a"].shared_with == ("b",) and result.steps["c"].shared_with == ()


async def test_a_step_arriving_after_the_call_ended_reuses_it_and_both_records_name_each_other() -> None:
    plan = {
        "steps": [
            step("a", "weather", city="Oslo"),
            step("gate", "lookup", key="k"),
            {**step("b", "weather", city="Oslo"), "depends_on": ["a", "gate"]},
            {**step("c", "weather", city="$ref:a.city"), "depends_on": ["b"]},
        ]
    }
    result = await execute_plan(plan, TOOLS)
    assert result.ok and CALLS["Oslo"] == 1
    assert set(result.steps["a"].shared_with) == {"b", "c"}
    assert result.steps["b"].shared_with == ("a",) and result.steps["c"].shared_with == ("a",)


async def test_a_failure_is_shared_and_each_step_keeps_its_own_fallback() -> None:
    plan = {
        "steps": [
            step("a", "missing", city="Atlantis"),
            {
                **step("b", "missing", city="Atlantis"),
                "fallback": {"tool": "backup", "arguments": {"city": "Atlantis"}},
            },
        ]
    }
    result = await execute_plan(plan, TOOLS)
    assert CALLS["Atlantis"] == 1
    a, b = result.steps["a"], result.steps["b"]
    assert a.status == "failed" and a.error is not None and "no city 'Atlantis'" in a.error.message
    assert b.ok and b.used_fallback and b.output == "backup for Atlantis"
    assert a.shared_with == ("b",) and b.shared_with == ("a",)


@pytest.mark.parametrize("tool_name", ["lookup", "put", "now"])
async def test_tools_not_both_read_only_and_idempotent_or_opted_out_are_called_each_time(tool_name: str) -> None:
    plan = {"steps": [step("a", tool_name, **{"key" if tool_name != "now" else "label": "k"}) for _ in range(1)]}
    plan["steps"].append({**plan["steps"][0], "id": "b"})
    result = await execute_plan(plan, TOOLS)
    assert CALLS["k"] == 2
    assert all(r.shared_with == () and r.attempts == 1 for r in result.steps.values())


async def test_a_plan_or_the_caller_can_turn_sharing_off() -> None:
    steps = [step("a", "weather", city="Oslo"), step("b", "weather", city="Oslo")]
    await execute_plan({"steps": steps, "share_calls": False}, TOOLS)
    assert CALLS["Oslo"] == 2
    await execute_plan({"steps": steps}, TOOLS, share_calls=False)
    await execute_plan({"steps": steps}, TOOLS, limits=RunLimits(share_calls=False))
    assert CALLS["Oslo"] == 6


async def test_a_bad_share_calls_value_is_a_validation_error() -> None:
    from toolplan import PlanValidationError

    with pytest.raises(PlanValidationError) as caught:
        await execute_plan({"steps": [step("a", "weather", city="Oslo")], "share_calls": "no"}, TOOLS)
    assert "'share_calls' must be true or false" in str(caught.value)
    assert sum(CALLS.values()) == 0


async def test_the_budget_counts_a_shared_call_once() -> None:
    plan = {"steps": [step(f"s{i}", "weather", city="Oslo") for i in range(3)]}
    result = await execute_plan(plan, TOOLS, budget=Budget(max_tool_calls=1))
    assert result.ok and CALLS["Oslo"] == 1


async def test_a_streamed_plan_shares_calls() -> None:
    text = json.dumps({"steps": [step("a", "weather", city="Oslo"), step("b", "weather", city="Oslo")]})

    async def pieces() -> AsyncIterator[str]:
        for i in range(0, len(text), 5):
            yield text[i : i + 5]

    result = await execute_plan_stream(pieces(), TOOLS)
    assert result.ok and CALLS["Oslo"] == 1
    assert {r.shared_with for r in result.steps.values()} == {("a",), ("b",)}


async def test_an_agent_turn_makes_identical_direct_calls_once() -> None:
    def call(i: int) -> ToolCall:
        return ToolCall(id=f"c{i}", name="weather", arguments=json.dumps({"city": "Oslo"}))

    model = ScriptedModel([AssistantMessage(tool_calls=(call(0), call(1))), "done"])
    result = await Agent(model=model, tools=TOOLS).run("go")
    assert result.output == "done" and CALLS["Oslo"] == 1
    replies = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    assert len(replies) == 2 and replies[0].content == replies[1].content and not replies[1].is_error


@pytest.mark.slow  # a Python process of its own
async def test_code_mode_call_tools_parallel_makes_identical_calls_once() -> None:
    code = (
        'pair = call_tools_parallel([("weather", {"city": "Oslo"}), ("weather", {"city": "Oslo"})])\nset_result(pair)'
    )
    code_tool = CodeTool(SubprocessRunner(), ToolRegistry(TOOLS))
    result, plan = await code_tool.run_code({"code": code}, invoker=ToolInvoker(code_tool.registry))
    assert result.ok and result.result[0] == result.result[1] and CALLS["Oslo"] == 1
    assert sorted(len(s.shared_with) for s in plan.steps.values()) == [1, 1]


# -- across runs: the result cache ----------------------------------------------------------------


async def test_a_cache_hit_makes_no_call_is_an_event_and_a_record_field() -> None:
    cache = ResultCache(ttl=60)
    plan = {"steps": [step("a", "weather", city="Oslo")]}
    first = await execute_plan(plan, TOOLS, cache=cache)
    events: list[PlanEvent] = []
    second = await execute_plan(plan, TOOLS, cache=cache, on_event=events.append, budget=Budget(max_tool_calls=0))
    assert CALLS["Oslo"] == 1
    assert not first.steps["a"].cached
    hit = second.steps["a"]
    assert hit.ok and hit.cached and hit.attempts == 0 and hit.output == first.steps["a"].output
    assert [e.step_id for e in events if isinstance(e, CacheHit)] == ["a"]
    assert not any(isinstance(e, StepStarted) for e in events)
    assert (cache.hits, cache.misses) == (1, 1)


async def test_the_cache_keeps_read_only_tools_only_and_never_failures() -> None:
    cache = ResultCache(ttl=60)
    plan = {"steps": [step("a", "put", key="p"), step("b", "missing", city="X"), step("c", "lookup", key="l")]}
    for _ in range(2):
        await execute_plan(plan, TOOLS, cache=cache, share_calls=False)
    assert CALLS == {"p": 2, "X": 2, "l": 1}


async def test_a_per_tool_time_to_live_of_zero_turns_the_cache_off_for_that_tool() -> None:
    cache = ResultCache(ttl=60, tools={"lookup": 0})
    for _ in range(2):
        plan = {"steps": [step("a", "lookup", key="l"), step("b", "weather", city="Oslo")]}
        await execute_plan(plan, TOOLS, cache=cache)
    assert CALLS == {"l": 2, "Oslo": 1}


async def test_an_expired_entry_is_a_miss() -> None:
    cache = ResultCache(ttl=0, tools={"weather": 1e-9})
    for _ in range(2):
        await execute_plan({"steps": [step("a", "weather", city="Oslo")]}, TOOLS, cache=cache)
    assert CALLS["Oslo"] == 2


async def test_a_cache_naming_a_tool_that_is_not_read_only_is_refused_before_anything_runs() -> None:
    cache = ResultCache(ttl=60, tools={"put": 30})
    with pytest.raises(UncacheableToolError) as caught:
        await execute_plan({"steps": [step("a", "weather", city="Oslo")]}, TOOLS, cache=cache)
    assert caught.value.code == "uncacheable_tool" and "'put'" in caught.value.message
    assert sum(CALLS.values()) == 0
    with pytest.raises(UncacheableToolError):
        Agent(model=ScriptedModel(["x"]), tools=TOOLS, cache=cache)


async def test_an_agent_cache_is_shared_by_its_runs() -> None:
    def turn() -> AssistantMessage:
        return AssistantMessage(tool_calls=(ToolCall(id="c", name="weather", arguments='{"city": "Oslo"}'),))

    agent = Agent(model=ScriptedModel([turn(), "one", turn(), "two"]), tools=TOOLS, cache=ResultCache(ttl=60))
    assert (await agent.run("a")).output == "one"
    assert (await agent.run("b")).output == "two"
    assert CALLS["Oslo"] == 1


def test_bad_cache_settings_are_refused_with_a_sentence() -> None:
    from toolplan import UserError

    for kwargs in ({"ttl": -1}, {"ttl": float("nan")}, {"tools": {"x": -2}}, {"max_entries": 0}):
        with pytest.raises(UserError):
            ResultCache(**kwargs)
    with pytest.raises(UserError, match=r"cache must be a toolplan\.ResultCache"):
        RunLimits(cache=object())  # type: ignore[arg-type]


async def test_the_memory_cache_is_bounded_oldest_first() -> None:
    cache = ResultCache(ttl=60, max_entries=2)
    for city in ("A", "B", "C", "A"):
        await execute_plan({"steps": [step("s", "weather", city=city)]}, TOOLS, cache=cache)
    assert CALLS == {"A": 2, "B": 1, "C": 1}
