"""A pydantic-ai agent that plans over its own tools: one line, ``capabilities=[ToolPlanning()]``.

Runs offline: pydantic-ai's FunctionModel plays the model and sends one plan.
Needs ``pip install 'toolplan[pydantic-ai]'``.
"""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from toolplan.integrations.pydantic_ai import ToolPlanning


def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 12)}


def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    return f"{abs(a - b)} degrees apart"


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Plays the model: one plan, then an answer built from the plan's result."""
    answers = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if answers:
        return ModelResponse(parts=[TextPart(f"Oslo and Rome: {answers[-1].content}")])
    plan = {
        "steps": [
            {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
            {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
            {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
        ],
        "output_steps": ["cmp"],
    }
    return ModelResponse(parts=[ToolCallPart("execute_tool_plan", plan)])


agent = Agent(FunctionModel(model), tools=[get_weather, compare], capabilities=[ToolPlanning()])
result = agent.run_sync("How different are Oslo and Rome today?", usage_limits=UsageLimits(tool_calls_limit=10))
print(result.output)  # Oslo and Rome: {"status":"succeeded","outputs":{"cmp":"15.0 degrees apart"}}
assert "15.0 degrees apart" in result.output
print(result.usage.tool_calls, "tool calls")  # 4: three nested calls counted by pydantic-ai, and the plan
