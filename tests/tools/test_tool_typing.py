"""`@tool` keeps the function's type: mypy checks this file (``mypy tests/tools``); pytest runs it too."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, assert_type

from toolplan import FunctionTool, ToolRegistry, execute_plan_sync, tool


@tool
def stock(item: str, warehouse: str = "main") -> int:
    """Units of ``item`` in stock."""
    return len(item) + len(warehouse)


@tool(read_only=True, timeout=5)
async def price(item: str, *, currency: str = "EUR") -> float:
    """Price of one ``item``."""
    return 1.5 if currency == "EUR" else 2.0


def test_the_signature_and_return_type_are_kept() -> None:
    assert_type(stock("apple"), int)
    assert_type(stock(item="apple", warehouse="b"), int)
    as_tool: FunctionTool[Callable[[str, str], int]] = stock
    as_function: Callable[[str], int] = stock
    pending: Coroutine[Any, Any, float] = price("apple")
    pending.close()
    assert as_tool("apple", "main") == as_function("apple") == 9


async def test_awaiting_an_async_tool_gives_its_value() -> None:
    assert_type(await price("apple", currency="USD"), float)
    assert await price("apple") == 1.5


def _wrong_calls() -> None:
    # Never run: each call is an error for mypy, and mypy fails on an unused ignore (strict mode),
    # so this proves the original parameters are checked.
    stock(3)  # type: ignore[arg-type]
    stock("apple", shelf=2)  # type: ignore[call-arg]
    price("apple", "USD")  # type: ignore[call-arg,unused-coroutine]


def test_a_list_of_different_tools_is_still_a_list_of_tools() -> None:
    tools = [stock, price]  # mypy: list[FunctionTool[function]], which every `tools=` parameter takes
    registry = ToolRegistry(tools)
    result = execute_plan_sync({"steps": [{"id": "s", "tool": "stock", "arguments": {"item": "a"}}]}, tools)
    assert registry.names == ["stock", "price"] and result.outputs == {"s": 5}
