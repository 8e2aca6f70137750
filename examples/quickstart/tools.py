"""Quickstart tools: deterministic fake weather data, a comparison and a summary.

Run the plan next to this file with:

    toolplan run examples/quickstart/plan.json --tools examples/quickstart/tools.py
"""

from __future__ import annotations

import zlib
from typing import Any, TypedDict

from toolplan import ToolError, tool

_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "foggy")
# The cities of the README and of `toolplan demo`, with the same weather; any other city gets made-up data.
_KNOWN: dict[str, tuple[float, str, int]] = {
    "Tokyo": (18.5, "cloudy", 71),
    "London": (11.0, "rainy", 88),
    "Paris": (14.5, "sunny", 60),
    "New York": (9.0, "windy", 55),
}


class Weather(TypedDict):
    location: str
    temp: float
    condition: str
    humidity: int


@tool(read_only=True, idempotent=True)
def get_weather(location: str) -> Weather:
    """Current weather for a city (fake, but the same every time for the same city).

    Args:
        location: City name, e.g. "Tokyo".
    """
    if not location.strip():
        raise ToolError("Give a city name, e.g. 'Tokyo'.")
    if location in _KNOWN:
        temp, condition, humidity = _KNOWN[location]
        return {"location": location, "temp": temp, "condition": condition, "humidity": humidity}
    seed = zlib.crc32(location.strip().lower().encode())
    return {
        "location": location,
        "temp": round(-5 + (seed % 400) / 10, 1),
        "condition": _CONDITIONS[seed % len(_CONDITIONS)],
        "humidity": 30 + seed % 65,
    }


def compare_data(data_a: dict[str, Any], data_b: dict[str, Any], note: str = "") -> dict[str, Any]:
    """Compare two weather reports.

    Args:
        data_a: The first report (from get_weather).
        data_b: The second report (from get_weather).
        note: Free text kept with the comparison.
    """
    warmer, colder = (data_a, data_b) if data_a["temp"] >= data_b["temp"] else (data_b, data_a)
    return {
        "warmer": warmer["location"],
        "colder": colder["location"],
        "difference": round(warmer["temp"] - colder["temp"], 1),
        "note": note,
    }


def summarise(comparisons: list[dict[str, Any]], title: str = "Weather") -> str:
    """One line per comparison, under a title.

    Args:
        comparisons: Results of compare_data.
        title: A heading for the summary.
    """
    lines = [f"{c['warmer']} is {c['difference']}°C warmer than {c['colder']}." for c in comparisons]
    return f"{title}: " + " ".join(lines)
