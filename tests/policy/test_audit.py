"""Declared plans and the audit: every finding, from results, agent runs, the store and the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolplan import Agent, PlanValidationError, ToolRegistry, execute_plan, tool
from toolplan.cli import app
from toolplan.execute import Choice, PlanResult, StepResult
from toolplan.models import AssistantMessage, ToolCall
from toolplan.policy import Declaration, audit, declaration_of, parse_declaration, trace_of
from toolplan.store import open_store
from toolplan.testing import ScriptedModel


@tool(read_only=True)
def search(query: str) -> str:
    """Search."""
    return f"results for {query}"


@tool(read_only=True, cost=2.0)
def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page {url}"


@tool
def summarize(text: str) -> str:
    """Summarize."""
    return text[:10]


TOOLS = ToolRegistry([search, fetch, summarize])

DECLARED = {
    "ToolCallPlan": {
        "planningContext": {
            "goal": "Answer with a summary of the best page",
            "constraints": {"maxToolCalls": 2, "maxCost": 3, "maxLatency": "60s", "language": "en"},
            "policy": {"strategy": "thompson", "preferGeneralMethods": True},
        },
        "plannedSequence": [
            {"toolName": "search", "rationale": "find pages", "expectedOutcome": "urls"},
            {"toolName": "fetch", "rationale": "read the best", "fallbackOnFailure": "search", "dependsOn": 1},
            {"toolName": "summarize", "rationale": "answer", "dependsOn": "fetch"},
        ],
    }
}


def test_a_declared_plan_parses_into_a_declaration() -> None:
    d = parse_declaration(json.dumps(DECLARED))
    assert d.source == "declared" and d.goal == "Answer with a summary of the best page"
    assert d.budget is not None and (d.budget.max_tool_calls, d.budget.max_cost, d.budget.max_latency) == (2, 3.0, 60.0)
    assert d.constraints == ("language: en",)
    assert d.policy is not None and (d.policy.strategy, d.policy.prefer_general_methods) == ("thompson", "always")
    assert [(c.id, c.tool, c.depends_on) for c in d.calls] == [
        ("1", "search", ()),
        ("2", "fetch", ("1",)),
        ("3", "summarize", ("2",)),
    ]
    assert d.calls[1].fallback == "search" and d.calls[0].expected_outcome == "urls"
    assert d.to_dict()["budget"] == {"max_tool_calls": 2, "max_cost": 3.0, "max_latency": 60.0}


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"plannedSequence": []}, "invalid_field"),
        ({"plannedSequence": [{"rationale": "no tool"}]}, "invalid_step"),
        ({"plannedSequence": [{"toolName": "a", "dependsOn": 5}]}, "unknown_dependency"),
        (
            {"planningContext": {"constraints": {"maxToolCalls": "many"}}, "plannedSequence": [{"toolName": "a"}]},
            "invalid_field",
        ),
        ({"nothing": 1}, "invalid_declaration"),
        (  # a number too big for a float (model output): an issue, not an OverflowError
            {"planningContext": {"constraints": {"maxCost": 10**400}}, "plannedSequence": [{"toolName": "a"}]},
            "invalid_field",
        ),
    ],
)
def test_bad_declarations_say_what_to_fix(bad: dict[str, Any], code: str) -> None:
    with pytest.raises(PlanValidationError) as info:
        parse_declaration(bad)
    assert info.value.issues[0].code == code


def call(sid: str, tool_: str, start: float, end: float, status: str = "succeeded", attempts: int = 1) -> StepResult:
    return StepResult(id=sid, tool=tool_, status=status, attempts=attempts, started_at=start, ended_at=end)  # type: ignore[arg-type]


def result(*steps: StepResult, choices: tuple[Choice, ...] = ()) -> PlanResult:
    return PlanResult(
        status="succeeded",
        steps={s.id: s for s in steps},
        output_steps=(),
        run_id="r1",
        started_at=0.0,
        ended_at=max(s.ended_at or 0.0 for s in steps),
        choices=choices,
    )


def found(declaration: Declaration, res: PlanResult, **kw: Any) -> list[tuple[str, str, str | None]]:
    return [(f.kind, f.code, f.step) for f in audit(declaration, trace_of(res), **kw)]


def test_calls_and_cost_over_the_declared_budget() -> None:
    d = parse_declaration(DECLARED)
    res = result(call("a", "search", 0, 1), call("b", "fetch", 1, 2), call("c", "summarize", 2, 3))
    budget = [f for f in found(d, res, tools=TOOLS) if f[0] == "BudgetExceeded"]
    assert found(d, res) == [("BudgetExceeded", "max_tool_calls", "c")]  # 3 calls made, 2 declared
    assert budget == [("BudgetExceeded", "max_tool_calls", "c"), ("BudgetExceeded", "max_cost", "c")]
    relaxed = parse_declaration(
        {"plannedSequence": [{"toolName": "search"}, {"toolName": "fetch"}, {"toolName": "summarize"}]}
    )
    assert found(relaxed, res, tools=TOOLS) == []


def test_budget_findings_say_by_how_much() -> None:
    d = parse_declaration(
        {
            "planningContext": {"constraints": {"maxToolCalls": 1, "maxLatency": 2, "maxCalls": {"search": 1}}},
            "plannedSequence": [{"toolName": "search"}],
        }
    )
    res = result(call("a", "search", 0, 1, attempts=3), call("b", "search", 1, 5))
    findings = audit(d, trace_of(res))
    by_code = {f.code: f for f in findings if f.kind == "BudgetExceeded"}
    assert by_code["max_tool_calls"].details == {"limit": 1, "used": 4, "over": 3}
    assert "4 calls were made (3 over)" in by_code["max_tool_calls"].message
    assert by_code["max_tool_calls_per_tool"].details["over"] == 3
    assert by_code["max_latency"].details["over"] == pytest.approx(3.0) and by_code["max_latency"].step == "b"


def test_planning_theater_missing_extra_and_different_calls() -> None:
    d = parse_declaration(
        {"plannedSequence": [{"toolName": "search"}, {"toolName": "fetch"}, {"toolName": "summarize"}]}
    )
    res = result(call("a", "search", 0, 1), call("x", "summarize", 1, 2), call("y", "search", 2, 3))
    assert found(d, res) == [("PlanDeviation", "missing_call", "2"), ("PlanDeviation", "undeclared_call", "y")]
    d = parse_declaration({"plannedSequence": [{"toolName": "search"}, {"toolName": "fetch"}]})
    res = result(call("a", "search", 0, 1), call("x", "summarize", 1, 2))
    findings = audit(d, trace_of(res))
    assert [(f.code, f.step) for f in findings] == [("different_tool", "x")]
    assert findings[0].message == "Declared call 2 was to 'fetch', but 'summarize' ran in its place (step 'x')."


def test_missing_and_undeclared_calls() -> None:
    d = parse_declaration({"plannedSequence": [{"toolName": "search", "rationale": "find"}, {"toolName": "fetch"}]})
    res = result(call("a", "search", 0, 1))
    findings = audit(d, trace_of(res))
    assert [(f.code, f.step) for f in findings] == [("missing_call", "2")]
    assert findings[0].message == "Declared call 2 ('fetch') was never made."
    extra = result(
        call("a", "search", 0, 1), call("b", "fetch", 1, 2), call("c", "summarize", 2, 3), call("e", "summarize", 3, 4)
    )
    assert [(f.code, f.step) for f in audit(d, trace_of(extra))] == [("undeclared_call", "c"), ("undeclared_call", "e")]


def test_a_call_started_before_its_declared_dependency_ended_is_reordered() -> None:
    d = parse_declaration(DECLARED)
    res = result(call("a", "search", 0, 5), call("b", "fetch", 1, 2), call("c", "summarize", 2.5, 3))
    reordered = [f for f in audit(d, trace_of(res)) if f.code == "reordered"]
    assert [(f.step, f.details["depends_on"]) for f in reordered] == [("b", "1")]
    assert "started 4s before that one ended" in reordered[0].message


def test_a_declared_fallback_is_not_an_extra_call() -> None:
    d = parse_declaration({"plannedSequence": [{"toolName": "fetch", "fallbackOnFailure": "search"}]})
    res = result(call("a", "fetch", 0, 1, status="failed"), call("b", "search", 1, 2))
    assert found(d, res) == []


def test_policy_violations_from_recorded_choices() -> None:
    d = parse_declaration(DECLARED)
    special = Choice(
        group="web",
        chosen="search",
        strategy="ucb1",
        probability=1.0,
        candidates=("search", "fetch"),
        step_id="a",
        general="fetch",
    )
    res = result(call("a", "search", 0, 1), choices=(special,))
    kinds = {(f.kind, f.code) for f in audit(d, trace_of(res), tools=TOOLS) if f.kind != "PlanDeviation"}
    assert kinds == {("BLPViolation", "specialised_tool"), ("PolicyViolation", "strategy_mismatch")}
    outside = Choice(
        group="web",
        chosen="summarize",
        strategy="thompson",
        probability=1.0,
        candidates=("search", "summarize"),
        step_id="a",
    )
    res = result(call("a", "summarize", 0, 1), choices=(outside,))
    violations = [f for f in audit(d, trace_of(res), tools=TOOLS) if f.kind == "PolicyViolation"]
    assert [f.code for f in violations] == ["outside_safety_class"]
    assert "summarize (writes)" in violations[0].message


def test_a_direct_call_of_a_specialised_member_violates_a_general_first_policy() -> None:
    @tool(read_only=True, general=True)
    def everything(query: str) -> str:
        return query

    tools = ToolRegistry([search, everything])
    tools.add_group("anything", ["search", "everything"])
    d = parse_declaration(
        {"planningContext": {"policy": "prefer_general_methods"}, "plannedSequence": [{"toolName": "search"}]}
    )
    res = result(call("a", "search", 0, 1))
    findings = audit(d, trace_of(res), tools=tools)
    assert [(f.kind, f.code) for f in findings] == [("BLPViolation", "specialised_tool")]
    assert (findings[0].details["trick"], findings[0].details["generalAlternative"]) == ("search", "everything")


async def test_a_native_plan_is_its_own_declaration() -> None:
    plan = {
        "goal": "weather",
        "budget": {"max_tool_calls": 5},
        "steps": [
            {"id": "a", "tool": "search", "arguments": {"query": "x"}, "rationale": "find"},
            {"id": "b", "tool": "summarize", "arguments": {"text": "$ref:a"}, "expected_outcome": "short"},
        ],
    }
    res = await execute_plan(plan, TOOLS)
    d = declaration_of(res_plan(plan))
    assert d.source == "native" and d.calls[0].rationale == "find" and d.calls[1].expected_outcome == "short"
    assert audit(d, trace_of(res), tools=TOOLS) == []


def res_plan(plan: dict[str, Any]) -> Any:
    from toolplan import parse_plan

    return parse_plan(plan)


async def test_an_agent_that_declares_one_plan_and_does_another_is_caught() -> None:
    declared = {
        "planningContext": {"goal": "answer"},
        "plannedSequence": [{"toolName": "search", "rationale": "find"}, {"toolName": "fetch", "rationale": "read"}],
    }
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="d", name="declare_plan", arguments=json.dumps(declared)),)),
            AssistantMessage(tool_calls=(ToolCall(id="s", name="search", arguments='{"query": "q"}'),)),
            AssistantMessage(tool_calls=(ToolCall(id="w", name="summarize", arguments='{"text": "t"}'),)),
            "done",
        ]
    )
    agent = Agent(model, tools=TOOLS, declare_plan=True)
    assert "## Declare your plan" in agent.system_prompt()
    assert "declare_plan" in [d.name for d in agent.tool_definitions()]
    result = await agent.run("go")
    assert len(result.declarations) == 1 and result.declarations[0].goal == "answer"
    findings = result.audit()
    assert [(f.kind, f.code, f.step) for f in findings] == [("PlanDeviation", "different_tool", "call0")]
    assert "'summarize' ran in its place" in findings[0].message  # fetch was declared second
    model.assert_consumed()


async def test_declare_plan_refuses_a_plan_with_tools_the_agent_does_not_have() -> None:
    bad = {"planningContext": {"goal": "x"}, "plannedSequence": [{"toolName": "teleport", "rationale": "why not"}]}
    model = ScriptedModel(
        [AssistantMessage(tool_calls=(ToolCall(id="d", name="declare_plan", arguments=json.dumps(bad)),)), "ok"]
    )
    result = await Agent(model, tools=TOOLS, declare_plan=True).run("go")
    reply = next(m for m in result.messages if getattr(m, "tool_call_id", None) == "d")
    assert "'teleport', which is not one of your tools" in str(reply.content) and result.declarations == ()


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_toolplan_audit_reads_a_stored_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    plan = {
        "budget": {"max_tool_calls": 1},
        "steps": [
            {"id": "a", "tool": "search", "arguments": {"query": "x"}},
            {"id": "b", "tool": "summarize", "arguments": {"text": "$ref:a"}},
        ],
    }

    async def stored() -> PlanResult:
        async with open_store(url) as store:
            return await execute_plan(plan, TOOLS, store=store)

    res = asyncio.run(stored())
    declared = tmp_path / "declared.json"
    declared.write_text(
        json.dumps(
            {"planningContext": {"constraints": {"maxToolCalls": 1}}, "plannedSequence": [{"toolName": "fetch"}]}
        )
    )
    done = run_cli("audit", res.run_id, "--db", url, "--json")
    assert done.exit_code == 1, done.output
    data = json.loads(done.output)
    assert [(f["kind"], f["code"], f["step"]) for f in data["runs"][0]["findings"]] == [
        ("PlanDeviation", "not_executed", "b")
    ]
    done = run_cli("audit", res.run_id, "--db", url, "--declared", str(declared))
    assert done.exit_code == 1 and "PlanDeviation different_tool [a]" in done.output
    assert run_cli("audit", "run_nope", "--db", url).exit_code == 2


def test_toolplan_audit_reads_an_agent_runs_stored_declaration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    declared = {
        "planningContext": {"goal": "answer"},
        "plannedSequence": [{"toolName": "search", "rationale": "find"}, {"toolName": "fetch", "rationale": "read"}],
    }
    plan = {"steps": [{"id": "s", "tool": "search", "arguments": {"query": "q"}}]}
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall(id="d", name="declare_plan", arguments=json.dumps(declared)),)),
            AssistantMessage(tool_calls=(ToolCall(id="p", name="execute_tool_plan", arguments=json.dumps(plan)),)),
            "done",  # it never fetched
        ]
    )

    async def run() -> tuple[str, list[dict[str, Any]]]:
        async with open_store(url) as store:
            agent = Agent(model, tools=TOOLS, declare_plan=True, tool_planning=True, store=store)
            result = await agent.run("go")
            parent = result.plan_results[0].run_id
            summary = next(s for s in await store.list_runs() if s.run_id == parent)
            assert summary.parent_id is not None
            return summary.parent_id, await store.declarations(summary.parent_id)

    agent_id, kept = asyncio.run(run())
    assert kept == [{**declared, "planId": "plan_1"}]  # as sent, with the id it was given
    done = run_cli("audit", agent_id, "--db", url, "--json")
    assert done.exit_code == 1, done.output
    data = json.loads(done.output)
    assert [(r["run_id"], [(f["code"], f["step"]) for f in r["findings"]]) for r in data["runs"]] == [
        (agent_id, [("missing_call", "2")])
    ]
