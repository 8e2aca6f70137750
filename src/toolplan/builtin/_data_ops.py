"""What `DataTools` works with: the operations of ``json_transform`` and ``data_aggregate``, and pure value helpers."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .._errors import ToolError
from .._json import JSONTextError, loads

__all__ = (
    "Aggregate",
    "FilterOp",
    "FlattenOp",
    "GroupOp",
    "LimitOp",
    "OmitOp",
    "Operation",
    "PickOp",
    "QueryOp",
    "RenameOp",
    "SortOp",
    "UniqueOp",
)


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueryOp(_Op):
    """Replace the data by the result of a JMESPath expression."""

    op: Literal["query"]
    expression: str = Field(description="JMESPath expression, e.g. 'items[?price > `10`].name'.")


class PickOp(_Op):
    """Keep only these keys of the object (or of each object of a list)."""

    op: Literal["pick"]
    fields: list[str]


class OmitOp(_Op):
    """Drop these keys of the object (or of each object of a list)."""

    op: Literal["omit"]
    fields: list[str]


class RenameOp(_Op):
    """Rename keys of the object (or of each object of a list): {"old": "new"}."""

    op: Literal["rename"]
    fields: dict[str, str]


class FilterOp(_Op):
    """Keep the items of a list for which a JMESPath expression is true, e.g. "age > `30`"."""

    op: Literal["filter"]
    where: str


class SortOp(_Op):
    """Sort a list by the value of a JMESPath expression (the item itself when omitted)."""

    op: Literal["sort"]
    by: str | None = None
    descending: bool = False


class LimitOp(_Op):
    """Keep ``count`` items of a list, from ``offset``."""

    op: Literal["limit"]
    count: int = Field(ge=0)
    offset: int = Field(default=0, ge=0)


class UniqueOp(_Op):
    """Drop repeated items of a list (equal items, or items with an equal JMESPath key)."""

    op: Literal["unique"]
    by: str | None = None


class GroupOp(_Op):
    """Turn a list into {key: [items]} by a JMESPath key (keys become strings)."""

    op: Literal["group"]
    by: str


class FlattenOp(_Op):
    """Flatten a list of lists by one level."""

    op: Literal["flatten"]


Operation = Annotated[
    QueryOp | PickOp | OmitOp | RenameOp | FilterOp | SortOp | LimitOp | UniqueOp | GroupOp | FlattenOp,
    Field(discriminator="op"),
]


_OPERATIONS: TypeAdapter[list[Operation]] = TypeAdapter(list[Operation])


class Aggregate(_Op):
    """One figure of `DataTools.aggregate`: ``{"op": "sum", "field": "price"}``."""

    op: Literal["count", "sum", "avg", "min", "max", "count_distinct"] = Field(
        description="count (rows, or rows where field is not null), sum, avg, min, max, count_distinct."
    )
    field: str | None = Field(default=None, description="The field it is computed over (count may leave it out).")


_AGGREGATES: TypeAdapter[dict[str, Aggregate]] = TypeAdapter(dict[str, Aggregate])


def _parsed(data: Any) -> Any:
    """``data``, or the JSON it holds when it is a string of JSON object or array text."""
    if isinstance(data, str) and data.lstrip()[:1] in ("{", "["):
        try:
            return loads(data)
        except JSONTextError:
            return data
    return data


def _key_op(op: PickOp | OmitOp | RenameOp) -> Callable[[dict[str, Any]], dict[str, Any]]:
    if isinstance(op, PickOp):
        wanted = op.fields
        return lambda obj: {k: obj[k] for k in wanted if k in obj}
    if isinstance(op, OmitOp):
        dropped = set(op.fields)
        return lambda obj: {k: v for k, v in obj.items() if k not in dropped}
    names = op.fields
    return lambda obj: {names.get(k, k): v for k, v in obj.items()}


def _each_object(
    value: Any, fn: Callable[[dict[str, Any]], dict[str, Any]], where: str, error: Callable[[str], ToolError]
) -> Any:
    if isinstance(value, dict):
        return fn(value)
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [fn(v) for v in value]
    raise error(f"{where} needs an object or a list of objects, got {_kind(value)}.")


def _truthy(value: Any) -> bool:
    # JMESPath's truth: false, null, "", [] and {} are false; every number (0 too) is true.
    if value is None or value is False:
        return False
    return not (isinstance(value, str | list | dict) and not value)


def _sort_key(value: Any) -> tuple[int, Any]:
    # null sorts first; then values of one kind compare as usual (mixed kinds raise TypeError).
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float | str):
        return (1, value)
    return (2, _canonical(value))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _unique_columns(row: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in row:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}_{n + 1}")
    return out


_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][-+]?[0-9]{1,3})?|[eE][-+]?[0-9]{1,3})")


def _infer(text: str) -> Any:
    """A CSV field as JSON: numbers written as JSON numbers (not '007', '1_000' or ' 5'), booleans, null."""
    if text == "":
        return None
    if text in ("true", "false", "TRUE", "FALSE", "True", "False"):
        return text.lower() == "true"
    if _INT.fullmatch(text):
        return int(text)
    if len(text) <= 40 and _FLOAT.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            return number
    return text


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
