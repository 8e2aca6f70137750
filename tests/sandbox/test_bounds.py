"""The bounded parser and value check that stand between model code and the host."""

from __future__ import annotations

from typing import Any

import pytest

from toolplan.sandbox._bounds import (  # private: the bounds themselves are what is tested
    MAX_DEPTH,
    MAX_FRAME_DEPTH,
    DataError,
    DataTooLarge,
    check_data,
    loads,
)
from toolplan.sandbox._calls import encode_reply
from toolplan.sandbox._frames import ProtocolViolation, parse_frame


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_loads_accepts_a_frame_at_the_depth_bound() -> None:
    text = b"[" * MAX_FRAME_DEPTH + b"]" * MAX_FRAME_DEPTH
    assert loads(text) == _nested(MAX_FRAME_DEPTH)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(b"[" * 50_000 + b"]" * 50_000, "nested more than 200 levels", id="50000-deep"),
        pytest.param(b'{"a":' * 300 + b"1" + b"}" * 300, "nested more than 200 levels", id="deep-objects"),
        pytest.param(b"[NaN]", "NaN and Infinity are not JSON", id="nan"),
        pytest.param(b"[Infinity]", "NaN and Infinity are not JSON", id="infinity"),
        pytest.param(b"[1e999]", "too large for a float", id="overflow"),
        pytest.param(b"[-1e400]", "too large for a float", id="negative-overflow"),
        pytest.param(b"1" * 400 + b".0", "too large for a float", id="long-mantissa"),
        pytest.param(b"1" * 5000, "more than 4300 digits", id="5000-digit-int"),
        pytest.param(b'"\xff"', "not valid JSON", id="invalid-utf8"),
        pytest.param(b'"\\ud800"', "not valid JSON", id="lone-surrogate"),
        pytest.param(b"{} trailing", "not valid JSON", id="trailing"),
        pytest.param(b"", "not valid JSON", id="empty"),
    ],
)
def test_loads_refuses_what_the_host_cannot_hold(text: bytes, expected: str) -> None:
    with pytest.raises(DataError, match=expected):
        loads(text)


def test_loads_keeps_ordinary_numbers() -> None:
    assert loads(b'{"a": [1e300, -2.5, 12345678901234567890, 1e-400]}') == {
        "a": [1e300, -2.5, 12345678901234567890, 0.0]
    }


def test_check_data_accepts_json_values_at_the_bound() -> None:
    value = {"a": _nested(MAX_DEPTH - 1), "t": (1, "x", None, True, 2.5), 1: "int keys become strings"}
    assert check_data(value, max_bytes=10_000) > 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(_nested(MAX_DEPTH + 1), "nested more than 100 levels", id="too-deep"),
        pytest.param(_nested(100_000), "nested more than 100 levels", id="100000-deep"),
        pytest.param([float("nan")], "not JSON", id="nan"),
        pytest.param({"a": float("-inf")}, "not JSON", id="inf"),
        pytest.param([10**5000], "more than 4300 digits", id="huge-int"),
        pytest.param({10**5000: 1}, "more than 4300 digits", id="huge-int-key"),
        pytest.param({(1, 2): 1}, "keys must be strings", id="tuple-key"),
        pytest.param([{1, 2}], "holds a set", id="set"),
        pytest.param([b"bytes"], "holds a bytes", id="bytes"),
        pytest.param([object()], "holds a object", id="object"),
    ],
)
def test_check_data_refuses(value: Any, expected: str) -> None:
    with pytest.raises(DataError, match=expected):
        check_data(value, max_bytes=1_000_000)


def test_check_data_stops_on_a_cycle() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(DataError, match="nested more than"):
        check_data(loop, max_bytes=1_000_000)


def test_check_data_stops_on_shared_values_by_size_not_by_expanding_them() -> None:
    value: list[Any] = [1]
    for _ in range(60):
        value = [value, value]  # 2**60 leaves once expanded, 60 levels deep
    with pytest.raises(DataTooLarge):
        check_data(value, max_bytes=100_000)


@pytest.mark.parametrize(
    "body",
    [b'{"op": "ready", "layers": ["x" ]}', b'{"op": "done", "error": null, "kind": null}'],
)
def test_valid_frames_parse(body: bytes) -> None:
    assert parse_frame(body).op in ("ready", "done")


def test_frame_violation_names_the_field() -> None:
    with pytest.raises(ProtocolViolation, match="in a 'call' frame, field 'id'"):
        parse_frame(b'{"op": "call", "id": true, "tool": "t", "args": {}}')


def test_unencodable_tool_value_becomes_a_failed_call_in_the_reply() -> None:
    loop: list[Any] = []
    loop.append(loop)
    reply = encode_reply(3, [{"ok": True, "value": 1}, {"ok": True, "value": loop}], parallel=True)
    body = loads(reply[4:])
    assert body["id"] == 3
    assert body["results"][0] == {"ok": True, "value": 1}
    assert body["results"][1]["error"]["code"] == "unserialisable_output"
