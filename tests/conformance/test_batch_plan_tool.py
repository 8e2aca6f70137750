"""Conformance, agentle4j's and oasis's batch tool: ``execute_plan`` with ``{"steps": [{"tool", "args"}]}``.

Such a user turns the batch tool on (``Agent(batch_calls=True)``), lets the model call it with
JSON-string arguments, and reads back ``[{"step", "tool", "status", "result" | "error"}]``; from the
command line the same batch is a plan file (``toolplan run``).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from toolplan import Agent, ToolError, tool
from toolplan.cli import app
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import ScriptedModel

BATCH = {
    "steps": [
        {"tool": "lookup", "args": {"key": "a"}},
        {"tool": "lookup", "args": {"key": "missing"}},
        {"tool": "lookup", "args": {"key": "b"}},
    ]
}


@tool
def lookup(key: str) -> int:
    """A stored value."""
    values = {"a": 1, "b": 2}
    if key not in values:
        raise ToolError(f"no value for {key!r}")
    return values[key]


def test_the_model_calls_execute_plan_and_reads_one_entry_per_step() -> None:
    call = ToolCall(id="b1", name="execute_plan", arguments=json.dumps(BATCH))  # arguments as a JSON string
    agent = Agent(ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"]), tools=[lookup], batch_calls=True)
    result = agent.run_sync("look up a, missing and b")
    [reply] = [m for m in result.messages if isinstance(m, ToolReturnMessage)]
    entries = json.loads(reply.content)
    assert [{k: e[k] for k in ("step", "tool", "status")} for e in entries] == [
        {"step": 0, "tool": "lookup", "status": "ok"},
        {"step": 1, "tool": "lookup", "status": "error"},
        {"step": 2, "tool": "lookup", "status": "ok"},
    ]
    assert (entries[0]["result"], entries[2]["result"]) == (1, 2)  # fail-forward: the failure skips nothing
    assert "missing" in entries[1]["error"]


def replies_to(steps: list[dict[str, object]]) -> list[ToolReturnMessage]:
    call = ToolCall(id="b1", name="execute_plan", arguments=json.dumps({"steps": steps}))
    agent = Agent(ScriptedModel([AssistantMessage(tool_calls=(call,)), "done"]), tools=[echo], batch_calls=True)
    return [m for m in agent.run_sync("go").messages if isinstance(m, ToolReturnMessage)]


@tool
def echo(text: str) -> str:
    """The text back."""
    return text


def test_a_batch_has_no_references_and_does_not_nest() -> None:
    [reply] = replies_to([{"tool": "echo", "args": {"text": "$ref:0"}}])
    assert json.loads(reply.content)[0]["result"] == "$ref:0"  # passed as written
    [nested] = replies_to([{"tool": "execute_plan", "args": {"steps": []}}])
    assert nested.is_error and "[meta_tool]" in nested.content and "cannot nest" in nested.content


def test_the_cli_runs_a_batch_file(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(
        "from toolplan import ToolError, tool\n\n\n@tool\ndef lookup(key: str) -> int:\n"
        "    if key == 'missing':\n        raise ToolError('no value')\n    return len(key)\n",
        encoding="utf-8",
    )
    (tmp_path / "batch.json").write_text(json.dumps(BATCH), encoding="utf-8")
    args = ["run", str(tmp_path / "batch.json"), "--tools", str(tmp_path / "tools.py"), "--json"]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 1  # one call failed
    statuses = [s["status"] for s in json.loads(done.stdout)["steps"]]
    assert statuses == ["succeeded", "failed", "succeeded"]
