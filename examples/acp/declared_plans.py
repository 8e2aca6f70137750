"""Declared plans as the ACP tool-coordination proposal writes them: replans, execution state, findings.

An agent declares its plan (``declare_plan``), makes a call, replans (the new plan ``replaces`` the
first), and goes on; the audit judges each call against the plan in force when it was made. A step
with a chain of fallbacks shows which link's result stood.

Run: python examples/acp/declared_plans.py
"""

from __future__ import annotations

import json
from typing import Any

from toolplan import Agent, ToolError, execute_plan_sync, tool
from toolplan.integrations.acp import acp_updates
from toolplan.models import AssistantMessage, ToolCall
from toolplan.policy import audit, execution_state, parse_declaration, trace_of
from toolplan.testing import ScriptedModel


@tool(read_only=True)
def search(query: str) -> str:
    """Search the web."""
    raise ToolError("the search service is down")


@tool(read_only=True)
def mirror_search(query: str) -> str:
    """A mirror of the web search."""
    raise ToolError("the mirror is down too")


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up in the knowledge base."""
    return f"{key}: 42"


def call(cid: str, name: str, arguments: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=cid, name=name, arguments=json.dumps(arguments)),))


FIRST = {
    "planId": "p1",
    "planningContext": {
        "goal": "Find the answer",
        "constraints": {"maxToolCalls": 2, "scaleFactor": 1.5},
        "policy": {"strategy": "ThompsonSampling", "preferGeneralMethods": False},
    },
    "plannedSequence": [{"toolName": "search", "rationale": "search the web"}],
}
SECOND = {
    "planId": "p2",
    "replaces": "p1",
    "planningContext": {"goal": "Find the answer"},
    "plannedSequence": [{"toolName": "lookup", "rationale": "the web failed: ask the knowledge base"}],
}


def main() -> None:
    model = ScriptedModel(
        [
            call("1", "declare_plan", FIRST),
            call("2", "search", {"query": "the answer"}),
            call("3", "declare_plan", SECOND),
            call("4", "lookup", {"key": "the answer"}),
            "The answer is 42.",
        ]
    )
    result = Agent(model, tools=[search, lookup], declare_plan=True).run_sync("What is the answer?")
    first, second = result.declarations
    print("declared:", [(d.plan_id, d.replaces) for d in result.declarations])
    print("p1 budget after scaleFactor 1.5:", first.budget.max_tool_calls if first.budget else None)
    trace = trace_of(result)
    print("p2:", execution_state(second, trace))
    print("findings with the replan:", [(f.kind, f.code) for f in result.audit()])
    print("p2 alone against every call:", [(f.kind, f.code, f.plan_id) for f in audit(second, trace)])

    # A fallback chain: search, then its mirror, then the knowledge base.
    plan = {
        "steps": [
            {
                "id": "answer",
                "tool": "search",
                "arguments": {"query": "the answer"},
                "fallback": {
                    "tool": "mirror_search",
                    "arguments": {"query": "the answer"},
                    "fallback": {"tool": "lookup", "arguments": {"key": "the answer"}},
                },
            }
        ]
    }
    ran = execute_plan_sync(plan, [search, mirror_search, lookup])
    step = ran.steps["answer"]
    print("chain:", step.status, repr(step.output), "from link", step.fallback_link, "after", step.attempts, "calls")
    declared = parse_declaration({"toolCallPlan": {**SECOND, "plannedSequence": [{"toolName": "search"}]}})
    states = [
        n["params"]["update"]["_meta"]["toolCallPlan"]["executionState"]["state"]
        for n in acp_updates(ran, session_id="s1", declaration=declared)
        if n["params"]["update"]["sessionUpdate"] == "plan"
    ]
    print("ACP plan updates:", states)


if __name__ == "__main__":
    main()
