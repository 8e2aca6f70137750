"""Behaviour every runner shares: results, tools, parallel calls, errors, logs."""

from __future__ import annotations

import asyncio
import json

import pytest
from sandbox_fakes import FakeTools

from toolplan.sandbox import CodeResult, CodeRunner


async def test_set_result(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run('set_result({"answer": 42})', call_tool=tools)
    assert result.result == {"answer": 42}
    assert result.result_set and result.ok
    assert json.loads(result.for_model()) == {"status": "ok", "result": {"answer": 42}}


async def test_tool_value_is_a_dict_in_the_code(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
w = call_tool("get_weather", {"city": "Tokyo"})
set_result({"is_dict": isinstance(w, dict), "temp": w["temp"] + 1, "tag": w["tags"][0]})
"""
    result = await runner.run(code, call_tool=tools)
    assert result.error is None
    assert result.result == {"is_dict": True, "temp": 22, "tag": "sunny"}
    assert result.tool_calls == 1
    assert tools.calls == [("get_weather", {"city": "Tokyo"})]


async def test_parallel_calls_run_concurrently_and_keep_order(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
out = call_tools_parallel([("meet", {"n": 1, "expect": 3}), ("meet", {"n": 2, "expect": 3}),
                           ("meet", {"n": 3, "expect": 3})])
set_result(out)
"""
    result = await runner.run(code, call_tool=tools)
    assert result.error is None, result.error
    assert result.result == [1, 2, 3]
    assert tools.max_in_flight == 3  # every call was running at once on the host
    assert result.tool_calls == 3


async def test_parallel_failures_are_exception_objects(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
out = call_tools_parallel([("get_weather", {"city": "Oslo"}), ("fail", {}), ("nope", None)])
set_result([
    out[0]["city"],
    isinstance(out[1], ToolCallError), str(out[1]),
    isinstance(out[2], ToolCallError), str(out[2]),
])
"""
    result = await runner.run(code, call_tool=tools)
    assert result.error is None, result.error
    city, fail_is_error, fail_text, nope_is_error, nope_text = result.result
    assert city == "Oslo"
    assert fail_is_error and "fail" in fail_text and "the weather service is down" in fail_text
    assert nope_is_error and "Unknown tool 'nope'" in nope_text


async def test_failing_tool_raises_catchable_error(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
try:
    call_tool("fail", {})
    set_result("not raised")
except ToolCallError as e:
    set_result("caught: " + str(e))
"""
    result = await runner.run(code, call_tool=tools)
    assert result.result == "caught: Tool 'fail' failed: the weather service is down"


async def test_unregistered_tool_is_a_catchable_error(runner: CodeRunner, tools: FakeTools) -> None:
    code = """
try:
    call_tool("launch_missiles", {"target": "moon"})
except ToolCallError as e:
    set_result(str(e))
"""
    result = await runner.run(code, call_tool=tools)
    assert "Unknown tool 'launch_missiles'" in result.result
    assert "get_weather" in result.result  # the known tools are listed


async def test_uncaught_tool_error_is_reported(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run('call_tool("fail")', call_tool=tools)
    assert result.error is not None and "the weather service is down" in result.error
    assert result.limit is None
    assert json.loads(result.for_model())["status"] == "error"


async def test_prints_go_to_logs_and_result_still_returned(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run('print("hello", 1)\nprint("world")\nset_result(7)', call_tool=tools)
    assert result.logs == "hello 1\nworld\n"
    assert result.result == 7
    assert json.loads(result.for_model()) == {"status": "ok", "result": 7, "logs": "hello 1\nworld\n"}


async def test_code_that_sets_nothing_is_told_how(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run("x = 1 + 1", call_tool=tools)
    assert not result.result_set
    message = json.loads(result.for_model())["message"]
    assert "set_result(value)" in message


async def test_syntax_and_runtime_errors(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run("def f(:\n  pass", call_tool=tools)
    assert result.error is not None and "SyntaxError" in result.error
    result = await runner.run("print('before')\n1 / 0", call_tool=tools)
    assert result.error is not None and "ZeroDivisionError" in result.error
    assert result.logs == "before\n"


async def test_non_json_result_is_refused_clearly(runner: CodeRunner, tools: FakeTools) -> None:
    result = await runner.run("set_result({1, 2})", call_tool=tools)
    assert result.error is not None and "JSON-serialisable" in result.error


async def test_describe_names_the_functions(runner: CodeRunner) -> None:
    text = runner.describe()
    for name in ("call_tool", "call_tools_parallel", "set_result", "ToolCallError"):
        assert name in text


async def test_loop_keeps_serving_while_code_runs(runner: CodeRunner, tools: FakeTools) -> None:
    task = asyncio.create_task(runner.run('call_tool("record", {})\nwhile True:\n    pass', call_tool=tools))
    await tools.recorded.wait()
    ticks = 0
    for _ in range(100):  # other work makes progress while the code spins
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 100 and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_for_model_marks_limits() -> None:
    result = CodeResult(error="stopped", limit="wall_time", logs="x")
    assert json.loads(result.for_model()) == {"status": "error", "logs": "x", "error": "stopped", "limit": "wall_time"}
