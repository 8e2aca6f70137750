"""Tools of the conditions example: an inventory, a purchase and a back-order."""

from __future__ import annotations

from toolplan import tool

STOCK = {"pen": 12, "lamp": 3}


@tool
def check_inventory(sku: str) -> dict[str, object]:
    """Units in stock and the unit price of an item."""
    return {"sku": sku, "available": STOCK.get(sku, 0), "price": 2.5}


@tool
def purchase(sku: str, quantity: int, total: float) -> str:
    """Buy ``quantity`` units of an item for ``total``."""
    return f"bought {quantity} {sku} for {total}"


@tool
def back_order(sku: str, quantity: int) -> str:
    """Order an item that is not in stock in that quantity."""
    return f"back-ordered {quantity} {sku}"
