"""A dry run before the real one: what a plan would call, cost and take, and that it calls nothing.

Run: python examples/dry_run/dry_run.py [DB_URL]   (default: sqlite:///dry_run.db in the current directory)

The first dry run knows no latencies; after one real run the store has them, and the second dry run
gives the expected duration. A learning policy chooses between two mirrors across the runs.
"""

from __future__ import annotations

import asyncio
import sys

from toolplan import Budget, ToolRegistry, execute_plan, tool
from toolplan.store import open_store

CALLED: list[str] = []


@tool(read_only=True, idempotent=True, cost=1)
def fetch_orders(customer: str) -> list[dict[str, object]]:
    """The customer's open orders."""
    CALLED.append("fetch_orders")
    return [{"id": 7, "total": 40}, {"id": 9, "total": 15}]


@tool(read_only=True, cost=2)
def mirror_eu(customer: str) -> str:
    """The customer's profile, from the European mirror."""
    CALLED.append("mirror_eu")
    return f"{customer} (eu)"


@tool(read_only=True, cost=2)
def mirror_us(customer: str) -> str:
    """The customer's profile, from the American mirror."""
    CALLED.append("mirror_us")
    return f"{customer} (us)"


@tool(destructive=True, cost=5)
def cancel_order(order_id: int) -> str:
    """Cancel an order for good."""
    CALLED.append("cancel_order")
    return f"cancelled {order_id}"


PLAN = {
    "policy": "thompson",
    "steps": [
        {"id": "orders", "tool": "fetch_orders", "arguments": {"customer": "ada"}},
        {"id": "profile", "tool": "profile", "arguments": {"customer": "ada"}},
        {
            "id": "cancel",
            "tool": "cancel_order",
            "arguments": {"order_id": "$ref:orders.0.id"},
            "depends_on": ["profile"],
            "rationale": "the customer asked to cancel the first order",
        },
    ],
    "budget": {"max_cost": 10},
}


async def main(url: str) -> None:
    tools = ToolRegistry([fetch_orders, mirror_eu, mirror_us, cancel_order])
    tools.add_group("profile", ["mirror_eu", "mirror_us"])
    async with open_store(url) as store:
        report = await execute_plan(PLAN, tools, store=store, dry_run=True, budget=Budget(max_tool_calls=4))
        assert CALLED == []  # nothing was called
        print("waves:", [list(w) for w in report.waves])
        print("destructive:", list(report.destructive))
        for step in report.steps.values():
            print(f"  {step.id:8} {step.tool:13} calls<={step.calls} cost={step.cost:g} {step.annotations}")
        print(
            f"budget: up to {report.budget.calls} calls, cost {report.budget.cost:g}; over: {list(report.budget.over)}"
        )
        print("duration:", report.duration_note)

        result = await execute_plan(PLAN, tools, store=store)  # the real run
        print("ran:", result.status, sorted(CALLED))

        again = await execute_plan(PLAN, tools, store=store, dry_run=True)
        seconds = again.expected_seconds
        print("expected duration now:", "unknown" if seconds is None else f"{seconds:.4f}s")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///dry_run.db"))
