"""Plans, limits and step records as JSON text for the store, and back, without loss.

The plan IR and `RunLimits` are frozen dataclasses: each is written as an object tagged with its
class (``"$t"``), so a stored plan comes back as the same `Plan` (any dialect, budget and options
included) and its hash identifies it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .._json import dumps, encodable, json_safe, loads
from ..execute import RunLimits, StepError, StepResult
from ..plan import Budget, Plan, Step
from ..plan._ir import Fallback

__all__ = ("decode", "encode", "output_json", "plan_hash", "step_from_row")

_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in (Plan, Step, Fallback, Budget, RunLimits)}
_TUPLE_FIELDS = {
    name: frozenset(f.name for f in dataclasses.fields(cls) if "tuple" in str(f.type)) for name, cls in _TYPES.items()
}
_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})  # JSON data as it is (dicts: arguments)
# Fields left out while empty, so that a plan that does not use them encodes as before they existed.
_OMITTED_WHEN_EMPTY = frozenset({"one_of", "warn_at", "window"})
# Never stored: a budget window is a live object of the process (a resumed run is given its own).
_NOT_STORED = frozenset({"window"})
# Per class: its tag and its stored fields, each with whether it is left out while empty.
_FIELDS = {
    cls: (
        name,
        tuple((f.name, f.name in _OMITTED_WHEN_EMPTY) for f in dataclasses.fields(cls) if f.name not in _NOT_STORED),
    )
    for name, cls in _TYPES.items()
}


def _to_data(value: Any) -> Any:
    """The IR as JSON data. Plain dicts and lists (a step's arguments) are JSON data already and pass as they are."""
    cls = type(value)
    known = _FIELDS.get(cls)
    if known is not None:
        name, fields = known
        out: dict[str, Any] = {"$t": name}
        for f, omitted_when_empty in fields:
            item = getattr(value, f)
            if omitted_when_empty and not item:
                continue  # a field added later: plans without it keep the text (and hash) they had
            out[f] = item if type(item) in _PLAIN else _to_data(item)
        return out
    if cls is tuple:
        return [_to_data(v) for v in value]
    if cls is not dict and isinstance(value, Mapping):
        return {str(k): _to_data(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        raise TypeError(f"cannot store a {cls.__name__}")
    return value


def _from_data(value: Any) -> Any:
    if isinstance(value, dict):
        name = value.get("$t")
        if isinstance(name, str) and name in _TYPES:
            tuples = _TUPLE_FIELDS[name]
            fields: dict[str, Any] = {}
            for key, item in value.items():
                if key == "$t":
                    continue
                decoded = _from_data(item)
                fields[key] = tuple(decoded) if key in tuples and isinstance(decoded, list) else decoded
            return _TYPES[name](**fields)
        return {k: _from_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_data(v) for v in value]
    return value


def encode(value: Plan | RunLimits) -> str:
    """JSON text of a plan or limits (keys sorted: equal plans give equal text)."""
    return dumps(_to_data(value), sort_keys=True)  # `dumps` makes anything that is not JSON data so


def decode(text: str) -> Any:
    """The `Plan` or `RunLimits` that `encode` wrote."""
    return _from_data(loads(text))


def plan_hash(body: str) -> str:
    """The identity of an encoded plan."""
    return hashlib.sha256(body.encode()).hexdigest()


_OUTPUT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))  # made once, not per call


def output_json(output: Any) -> tuple[str, str | None]:
    """A step's output as JSON text, and a note when it was not JSON data and was stored as the model sees it."""
    try:  # JSON data as it is: the common case
        return encodable(_OUTPUT.encode(output)), None
    except (ValueError, TypeError, RecursionError):
        pass
    return dumps(json_safe(output)), (
        f"The output ({type(output).__name__}) was not JSON data as it was; it is stored as the model sees it."
    )


def step_from_row(row: Mapping[Any, Any], output: Any, *, reused: bool = False) -> StepResult:
    """The `StepResult` of a stored step row (``output`` already loaded).

    ``reused``: a later session of its run (a resume) took the record as it was, without a call.
    """
    kind = row["error_kind"]
    warnings = tuple(loads(row["warnings"])) if row["warnings"] else ()
    note = row["output_note"]
    if note:
        warnings = (*warnings, note)
    return StepResult(
        id=row["step_id"],
        tool=row["tool"],
        status=row["status"],
        output=output,
        error=StepError(kind=kind, message=row["error_message"] or "") if kind else None,
        attempts=row["attempt"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        arguments=loads(row["arguments"]) if row["arguments"] else None,
        used_fallback=bool(row["used_fallback"]),
        warnings=warnings,
        reused=reused,
    )
