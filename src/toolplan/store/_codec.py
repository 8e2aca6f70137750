"""Plans, limits and run records as JSON text for the store, and back, without loss.

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

from .._errors import PlanIssue
from .._json import compact_encoder, dumps, encodable, json_safe, loads
from ..execute import ApprovalRequest, PlanResult, PlanStatus, RunLimits, StepResult
from ..execute._internal import symmetric
from ..plan import Budget, Fallback, Plan, Step

__all__ = ("decode", "encode", "output_json", "plan_hash", "result_facts", "result_from_row", "step_from_row")

_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in (Plan, Step, Fallback, Budget, RunLimits)}
_TUPLE_FIELDS = {
    name: frozenset(f.name for f in dataclasses.fields(cls) if "tuple" in str(f.type)) for name, cls in _TYPES.items()
}
_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})  # JSON data as it is (dicts: arguments)
# Fields left out while empty, so that a plan that does not use them encodes as before they existed.
_OMITTED_WHEN_EMPTY = frozenset({"one_of", "warn_at", "window"})
# Fields left out while True (their default), for the same reason.
_OMITTED_WHEN_TRUE = frozenset({"share_calls"})
# Never stored: a budget window and a result cache are live objects of the process (a resumed run is
# given its own).
_NOT_STORED = frozenset({"window", "cache"})


def _omitted(name: str) -> int:
    """0: always stored; 1: left out while empty; 2: left out while True."""
    return 1 if name in _OMITTED_WHEN_EMPTY else 2 if name in _OMITTED_WHEN_TRUE else 0


# Per class: its tag and its stored fields, each with when it is left out (`_omitted`).
_FIELDS = {
    cls: (
        name,
        tuple((f.name, _omitted(f.name)) for f in dataclasses.fields(cls) if f.name not in _NOT_STORED),
    )
    for name, cls in _TYPES.items()
}


# Per class: its tag and its stored fields in the order `encode`'s sorted keys put them ("$t" first:
# "$" sorts before letters), each with what goes before its value (``,"name":``) and whether it is left
# out while empty.
_SORTED_FIELDS = {
    cls: ('{"$t":"' + name + '"', tuple((f, f',"{f}":', omitted) for f, omitted in sorted(fields)))
    for cls, (name, fields) in _FIELDS.items()
}


class _NotPlain(Exception):
    """A value `encode`'s one pass leaves to the general path (`_to_data`, then `dumps`)."""


def _refuse(value: Any) -> Any:
    raise _NotPlain


# JSON data (a step's arguments) as `dumps(..., sort_keys=True)` writes it when it can write it as it
# is, made once; anything it cannot write as it is raises, for the general path to write as `dumps` does.
_DATA = compact_encoder(_refuse, ensure_ascii=False, sort_keys=True)
_STRING: Any = json.encoder.encode_basestring  # a str as that encoder writes it


def _write(value: Any, out: list[str]) -> None:
    """Append ``value``'s JSON text, as the general path writes it; raise `_NotPlain` where it would differ.

    ``value`` is the IR (or a tuple of it); what is not the IR is JSON data, written by `_DATA`,
    which refuses the IR inside data (the general path writes that as its ``str()``).
    """
    known = _SORTED_FIELDS.get(type(value))
    if known is None:
        if type(value) is tuple and value and type(value[0]) in _SORTED_FIELDS:  # a plan's steps
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                _write(item, out)
            out.append("]")
        else:
            out.append("".join(_DATA(value, 0)))
        return
    tag, fields = known
    out.append(tag)
    for f, key, omitted in fields:
        item = getattr(value, f)
        if item is None:
            if not omitted:
                out.append(key + "null")
        elif type(item) is str:
            if item or not omitted:
                out.append(key + _STRING(item))
        elif item is True and omitted == 2:
            continue
        elif item or omitted != 1:
            out.append(key)
            _write(item, out)
    out.append("}")


def _to_data(value: Any) -> Any:
    """The IR as JSON data. Plain dicts and lists (a step's arguments) are JSON data already and pass as they are."""
    cls = type(value)
    known = _FIELDS.get(cls)
    if known is not None:
        name, fields = known
        out: dict[str, Any] = {"$t": name}
        for f, omitted in fields:
            item = getattr(value, f)
            if (omitted == 1 and not item) or (omitted == 2 and item is True):
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
    """JSON text of a plan or limits (keys sorted: equal plans give equal text).

    Written in one pass (`_write`); a value it does not handle takes the general path, which gives
    the same text (stored plans' hashes depend on it: `encode_general` is the reference).
    """
    out: list[str] = []
    try:
        _write(value, out)
    except (_NotPlain, ValueError, TypeError, RecursionError):  # NaN, a huge int, a bad key, too deep, a cycle
        return encode_general(value)
    return encodable("".join(out))


def encode_general(value: Plan | RunLimits) -> str:
    """`encode` by way of JSON data: the IR as dicts and lists, then `dumps` with sorted keys."""
    return dumps(_to_data(value), sort_keys=True)  # `dumps` makes anything that is not JSON data so


def decode(text: str) -> Any:
    """The `Plan` or `RunLimits` that `encode` wrote."""
    return _from_data(loads(text))


def plan_hash(body: str) -> str:
    """The identity of an encoded plan."""
    return hashlib.sha256(body.encode()).hexdigest()


_OUTPUT = compact_encoder(_refuse, ensure_ascii=False, sort_keys=False)  # JSON data as it is, or an error


def output_json(output: Any) -> tuple[str, str | None]:
    """A step's output as JSON text, and a note when it was not JSON data and was stored as the model sees it."""
    try:  # JSON data as it is: the common case
        return encodable("".join(_OUTPUT(output, 0))), None
    except (_NotPlain, ValueError, TypeError, RecursionError):
        pass
    return dumps(json_safe(output)), (
        f"The output ({type(output).__name__}) was not JSON data as it was; it is stored as the model sees it."
    )


def step_from_row(row: Mapping[Any, Any], output: Any, *, reused: bool = False) -> StepResult:
    """The `StepResult` of a stored step row (``output`` already loaded), by way of `StepResult.from_dict`.

    ``reused``: a later session of its run (a resume) took the record as it was, without a call.
    A note on how the output was stored (``output_note``) comes back as the record's last warning.
    """
    kind = row["error_kind"]
    warnings = loads(row["warnings"]) if row["warnings"] else []
    note = row["output_note"]
    if note:
        warnings = [*warnings, note]
    return StepResult.from_dict(
        {
            "id": row["step_id"],
            "tool": row["tool"],
            "status": row["status"],
            "output": output,
            "error": {"kind": kind, "message": row["error_message"] or ""} if kind else None,
            "attempts": row["attempt"],
            "started_at": row["started_at"],
            "ended_at": row["ended_at"],
            "arguments": loads(row["arguments"]) if row["arguments"] else None,
            "used_fallback": bool(row["used_fallback"]),
            "fallback_link": int(row["used_fallback"] or 0),
            "warnings": warnings,
            "reused": reused,
            "shared_with": loads(row["shared_with"]) if row["shared_with"] else (),
            "cached": bool(row["cached"]),
        }
    )


def result_facts(result: PlanResult) -> str:
    """The facts of a finished run the store keeps besides its step rows, as JSON text.

    They are the plan-level fields of `PlanResult.to_dict` that neither the run's row nor its plan
    hold: its start and end, its dependencies and its warnings. `result_from_row` reads them back.
    """
    return dumps(
        {
            "started_at": result.started_at,
            "ended_at": result.ended_at,
            "deps": {k: list(v) for k, v in result.deps.items()},
            "warnings": [w.to_dict(severity=True) for w in result.warnings],
            "approval": None if result.approval is None else result.approval.to_dict(),
        }
    )


def result_from_row(run_id: str, plan: Plan, row: Mapping[Any, Any], records: Mapping[str, StepResult]) -> PlanResult:
    """The `PlanResult` of a stored run: its row (``result``: `result_facts`'s text), plan and step records.

    A step of the plan without a record is ``pending``; a run stored without facts is given its row's
    times.
    """
    facts = loads(row["result"]) if row["result"] else {}
    records = symmetric(records) or records  # a step that made a call names the steps that took its outcome
    steps = {s.id: records.get(s.id) or StepResult(id=s.id, tool=s.tool, status="pending") for s in plan.steps}
    status: PlanStatus = (
        row["status"] if row["status"] in ("succeeded", "failed", "cancelled", "pending_approval") else "failed"
    )
    approval = facts.get("approval")
    return PlanResult(
        status=status,
        steps=steps,
        output_steps=tuple(o for o in plan.outputs if o in steps),
        run_id=run_id,
        dialect=plan.dialect,
        started_at=float(facts.get("started_at") or row["created_at"]),
        ended_at=float(facts.get("ended_at") or row["updated_at"]),
        deps={k: tuple(v) for k, v in (facts.get("deps") or {}).items()},
        # Warnings stored without their severity (by an older toolplan) are warnings all the same.
        warnings=tuple(PlanIssue.from_dict(w, severity="warning") for w in facts.get("warnings") or ()),
        approval=ApprovalRequest.from_dict(approval) if status == "pending_approval" and approval else None,
    )
