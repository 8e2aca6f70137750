"""Tools of the durable-run example: a trip booking whose payment must never happen twice.

``PAYMENTS`` stands in for a payment provider that, like Stripe's API, remembers each idempotency
key it has seen: a second request with the same key returns the first charge instead of charging
again. The tools pass on the key toolplan gives each step (``current_call().idempotency_key``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from toolplan import current_call, tool

PAYMENTS = Path(os.environ.get("PAYMENTS_FILE", "payments.json"))  # the provider's own records


def _charges() -> dict[str, dict[str, object]]:
    return json.loads(PAYMENTS.read_text()) if PAYMENTS.exists() else {}


@tool(read_only=True)
def find_flight(origin: str, destination: str) -> dict[str, object]:
    """Find the cheapest flight (reads only: safe to call again)."""
    time.sleep(0.2)
    return {"flight": f"{origin}-{destination}-042", "price": 420}


@tool(idempotent=True)
def hold_seat(flight: str) -> dict[str, str]:
    """Hold a seat; holding it again with the same key keeps the same hold."""
    time.sleep(0.2)
    return {"hold": f"hold-{flight}", "key": current_call().idempotency_key}


@tool
def charge_card(amount: int) -> dict[str, object]:
    """Charge the card. Not marked idempotent: toolplan never repeats it on its own."""
    key = current_call().idempotency_key
    charges = _charges()
    if key not in charges:  # the provider de-duplicates by key
        charges[key] = {"amount": amount, "at": time.time()}
        PAYMENTS.write_text(json.dumps(charges))
    time.sleep(0.2)
    return {"charged": amount, "key": key}


@tool(idempotent=True)
def send_receipt(flight: str, charged: int) -> str:
    """Email the receipt (the mail service de-duplicates by key)."""
    return f"Receipt: {flight}, {charged} EUR"
