"""A model to try ``toolplan agent`` with, no API key and no network: ``--model examples/cogent/model.py:MODEL``.

It plays what a model would do with the quickstart tools (``examples/quickstart/tools.py``): one
turn asking for the weather of Tokyo and London (two calls, run at once by ``--executor native`` or
one after the other by ``--executor sequential``), one turn comparing them, then the answer::

    toolplan agent "Is Tokyo warmer than London?" --tools examples/quickstart/tools.py \\
        --model examples/cogent/model.py:MODEL --executor native
"""

from __future__ import annotations

import json
from typing import Any

from toolplan.models import AssistantMessage, ModelMessage, ToolCall, ToolReturnMessage
from toolplan.testing import FunctionInfo, FunctionModel


def _call(n: int, name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id=f"call_{n}", name=name, arguments=json.dumps(arguments))


def play(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage | str:
    """The next answer, from the tool results so far."""
    results = [json.loads(m.content) for m in messages if isinstance(m, ToolReturnMessage) and not m.is_error]
    if not results:
        return AssistantMessage(
            tool_calls=tuple(_call(i, "get_weather", {"location": c}) for i, c in enumerate(("Tokyo", "London")))
        )
    if len(results) == 2:
        return AssistantMessage(tool_calls=(_call(2, "compare_data", {"data_a": results[0], "data_b": results[1]}),))
    c = results[-1]
    return f"{c['warmer']} is warmer than {c['colder']}, by {c['difference']}°C."


MODEL = FunctionModel(play, model_name="cogent-example")
