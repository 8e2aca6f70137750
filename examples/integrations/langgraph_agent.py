"""A LangGraph agent whose tool node also offers ``make_plan_tool(tools)``.

Runs offline: LangChain's FakeMessagesListChatModel plays the model and sends one plan.
Needs ``pip install 'toolplan[langchain]'``.
"""

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from toolplan.integrations.langchain import make_plan_tool


@tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp": {"Oslo": 4, "Rome": 19}.get(city, 12)}


@tool
def compare(a: float, b: float) -> str:
    """Compare two temperatures."""
    return f"{abs(a - b)} degrees apart"


tools = [get_weather, compare]
tools = [*tools, make_plan_tool(tools)]  # the one line

plan = {
    "steps": [
        {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
        {"id": "cmp", "tool": "compare", "arguments": {"a": "$ref:oslo.temp", "b": "$ref:rome.temp"}},
    ],
    "output_steps": ["cmp"],
}
model = FakeMessagesListChatModel(
    responses=[
        AIMessage("", tool_calls=[{"name": "execute_tool_plan", "args": plan, "id": "call_1"}]),
        AIMessage("15 degrees."),
    ]
)  # a real chat model: ChatOpenAI(...).bind_tools(tools)

graph = StateGraph(MessagesState)
graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
graph.add_node("tools", ToolNode(tools))
graph.add_edge(START, "model")
graph.add_conditional_edges("model", tools_condition)
graph.add_edge("tools", "model")
app = graph.compile()

for mode, chunk in app.stream(
    {"messages": [HumanMessage("How different are Oslo and Rome today?")]}, stream_mode=["custom", "values"]
):
    if mode == "custom":
        print(chunk)  # toolplan's step events, on LangGraph's stream writer
    else:
        final = chunk

answer = next(m for m in final["messages"] if isinstance(m, ToolMessage))
print(answer.content)  # {"status":"succeeded","outputs":{"cmp":"15.0 degrees apart"}}: what the model reads
print(answer.artifact["steps"][0]["status"])  # succeeded: the full record, for your code
assert "15.0 degrees apart" in answer.content
