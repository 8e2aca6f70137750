"""``toolplan demo``: a built-in plan with simulated latencies, run through the real engine.

`run_demo` is the entry point; it only needs a rich console, so other front ends (or a longer demo
comparing agents) can reuse it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console

from ..execute import PlanResult, execute_plan
from ..tools import ToolResult, tool
from ._progress import ProgressView, live_progress
from ._render import print_errors, print_json, print_step_table, prose, say

__all__ = ("DEMO_PLAN", "demo_tools", "run_demo")

# Simulated latency (seconds) and weather of each known city. Deterministic: same run, same output.
_CITIES: dict[str, tuple[float, dict[str, Any]]] = {
    "Tokyo": (0.30, {"temp": 18.5, "condition": "cloudy", "humidity": 71}),
    "London": (0.25, {"temp": 11.0, "condition": "rainy", "humidity": 88}),
    "Paris": (0.20, {"temp": 14.5, "condition": "sunny", "humidity": 60}),
    "New York": (0.35, {"temp": 9.0, "condition": "windy", "humidity": 55}),
}


@tool(read_only=True)
async def get_weather(location: str) -> ToolResult:
    """Current weather for a city (simulated).

    Args:
        location: City name, e.g. "Tokyo".
    """
    if location not in _CITIES:
        await asyncio.sleep(0.05)
        return ToolResult(None, error=f"City {location!r} not found. Known cities: {', '.join(_CITIES)}.")
    latency, weather = _CITIES[location]
    await asyncio.sleep(latency)
    return ToolResult({"location": location, **weather})


@tool(read_only=True)
async def compare_data(data_a: dict[str, Any], data_b: dict[str, Any], note: str = "") -> dict[str, Any]:
    """Compare two weather reports.

    Args:
        data_a: The first report.
        data_b: The second report.
        note: Free text to keep with the comparison.
    """
    await asyncio.sleep(0.1)
    warmer = data_a if data_a["temp"] >= data_b["temp"] else data_b
    return {
        "warmer": warmer["location"],
        "difference": round(abs(data_a["temp"] - data_b["temp"]), 1),
        "note": note,
    }


@tool(read_only=True)
async def summarise(comparisons: list[dict[str, Any]]) -> str:
    """One sentence per comparison.

    Args:
        comparisons: Results of compare_data.
    """
    await asyncio.sleep(0.05)
    return " ".join(
        f"{c['warmer']} is warmer by {c['difference']}°C" + (f" ({c['note']})." if c["note"] else ".")
        for c in comparisons
    )


def demo_tools() -> list[Any]:
    """The demo's tools."""
    return [get_weather, compare_data, summarise]


DEMO_PLAN: dict[str, Any] = {
    "goal": "Which city is warmer: Tokyo or London, Paris or New York? (and Atlantis, which does not exist)",
    "steps": [
        {"id": "tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
        {"id": "london", "tool": "get_weather", "arguments": '{"location": "London"}'},
        {"id": "paris", "tool": "get_weather", "arguments": {"location": "Paris"}},
        {"id": "new_york", "tool": "get_weather", "arguments": {"location": "New York"}},
        {"id": "atlantis", "tool": "get_weather", "arguments": {"location": "Atlantis"}},
        {
            "id": "tokyo_vs_london",
            "tool": "compare_data",
            "arguments": {
                "data_a": "$ref:tokyo",
                "data_b": "$ref:london",
                "note": "Tokyo is {{tokyo.condition}}, London is {{london.condition}}",
            },
        },
        {
            "id": "paris_vs_new_york",
            "tool": "compare_data",
            "arguments": {"data_a": "$ref:paris", "data_b": "$ref:new_york", "note": "{{paris.humidity}}% humidity"},
        },
        {
            "id": "atlantis_vs_tokyo",
            "tool": "compare_data",
            "arguments": {"data_a": "$ref:atlantis", "data_b": "$ref:tokyo"},
        },
        {
            "id": "summary",
            "tool": "summarise",
            "arguments": {"comparisons": ["$ref:tokyo_vs_london", "$ref:paris_vs_new_york"]},
        },
    ],
    "output_steps": ["tokyo_vs_london", "paris_vs_new_york", "summary"],
}


async def _run(on_event: ProgressView | None) -> PlanResult:
    return await execute_plan(DEMO_PLAN, demo_tools(), on_event=on_event)


def run_demo(console: Console) -> int:
    """Run the demo plan on ``console`` and explain what happened; returns the exit code (0).

    On a terminal the steps are shown live; otherwise a table is printed at the end.
    """
    n = len(DEMO_PLAN["steps"])
    say(console, f"toolplan demo: {n} tool calls from one plan, run as a dependency graph.", "bold")
    prose(console, f"Goal: {DEMO_PLAN['goal']}", "dim")
    if console.is_terminal:
        view = ProgressView({s["id"]: s["tool"] for s in DEMO_PLAN["steps"]})
        with live_progress(console, view):
            result = asyncio.run(_run(view))
    else:
        result = asyncio.run(_run(None))
        print_step_table(console, result)
    print_errors(console, result)
    _explain(console, result)
    return 0


def _explain(console: Console, result: PlanResult) -> None:
    say(console, "")
    say(console, "Outputs (only the steps the plan asked for):", "bold")
    print_json(console, result.outputs)
    say(console, "")
    say(console, "Waves (steps whose inputs are ready at the same depth):", "bold")
    for k, wave in enumerate(result.waves, start=1):
        say(console, f"  wave {k}: {', '.join(wave)}")
    path = " -> ".join(result.critical_path)
    say(console, f"Critical path: {path} ({result.critical_path_duration:.2f}s)", "bold")
    failed = [sid for sid, r in result.steps.items() if r.status == "failed"]
    skipped = [sid for sid, r in result.steps.items() if r.status == "skipped"]
    ok = sum(1 for r in result.steps.values() if r.ok)
    prose(
        console,
        f"Fail-forward: {ok} of {len(result.steps)} steps succeeded. {', '.join(failed) or 'Nothing'} failed "
        f"(on purpose); {', '.join(skipped) or 'nothing'} was skipped because it needs that output, "
        "and every other step went on.",
        "yellow",
    )
    busy = sum(r.duration or 0.0 for r in result.steps.values())
    prose(
        console,
        f"Wall time {result.duration:.2f}s vs {busy:.2f}s of step time one after another "
        f"(achieved parallelism {result.parallelism:.1f}x).",
        "bold green",
    )
