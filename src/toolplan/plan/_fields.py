"""The checks a plan's fields get when it is parsed: ids, numbers, the budget and the failure mode.

Each problem becomes a `PlanIssue` (collected in an `_Issues` list) and the caller goes on with a
placeholder, so that validation reports every problem at once. `check_plan_fields` makes the same
checks on a `Plan` built in Python rather than parsed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, cast

from .._errors import PlanIssue
from ._ir import Budget, FailureMode, Plan

__all__ = ("ID_RE", "MAX_ID_CHARS", "MAX_STEP_RETRY", "check_plan_fields")


MAX_ID_CHARS = 100


ID_RE = re.compile(rf"\A[A-Za-z0-9_-]{{1,{MAX_ID_CHARS}}}\Z")  # \Z, not $: "$" also matches before a final newline


_id_match = ID_RE.fullmatch


MAX_STEP_RETRY = 10  # a step's "retry": more would only repeat a failing call (and overflow the backoff)


class _Issues(list[PlanIssue]):
    def error(self, code: str, message: str, step: str | None = None) -> None:
        self.append(PlanIssue(code=code, message=message, step=step))

    def warn(self, code: str, message: str, step: str | None = None) -> None:
        self.append(PlanIssue(code=code, message=message, step=step, severity="warning"))


def _show(raw: Any) -> str:
    """A bounded rendering of a bad value for a message (it may be huge or deeply nested)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw.bit_length() > 64:
        return f"an integer of {raw.bit_length()} bits"
    if raw is None or isinstance(raw, (bool, int, float, str)):
        text = repr(raw)
        return text if len(text) <= 40 else f"{text[:37]}..."
    return f"a {type(raw).__name__}"


def _is_positive(raw: Any) -> bool:
    """A number greater than 0 that a float can hold: not NaN, not infinite, not a bool."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return False
    try:
        return 0.0 < float(raw) < math.inf  # False for NaN
    except OverflowError:  # an int too large for a float
        return False


def _is_count(raw: Any, low: int, high: int | None = None) -> bool:
    """A whole number (not a bool, not a float) from ``low`` to ``high``."""
    return type(raw) is int and raw >= low and (high is None or raw <= high)


def _positive(raw: Any, field: str, step: str | None, issues: _Issues) -> Any:
    if not _is_positive(raw):
        issues.error("invalid_field", _positive_message(field, raw), step)
        return None
    return raw


def _positive_message(field: str, raw: Any) -> str:
    unit = "" if field == "budget.max_cost" else " of seconds"
    unset = " Leave the field out for no limit." if field.startswith("budget.") else ""
    return f"'{field}' must be a finite number{unit} greater than 0 (not NaN nor Infinity), got {_show(raw)}.{unset}"


def _retry_message(raw: Any) -> str:
    return (
        f"'retry' must be a whole number from 0 to {MAX_STEP_RETRY} (extra attempts after a failure), got {_show(raw)}."
    )


def _retry(raw: Any, step: str | None, issues: _Issues) -> int | None:
    if not _is_count(raw, 0, MAX_STEP_RETRY):
        issues.error("invalid_field", _retry_message(raw), step)
        return None
    count: int = raw
    return count


def _count_message(field: str, raw: Any, low: int) -> str:
    return f"'{field}' must be a whole number, {low} or more, got {_show(raw)}."


def _label(raw: str) -> str:
    """A bad id as issues name it: bounded and encodable (it may be huge or hold lone surrogates)."""
    text = raw.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ID_CHARS else f"{text[: MAX_ID_CHARS - 1]}…"


def _id_message(raw: str, index: int) -> str:
    suggestion = re.sub(r"[^A-Za-z0-9_-]+", "_", raw[:64]).strip("_") or f"s{index + 1}"
    return (
        f"Step id {_show(raw)} may only use letters, digits, '_' and '-', at most {MAX_ID_CHARS} of them. "
        f"Rename it (e.g. {suggestion!r})."
    )


def _positive_int(raw: Any, field: str, issues: _Issues) -> int | None:
    if raw is None:
        return None
    if not _is_count(raw, 1):
        issues.error("invalid_field", _count_message(field, raw, 1))
        return None
    count: int = raw
    return count


def _flag(raw: Any, field: str, default: bool, issues: _Issues) -> bool:
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    issues.error("invalid_field", f"{field!r} must be true or false, got {_show(raw)}.")
    return default


def _failure_mode(raw: Any, default: FailureMode, issues: _Issues) -> FailureMode:
    if raw is None:
        return default
    if raw in ("fail_forward", "fail_fast"):
        return cast(FailureMode, raw)
    issues.error("invalid_field", f"'failure_mode' must be 'fail_forward' or 'fail_fast', got {_show(raw)}.")
    return default


_BUDGET_KEYS = ("max_tool_calls", "max_tool_calls_per_tool", "max_cost", "max_latency", "warn_at")


def _budget(raw: Any, issues: _Issues) -> Budget | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        issues.error("invalid_field", "'budget' must be an object such as {\"max_tool_calls\": 10}.")
        return None
    b = cast(dict[str, Any], raw)
    per_tool: Any = b.get("max_tool_calls_per_tool")
    if per_tool is None:
        per_tool = {}
    elif not _is_per_tool(per_tool):
        issues.error("invalid_field", _PER_TOOL_MESSAGE)
        per_tool = {}
    for key in b:
        if key not in _BUDGET_KEYS:
            issues.warn("unknown_field", f"Budget field {_show(key)} is unknown and was ignored.")
    calls = b.get("max_tool_calls")
    if calls is not None and not _is_count(calls, 0):
        issues.error("invalid_field", _count_message("budget.max_tool_calls", calls, 0))
        calls = None
    cost, latency = b.get("max_cost"), b.get("max_latency")
    return Budget(
        max_tool_calls=calls,
        max_tool_calls_per_tool=cast(dict[str, int], per_tool),
        max_cost=None if cost is None else _positive(cost, "budget.max_cost", None, issues),
        max_latency=None if latency is None else _positive(latency, "budget.max_latency", None, issues),
        warn_at=_warn_at(b.get("warn_at"), issues),
    )


def _is_share(raw: Any) -> bool:
    """A finite number, 0 < raw <= 1 (not a bool)."""
    return type(raw) in (int, float) and 0 < raw <= 1  # NaN fails both comparisons


def _warn_at_message(raw: Any) -> str:
    return (
        f"'budget.warn_at' must be a share of each limit, a number greater than 0 and at most 1 (such as 0.8: "
        f"warn when 80% is spent), got {_show(raw)}. Leave the field out for no warning."
    )


def _warn_at(raw: Any, issues: _Issues) -> float | None:
    if raw is None:
        return None
    if not _is_share(raw):
        issues.error("invalid_field", _warn_at_message(raw))
        return None
    return float(raw)


_PER_TOOL_MESSAGE = (
    "'budget.max_tool_calls_per_tool' must map tool names to whole numbers, 0 or more, such as {\"get_weather\": 3}."
)


def _is_per_tool(raw: Any) -> bool:
    if not isinstance(raw, Mapping):
        return False
    return all(isinstance(k, str) and _is_count(v, 0) for k, v in raw.items())


def check_plan_fields(plan: Plan) -> list[PlanIssue]:
    """The checks the parser makes on ids and numbers, for a `Plan` built in Python rather than parsed."""
    issues = _Issues()
    for i, s in enumerate(plan.steps):
        if not isinstance(s.id, str) or ID_RE.fullmatch(s.id) is None:
            issues.error("invalid_id", _id_message(str(s.id), i), s.id if isinstance(s.id, str) else None)
        if s.timeout is not None and not _is_positive(s.timeout):
            issues.error("invalid_field", _positive_message("timeout", s.timeout), s.id)
        if s.retry is not None and not _is_count(s.retry, 0, MAX_STEP_RETRY):
            issues.error("invalid_field", _retry_message(s.retry), s.id)
    if plan.max_concurrency is not None and not _is_count(plan.max_concurrency, 1):
        issues.error("invalid_field", _count_message("max_concurrency", plan.max_concurrency, 1))
    b = plan.budget
    if b is not None:
        if b.max_tool_calls is not None and not _is_count(b.max_tool_calls, 0):
            issues.error("invalid_field", _count_message("budget.max_tool_calls", b.max_tool_calls, 0))
        if not _is_per_tool(b.max_tool_calls_per_tool):
            issues.error("invalid_field", _PER_TOOL_MESSAGE)
        for name, value in (("budget.max_cost", b.max_cost), ("budget.max_latency", b.max_latency)):
            if value is not None and not _is_positive(value):
                issues.error("invalid_field", _positive_message(name, value))
        if b.warn_at is not None and not _is_share(b.warn_at):
            issues.error("invalid_field", _warn_at_message(b.warn_at))
    return issues
