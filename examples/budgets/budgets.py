"""Budgets per tool and per cost, a warning at 80%, and a budget window per key kept in a store.

Run: python examples/budgets/budgets.py [DB_URL]   (default: sqlite:///budgets.db in the current directory)
"""

from __future__ import annotations

import asyncio
import sys

from toolplan import Budget, RunLimits, execute_plan, tool
from toolplan.execute import BudgetWarning, PlanEvent, WindowCharge, WindowLimits
from toolplan.store import StoreWindow, open_store


@tool(read_only=True, cost_of=lambda args: 1 + len(args["query"]) / 100)
def search(query: str) -> str:
    """Search: priced by the query's length."""
    return f"results for {query}"


@tool(cost=5)
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


PLAN = {
    "steps": [
        *({"id": f"q{i}", "tool": "search", "arguments": {"query": f"question {i}"}} for i in range(4)),
        {"id": "mail1", "tool": "send_email", "arguments": {"to": "a@example.com", "body": "$ref:q0"}},
        {"id": "mail2", "tool": "send_email", "arguments": {"to": "b@example.com", "body": "$ref:q1"}},
    ]
}


async def main(url: str) -> None:
    def show(event: PlanEvent) -> None:
        if isinstance(event, BudgetWarning):
            print("event:", event.message)

    async with open_store(url) as store:
        window = StoreWindow(store, WindowLimits(period=3600, max_cost=15))
        limits = RunLimits(
            budget=Budget(max_cost=20, max_tool_calls_per_tool={"send_email": 1}, warn_at=0.8),
            window=WindowCharge(window, "demo-key"),
            max_concurrency=1,
        )
        for run in (1, 2):
            result = await execute_plan(PLAN, [search, send_email], limits=limits, on_event=show)
            print(f"run {run}:")
            for r in result.steps.values():
                print(f"  {r.id:6} {r.status:10} {r.error.message if r.error else ''}")
        usage = (await window.usage("demo-key")).to_dict()
        print(f"window: {usage['cost']:g} of {usage['max_cost']:g} spent this hour, {usage['cost_left']:g} left")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///budgets.db"))
