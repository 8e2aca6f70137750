"""`DataTools`: JMESPath queries, declarative transforms and CSV <-> JSON, without a model round trip."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from .._errors import ToolError, UserError
from .._json import JSONTextError, loads
from .._optional import import_optional
from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._data_ops import (
    _AGGREGATES,
    _OPERATIONS,
    Aggregate,
    FilterOp,
    FlattenOp,
    GroupOp,
    LimitOp,
    OmitOp,
    Operation,
    PickOp,
    QueryOp,
    RenameOp,
    SortOp,
    UniqueOp,
    _canonical,
    _cell,
    _each_object,
    _infer,
    _key_op,
    _kind,
    _one_line,
    _Op,
    _parsed,
    _sort_key,
    _truthy,
    _unique_columns,
)
from ._names import ToolNames, check_names
from ._query import QueryBoundError, QueryLimits, bounded_interpreter

if TYPE_CHECKING:
    import jmespath

__all__ = ("DataTools",)

_MiB = 1024 * 1024
_PURE = ToolAnnotations(read_only=True, idempotent=True, cost=0.0, timeout=30.0)
MAX_EXPRESSION_CHARS = 2000
_LITERAL = re.compile(r"`((?:[^`\\]|\\.)*)`")


def _import_jmespath() -> Any:
    return import_optional("jmespath", "DataTools", "builtin", package="jmespath")


class DataTools(Toolset):
    """Pick fields and reshape data inside a plan: JMESPath queries, transforms, CSV and JSON.

    Every function is pure (read-only, idempotent, cost 0), so a plan can chain ``$ref``s through them
    instead of sending data back to the model. A ``data`` argument that is a string holding JSON
    (many tools return JSON text) is parsed first. Needs ``pip install "toolplan[builtin]"`` (for
    ``jmespath``).

    Functions: ``json_query``, ``json_transform``, ``csv_to_json``, ``json_to_csv``. With
    ``names="oasis"``: ``data_parse`` (JSON or CSV text to data), ``data_filter`` (the items a
    JMESPath condition holds for), ``data_aggregate`` (count, sum, avg, min, max by group) and
    ``data_transform`` (``json_transform``); all pure as well.

    JMESPath queries run under bounds checked while they run (see the module ``_query``): no value a
    query builds may exceed ``max_query_items`` JSON values or ``max_query_chars`` characters of text
    beyond the size of its input, and a call's queries stop after ``query_timeout`` seconds. A query
    that hits one fails the call with a business error naming the bound.

    Args:
        max_text_chars: Largest CSV text ``csv_to_json`` reads, and largest CSV ``json_to_csv`` writes.
        max_rows: Most rows either CSV function handles.
        max_query_items: Most JSON values (numbers, strings, objects, arrays; a repeated part counted
            each time) in any value a query builds, beyond its input's own.
        max_query_chars: Most characters of text in any value a query builds, beyond its input's own.
        query_timeout: Seconds the queries of one call may run (the call's deadline, when earlier, wins).
        names: ``"toolplan"`` (the names above) or ``"oasis"`` (the ``data_*`` names).
        prefix: Put in front of every function name (see `Toolset`).
    """

    def __init__(
        self,
        *,
        max_text_chars: int = 16 * _MiB,
        max_rows: int = 100_000,
        max_query_items: int = 1_000_000,
        max_query_chars: int = 16 * _MiB,
        query_timeout: float = 10.0,
        names: ToolNames = "toolplan",
        prefix: str = "",
    ) -> None:
        check_names("DataTools", names)
        if max_text_chars < 1 or max_rows < 1 or max_query_items < 1 or max_query_chars < 1:
            raise UserError(
                "DataTools: max_text_chars, max_rows, max_query_items and max_query_chars must be at least 1."
            )
        if not (isinstance(query_timeout, int | float) and 0 < query_timeout < float("inf")):
            raise UserError(f"DataTools: query_timeout must be a positive number of seconds, got {query_timeout!r}.")
        self._jmespath = _import_jmespath()
        self.max_text_chars = max_text_chars
        self.max_rows = max_rows
        self.query_limits = QueryLimits(max_query_items, max_query_chars, float(query_timeout))
        self._tool = f"{prefix}data"
        if names == "oasis":
            functions = [
                FunctionTool(self.parse, name="data_parse", annotations=_PURE),
                FunctionTool(self.filter, name="data_filter", annotations=_PURE),
                FunctionTool(self.aggregate, name="data_aggregate", annotations=_PURE),
                FunctionTool(self.json_transform, name="data_transform", annotations=_PURE),
            ]
        else:
            functions = [
                FunctionTool(self.json_query, annotations=_PURE),
                FunctionTool(self.json_transform, annotations=_PURE),
                FunctionTool(self.csv_to_json, annotations=_PURE),
                FunctionTool(self.json_to_csv, annotations=_PURE),
            ]
        super().__init__(functions, prefix=prefix)

    def _error(self, message: str) -> ToolError:
        return ToolError(message, tool=self._tool)

    # -- JMESPath ------------------------------------------------------------------------------------
    def _compile(self, expression: str) -> jmespath.parser.ParsedResult:
        if len(expression) > MAX_EXPRESSION_CHARS:
            raise self._error(f"The expression is {len(expression)} characters; the limit is {MAX_EXPRESSION_CHARS}.")
        for literal in _LITERAL.findall(expression):
            # jmespath accepts a non-JSON literal with a deprecation warning (turned into an error under
            # -W error): refuse it here, with the way to write it.
            try:
                json.loads(literal.replace("\\`", "`"))
            except ValueError:
                raise self._error(
                    f"The literal `{literal[:80]}` in the expression is not JSON: write text as 'text' (a raw "
                    'string) or `"text"`, numbers as `10`.'
                ) from None
        jp = self._jmespath
        try:
            parsed: jmespath.parser.ParsedResult = jp.compile(expression)
        except jp.exceptions.JMESPathError as exc:
            raise self._error(f"Invalid JMESPath expression {expression!r}: {_one_line(exc)}") from None
        except RecursionError:
            raise self._error(f"The JMESPath expression {expression[:80]!r}... is nested too deep.") from None
        return parsed

    def _interpreter(self, data: Any) -> Any:
        """A bounded evaluator for one call whose input is ``data``."""
        interpreter = bounded_interpreter(self._jmespath, self.query_limits)
        interpreter.meter.given(data)
        return interpreter

    def _search(self, parsed: jmespath.parser.ParsedResult, data: Any, interpreter: Any) -> Any:
        jp = self._jmespath
        try:
            return interpreter.run(parsed, data)
        except QueryBoundError as exc:
            raise self._error(f"JMESPath expression {parsed.expression[:200]!r} stopped: {exc}") from None
        except jp.exceptions.JMESPathError as exc:
            raise self._error(f"JMESPath expression {parsed.expression!r} failed: {_one_line(exc)}") from None
        except RecursionError:
            raise self._error("The data is nested too deep for this expression.") from None

    def json_query(self, data: Any, expression: str) -> Any:
        """Select and reshape JSON data with a JMESPath expression.

        Examples: 'items[0].name', 'items[?price > `10`].{name: name, price: price}',
        'sort_by(items, &price)[-1]', 'length(items)'.

        Args:
            data: The JSON data (an object, a list, or a string holding JSON).
            expression: The JMESPath expression.
        """
        parsed = self._compile(expression)
        value = _parsed(data)
        return self._search(parsed, value, self._interpreter(value))

    def json_transform(self, data: Any, operations: list[Operation]) -> Any:
        """Apply operations to JSON data, in order, and return the result.

        Operations (see their schemas): query, pick, omit, rename, filter, sort, limit, unique, group,
        flatten. Expressions are JMESPath, evaluated on each item for filter, sort, unique and group.

        Args:
            data: The JSON data (an object, a list, or a string holding JSON).
            operations: The operations, applied one after the other.
        """
        value = _parsed(data)
        if not all(isinstance(op, _Op) for op in operations):  # called from Python with plain dicts
            try:
                operations = _OPERATIONS.validate_python(operations)
            except ValidationError as exc:
                raise self._error(f"Invalid operations: {_one_line(exc)}") from None
        interpreter = self._interpreter(value)  # one set of bounds for the whole call
        for index, op in enumerate(operations):
            value = self._apply(op, value, index, interpreter)
        return value

    def _apply(self, op: Any, value: Any, index: int, interpreter: Any) -> Any:
        where = f"Operation {index} ({op.op})"
        if isinstance(op, QueryOp):
            return self._search(self._compile(op.expression), value, interpreter)
        if isinstance(op, PickOp | OmitOp | RenameOp):
            return _each_object(value, _key_op(op), where, self._error)
        if isinstance(op, FlattenOp):
            items = self._list(value, where)
            return [x for item in items for x in (item if isinstance(item, list) else [item])]
        items = self._list(value, where)
        if isinstance(op, LimitOp):
            return items[op.offset : op.offset + op.count]
        if isinstance(op, FilterOp):
            test = self._compile(op.where)
            return [item for item in items if _truthy(self._search(test, item, interpreter))]
        key = self._compile(op.by) if op.by is not None else None

        def keyed(item: Any) -> Any:
            return item if key is None else self._search(key, item, interpreter)

        if isinstance(op, SortOp):
            pairs = [(keyed(item), item) for item in items]
            try:
                pairs.sort(key=lambda pair: _sort_key(pair[0]), reverse=op.descending)
            except TypeError:
                raise self._error(
                    f"{where}: the sort keys are of different types; sort by one kind of value."
                ) from None
            return [item for _, item in pairs]
        if isinstance(op, UniqueOp):
            seen: set[str] = set()
            out = []
            for item in items:
                mark = _canonical(keyed(item))
                if mark not in seen:
                    seen.add(mark)
                    out.append(item)
            return out
        assert isinstance(op, GroupOp)
        groups: dict[str, list[Any]] = {}
        for item in items:
            k = keyed(item)
            groups.setdefault(k if isinstance(k, str) else _canonical(k), []).append(item)
        return groups

    def _list(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self._error(f"{where} needs a list, got {_kind(value)}. Use a 'query' operation to select a list.")
        return value

    # -- CSV -----------------------------------------------------------------------------------------
    def csv_to_json(self, text: str, delimiter: str = ",", header: bool = True, infer_types: bool = False) -> list[Any]:
        """Parse CSV text into JSON rows.

        Args:
            text: The CSV text.
            delimiter: The field separator (one character), e.g. ',' or ';' or a tab.
            header: The first row names the columns: rows become objects. Otherwise rows are lists.
            infer_types: Turn numbers, true/false and empty fields into numbers, booleans and null.
        """
        if len(text) > self.max_text_chars:
            raise self._error(f"The CSV text is {len(text)} characters; the limit is {self.max_text_chars}.")
        if len(delimiter) != 1:
            raise self._error(f"delimiter must be one character, got {delimiter!r}.")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
        convert: Callable[[str], Any] = _infer if infer_types else str
        rows: list[Any] = []
        columns: list[str] | None = None
        try:
            for line, row in enumerate(reader, 1):
                if header and columns is None:
                    columns = _unique_columns(row)
                    continue
                if len(rows) >= self.max_rows:
                    raise self._error(f"The CSV has more than {self.max_rows} rows; send fewer rows per call.")
                values = [convert(v) for v in row]
                if columns is None:
                    rows.append(values)
                else:
                    if len(values) > len(columns):
                        raise self._error(
                            f"CSV line {line} has {len(values)} fields but the header has {len(columns)}."
                        )
                    rows.append(dict(zip(columns, values + [None] * (len(columns) - len(values)), strict=True)))
        except csv.Error as exc:
            raise self._error(f"The CSV text cannot be parsed: {exc}.") from None
        return rows

    def json_to_csv(self, rows: Any, columns: list[str] | None = None, delimiter: str = ",") -> str:
        """Write JSON rows as CSV text with a header line.

        Objects become rows under the given columns (default: every key, in first-seen order); lists
        are written as they are. Nested values are written as compact JSON.

        Args:
            rows: A list of objects or of lists (or a string holding such JSON).
            columns: The columns, in order (objects only).
            delimiter: The field separator (one character).
        """
        rows = _parsed(rows)
        if not isinstance(rows, list):
            raise self._error(f"rows must be a list of objects or lists, got {_kind(rows)}.")
        if len(rows) > self.max_rows:
            raise self._error(f"There are {len(rows)} rows; the limit is {self.max_rows}.")
        if len(delimiter) != 1:
            raise self._error(f"delimiter must be one character, got {delimiter!r}.")
        out = io.StringIO(newline="")
        writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
        if rows and all(isinstance(r, dict) for r in rows):
            names = columns if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
            writer.writerow(names)
            for row in rows:
                writer.writerow([_cell(row.get(c)) for c in names])
                self._check_size(out)
        elif all(isinstance(r, list) for r in rows):
            if columns is not None:
                writer.writerow(columns)
            for row in rows:
                writer.writerow([_cell(v) for v in row])
                self._check_size(out)
        else:
            raise self._error("rows must be all objects or all lists.")
        return out.getvalue()

    # -- parse, filter, aggregate -------------------------------------------------------------------
    def parse(
        self,
        text: str,
        format: Literal["auto", "json", "csv"] = "auto",
        delimiter: str = ",",
        header: bool = True,
        infer_types: bool = True,
    ) -> Any:
        """Parse JSON or CSV text into data (CSV rows become objects keyed by the header).

        Args:
            text: The JSON or CSV text.
            format: 'json', 'csv', or 'auto': JSON when the text starts like JSON and parses, else CSV.
            delimiter: The CSV field separator (one character).
            header: The CSV's first row names the columns.
            infer_types: Turn CSV numbers, true/false and empty fields into numbers, booleans and null.
        """
        if len(text) > self.max_text_chars:
            raise self._error(f"The text is {len(text)} characters; the limit is {self.max_text_chars}.")
        if format == "json" or (format == "auto" and text.lstrip()[:1] in ("{", "[", '"')):
            try:
                return loads(text, max_chars=self.max_text_chars)
            except JSONTextError as exc:
                if format == "json":
                    raise self._error(f"The text is not JSON: {exc.message}. Send format='csv' for CSV.") from None
        return self.csv_to_json(text, delimiter=delimiter, header=header, infer_types=infer_types)

    def filter(self, data: Any, where: str) -> list[Any]:
        """Keep the items of a list for which a JMESPath condition is true, e.g. "price > `10`".

        Args:
            data: A list (or a string holding a JSON list).
            where: The condition, evaluated on each item: "status == 'open'", "contains(tags, 'x')".
        """
        items = self._list(_parsed(data), "data_filter")
        test = self._compile(where)
        interpreter = self._interpreter(items)
        return [item for item in items if _truthy(self._search(test, item, interpreter))]

    def aggregate(
        self, data: Any, aggregates: dict[str, Aggregate], group_by: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Sum, count, average, min and max over a list of objects, by group.

        Returns one row per group (in first-seen order; one row in all without group_by): the group's
        fields, then each figure under its name. Null and missing values are left out of every
        figure but a count without field; sum and avg need numbers.

        Args:
            data: A list of objects (or a string holding one).
            aggregates: The figures by name, e.g. {"total": {"op": "sum", "field": "price"},
                "orders": {"op": "count"}}.
            group_by: Fields whose values form the groups, e.g. ["region"].
        """
        rows = self._list(_parsed(data), "data_aggregate")
        if len(rows) > self.max_rows:
            raise self._error(f"There are {len(rows)} rows; the limit is {self.max_rows}.")
        if not all(isinstance(a, Aggregate) for a in aggregates.values()):  # called from Python with dicts
            try:
                aggregates = _AGGREGATES.validate_python(aggregates)
            except ValidationError as exc:
                raise self._error(f"Invalid aggregates: {_one_line(exc)}") from None
        if not aggregates:
            raise self._error('aggregates is empty: name at least one figure, e.g. {"n": {"op": "count"}}.')
        keys = list(group_by or ())
        for name, agg in aggregates.items():
            if agg.field is None and agg.op != "count":
                raise self._error(f"Aggregate {name!r} ({agg.op}) needs a field.")
        groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self._error(f"data_aggregate needs a list of objects; item {i} is {_kind(row)}.")
            group = {k: row.get(k) for k in keys}
            groups.setdefault(_canonical(list(group.values())), (group, []))[1].append(row)
        if not groups and not keys:
            groups[""] = ({}, [])
        return [
            {**group, **{name: self._figure(name, agg, members) for name, agg in aggregates.items()}}
            for group, members in groups.values()
        ]

    def _figure(self, name: str, agg: Aggregate, rows: list[dict[str, Any]]) -> Any:
        if agg.field is None:
            return len(rows)
        values = [row[agg.field] for row in rows if row.get(agg.field) is not None]
        if agg.op == "count":
            return len(values)
        if agg.op == "count_distinct":
            return len({_canonical(v) for v in values})
        if agg.op in ("sum", "avg"):
            bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, int | float)), None)
            if bad is not None:
                raise self._error(
                    f"Aggregate {name!r} ({agg.op} of {agg.field!r}) met {_kind(bad)} ({bad!r:.40}); "
                    "it needs numbers. Parse CSV with infer_types=true, or filter those rows out."
                )
            total = sum(values)
            if agg.op == "sum":
                return total
            return total / len(values) if values else None
        if not values:
            return None
        try:
            keyed = [(_sort_key(v), v) for v in values]
            return (min if agg.op == "min" else max)(keyed, key=lambda pair: pair[0])[1]
        except TypeError:
            raise self._error(
                f"Aggregate {name!r} ({agg.op} of {agg.field!r}) met values of different types; they must compare."
            ) from None

    def _check_size(self, out: io.StringIO) -> None:
        if out.tell() > self.max_text_chars:
            raise self._error(f"The CSV would be longer than {self.max_text_chars} characters; send fewer rows.")
