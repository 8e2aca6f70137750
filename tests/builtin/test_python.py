"""PythonTool: code mode as a plan step, with the step's inputs as variables and no tools."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from toolplan import ToolError, UserError, execute_plan, tool
from toolplan.builtin import PythonTool
from toolplan.sandbox import CodeLimits, MontyRunner, SubprocessRunner

HAS_MONTY = importlib.util.find_spec("pydantic_monty") is not None


def _tools() -> Iterator[Any]:
    yield pytest.param(PythonTool(), id="subprocess")
    yield pytest.param(
        PythonTool(MontyRunner()), id="monty", marks=pytest.mark.skipif(not HAS_MONTY, reason="no pydantic-monty")
    )


@pytest.fixture(params=list(_tools()))
def python(request: pytest.FixtureRequest) -> PythonTool:
    value: PythonTool = request.param
    return value


async def test_inputs_become_variables_and_set_result_the_output(python: PythonTool) -> None:
    rows = [{"amount": 3}, {"amount": 4}]
    assert await python.run_python("set_result(sum(r['amount'] for r in rows) * k)", {"rows": rows, "k": 2}) == 14
    assert await python.run_python("print('total', len(rows))", {"rows": rows}) == "total 2\n"


async def test_failures_are_business_errors(python: PythonTool) -> None:
    with pytest.raises(ToolError, match="ZeroDivisionError"):
        await python.run_python("print('before'); 1 / 0")
    with pytest.raises(ToolError, match="cannot call tools"):
        await python.run_python("call_tool('get_weather', {'city': 'Paris'})")
    for name in ("call_tool", "set_result", "class", "__builtins__", "not an identifier"):
        with pytest.raises(ToolError, match="cannot be a variable name"):
            await python.run_python("set_result(1)", {name: 1})
    with pytest.raises(ToolError, match="empty"):
        await python.run_python("  ")


async def test_limits(python: PythonTool) -> None:
    small = PythonTool(python.runner, limits=CodeLimits(wall_time=0.5, max_message_bytes=1000))
    with pytest.raises(ToolError, match="limit: wall_time"):
        await small.run_python("while True: pass")
    with pytest.raises(ToolError, match=r"inputs are .* bytes of JSON; the limit is 1000"):
        await small.run_python("set_result(1)", {"blob": "x" * 2000})


def test_annotations_and_runner_check() -> None:
    (definition,) = PythonTool().definitions()
    a = definition.annotations
    assert definition.name == "run_python" and a.read_only and a.idempotent and not a.destructive
    with pytest.raises(UserError, match="SubprocessRunner or a MontyRunner"):
        PythonTool(object())  # type: ignore[arg-type]


async def test_a_plan_step_computes_on_earlier_outputs() -> None:
    @tool(read_only=True)
    def sales(region: str) -> list[dict[str, float]]:
        """Sales of a region."""
        return [{"amount": 10.0}, {"amount": 2.5}] if region == "eu" else [{"amount": 1.0}]

    plan = {
        "steps": [
            {"id": "eu", "tool": "sales", "arguments": {"region": "eu"}},
            {"id": "us", "tool": "sales", "arguments": {"region": "us"}},
            {
                "id": "total",
                "tool": "run_python",
                "arguments": {
                    "code": "set_result(round(sum(r['amount'] for r in eu + us), 2))",
                    "inputs": {"eu": "$ref:eu", "us": "$ref:us"},
                },
            },
        ],
        "output_steps": ["total"],
    }
    result = await execute_plan(plan, [sales, PythonTool(SubprocessRunner())])
    assert result.outputs == {"total": 13.5}
