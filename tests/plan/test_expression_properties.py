"""Any expression, however wrong, ends in a coded validation error, a value or `ExpressionFailed`: nothing else."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolplan.plan._internal import OPERATORS, ExpressionFailed, compile_arguments, resolve_compiled

OUTPUTS: dict[str, Any] = {
    "src": {"n": 7, "big": 10**99, "x": 1.5e300, "s": "text", "items": [3, 1, 2], "flag": True, "none": None}
}
REFS = [f"$ref:src.{k}" for k in ("n", "big", "x", "s", "items", "flag", "none", "gone")] + ["$ref:src"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**120), max_value=10**120),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.sampled_from(REFS),
)
expressions = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.builds(
            lambda op, args: {"$op": op, "args": args}, st.sampled_from(sorted(OPERATORS)), st.lists(inner, max_size=4)
        ),
        st.lists(inner, max_size=3),
    ),
    max_leaves=40,
)


def _json_value(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(_json_value(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _json_value(x) for k, x in v.items())
    return v is None or isinstance(v, (bool, int, str))


@settings(max_examples=400, deadline=None)
@given(expressions)
def test_an_expression_validates_or_evaluates_safely(value: Any) -> None:
    errors: list[str] = []
    compiled, _, _ = compile_arguments(
        {"v": value}, ["src"], warn=lambda code, message: None, error=lambda code, message: errors.append(code)
    )
    if errors:
        assert set(errors) <= {"invalid_expression", "invalid_reference"}
        return
    try:
        out = resolve_compiled(compiled, OUTPUTS, True, None)
    except ExpressionFailed as exc:
        assert str(exc)  # a message that says why
        return
    assert _json_value(out["v"])
    if isinstance(out["v"], int) and not isinstance(out["v"], bool) and isinstance(value, dict):
        assert abs(out["v"]) < 10**100 or value.get("$op") in ("min", "max")
