"""Repeated calls: identical read-only lookups in one plan are made once; a result cache spans runs.

Run: python examples/repeated_calls/repeated_calls.py [DB_URL]   (default: sqlite:///cache.db here)

The plan asks for the weather in Oslo three times (two branches and a check); `weather` is
read_only and idempotent, so one call serves all three. The second run of the plan finds both
cities in the result cache, kept in the store's database, and makes no call at all.
"""

from __future__ import annotations

import asyncio
import sys

from toolplan import ResultCache, execute_plan, tool
from toolplan.execute import CacheHit, PlanEvent
from toolplan.store import open_store

CALLS: list[str] = []


@tool(read_only=True, idempotent=True)
async def weather(city: str) -> dict[str, object]:
    """The weather in a city (a slow remote lookup, say)."""
    CALLS.append(city)
    await asyncio.sleep(0.01)
    return {"city": city, "temp": len(city) * 3}


@tool(read_only=True, idempotent=True)
def advise(report: dict[str, object], activity: str) -> str:
    """Advice for an activity given a weather report."""
    return f"{activity} in {report['city']}: {'go' if int(str(report['temp'])) > 10 else 'wait'}"


PLAN = {
    "steps": [
        {"id": "oslo", "tool": "weather", "arguments": {"city": "Oslo"}},
        {"id": "oslo_again", "tool": "weather", "arguments": {"city": "Oslo"}},
        {"id": "rome", "tool": "weather", "arguments": {"city": "Rome"}},
        {"id": "hike", "tool": "advise", "arguments": {"report": "$ref:oslo", "activity": "hike"}},
        {"id": "swim", "tool": "advise", "arguments": {"report": "$ref:oslo_again", "activity": "swim"}},
        {"id": "check", "tool": "weather", "arguments": {"city": "$ref:oslo.city"}},
    ]
}


async def main(url: str) -> None:
    def show(event: PlanEvent) -> None:
        if isinstance(event, CacheHit):
            print(f"  cache hit: {event.step_id} ({event.tool})")

    async with open_store(url) as store:
        cache = ResultCache(ttl=300, store=store)
        for run in (1, 2):
            CALLS.clear()
            print(f"run {run}:")
            result = await execute_plan(PLAN, [weather, advise], cache=cache, on_event=show)
            for r in result.steps.values():
                how = "cached" if r.cached else f"shared with {', '.join(r.shared_with)}" if r.shared_with else ""
                print(f"  {r.id:<11} {r.status:<10} calls={r.attempts}  {how}".rstrip())
            print(f"  weather calls made: {len(CALLS)} ({', '.join(CALLS) or 'none'})")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///cache.db"))
