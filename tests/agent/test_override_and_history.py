"""`Agent.override(model=...)` for tests, and `AgentResult.all_messages()` / `new_messages()` across turns."""

from __future__ import annotations

import asyncio

import pytest

from toolplan import tool
from toolplan.agent import Agent
from toolplan.models import AssistantMessage, ModelMessage, SystemMessage, ToolReturnMessage, UserMessage
from toolplan.testing import FunctionInfo, FunctionModel, ScriptedModel, TestModel


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def answering(text: str) -> ScriptedModel:
    return ScriptedModel([text])


def test_override_replaces_the_model_for_run_sync_and_restores_it() -> None:
    own = answering("own")
    agent = Agent(model=own, tools=[double])
    with agent.override(model=TestModel(custom_output_text="overridden")):
        assert agent.run_sync("go").output == "overridden"
        assert agent.model is not own
    assert agent.model is own
    assert agent.run_sync("go").output == "own"
    own.assert_consumed()


async def test_override_works_with_run_and_run_stream_and_nests() -> None:
    agent = Agent(model=answering("unused"))
    outer, inner = answering("outer"), ScriptedModel(["inner", "streamed"])
    with agent.override(model=outer):
        with agent.override(model=inner):
            assert (await agent.run("go")).output == "inner"
            async with agent.run_stream("go") as stream:
                kinds = [event.kind async for event in stream]
            assert stream.result is not None and stream.result.output == "streamed"
            assert kinds[-1] == "run_finished"
        assert (await agent.run("go")).output == "outer"
        with agent.override():  # no model given: nothing changes
            assert agent.model is outer
    outer.assert_consumed()
    inner.assert_consumed()


async def test_override_is_restored_after_an_error_and_stays_in_its_context() -> None:
    own = answering("own")
    agent = Agent(model=own)
    other = Agent(model=answering("other"))
    entered = asyncio.Event()
    leave = asyncio.Event()

    async def outside() -> str:
        await entered.wait()  # runs while the override below is active, in a task started before it
        assert agent.model is own
        leave.set()
        return (await other.run("go")).output

    task = asyncio.create_task(outside())
    with pytest.raises(RuntimeError, match="boom"), agent.override(model=TestModel()):
        assert other.model is not agent.model  # only this agent's model changes
        entered.set()
        await leave.wait()
        raise RuntimeError("boom")
    assert agent.model is own
    assert await task == "other"


def test_override_accepts_model_strings_and_checks_them() -> None:
    from toolplan import UserError

    agent = Agent(model=TestModel())
    with pytest.raises(UserError, match="provider"), agent.override(model="no-provider"):
        pass


def echo(messages: list[ModelMessage], info: FunctionInfo) -> AssistantMessage:
    """Answers with the number of user prompts it has seen so far."""
    users = [m for m in messages if isinstance(m, UserMessage)]
    return AssistantMessage(content=f"prompt {len(users)}: {users[-1].content}")


def test_new_messages_and_all_messages_feed_a_two_turn_conversation() -> None:
    model = FunctionModel(echo)
    agent = Agent(model=model, instructions="Be brief.")

    first = agent.run_sync("hello")
    assert first.new_messages() == first.all_messages() == list(first.messages)
    assert [type(m) for m in first.new_messages()] == [SystemMessage, UserMessage, AssistantMessage]

    second = agent.run_sync("and again", message_history=first.new_messages())
    assert second.output == "prompt 2: and again"
    assert second.all_messages()[:3] == first.all_messages()  # the system prompt is not repeated
    assert [type(m) for m in second.new_messages()] == [UserMessage, AssistantMessage]
    assert first.all_messages() + second.new_messages() == second.all_messages()

    third = agent.run_sync("once more", message_history=second.all_messages())
    assert third.output == "prompt 3: once more"
    assert len(third.all_messages()) == 7 and len(third.new_messages()) == 2
    assert model.requests[-1].messages == tuple(third.all_messages()[:-1])


async def test_new_messages_include_the_tool_calls_of_the_run() -> None:
    agent = Agent(model=TestModel(custom_output_text="done"), tools=[double])
    history: list[ModelMessage] = [UserMessage(content="earlier"), AssistantMessage(content="ok")]
    result = await agent.run("double it", message_history=history)
    new = result.new_messages()
    assert [type(m) for m in new] == [UserMessage, AssistantMessage, ToolReturnMessage, AssistantMessage]
    assert new[0] == UserMessage(content="double it")
    assert result.all_messages()[: len(history)] == history
    assert result.all_messages()[len(history) :] == new
