"""The tools of the service example: `toolplan serve --tools examples/service/tools.py`."""

from toolplan import tool


@tool(read_only=True)
def get_weather(city: str) -> dict:
    """Current weather of a city."""
    return {"city": city, "temp": {"Oslo": 3.0, "Rome": 18.0}.get(city, 10.0)}


@tool(read_only=True)
def compare(x: float, y: float) -> str:
    """Compare two temperatures."""
    return "first is warmer" if x > y else "second is warmer"
