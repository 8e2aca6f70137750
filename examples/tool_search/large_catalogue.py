"""A model plans over a 1,020-tool catalogue while its first request lists two tools.

    python examples/tool_search/large_catalogue.py                 # a stand-in model that searches, then plans
    python examples/tool_search/large_catalogue.py openai:gpt-4.1  # a real model (needs its API key)

The catalogue is 1,020 tools of a made-up company API (60 kinds of record x 17 actions), all
deferred: the model sees ``search_tools`` and ``execute_tool_plan``, searches for what it needs,
and plans over what it found. See docs/tool-search.md.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from toolplan import Agent, ToolRegistry
from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionModel
from toolplan.tools import Toolset

AREAS = ["billing", "sales", "support", "hr", "logistics", "marketing"]
RECORDS = ["invoice", "order", "ticket", "employee", "shipment", "campaign", "refund", "contract", "note", "alert"]
ACTIONS = {
    "list": "List the {r}s in {a}, newest first.",
    "get": "Get one {r} in {a} by its id.",
    "create": "Create a new {r} in {a}.",
    "update": "Change some fields of a {r} in {a}.",
    "delete": "Delete a {r} from {a} for good.",
    "search": "Search {r}s in {a} by words in their text.",
    "archive": "Archive a {r} in {a}.",
    "restore": "Restore an archived {r} in {a}.",
    "export": "Export the {r}s of {a} as CSV rows.",
    "count": "Count the {r}s in {a} with a status.",
    "approve": "Approve a pending {r} in {a}.",
    "reject": "Reject a pending {r} in {a} with a reason.",
    "assign": "Assign a {r} in {a} to an owner.",
    "comment": "Add a comment to a {r} in {a}.",
    "history": "Show the change history of a {r} in {a}.",
    "duplicate": "Copy a {r} in {a} into a new draft.",
    "notify": "Tell the owner of a {r} in {a} about it by email.",
}


def catalogue() -> Toolset:
    definitions = [
        {
            "name": f"{area}_{action}_{record}",
            "description": text.format(r=record, a=area),
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
        for area in AREAS
        for record in RECORDS
        for action, text in ACTIONS.items()
    ]

    def handler(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"done": name, **arguments}

    toolset = Toolset.from_definitions(definitions, handler)
    toolset.deferred = True  # the model finds these with search_tools
    return toolset


def stand_in(messages: list[ModelMessage], info: Any) -> AssistantMessage | str:
    """Searches twice, then plans over the first match of each search."""
    searches = ["approve a pending refund in billing", "email the owner of a refund in billing"]
    replies = [m for m in messages if isinstance(m, ToolReturnMessage)]
    if len(replies) < len(searches):
        arguments = json.dumps({"query": searches[len(replies)], "limit": 3})
        return AssistantMessage(tool_calls=(ToolCall(id=f"s{len(replies)}", name="search_tools", arguments=arguments),))
    if len(replies) == len(searches):
        approve, notify = (json.loads(r.content)["tools"][0]["name"] for r in replies)
        plan = {
            "steps": [
                {"id": "ok", "tool": approve, "arguments": {"id": "R-17"}},
                {"id": "tell", "tool": notify, "arguments": {"id": "$ref:ok.id"}},
            ]
        }
        return AssistantMessage(tool_calls=(ToolCall(id="p", name="execute_tool_plan", arguments=json.dumps(plan)),))
    return f"Done: {replies[-1].content}"


def main() -> None:
    registry = ToolRegistry([catalogue()])
    model: Any = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(stand_in)
    agent = Agent(model, tools=registry, tool_planning=True)
    print(f"catalogue: {len(registry)} tools, {len(registry.deferred_names)} deferred")
    print("first request lists:", [d.name for d in agent.tool_definitions()])
    result = agent.run_sync("Approve refund R-17 in billing and email its owner.")
    for message in result.messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                print(f"model called {call.name}: {call.arguments}")
    print("answer:", result.output)


if __name__ == "__main__":
    main()
