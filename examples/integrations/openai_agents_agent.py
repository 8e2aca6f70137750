"""An OpenAI Agents SDK agent that plans over its function tools: one line, ``plan_tool()``.

Runs offline: the SDK's ScriptedModel plays the model and sends one plan.
Needs ``pip install 'toolplan[openai-agents]'``.
"""

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from toolplan.integrations.openai_agents import plan_tool

set_tracing_disabled(True)  # this example stays offline


@function_tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 12)}


@function_tool
def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    return f"{abs(a - b)} degrees apart"


plan = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}
model = ScriptedModel([[function_call("execute_tool_plan", plan, call_id="c1")], [assistant_message("15 degrees.")]])

agent = Agent(name="weather", model=model, tools=[get_weather, compare, plan_tool()])
result = Runner.run_sync(agent, "How different are Oslo and Rome today?")
print(result.final_output)  # 15 degrees.
seen = [i for i in model.calls[1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
print(
    seen[-1]["output"]
)  # {"status":"succeeded","outputs":{"cmp":"15.0 degrees apart"}}: all the model sees of the three calls
assert "15.0 degrees apart" in str(seen[-1]["output"])
