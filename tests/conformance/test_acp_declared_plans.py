"""Conformance, the ACP tool-coordination proposal (DRR-005): declared plans as its users write them.

A ``ToolCallPlan`` keeps its ``planId`` and ``executionState``; a replan names the plan it
``replaces`` and each call is judged against the plan in force when it was made (the chain is
stored and shown by ``toolplan audit``); ``scaleFactor`` scales the budget; the proposal's
strategy names, ``explorationRate`` and ``temperature`` are honoured; findings are
``BudgetExceeded``, ``PlanDeviation`` and ``BLPViolation`` (with the trick and the general
alternative); a declared plan sent where a plan to run is expected gets ``declared_plan``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolplan import Agent, PlanValidationError, ToolRegistry, execute_plan, tool, validate_plan
from toolplan.cli import app
from toolplan.integrations.acp import acp_updates
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.policy import (
    ExecutionState,
    ToolPolicy,
    audit,
    audit_chain,
    execution_state,
    parse_declaration,
    policy_settings,
    trace_of,
)
from toolplan.store import open_store
from toolplan.testing import ScriptedModel


@tool(read_only=True)
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


@tool(read_only=True, general=True)
def browse(query: str) -> str:
    """Browse: the general way to find anything."""
    return f"browsed {query}"


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def summarize(text: str) -> str:
    """Summarize."""
    if text == "fail":
        raise ValueError("nothing to summarize")
    return text[:12]


def registry() -> ToolRegistry:
    tools = ToolRegistry([search, browse, lookup, summarize])
    tools.add_group("web", ["search", "browse"])
    return tools


TOOLS = [search, lookup, summarize]  # an agent's tools, without groups


def declared(plan_id: str, *tools: str, replaces: str | None = None, **context: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "planId": plan_id,
        "planningContext": {"goal": "answer", **context},
        "plannedSequence": [{"toolName": t, "rationale": f"use {t}"} for t in tools],
        "executionState": "Planned",
    }
    if replaces is not None:
        body["replaces"] = replaces
    return {"toolCallPlan": body}


def call(cid: str, name: str, arguments: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=cid, name=name, arguments=json.dumps(arguments)),))


# -- the declaration: planId, executionState, scaleFactor, policy ------------------------------------


def test_plan_id_and_execution_state_are_kept() -> None:
    d = parse_declaration(
        {
            "ToolCallPlan": {
                **declared("p1", "search")["toolCallPlan"],
                "executionState": {"InProgress": {"completed": 1}},
            }
        }
    )
    assert d.plan_id == "p1" and d.execution_state == ExecutionState(state="InProgress", completed=1)
    assert d.to_dict()["execution_state"] == {"state": "InProgress", "completed": 1}
    with pytest.raises(PlanValidationError) as info:
        parse_declaration({**declared("p1", "search")["toolCallPlan"], "executionState": "Sleeping"})
    assert "Planned, InProgress, Complete, Failed" in info.value.message


def test_scale_factor_scales_the_declared_budget() -> None:
    d = parse_declaration(declared("p1", "search", constraints={"maxToolCalls": 5, "maxCost": 2, "scaleFactor": 0.5}))
    assert d.scale_factor == 0.5 and d.budget is not None
    assert (d.budget.max_tool_calls, d.budget.max_cost) == (2, 1.0)  # counts round down
    with pytest.raises(PlanValidationError):
        parse_declaration(declared("p1", "search", constraints={"maxToolCalls": 5, "scaleFactor": 0}))


@pytest.mark.parametrize(
    ("policy", "strategy"),
    [
        ({"strategy": "Greedy"}, "greedy"),
        ({"strategy": "EpsilonGreedy", "explorationRate": 0.3}, "epsilon_greedy"),
        ({"strategy": "UCB"}, "ucb1"),
        ({"strategy": "ThompsonSampling"}, "thompson"),
        ({"strategy": "Softmax", "temperature": 0.5}, "softmax"),
    ],
)
def test_the_proposals_strategy_names_are_read(policy: dict[str, Any], strategy: str) -> None:
    d = parse_declaration(declared("p1", "search", policy=policy))
    assert d.policy is not None and d.policy.strategy == strategy
    assert d.policy.exploration_rate == policy.get("explorationRate")
    assert d.policy.temperature == policy.get("temperature")


def test_an_unknown_strategy_is_an_error_not_no_strategy() -> None:
    with pytest.raises(PlanValidationError) as info:
        parse_declaration(declared("p1", "search", policy={"strategy": "Clairvoyant"}))
    assert "EpsilonGreedy" in info.value.message


@pytest.mark.parametrize(
    ("policy", "strategy"),
    [
        ({"strategy": "EpsilonGreedy", "explorationRate": 0.5}, "epsilon_greedy"),
        ({"strategy": "Softmax", "temperature": 0.2}, "softmax"),
        ("ThompsonSampling", "thompson"),
        ("UCB", "ucb1"),
    ],
)
async def test_a_plans_policy_in_the_proposals_words_is_honoured(policy: Any, strategy: str) -> None:
    plan = {"policy": policy, "steps": [{"id": "a", "tool": "web", "arguments": {"query": "tides"}}]}
    result = await execute_plan(plan, registry(), policy=ToolPolicy("greedy", seed=1))
    assert [c.strategy for c in result.choices] == [strategy]
    assert policy_settings("EpsilonGreedy, explorationRate=0.3").exploration_rate == 0.3


# -- a declared plan where a plan to run is expected ---------------------------------------------------


@pytest.mark.parametrize("wrapper", ["toolCallPlan", "ToolCallPlan"])
def test_a_wrapped_declaration_given_as_a_plan_gets_declared_plan(wrapper: str) -> None:
    body = declared("p1", "search")["toolCallPlan"]
    errors = validate_plan({wrapper: body}, registry()).errors
    assert [e.code for e in errors] == ["declared_plan"]
    assert "declare_plan" in errors[0].message and "parse_declaration" in errors[0].message


# -- execution state as the run moves -----------------------------------------------------------------


async def test_execution_state_follows_the_run() -> None:
    d = parse_declaration(declared("p1", "search", "summarize"))
    plan = {
        "steps": [
            {"id": "a", "tool": "search", "arguments": {"query": "tides"}},
            {"id": "b", "tool": "summarize", "arguments": {"text": "$ref:a"}},
        ]
    }
    tools = registry()
    done = await execute_plan(plan, tools)
    assert execution_state(d, trace_of(done)) == ExecutionState(state="Complete", completed=2)
    failing = {"steps": [plan["steps"][0], {"id": "b", "tool": "summarize", "arguments": {"text": "fail"}}]}
    failed = execution_state(d, trace_of(await execute_plan(failing, tools)))
    assert failed.state == "Failed" and failed.completed == 1 and "nothing to summarize" in (failed.reason or "")
    notes = acp_updates(done, session_id="s", declaration=d, tools=tools)
    states = [
        n["params"]["update"]["_meta"]["toolCallPlan"]["executionState"]["state"]
        for n in notes
        if n["params"]["update"]["sessionUpdate"] == "plan"
    ]
    assert states[0] == "Planned" and "InProgress" in states and states[-1] == "Complete"
    assert notes[0]["params"]["update"]["_meta"]["toolCallPlan"]["planId"] == "p1"


# -- findings under the proposal's names ---------------------------------------------------------------


async def test_findings_carry_the_proposals_kinds() -> None:
    d = parse_declaration(
        declared("p1", "search", constraints={"maxToolCalls": 1}, policy={"preferGeneralMethods": True})
    )
    plan = {
        "steps": [
            {"id": "a", "tool": "search", "arguments": {"query": "x"}},
            {"id": "b", "tool": "lookup", "arguments": {"key": "y"}},
        ]
    }
    tools = registry()
    findings = audit(d, trace_of(await execute_plan(plan, tools)), tools=tools)
    kinds = {(f.kind, f.code) for f in findings}
    assert kinds == {
        ("BudgetExceeded", "max_tool_calls"),
        ("PlanDeviation", "undeclared_call"),
        ("BLPViolation", "specialised_tool"),
    }
    blp = next(f for f in findings if f.kind == "BLPViolation")
    assert blp.details["trick"] == "search" and blp.details["generalAlternative"] == "browse"
    assert all(f.plan_id == "p1" for f in findings)
    deviation = next(f for f in findings if f.kind == "PlanDeviation")
    assert deviation.details["actual"]["tool"] == "lookup" and deviation.details["expected"] is None


# -- replanning ------------------------------------------------------------------------------------------


def replanning_model(replaces: str | None, *, plans: bool = False) -> ScriptedModel:
    """Declares p1 (search, summarize), searches, replans to p2 (lookup), looks up; ``plans``: each call in a plan."""

    def make(cid: str, tool_name: str, arguments: dict[str, Any]) -> AssistantMessage:
        if not plans:
            return call(cid, tool_name, arguments)
        return call(cid, "execute_tool_plan", {"steps": [{"id": cid, "tool": tool_name, "arguments": arguments}]})

    return ScriptedModel(
        [
            call("d1", "declare_plan", declared("p1", "search", "summarize")["toolCallPlan"]),
            make("s", "search", {"query": "tides"}),
            call("d2", "declare_plan", declared("p2", "lookup", replaces=replaces)["toolCallPlan"]),
            make("l", "lookup", {"key": "tide table"}),
            "done",
        ]
    )


async def test_a_replan_judges_each_call_against_the_plan_in_force() -> None:
    result = await Agent(replanning_model("p1"), tools=TOOLS, declare_plan=True).run("go")
    assert [d.plan_id for d in result.declarations] == ["p1", "p2"]
    assert result.declarations[1].replaces == "p1"
    assert result.audit() == []  # search under p1, lookup under p2; p1's summarize was withdrawn
    reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage) and m.tool_call_id == "d2")
    assert "'p2'" in reply.content and "replacing 'p1'" in reply.content
    # Without the link, the last declaration is judged against every call, as before.
    unlinked = await Agent(replanning_model(None), tools=TOOLS, declare_plan=True).run("go")
    assert [(f.kind, f.code) for f in unlinked.audit()] == [("PlanDeviation", "undeclared_call")]
    assert audit_chain(unlinked.declarations, trace_of(unlinked)) == unlinked.audit()


async def test_a_replan_of_an_unknown_plan_is_refused() -> None:
    model = ScriptedModel([call("d", "declare_plan", declared("p2", "lookup", replaces="p0")["toolCallPlan"]), "ok"])
    result = await Agent(model, tools=TOOLS, declare_plan=True).run("go")
    reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
    assert reply.is_error and "'p0', which was not declared" in reply.content


def test_toolplan_audit_shows_the_chain_of_declarations(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def run() -> str:
        async with open_store(url) as store:
            model = replanning_model("p1", plans=True)
            agent = Agent(model, tools=TOOLS, declare_plan=True, tool_planning=True, store=store)
            result = await agent.run("go")
            parents = {s.parent_id for s in await store.list_runs() if s.parent_id}
            assert len(parents) == 1 and len(await store.timed_declarations(next(iter(parents)))) == 2
            assert result.audit() == []
            return next(iter(parents))

    agent_id = asyncio.run(run())
    done = CliRunner().invoke(app, ["audit", agent_id, "--db", url, "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    plans = json.loads(done.output)["runs"][0]["declarations"]
    assert [(p["plan_id"], p["replaces"], p["execution_state"]["state"]) for p in plans] == [
        ("p1", None, "InProgress"),
        ("p2", "p1", "Complete"),
    ]
    text = CliRunner().invoke(app, ["audit", agent_id, "--db", url], catch_exceptions=False).output
    assert "Declared plan p1 (2 calls): InProgress (1 completed)" in text
    assert "Declared plan p2, replaces p1 (1 call): Complete" in text
