"""Code mode on a Ray cluster: ``python examples/ray/code_on_ray.py [ADDRESS]``.

An agent with ``code_execution`` and a `RayBackend` runs the model's code in its sandbox on a Ray
worker; every tool call the code makes comes back to this process (limits, budget, records) and runs
on the cluster like any other call. A `ScriptedModel` plays the model so that the example needs no API
key: put your model there (``"openai:gpt-4o-mini"``, ...). Needs ``pip install "toolplan[ray]"``.
"""

from __future__ import annotations

import json
import os
import sys

from toolplan.agent import Agent
from toolplan.backends import RayBackend
from toolplan.models import AssistantMessage, ToolCall, ToolReturnMessage
from toolplan.sandbox import SubprocessRunner
from toolplan.testing import ScriptedModel
from tools import TOOLS

# What the model writes: a loop over topics, two tool calls each, and a value to return.
CODE = """
import os
counts = {}
for topic in ["ray", "toolplan"]:
    page = call_tool("fetch_page", {"topic": topic})
    counts[topic] = call_tool("word_count", {"text": page["text"]})
set_result({"counts": counts, "sandbox_pid": os.getpid(), "sandbox_parent_pid": os.getppid()})
"""


def main(address: str | None) -> None:
    call = ToolCall(id="c1", name="execute_code", arguments=json.dumps({"code": CODE}))
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Counted."])
    # num_cpus sizes a local cluster; it is left out when joining one (ADDRESS, or RAY_ADDRESS set).
    with RayBackend(address, cpu_tools=["word_count"], init_options={"num_cpus": 2}) as backend:
        agent = Agent(model, tools=TOOLS, code_execution=SubprocessRunner(), backend=backend)
        result = agent.run_sync("Count the words on the ray and toolplan pages.")
        reply = json.loads(next(m for m in result.messages if isinstance(m, ToolReturnMessage)).content)
        on_worker = reply["result"]["sandbox_parent_pid"] in backend.actor_pids()
    print(json.dumps({"status": reply["status"], "counts": reply["result"]["counts"]}, sort_keys=True))
    print(f"sandbox ran on a Ray worker: {on_worker} (driver pid {os.getpid()})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
