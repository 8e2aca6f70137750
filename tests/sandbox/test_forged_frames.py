"""The host treats everything from the code as hostile input (issue 14, defect 4).

Subprocess runner: the code can reach its own end of the protocol channel (through the closure of
``set_result``) and write any bytes it likes. Monty: the code hands the host any value the
interpreter can build. In every case ``run`` returns a failed `CodeResult` that says what the code did
wrong, never raises, and the next run works.
"""

from __future__ import annotations

import json

import pytest
from sandbox_fakes import HAS_MONTY, FakeTools

from toolplan.sandbox import CodeLimits, CodeRunner, MontyRunner, SubprocessRunner

RUNNER = SubprocessRunner()

# The code takes hold of the child's end of the channel and writes raw bytes or whole frames.
CHANNEL = """
import struct
_ch = set_result.__closure__[0].cell_contents
def raw(data):
    _ch._sock.sendall(data)
def frame(body):
    raw(struct.pack(">I", len(body)) + body)
"""
DEEP = b'{"op":"result","value":' + b"[" * 50_000 + b"]" * 50_000 + b"}"


async def _host_still_works(runner: CodeRunner) -> None:
    tools = FakeTools()
    result = await runner.run('set_result(call_tool("get_weather", {"city": "Rome"}))', call_tool=tools)
    assert result.error is None, result.error
    assert result.result["city"] == "Rome"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("frame(b'[1, 2]')", "not a JSON object with a known 'op'", id="not-an-object"),
        pytest.param('frame(b\'{"op": "shell"}\')', "not a JSON object with a known 'op'", id="unknown-op"),
        pytest.param('frame(b\'{"op": "ready", "layers": 5}\')', "field 'layers'", id="ready-layers-int"),
        pytest.param(
            'frame(b\'{"op": "ready", "layers": ["landlock", "seccomp"]}\')',
            "a second 'ready' frame",
            id="second-ready",
        ),
        pytest.param('frame(b\'{"op": "parallel", "id": 1, "calls": 5}\')', "field 'calls'", id="parallel-calls-int"),
        pytest.param(
            'frame(b\'{"op": "call", "id": "1", "tool": "record", "args": {}}\')',
            "field 'id'",
            id="call-id-str",
        ),
        pytest.param('frame(b\'{"op": "done", "error": 5, "kind": [1]}\')', "field 'error'", id="done-error-int"),
        pytest.param('frame(b\'{"op": "result", "value": 1, "extra": 2}\')', "field 'extra'", id="unexpected-field"),
        pytest.param("frame(DEEP)", "nested more than 200 levels", id="50000-deep"),
        pytest.param('frame(b\'{"op": "result", "value": NaN}\')', "NaN and Infinity are not JSON", id="nan"),
        pytest.param('frame(b\'{"op": "result", "value": [-Infinity]}\')', "not JSON", id="infinity"),
        pytest.param('frame(b\'{"op": "result", "value": 1e999}\')', "too large for a float", id="overflowing-float"),
        pytest.param(
            "frame(b'{\"op\": \"result\", \"value\": ' + b'7' * 5000 + b'}')",
            "more than 4300 digits",
            id="5000-digit-int",
        ),
        pytest.param("frame(b'\\xff\\xfe garbage \\x00')", "not valid JSON", id="garbage-bytes"),
        pytest.param('frame(b\'{"op": "result", "value": "\\xff"}\')', "not valid JSON", id="invalid-utf8"),
        pytest.param(
            'frame(b\'{"op": "done", "error": null, "kind": null}\')\nframe(b\'{"op": "result", "value": 1}\')',
            "after 'done'",
            id="frame-after-done",
        ),
    ],
)
async def test_forged_frame_fails_the_run(code: str, expected: str) -> None:
    tools = FakeTools()
    result = await RUNNER.run(CHANNEL + f"DEEP = {DEEP!r}\n" + code + "\nset_result('forged')", call_tool=tools)
    assert result.limit == "protocol", result.error
    assert result.error is not None and expected in result.error, result.error
    assert "do not write to the sandbox's channel" in result.error
    assert result.result != "forged" and not result.ok
    json.loads(result.for_model())  # the model is told, in valid JSON
    await _host_still_works(RUNNER)


async def test_truncated_frame_fails_the_run() -> None:
    code = CHANNEL + 'raw(struct.pack(">I", 100) + b\'{"op": "res\')\n_ch._sock.close()'
    result = await RUNNER.run(code, call_tool=FakeTools())
    assert result.limit == "protocol", result.error
    assert "closed in the middle of a message (11 of 100 bytes arrived)" in str(result.error)
    await _host_still_works(RUNNER)


async def test_frame_claiming_a_huge_length_is_refused_unread() -> None:
    result = await RUNNER.run(CHANNEL + 'raw(b"\\xff\\xff\\xff\\xff")\nset_result(1)', call_tool=FakeTools())
    assert result.limit == "message_size"
    assert "4294967295 bytes" in str(result.error)
    await _host_still_works(RUNNER)


async def test_oversized_forged_frame_is_refused() -> None:
    code = CHANNEL + 'frame(b\'{"op": "result", "value": "\' + b"x" * 200_000 + b\'"}\')\nset_result(1)'
    result = await RUNNER.run(code, call_tool=FakeTools(), limits=CodeLimits(max_message_bytes=100_000))
    assert result.limit == "message_size"
    assert not result.result_set


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param({"tool": "record", "args": [1, 2]}, "args must be a dict", id="args-list"),
        pytest.param({"tool": "record", "args": "x=1"}, "args must be a dict", id="args-str"),
        pytest.param({"tool": 42, "args": {}}, "tool name must be a non-empty string", id="name-int"),
        pytest.param({"tool": "", "args": {}}, "tool name must be a non-empty string", id="name-empty"),
    ],
)
async def test_forged_call_with_bad_arguments_is_a_failed_call_for_the_code(
    message: dict[str, object], expected: str
) -> None:
    tools = FakeTools()
    code = CHANNEL + f"set_result(_ch.request({{'op': 'call', **{message!r}}}))"
    result = await RUNNER.run(code, call_tool=tools)
    assert result.error is None, result.error
    assert result.result["ok"] is False
    assert result.result["error"]["code"] == "invalid_call"
    assert expected in result.result["error"]["message"]
    assert tools.calls == []  # nothing reached the host's tools


async def test_forged_parallel_call_with_bad_entries_fails_only_those_calls() -> None:
    tools = FakeTools()
    calls = [["get_weather", {"city": "Oslo"}], ["record"], 7, ["record", [1]]]
    code = CHANNEL + f"set_result(_ch.request({{'op': 'parallel', 'calls': {calls!r}}}))"
    result = await RUNNER.run(code, call_tool=tools)
    assert result.error is None, result.error
    first, *bad = result.result["results"]
    assert first == {"ok": True, "value": {"city": "Oslo", "temp": 21, "tags": ["sunny"]}}
    assert [r["error"]["code"] for r in bad] == ["invalid_call"] * 3
    assert tools.calls == [("get_weather", {"city": "Oslo"})]


# -- tool values the code cannot be given ------------------------------------------------------------
def _runners() -> list[object]:
    monty = pytest.param(
        MontyRunner(), id="monty", marks=pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
    )
    return [pytest.param(RUNNER, id="subprocess"), monty]


@pytest.mark.parametrize("runner", _runners())
@pytest.mark.parametrize("tool", ["cyclic", "deep"])
async def test_unencodable_tool_value_is_a_failed_call(runner: CodeRunner, tool: str) -> None:
    code = f"""
try:
    call_tool({tool!r})
    set_result("returned")
except ToolCallError as e:
    set_result(str(e))
"""
    result = await runner.run(code, call_tool=FakeTools())
    assert result.error is None, result.error
    assert "cannot be" in result.result and "as JSON" in result.result
    await _host_still_works(runner)


# -- Monty: values from the interpreter ---------------------------------------------------------------
needs_monty = pytest.mark.skipif(not HAS_MONTY, reason="pydantic-monty not installed")
NEST = "x = []\nfor i in range(5000):\n    x = [x]\n"


@needs_monty
@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(NEST + "set_result(x)", "nested more than 100 levels", id="result-5000-deep"),
        pytest.param(NEST + "call_tool('record', {'a': x})", "nested more than 100 levels", id="call-5000-deep"),
        pytest.param(
            NEST + "call_tools_parallel([('record', {'a': x})])", "nested more than 100 levels", id="parallel-deep"
        ),
        pytest.param("set_result(10 ** 5000)", "more than 4300 digits", id="result-huge-int"),
        pytest.param("call_tool('record', {'n': 10 ** 5000})", "more than 4300 digits", id="call-huge-int"),
        pytest.param("set_result(float('nan'))", "not JSON", id="result-nan"),
        pytest.param("call_tool('record', {'a': float('nan')})", "not JSON", id="call-nan"),
        pytest.param("call_tool('record', {'a': [float('inf')]})", "not JSON", id="call-inf"),
        pytest.param("call_tool('record', {'a': {1, 2}})", "holds a set", id="call-set"),
        pytest.param("set_result({(1, 2): 'pair'})", "keys must be strings", id="result-tuple-key"),
    ],
)
async def test_monty_values_are_bounded(code: str, expected: str) -> None:
    tools = FakeTools()
    result = await MontyRunner().run(code, call_tool=tools)
    assert result.error is not None and expected in result.error, result.error
    assert "TypeError" in result.error
    assert not result.result_set and tools.calls == []
    json.loads(result.for_model())
    await _host_still_works(MontyRunner())


@needs_monty
async def test_monty_value_sharing_itself_is_refused_by_size_without_expanding_it() -> None:
    code = "x = [1]\nfor i in range(60):\n    x = [x, x]\nset_result(x)"  # 2**60 leaves once expanded
    result = await MontyRunner().run(code, call_tool=FakeTools(), limits=CodeLimits(max_message_bytes=10_000))
    assert result.limit == "message_size", result.error
    assert not result.result_set


@needs_monty
async def test_monty_bad_value_can_be_caught_by_the_code() -> None:
    code = NEST + "try:\n    set_result(x)\nexcept TypeError as e:\n    set_result('flatten: ' + str(e))"
    result = await MontyRunner().run(code, call_tool=FakeTools())
    assert result.error is None, result.error
    assert result.result.startswith("flatten: set_result(value) must be JSON-serialisable")


# -- the same bounds, met by ordinary code -----------------------------------------------------------
@pytest.mark.parametrize("runner", _runners())
@pytest.mark.parametrize("depth", [150, 5000])
@pytest.mark.parametrize("call", ["set_result(x)", "call_tool('record', {'a': x})"], ids=["result", "call"])
async def test_too_deep_value_is_an_exception_the_code_can_catch(runner: CodeRunner, depth: int, call: str) -> None:
    nest = f"x = []\nfor i in range({depth}):\n    x = [x]\n"
    code = nest + f"try:\n    {call}\nexcept TypeError as e:\n    set_result(str(e))"
    tools = FakeTools()
    result = await runner.run(code, call_tool=tools)
    assert result.error is None, result.error
    assert "must be JSON-serialisable" in result.result and "nested" in result.result
    assert tools.calls == []


@pytest.mark.parametrize("runner", _runners())
async def test_value_at_the_depth_bound_is_accepted(runner: CodeRunner) -> None:
    code = "x = [1]\nfor i in range(98):\n    x = [x]\nset_result(call_tool('record', {'a': x}))"
    tools = FakeTools()
    result = await runner.run(code, call_tool=tools)
    assert result.error is None, result.error
    assert result.result == "recorded"
    assert len(tools.calls) == 1
