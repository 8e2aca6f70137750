"""A deterministic scripted model and a minimal agent loop, for counting round-trips and tokens.

The *model* is a `toolplan.testing.FunctionModel` whose function reads the conversation and answers
like a perfect model would in one of three modes:

- ``react``: one tool call per turn (the next call whose inputs are known), then the answer.
- ``parallel``: every call whose inputs are known, as native parallel tool calls in one turn.
- ``plan``: one ``execute_tool_plan`` call holding the whole task plan, then the answer.

Each request sleeps a simulated latency (``MODEL_FIXED_S`` + input tokens x ``PREFILL_S_PER_TOKEN``
+ output tokens x ``DECODE_S_PER_TOKEN``, times a scale) and records its token counts: input = the
whole conversation and the tool definitions, rendered as an OpenAI-style request body (the API
re-sends everything on every request); output = the assistant message.

The *loop* (`run_conversation`) is the minimal agent: request, run the tool calls (one by one,
concurrently, or the plan through toolplan), append the tool messages, repeat. When
``toolplan.agent.Agent`` exists, `run_with_agent` drives the same model through it instead (one
function to swap; the token accounting lives in the model, so it is unchanged).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolplan.execute import execute_plan
from toolplan.models import (
    AssistantMessage,
    ModelMessage,
    SystemMessage,
    ToolCall,
    ToolReturnMessage,
    UserMessage,
)
from toolplan.testing import FunctionInfo, FunctionModel
from toolplan.tools import ToolAnnotations, ToolDefinition, ToolRegistry

from . import tokens
from .tasks import Task

Mode = Literal["react", "parallel", "plan"]
MODES: tuple[Mode, ...] = ("react", "parallel", "plan")
PLAN_TOOL = "execute_tool_plan"

MODEL_FIXED_S = 0.400  # time to first token incl. network, per request
PREFILL_S_PER_TOKEN = 0.000_05  # 20k input tokens / s
DECODE_S_PER_TOKEN = 0.020  # 50 output tokens / s

SYSTEM = "You are a helpful assistant. Use the tools to answer the user's question, then answer briefly."

_REF = re.compile(r"^\$ref:([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*)$")
_TEMPLATE = re.compile(r"\{\{([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*)\}\}")


# -- the meta-tool as the model sees it ------------------------------------------------------------


def plan_tool_definition(registry: ToolRegistry) -> tuple[ToolDefinition, str, str]:
    """(definition, planning prompt section, where they came from): toolplan.agent's if it exists."""
    try:
        from toolplan.agent import PlanTool, planning_instructions
    except ImportError:
        pass
    else:
        return PlanTool(registry).definitions()[0], planning_instructions(registry.names), "toolplan.agent.PlanTool"
    schema = {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "tool": {"type": "string", "enum": registry.names},
                        "arguments": {"type": "object"},
                    },
                    "required": ["id", "tool", "arguments"],
                },
            },
            "output_steps": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["steps"],
    }
    definition = ToolDefinition(
        name=PLAN_TOOL,
        description="Run several tool calls in ONE turn as a plan. Steps run in parallel unless one uses "
        'another\'s output: "$ref:ID.field" inserts step ID\'s output, "{{ID.field}}" interpolates it '
        "in a string. Only the outputs of `output_steps` come back.",
        parameters_json_schema=schema,
        annotations=ToolAnnotations(cost=0.0),
    )
    prompt = (
        "## Tool plans\nWhen a task needs several tool calls, call `execute_tool_plan` once with every step "
        "instead of calling tools one by one."
    )
    return definition, prompt, "bench fallback (toolplan.agent not available)"


# -- rendering for token counts --------------------------------------------------------------------


def _wire_message(m: ModelMessage) -> dict[str, Any]:
    if isinstance(m, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": m.content}
        if m.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
        return out
    if isinstance(m, ToolReturnMessage):
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    return {"role": m.role, "content": m.content}


def request_text(messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition]) -> str:
    """The request body as an OpenAI-compatible API receives it (what input tokens are counted on)."""
    body = {
        "tools": [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema},
            }
            for t in tools
        ],
        "messages": [_wire_message(m) for m in messages],
    }
    return json.dumps(body, ensure_ascii=False)


def response_text(message: AssistantMessage) -> str:
    return json.dumps(_wire_message(message), ensure_ascii=False)


# -- the scripted policy ---------------------------------------------------------------------------


def _path(value: Any, path: str) -> Any:
    for seg in filter(None, path.split(".")):
        value = value[int(seg)] if isinstance(value, list) else value[seg]
    return value


def _deps(value: Any) -> set[str]:
    if isinstance(value, str):
        m = _REF.match(value)
        return {m.group(1)} if m else {t.group(1) for t in _TEMPLATE.finditer(value)}
    if isinstance(value, dict):
        return set().union(*(_deps(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_deps(v) for v in value)) if value else set()
    return set()


def _fill(value: Any, results: dict[str, Any]) -> Any:
    """What a model writes once it has read the results: references replaced by the actual values."""
    if isinstance(value, str):
        m = _REF.match(value)
        if m:
            return _path(results[m.group(1)], m.group(2))
        return _TEMPLATE.sub(lambda t: str(_path(results[t.group(1)], t.group(2))), value)
    if isinstance(value, dict):
        return {k: _fill(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, results) for v in value]
    return value


@dataclass
class RequestLog:
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    model_seconds: list[float] = field(default_factory=list)


class ScriptedPolicy:
    """The FunctionModel function for one task in one mode (a perfect, deterministic model)."""

    def __init__(self, task: Task, mode: Mode, *, scale: float) -> None:
        self.task, self.mode, self.scale = task, mode, scale
        self.steps = {s["id"]: s for s in task.plan["steps"]}
        self.deps = {sid: _deps(s["arguments"]) for sid, s in self.steps.items()}
        self.log = RequestLog()

    def _state(self, messages: Sequence[ModelMessage]) -> tuple[set[str], dict[str, Any]]:
        called: set[str] = set()
        results: dict[str, Any] = {}
        for m in messages:
            if isinstance(m, AssistantMessage):
                called.update(c.id.removeprefix("call_") for c in m.tool_calls)
            elif isinstance(m, ToolReturnMessage):
                results[m.tool_call_id.removeprefix("call_")] = json.loads(m.content)
        return called, results

    def decide(self, messages: Sequence[ModelMessage]) -> AssistantMessage:
        called, results = self._state(messages)
        if self.mode == "plan":
            if PLAN_TOOL not in called:
                args = json.dumps(self.task.plan, ensure_ascii=False)
                return AssistantMessage(tool_calls=(ToolCall(id=f"call_{PLAN_TOOL}", name=PLAN_TOOL, arguments=args),))
            outputs = results[PLAN_TOOL]["outputs"]
            return AssistantMessage(content=self._answer(outputs[self.task.plan["output_steps"][-1]]))
        ready = [sid for sid in self.steps if sid not in called and self.deps[sid] <= results.keys()]
        if not ready:
            return AssistantMessage(content=self._answer(results[self.task.plan["output_steps"][-1]]))
        if self.mode == "react":
            ready = ready[:1]
        calls = tuple(
            ToolCall(
                id=f"call_{sid}",
                name=self.steps[sid]["tool"],
                arguments=json.dumps(_fill(self.steps[sid]["arguments"], results), ensure_ascii=False),
            )
            for sid in ready
        )
        return AssistantMessage(tool_calls=calls)

    def _answer(self, output: Any) -> str:
        return self.task.answer.format(**output) if isinstance(output, dict) else f"{self.task.answer} {output}"

    async def __call__(self, messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
        reply = self.decide(messages)
        n_in = tokens.count(request_text(messages, info.tools))
        n_out = tokens.count(response_text(reply))
        seconds = self.scale * (MODEL_FIXED_S + n_in * PREFILL_S_PER_TOKEN + n_out * DECODE_S_PER_TOKEN)
        self.log.input_tokens.append(n_in)
        self.log.output_tokens.append(n_out)
        self.log.model_seconds.append(seconds)
        await asyncio.sleep(seconds)
        return reply


# -- the minimal agent loop ------------------------------------------------------------------------


@dataclass
class Conversation:
    task: str
    mode: Mode
    requests: int
    input_tokens: int
    output_tokens: int
    wall_s: float
    model_s: float
    tool_calls: int
    final_answer: str
    plan_tool_source: str
    per_request_input_tokens: list[int]


def _tool_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


async def run_conversation(task: Task, mode: Mode, *, scale: float, max_turns: int = 25) -> Conversation:
    """The minimal agent: request -> run calls -> append results -> repeat, until a text answer."""
    registry = ToolRegistry.of(task.tools)
    definitions = list(registry.definitions())
    system = SYSTEM
    source = "-"
    if mode == "plan":
        plan_def, prompt, source = plan_tool_definition(registry)
        definitions.append(plan_def)
        system = f"{SYSTEM}\n\n{prompt}"
    policy = ScriptedPolicy(task, mode, scale=scale)
    model = FunctionModel(policy)
    messages: list[ModelMessage] = [SystemMessage(content=system), UserMessage(content=task.prompt)]
    tool_calls = 0
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(max_turns):
        response = await model.request(messages, definitions)
        reply = response.message
        messages.append(reply)
        if not reply.tool_calls:
            break

        async def run_call(call: ToolCall) -> ToolReturnMessage:
            args = call.parse_arguments()
            if call.name == PLAN_TOOL:
                result = await execute_plan(args, registry)
                text = result.to_model_text()
                tool_count = len(result.steps)
            else:
                text, tool_count = _tool_text((await registry.execute(call.name, args)).content), 1
            nonlocal tool_calls
            tool_calls += tool_count
            return ToolReturnMessage(tool_call_id=call.id, name=call.name, content=text)

        messages.extend(await asyncio.gather(*(run_call(c) for c in reply.tool_calls)))
    wall = loop.time() - t0
    final = messages[-1]
    assert isinstance(final, AssistantMessage) and final.content, "the conversation did not end with an answer"
    return Conversation(
        task=task.name,
        mode=mode,
        requests=len(policy.log.input_tokens),
        input_tokens=sum(policy.log.input_tokens),
        output_tokens=sum(policy.log.output_tokens),
        wall_s=wall,
        model_s=sum(policy.log.model_seconds),
        tool_calls=tool_calls,
        final_answer=final.content,
        plan_tool_source=source,
        per_request_input_tokens=list(policy.log.input_tokens),
    )


def agent_available() -> bool:
    """True when the real agent loop and test model exist (then `run_with_agent` can replace the loop)."""
    try:
        from toolplan.agent import Agent  # noqa: F401
    except ImportError:
        return False
    return True


async def run_with_agent(task: Task, mode: Mode, *, scale: float) -> Conversation:
    """The same conversation through the real ``toolplan.agent.Agent`` (native executor; plan mode
    turns on ``tool_planning``). Token counts come from the model function, as in `run_conversation`.
    """
    from toolplan.agent import Agent

    policy = ScriptedPolicy(task, mode, scale=scale)
    agent = Agent(
        model=FunctionModel(policy),
        instructions=SYSTEM,
        tools=task.tools,
        tool_planning=mode == "plan",
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    result = await agent.run(task.prompt)
    wall = loop.time() - t0
    assert result.output, "the conversation did not end with an answer"
    calls = len(policy.steps)  # the scripted model makes every task call exactly once, in every mode
    return Conversation(
        task=task.name,
        mode=mode,
        requests=len(policy.log.input_tokens),
        input_tokens=sum(policy.log.input_tokens),
        output_tokens=sum(policy.log.output_tokens),
        wall_s=wall,
        model_s=sum(policy.log.model_seconds),
        tool_calls=calls,
        final_answer=result.output,
        plan_tool_source="toolplan.agent.Agent(tool_planning=True)" if mode == "plan" else "-",
        per_request_input_tokens=list(policy.log.input_tokens),
    )
