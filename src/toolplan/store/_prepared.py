"""PostgreSQL: the journal's statements as prepared statements of the write connection, and their values as text.

A batch committed from the event loop (`OnLoop`) is sent as a pipeline of prepared statements: each
statement is parsed and planned by the server once per connection, not once per write, and its
values go as parameters in text form, not quoted into the statement. A parameter's type is given
where Python's type says it (int: ``int8``, float: ``float8``) and left to the server otherwise
(str, None: inferred from the statement), as psycopg does; a statement is prepared once per list of
such types. A value this module does not write (bytes, a bool, a NUL character, an infinite float,
an integer beyond 64 bits) leaves the batch to the database thread and psycopg's own adaptation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ("Call", "Prepared")

# One command of a pipeline: the statement's name, its text and parameter types when it is to be
# prepared first (else None), and its values (None: SQL NULL).
Call = tuple[bytes, bytes | None, Sequence[int] | None, list[bytes | None]]

_INT8, _FLOAT8, _UNKNOWN = 20, 701, 0  # type oids
_INT8_MIN, _INT8_MAX = -(2**63), 2**63 - 1
_DUPLICATE = b"42P05"  # duplicate_prepared_statement: the name is prepared already
_UNDEFINED = b"26000"  # invalid_sql_statement_name: the name is not prepared


class Prepared:
    """The statements prepared on one connection (names ``toolplan_<n>``), and the pipelines that use them."""

    __slots__ = ("_conn", "_known", "_names", "_texts", "_utf8")

    def __init__(self) -> None:
        self._conn: Any = None  # the connection the names were prepared on
        self._names: dict[tuple[str, tuple[int, ...]], bytes] = {}  # by statement and parameter types
        self._known: set[bytes] = set()  # names the server has (their preparation committed, or existed)
        self._texts: dict[str, bytes | None] = {}  # a statement with $n placeholders (None: not written here)
        self._utf8 = False  # the connection's client encoding is UTF-8 (values are encoded so)

    def calls(self, statements: Iterable[tuple[str, Sequence[Any]]], raw: Any) -> list[Call] | None:
        """The pipeline's commands for ``statements`` on ``raw`` (None: a value or statement not written here)."""
        if raw is not self._conn:
            self._conn = raw
            self._known.clear()
            self._utf8 = raw.info.encoding == "utf-8"
        if not self._utf8:
            return None
        out: list[Call] = []
        preparing: set[bytes] = set()
        for sql, params in statements:
            values: list[bytes | None] = []
            types: list[int] = []
            for value in params:
                kind = type(value)
                if value is None:
                    values.append(None)
                    types.append(_UNKNOWN)
                elif kind is str:
                    if "\x00" in value:
                        return None  # psycopg says why it cannot be stored
                    values.append(value.encode())
                    types.append(_UNKNOWN)
                elif kind is int:
                    if not _INT8_MIN <= value <= _INT8_MAX:
                        return None
                    values.append(str(value).encode())
                    types.append(_INT8)
                elif kind is float and value - value == 0.0:  # finite
                    values.append(repr(value).encode())
                    types.append(_FLOAT8)
                else:
                    return None
            key = (sql, tuple(types))
            name = self._names.get(key)
            if name is None:
                name = self._names[key] = f"toolplan_{len(self._names)}".encode()
            text: bytes | None = None
            if name not in self._known and name not in preparing:
                text = self._text(sql, len(values))
                if text is None:
                    return None
                preparing.add(name)
            out.append((name, text, types if text is not None else None, values))
        return out

    def _text(self, sql: str, count: int) -> bytes | None:
        """``sql`` with ``$1``, ``$2``... for its ``%s`` placeholders (None: its placeholders are not ``count``)."""
        text = self._texts.get(sql, b"")
        if text == b"":
            parts = sql.split("%s")
            ok = "%%" not in sql and len(parts) == count + 1  # an escaped percent sign: left to psycopg
            text = self._texts[sql] = (
                "".join(f"{p}${i}" for i, p in enumerate(parts[:-1], 1)).encode() + parts[-1].encode() if ok else None
            )
        return text

    def known(self, names: Iterable[bytes]) -> None:
        """Names whose preparation the server confirmed (or that it had already)."""
        self._known.update(names)

    def failed(self, name: bytes, prepare: bool, sqlstate: bytes | None) -> None:
        """A command of ``name`` failed with ``sqlstate``: what the server has is learned from it."""
        if prepare and sqlstate == _DUPLICATE:
            self._known.add(name)
        elif not prepare and sqlstate == _UNDEFINED:  # the session's were dropped (DEALLOCATE ALL, DISCARD ALL)
            self._known.clear()
