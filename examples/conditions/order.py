"""Check the inventory, then purchase or back-order: one plan, two steps with opposite conditions.

Run it: ``python examples/conditions/order.py``. ``plan.json`` is ``plan("lamp", 4)``, for the
command line: ``toolplan run examples/conditions/plan.json --tools examples/conditions/tools.py``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from toolplan import execute_plan

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import back_order, check_inventory, purchase


def plan(sku: str, quantity: int) -> dict[str, Any]:
    """Buy ``quantity`` of ``sku`` if that many are in stock, else back-order what is missing."""
    return {
        "steps": [
            {"id": "stock", "tool": "check_inventory", "arguments": {"sku": sku}},
            {
                "id": "buy",
                "tool": "purchase",
                "arguments": {
                    "sku": sku,
                    "quantity": quantity,
                    "total": {"$op": "*", "args": [quantity, "$ref:stock.price"]},
                },
                "when": {"$op": ">=", "args": ["$ref:stock.available", quantity]},
            },
            {
                "id": "later",
                "tool": "back_order",
                "arguments": {"sku": sku, "quantity": {"$op": "-", "args": [quantity, "$ref:stock.available"]}},
                "when": {"$op": "<", "args": ["$ref:stock.available", quantity]},
            },
        ],
        "output_steps": ["buy", "later"],
    }


async def main() -> None:
    tools = [check_inventory, purchase, back_order]
    for sku, quantity in (("pen", 4), ("lamp", 4)):
        result = await execute_plan(plan(sku, quantity), tools)
        print(f"{sku} x{quantity}: plan {result.status}")
        for sid in ("buy", "later"):
            step = result.steps[sid]
            shown = step.output if step.error is None else step.error.message
            print(f"  {sid}: {step.status}: {shown}")


if __name__ == "__main__":
    asyncio.run(main())
