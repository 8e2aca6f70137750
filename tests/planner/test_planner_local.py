"""The planner against a real model: SmolLM2-135M behind llama.cpp's server, constrained by the plan's grammar.

The model is tiny and its plans are often wrong; what the constraint guarantees is their structure.
llama.cpp turns the forced ``submit_plan`` tool's JSON Schema into a grammar, so every draft the
model finishes is a plan naming only the catalogue's tools (and their argument names). A draft cut
off by ``max_tokens`` is unfinished JSON: the grammar bounds what is written, not its length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from toolplan import tool
from toolplan.models import Model, ModelMessage, ModelResponse, ModelSettings
from toolplan.planner import Planner
from toolplan.testing import LocalLlamaServer
from toolplan.tools import ToolDefinition

# About a minute on 2 idle cores (a prompt of ~1,000 tokens per request); several on a busy machine.
pytestmark = [pytest.mark.local_model, pytest.mark.slow, pytest.mark.timeout(600)]


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather of a city: temperature in Celsius and a condition such as 'rain'."""
    return {"city": city, "temp_c": 12.0, "condition": "cloudy"}


@tool
def translate(text: str, language: str) -> str:
    """Translate a text into a language (such as 'French')."""
    return text


MAX_TOKENS = 160


class Counting(Model):
    """The server's model, keeping how many tokens each answer has (to tell a finished draft from a cut one)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.output_tokens: list[int] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition], settings: ModelSettings | None = None
    ) -> ModelResponse:
        response = await self.inner.request(messages, tools, settings)
        self.output_tokens.append(response.usage.output_tokens)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


QUESTIONS = ("What is the weather in Tokyo and in London?", "Translate 'good morning' into Spanish.")


async def test_every_finished_constrained_draft_is_a_plan_over_the_catalogue(llama_server: LocalLlamaServer) -> None:
    # The fixture's server has a 2,048-token context: two tools keep the prompt (instructions and the
    # submit tool's schema) near 1,000 tokens, which leaves room for a repair round.
    finished = 0
    async with Counting(llama_server.model()) as model:
        planner = Planner(model, [get_weather, translate], max_steps=3, settings=ModelSettings(max_tokens=MAX_TOKENS))
        for question in QUESTIONS:
            model.output_tokens = []
            draft = await planner.plan(question)
            assert len(draft.versions) == len(model.output_tokens) == draft.usage.requests
            print(question, model.output_tokens, [v.text for v in draft.versions])  # shown when the test fails
            for version, tokens in zip(draft.versions, model.output_tokens, strict=True):
                if tokens >= MAX_TOKENS:  # cut short: unfinished JSON, the only way a draft can fail to parse
                    assert version.plan is not None or [i.code for i in version.issues] == ["invalid_json"]
                    continue
                finished += 1
                assert version.plan is not None, (question, version.text, version.issues)
                assert {s.tool for s in version.plan.steps} <= {"get_weather", "translate"}, question
                for step in version.plan.steps:  # argument names are the tool's own
                    allowed = {"city"} if step.tool == "get_weather" else {"text", "language"}
                    assert set(step.arguments) <= allowed, (question, step)
    assert finished >= 2  # the guarantee was tested, not skipped: SmolLM2 finishes most of these drafts
