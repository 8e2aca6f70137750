"""oasis's ``execute_plan`` batch and built-in tool names on a toolplan agent.

The model calls ``execute_plan`` with ``batch.json``'s steps; they run in parallel, and the model
gets one entry per step, in order: ``{"step", "tool", "status", "result" | "error"}``. The step that
reads outside the workspace fails alone. Run: ``python examples/oasis/batch.py``; the same batch
from the command line: ``toolplan run examples/oasis/batch.json --tools examples/oasis/tools.py:TOOLS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from toolplan import Agent
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.testing import ScriptedModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import TOOLS

HERE = Path(__file__).resolve().parent

batch = (HERE / "batch.json").read_text(encoding="utf-8")
model = ScriptedModel(
    [
        AssistantMessage(tool_calls=(ToolCall(id="b", name="execute_plan", arguments=batch),)),
        "Sales: north 12, south 5.",
    ]
)
agent = Agent(model, tools=TOOLS, batch_calls=True)
result = agent.run_sync("Summarise the sales file")
reply = next(m for m in result.messages if isinstance(m, ToolReturnMessage))
for entry in json.loads(reply.content):
    outcome = entry["result"] if entry["status"] == "ok" else entry["error"]
    print(entry["step"], entry["tool"], entry["status"], json.dumps(outcome)[:70])
print("answer:", result.output)
