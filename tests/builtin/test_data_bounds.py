"""DataTools under query bombs: every bound is checked while a query runs, and the error names it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolplan import ToolError, UserError, execute_plan
from toolplan.builtin import DataTools

TEN = list(range(10))
REPEAT = "[@,@,@,@,@,@,@,@,@,@]"


def test_a_value_repeated_into_billions_is_stopped_by_max_query_items() -> None:
    # Ten stages of ten references: 10^10 numbers if it were written out, built in microseconds.
    expression = "@" + f"|{REPEAT}" * 8
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"stopped: .*max_query_items=1000000"):
        DataTools().json_query(TEN, expression)
    assert time.monotonic() - started < 5


def test_a_value_copied_out_into_millions_is_stopped_before_it_is_built() -> None:
    expression = "@" + f"|{REPEAT}[]" * 8  # 193 characters: 10^9 numbers, really copied
    data = DataTools(max_query_items=10_000)
    with pytest.raises(ToolError, match=r"max_query_items=10000"):
        data.json_query(TEN, expression)
    assert len(data.json_query(TEN, "@" + f"|{REPEAT}[]" * 3)) == 10_000  # exactly what is allowed


def test_long_text_is_stopped_by_max_query_chars() -> None:
    data = DataTools(max_query_chars=1000)
    text = "x" * 100
    with pytest.raises(ToolError, match=r"max_query_chars=1000"):
        data.json_query({"t": text}, "join('', [t, t, t, t, t, t, t, t, t, t, t, t])")
    with pytest.raises(ToolError, match=r"max_query_chars=1000"):
        data.json_query({"t": text}, "[t, t, t, t, t, t, t, t, t, t, t, t]")  # repeated, not joined


def test_a_slow_query_is_stopped_by_its_deadline() -> None:
    expression = "@" + f"|{REPEAT}[]" * 4 + "".join(f"|[?@ > `{i}`]" for i in range(40))
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"stopped after 0\.05 s \(query_timeout"):
        DataTools(query_timeout=0.05).json_query(TEN, expression)
    assert time.monotonic() - started < 2


def test_the_input_itself_may_be_larger_than_the_bounds() -> None:
    data = DataTools(max_query_items=100, max_query_chars=100)
    rows = [{"name": f"user {i}", "n": i} for i in range(1000)]
    assert len(data.json_query(rows, "[*].name")) == 1000
    assert data.json_query(rows, "length([?n > `10`])") == 989
    with pytest.raises(ToolError, match="max_query_items=100"):  # but not twice its size
        data.json_query(rows, "[@, @]")


def test_transform_operations_share_one_set_of_bounds() -> None:
    data = DataTools(max_query_items=1000)
    operations: Any = [{"op": "query", "expression": f"{REPEAT}[]"}] * 3  # 100, 1,000, then 10,000 values
    with pytest.raises(ToolError, match="max_query_items=1000"):
        data.json_transform(TEN, operations)


async def test_in_a_plan_a_bomb_is_a_business_error_tried_once() -> None:
    plan = {
        "steps": [{"id": "q", "tool": "json_query", "arguments": {"data": TEN, "expression": "@" + f"|{REPEAT}" * 8}}]
    }
    step = (await execute_plan(plan, [DataTools()], retry_delay=0)).steps["q"]
    assert step.status == "failed" and step.error is not None and step.error.kind == "business"
    assert "max_query_items" in step.error.message and step.attempts == 1


@pytest.mark.parametrize(
    "options",
    [{"max_query_items": 0}, {"max_query_chars": 0}, {"query_timeout": 0}, {"query_timeout": float("inf")}],
)
def test_bad_bounds_are_developer_errors(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        DataTools(**options)


# -- property: whatever the expression, the call ends within its bounds ------------------------------
_STAGES = [
    "[@,@]",
    "[@,@,@]",
    "[]",
    "[*]",
    "{a: @, b: @}",
    "values(@)",
    "to_string(@)",
    "join(',', [to_string(@), to_string(@)])",
    "[?@]",
    "sort_by([*], &to_string(@))",
    "map(&[@, @], [*])",
    "length(@)",
    "@",
    "reverse(@)",
    "[0]",
    "[*].[@, @][]",
]
_ITEMS, _CHARS = 400, 4000


def _count(value: Any, cap: int) -> tuple[int, int]:
    """JSON values and characters of ``value`` written out, stopping once past ``cap`` values."""
    items = chars = 0
    stack = [value]
    while stack and items <= cap:
        item = stack.pop()
        items += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            chars += sum(len(k) for k in item)
            stack.extend(item.values())
    return items, chars


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stages=st.lists(st.sampled_from(_STAGES), min_size=1, max_size=14),
    data=st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=5)), max_size=6),
)
def test_any_pipe_of_stages_ends_within_the_bounds(stages: list[str], data: list[Any]) -> None:
    tools = DataTools(max_query_items=_ITEMS, max_query_chars=_CHARS, query_timeout=2.0)
    in_items, in_chars = _count(data, 10**6)
    started = time.monotonic()
    try:
        result = tools.json_query(data, "@|" + "|".join(stages))
    except ToolError as exc:
        assert "stopped" in exc.message or "failed" in exc.message, exc.message
    else:
        items, chars = _count(result, 10 * (_ITEMS + in_items))
        assert items <= _ITEMS + in_items + 1 and chars <= _CHARS + in_chars
    assert time.monotonic() - started < 10
