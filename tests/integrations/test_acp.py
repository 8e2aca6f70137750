"""ACP export: every notification is valid against the protocol's JSON Schema (vendored in acp/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolplan import ToolRegistry, execute_plan, parse_plan, tool
from toolplan.integrations.acp import AcpExporter, acp_updates
from toolplan.policy import parse_declaration

SCHEMA = json.loads((Path(__file__).parent / "acp" / "schema.json").read_text(encoding="utf-8"))


def validator() -> Any:
    # A session/update notification's params are a SessionNotification.
    schema = {"$ref": "#/$defs/SessionNotification", "$defs": SCHEMA["$defs"]}
    return jsonschema.Draft202012Validator(schema)


@tool(read_only=True)
def lookup(city: str) -> dict[str, Any]:
    """Look a city up."""
    return {"city": city, "temp": 21}


@tool
def notify(text: str) -> str:
    """Notify someone."""
    raise RuntimeError("mail server down")


PLAN = {
    "steps": [
        {"id": "a", "tool": "lookup", "arguments": {"city": "Oslo"}, "rationale": "Get Oslo's weather"},
        {"id": "b", "tool": "lookup", "arguments": {"city": "Rome"}},
        {"id": "c", "tool": "notify", "arguments": {"text": "{{a.temp}} vs {{b.temp}}"}},
        {"id": "d", "tool": "lookup", "arguments": {"city": "$ref:c"}},
    ],
    "output_steps": ["c"],
}


def check(notes: list[dict[str, Any]]) -> None:
    v = validator()
    for note in notes:
        assert note["jsonrpc"] == "2.0" and note["method"] == "session/update"
        errors = sorted(v.iter_errors(note["params"]), key=str)
        assert not errors, f"{note}: {errors[0].message}"


async def test_a_finished_run_becomes_valid_plan_and_tool_call_updates() -> None:
    tools = ToolRegistry([lookup, notify])
    result = await execute_plan(PLAN, tools)
    notes = acp_updates(result, session_id="sess_1", tools=tools)
    check(notes)
    updates = [n["params"]["update"] for n in notes]
    kinds = [u["sessionUpdate"] for u in updates]
    assert kinds[0] == "plan" and kinds[-1] == "plan"
    assert kinds.count("tool_call") == 3 and kinds.count("tool_call_update") == 3  # d was skipped: no call
    calls = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    assert calls[f"{result.run_id}:a"]["kind"] == "read" and calls[f"{result.run_id}:c"]["kind"] == "edit"
    assert calls[f"{result.run_id}:a"]["rawInput"] == {"city": "Oslo"}
    done = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call_update"}
    assert done[f"{result.run_id}:c"]["status"] == "failed"
    assert "mail server down" in done[f"{result.run_id}:c"]["content"][0]["content"]["text"]
    assert done[f"{result.run_id}:a"]["rawOutput"] == {"city": "Oslo", "temp": 21}
    final = updates[-1]["entries"]
    assert [e["status"] for e in final] == ["completed"] * 4
    assert [e["priority"] for e in final] == ["medium", "medium", "high", "medium"]


async def test_live_export_shows_progress_as_the_run_goes() -> None:
    tools = ToolRegistry([lookup, notify])
    sent: list[dict[str, Any]] = []
    exporter = AcpExporter("sess_live", sent.append, tools=tools, plan=parse_plan(PLAN))
    await execute_plan(PLAN, tools, on_event=exporter)
    check(sent)
    plans = [n["params"]["update"]["entries"] for n in sent if n["params"]["update"]["sessionUpdate"] == "plan"]
    assert plans[0][0] == {"content": "Get Oslo's weather (lookup)", "priority": "medium", "status": "pending"}
    assert any(e["status"] == "in_progress" for p in plans for e in p)
    assert all(e["status"] == "completed" for e in plans[-1])


async def test_a_declaration_gives_the_plan_entries() -> None:
    declaration = parse_declaration(
        {
            "planningContext": {"goal": "weather"},
            "plannedSequence": [
                {"toolName": "lookup", "rationale": "Oslo first"},
                {"toolName": "lookup", "rationale": "then Rome"},
            ],
        }
    )
    result = await execute_plan({"steps": PLAN["steps"][:2]}, ToolRegistry([lookup]))  # type: ignore[index]
    notes = acp_updates(result, session_id="s", declaration=declaration)
    check(notes)
    final = notes[-1]["params"]["update"]["entries"]
    assert [e["content"] for e in final] == ["Oslo first (lookup)", "then Rome (lookup)"]


@pytest.mark.parametrize(
    "bad", [{"sessionUpdate": "plan", "entries": [{"content": "x", "priority": "urgent", "status": "pending"}]}]
)
def test_the_schema_check_catches_a_bad_update(bad: dict[str, Any]) -> None:
    assert list(validator().iter_errors({"sessionId": "s", "update": bad}))


def test_the_old_policy_path_is_an_alias_that_warns() -> None:
    import toolplan.policy

    with pytest.warns(DeprecationWarning, match=r"toolplan\.integrations\.acp"):
        assert toolplan.policy.AcpExporter is AcpExporter
    with pytest.warns(DeprecationWarning, match=r"toolplan\.integrations\.acp"):
        assert toolplan.policy.acp_updates is acp_updates
    with pytest.raises(AttributeError):
        toolplan.policy.no_such_name  # noqa: B018
