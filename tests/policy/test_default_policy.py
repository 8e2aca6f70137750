"""A plan that names a strategy, run without a policy: the registry's own policy learns across runs."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest

from toolplan import ToolError, ToolRegistry, execute_plan, tool
from toolplan.execute import _choice
from toolplan.policy import ToolPolicy

RUNS = 40


@tool(read_only=True)
def broken(query: str) -> str:
    """A search that fails every call."""
    raise ToolError("down")


@tool(read_only=True)
def working(query: str) -> str:
    """A search that works."""
    return f"found {query}"


def plan(strategy: str | None, *, inline: bool = False) -> dict[str, Any]:
    target: Any = {"one_of": ["broken", "working"]} if inline else "search"
    out: dict[str, Any] = {"steps": [{"id": "s", "tool": target, "arguments": {"query": "q"}}]}
    if strategy is not None:
        out["policy"] = strategy
    return out


def registry() -> ToolRegistry:
    r = ToolRegistry([broken, working])
    r.add_group("search", ["broken", "working"])  # broken first: what a fixed choice calls
    return r


@pytest.mark.parametrize(("strategy", "inline"), [("epsilon_greedy", False), ("thompson", True), ("thompson", False)])
async def test_runs_on_one_registry_stop_choosing_the_member_that_always_fails(
    strategy: str, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The policy a registry makes draws unseeded random numbers; seed it so each run of this test
    # draws the same ones (unseeded, thompson picked 'broken' twice late in about one run in a thousand).
    monkeypatch.setattr(_choice, "_make_policy", lambda: ToolPolicy(seed=11))
    r = registry()
    before = r.default_policy
    chosen: list[str] = []
    for _ in range(RUNS):
        result = await execute_plan(plan(strategy, inline=inline), r)
        chosen.append(result.choices[0].chosen)
        assert result.warnings == ()  # this registry is kept between runs: nothing to warn of
    assert before is None and isinstance(r.default_policy, ToolPolicy)  # made on first use, kept on the registry
    late = Counter(chosen[RUNS // 2 :])
    # epsilon_greedy still explores (10% of runs, half of them on 'broken'); the others stop at once.
    assert late["broken"] <= (6 if strategy == "epsilon_greedy" else 1), chosen
    assert result.choices[0].strategy == strategy


async def test_without_a_strategy_the_choice_stays_fixed_and_nothing_is_made() -> None:
    r = registry()
    for _ in range(3):
        result = await execute_plan(plan(None), r)
        assert result.choices[0].chosen == "broken" and result.choices[0].strategy == "fixed"
    assert r.default_policy is None


async def test_a_policy_set_on_the_registry_is_the_one_used() -> None:
    r = registry()
    mine = ToolPolicy("greedy", seed=3)
    r.default_policy = mine
    for _ in range(4):
        await execute_plan(plan("greedy"), r)
    assert r.default_policy is mine and sum(s.n for s in mine.stats("search").values()) == pytest.approx(4, abs=1e-3)


async def test_tools_given_as_a_list_learn_nothing_across_runs_and_the_result_and_log_say_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolplan.policy"):
        result = await execute_plan(plan("thompson", inline=True), [broken, working])
    [issue] = [w for w in result.warnings if w.code == "policy_not_kept"]
    assert issue.severity == "warning" and issue.step == "s"
    assert "forgotten when the run ends" in issue.message and "policy=ToolPolicy" in issue.message
    assert any("forgotten when the run ends" in m for m in caplog.messages)
    assert result.to_dict()["warnings"][0]["code"] == "policy_not_kept"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="toolplan.policy"):  # a policy given: nothing to warn of
        given = await execute_plan(plan("thompson", inline=True), [broken, working], policy=ToolPolicy(seed=1))
    assert given.warnings == () and caplog.messages == []
