"""What mypy sees of deps and structured output: ``mypy tests/agent`` checks this file; pytest runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from toolplan import AgentResult, RunContext, tool
from toolplan.agent import Agent
from toolplan.testing import TestModel


@dataclass
class Deps:
    greeting: str


class Answer(BaseModel):
    text: str


@tool
def greet(ctx: RunContext[Deps], name: str) -> str:
    """Greet someone."""
    assert_type(ctx.deps.greeting, str)
    return f"{ctx.deps.greeting}, {name}"


def test_plain_agent_outputs_str() -> None:
    agent = Agent(TestModel(custom_output_text="hi"))
    assert_type(agent, Agent[None, str])
    result = agent.run_sync("go")
    assert_type(result, AgentResult[str])
    assert_type(result.output, str)
    assert result.output == "hi"


def test_deps_and_output_types_flow_to_the_result() -> None:
    agent = Agent(TestModel(), tools=[greet], deps_type=Deps, output_type=Answer)
    assert_type(agent, Agent[Deps, Answer])
    result = agent.run_sync("go", deps=Deps("hello"))
    assert_type(result.output, Answer)
    assert isinstance(result.output, Answer)


def test_generic_outputs_are_typed_too() -> None:
    agent = Agent(TestModel(), output_type=list[int])
    assert_type(agent.run_sync("go").output, list[int])


def test_a_tool_with_run_context_keeps_its_signature() -> None:
    assert_type(greet(RunContext(deps=Deps("hey")), "Ada"), str)


def _wrong() -> None:
    # Never run: each line is a mypy error (and mypy --strict fails on an unused ignore).
    Agent(TestModel(), deps_type=Deps).run_sync("go", deps="not deps")  # type: ignore[arg-type]
    greet(RunContext(deps=1), "Ada")  # type: ignore[arg-type]
