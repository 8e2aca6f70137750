"""The round-trip task suite: tools with realistic latency and payloads, and the calls each task needs.

Shapes follow published multi-call benchmarks: BFCL's *parallel* category and LLMCompiler's
ParallelQA (k independent lookups, then one combine), HotpotQA-style search -> compute chains
(LLMCompiler's HotpotQA/Movie runs) and a 5-step dependent chain (ToolBench / tau-bench style
lookups where each call needs the previous answer). Each task is written once as a plan; the
scripted model derives the one-call-per-turn and parallel-calls transcripts from the same plan.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

from toolplan import tool

# Tool latencies in seconds at scale 1.0 (the benchmark scales them with the model latency).
LATENCY = {
    "get_weather": 0.30,
    "compare_weather": 0.05,
    "web_search": 0.60,
    "calculator": 0.02,
    "find_customer": 0.20,
    "list_orders": 0.25,
    "get_order": 0.15,
    "track_shipment": 0.30,
    "estimate_delivery": 0.10,
}
_scale = [1.0]


def set_latency_scale(scale: float) -> None:
    _scale[0] = scale


async def _latency(name: str) -> None:
    await asyncio.sleep(LATENCY[name] * _scale[0])


def _h(text: str, mod: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % mod


@tool
async def get_weather(city: str) -> dict[str, Any]:
    """Current weather and a 3-day forecast for a city.

    Args:
        city: City name, e.g. "Tokyo".
    """
    await _latency("get_weather")
    t = 5 + _h(city, 25)
    return {
        "city": city,
        "temperature_c": t,
        "feels_like_c": t - 2,
        "condition": ["sunny", "cloudy", "rain", "windy"][_h(city, 4)],
        "humidity_pct": 40 + _h(city + "h", 50),
        "wind_kph": 5 + _h(city + "w", 30),
        "observed_at": "2025-06-01T12:00:00Z",
        "forecast": [
            {"day": d, "high_c": t + i, "low_c": t - 6 + i, "precip_pct": _h(city + d, 100)}
            for i, d in enumerate(("Mon", "Tue", "Wed"))
        ],
        "source": "weather.example.com",
    }


@tool
async def compare_weather(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare weather reports: warmest, coldest and the mean temperature.

    Args:
        reports: Reports from get_weather.
    """
    await _latency("compare_weather")
    temps = {r["city"]: r["temperature_c"] for r in reports}
    return {
        "warmest": max(temps, key=temps.__getitem__),
        "coldest": min(temps, key=temps.__getitem__),
        "mean_c": round(sum(temps.values()) / len(temps), 1),
    }


@tool
async def web_search(query: str) -> dict[str, Any]:
    """Search the web; returns the top 5 results with snippets.

    Args:
        query: What to search for.
    """
    await _latency("web_search")
    value = 100 + _h(query, 900)
    return {
        "query": query,
        "answer": value,
        "results": [
            {
                "title": f"{query} - result {i + 1}",
                "url": f"https://example.org/{_h(query, 10**6)}/{i}",
                "snippet": f"According to source {i + 1}, the figure for {query} is about {value} as of the "
                "latest published estimate; see the full article for methodology and revisions.",
            }
            for i in range(5)
        ],
    }


@tool
async def calculator(expression: str, a: float, b: float) -> dict[str, Any]:
    """Apply a binary operation to two numbers.

    Args:
        expression: One of "a+b", "a-b", "a*b", "a/b".
        a: First operand.
        b: Second operand.
    """
    await _latency("calculator")
    ops = {"a+b": a + b, "a-b": a - b, "a*b": a * b, "a/b": a / b if b else float("nan")}
    return {"expression": expression, "value": round(ops[expression], 4)}


@tool
async def find_customer(email: str) -> dict[str, Any]:
    """Find a customer by email.

    Args:
        email: The customer's email address.
    """
    await _latency("find_customer")
    return {"customer_id": f"C{_h(email, 10**5):05d}", "name": "Ada Lovelace", "tier": "gold", "since": "2019-04-02"}


@tool
async def list_orders(customer_id: str) -> dict[str, Any]:
    """List a customer's recent orders (newest first).

    Args:
        customer_id: From find_customer.
    """
    await _latency("list_orders")
    return {
        "customer_id": customer_id,
        "orders": [
            {"order_id": f"O{_h(customer_id, 10**6) + i:06d}", "placed": f"2025-05-{28 - 3 * i:02d}", "items": 1 + i}
            for i in range(4)
        ],
    }


@tool
async def get_order(order_id: str) -> dict[str, Any]:
    """Details of one order.

    Args:
        order_id: From list_orders.
    """
    await _latency("get_order")
    return {
        "order_id": order_id,
        "status": "shipped",
        "carrier": "ExampleExpress",
        "tracking_number": f"EX{_h(order_id, 10**9):09d}",
        "total_eur": 129.9,
        "items": [{"sku": "KB-42", "name": "Mechanical keyboard", "qty": 1}],
    }


@tool
async def track_shipment(tracking_number: str) -> dict[str, Any]:
    """Tracking events of a shipment.

    Args:
        tracking_number: From get_order.
    """
    await _latency("track_shipment")
    return {
        "tracking_number": tracking_number,
        "last_hub": "Leipzig",
        "events": [
            {"at": "2025-05-29T08:10:00Z", "where": "Warehouse Berlin", "what": "picked up"},
            {"at": "2025-05-30T02:44:00Z", "where": "Leipzig hub", "what": "sorted"},
        ],
    }


@tool
async def estimate_delivery(tracking_number: str, last_hub: str) -> dict[str, Any]:
    """Estimated delivery date of a shipment.

    Args:
        tracking_number: From get_order.
        last_hub: The last hub from track_shipment.
    """
    await _latency("estimate_delivery")
    return {"tracking_number": tracking_number, "estimated_delivery": "2025-06-02", "confidence": 0.9}


WEATHER = [get_weather, compare_weather]
SEARCH = [web_search, calculator]
ORDERS = [find_customer, list_orders, get_order, track_shipment, estimate_delivery]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    shape: str
    prompt: str
    tools: list[Any]
    plan: dict[str, Any]
    answer: str
    note: str = field(default="")


def _weather_task(name: str, cities: list[str]) -> Task:
    steps: list[dict[str, Any]] = [
        {"id": f"w{i}", "tool": "get_weather", "arguments": {"city": c}} for i, c in enumerate(cities)
    ]
    steps.append(
        {
            "id": "cmp",
            "tool": "compare_weather",
            "arguments": {"reports": [f"$ref:w{i}" for i in range(len(cities))]},
        }
    )
    return Task(
        name=name,
        shape=f"{len(cities)}-way fan-out + combine",
        prompt=f"Which of these cities is warmest right now, which is coldest, and what is the mean "
        f"temperature: {', '.join(cities)}?",
        tools=WEATHER,
        plan={"steps": steps, "output_steps": ["cmp"]},
        answer="The warmest city is {warmest}, the coldest is {coldest}; the mean temperature is {mean_c} °C.",
    )


TASKS: list[Task] = [
    _weather_task("fanout2", ["Tokyo", "London"]),
    _weather_task("fanout8", ["Tokyo", "London", "Paris", "New York", "Sydney", "Cairo", "Lima", "Oslo"]),
    Task(
        name="search_compute",
        shape="2 searches -> compute",
        prompt="How many times larger is the population of Lagos than that of Lisbon?",
        tools=SEARCH,
        plan={
            "steps": [
                {"id": "a", "tool": "web_search", "arguments": {"query": "population of Lagos"}},
                {"id": "b", "tool": "web_search", "arguments": {"query": "population of Lisbon"}},
                {
                    "id": "ratio",
                    "tool": "calculator",
                    "arguments": {"expression": "a/b", "a": "$ref:a.answer", "b": "$ref:b.answer"},
                },
            ],
            "output_steps": ["ratio"],
        },
        answer="Lagos is about {value} times as populous as Lisbon.",
    ),
    Task(
        name="search_chain",
        shape="search -> compute -> search -> compute",
        prompt="Take the height of the Eiffel Tower in metres, double it, search how many floors a building "
        "of that height has, and add 10.",
        tools=SEARCH,
        plan={
            "steps": [
                {"id": "h", "tool": "web_search", "arguments": {"query": "height of the Eiffel Tower in metres"}},
                {"id": "d", "tool": "calculator", "arguments": {"expression": "a*b", "a": "$ref:h.answer", "b": 2}},
                {
                    "id": "f",
                    "tool": "web_search",
                    "arguments": {"query": "floors of a building {{d.value}} metres tall"},
                },
                {"id": "r", "tool": "calculator", "arguments": {"expression": "a+b", "a": "$ref:f.answer", "b": 10}},
            ],
            "output_steps": ["r"],
        },
        answer="The result is {value}.",
    ),
    Task(
        name="chain5",
        shape="5-step dependent chain",
        prompt="When will the latest order of ada@example.com arrive?",
        tools=ORDERS,
        plan={
            "steps": [
                {"id": "c", "tool": "find_customer", "arguments": {"email": "ada@example.com"}},
                {"id": "o", "tool": "list_orders", "arguments": {"customer_id": "$ref:c.customer_id"}},
                {"id": "g", "tool": "get_order", "arguments": {"order_id": "$ref:o.orders.0.order_id"}},
                {"id": "t", "tool": "track_shipment", "arguments": {"tracking_number": "$ref:g.tracking_number"}},
                {
                    "id": "e",
                    "tool": "estimate_delivery",
                    "arguments": {"tracking_number": "$ref:g.tracking_number", "last_hub": "$ref:t.last_hub"},
                },
            ],
            "output_steps": ["e"],
        },
        answer="Your latest order should arrive on {estimated_delivery}.",
    ),
]
