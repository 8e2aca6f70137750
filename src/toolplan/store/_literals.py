"""Writing a PostgreSQL statement's values into its text, for a transaction sent as one multi-statement query."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ("Literals",)


class Literals:
    """A statement's values written into its text as PostgreSQL literals (for one multi-statement query).

    Strings are quoted by doubling their quotes, which is exact with ``standard_conforming_strings``
    on (every PostgreSQL since 9.1 by default; without it `of` gives None and the store does not use
    it). Integers and finite floats are written as numbers (a float's ``repr`` reads back as the same
    double); any other value (an infinite float, bytes) is left to psycopg's own client-side quoting.
    """

    __slots__ = ("_parts", "_quote")

    def __init__(self, quote: Callable[[str, Sequence[Any]], str]) -> None:
        self._quote = quote
        self._parts: dict[str, list[str]] = {}  # a statement's text split at its placeholders

    @classmethod
    def of(cls, raw: Any) -> Literals | None:
        if raw.info.parameter_status("standard_conforming_strings") != "on":
            return None
        import psycopg

        return cls(psycopg.ClientCursor(raw).mogrify)

    def statement(self, sql: str, params: Sequence[Any]) -> str:
        parts = self._parts.get(sql)
        if parts is None:
            parts = self._parts[sql] = sql.split("%s")
        if len(parts) != len(params) + 1 or "%%" in sql:  # an escaped percent sign: psycopg's quoting reads it
            return self._quote(sql, params)
        out = [parts[0]]
        for value, part in zip(params, parts[1:], strict=True):
            kind = type(value)
            if value is None:
                out.append("NULL")
            elif kind is str:
                if "\x00" in value:
                    return self._quote(sql, params)  # psycopg says why it cannot be stored
                out.append("'" + value.replace("'", "''") + "'")
            elif kind is int or (kind is float and value - value == 0.0):  # a float: finite
                out.append(repr(value) if value >= 0 else f"({value!r})")
            else:
                return self._quote(sql, params)
            out.append(part)
        return "".join(out)
