"""Tools of the durable-run crash tests, loaded by ``toolplan ... --tools tests/durable/ledger_tools.py``.

Each tool sleeps ``ms`` milliseconds, then writes what it did to the external ledger (a SQLite file
named by ``TOOLPLAN_LEDGER``, shared by every process of a test) and commits before it returns:

- ``starts``: one row when a call begins (the tests wait on it to kill a process mid-call);
- ``calls``: one row per raw call that ran to its end (key, run, step, tool, attempt, pid, value);
- ``charges``: what `charge` (neither idempotent nor read-only) appends, one row per call;
- ``effects``: what `put` (idempotent) upserts, one row per idempotency key.

A tool's output, ``{"value": N}``, depends on its arguments only (``salt`` and ``inputs``, the
values of the steps it reads), so a run that crashed and resumed can be compared with one that did not.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time

from toolplan import current_call, tool

# Only the three tools are public: `toolplan --tools ledger_tools.py` registers every public function.
# The ledger's tables are created by the tests (durable_support.create_ledger) before any process starts.


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["TOOLPLAN_LEDGER"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _value(salt: str, inputs: list[int]) -> int:
    """The output value of a step: a hash of its salt and its inputs."""
    digest = hashlib.sha256(f"{salt}|{','.join(map(str, inputs))}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 2


def _call(kind: str, ms: int, salt: str, inputs: list[int]) -> dict[str, int]:
    call = current_call()
    key = call.idempotency_key
    pid = os.getpid()
    conn = _connect()
    try:
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO starts (key, step, tool, attempt, pid, at) VALUES (?, ?, ?, ?, ?, ?)",
                (key, call.step_id, kind, call.attempt, pid, time.time()),
            )
        time.sleep(ms / 1000)
        value = _value(salt, inputs)
        with conn:  # the effect and the call's row commit together, before the tool returns
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO calls (key, run_id, step, tool, attempt, pid, value, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, call.run_id, call.step_id, kind, call.attempt, pid, value, time.time()),
            )
            if kind == "charge":
                conn.execute("INSERT INTO charges (key, value) VALUES (?, ?)", (key, value))
            elif kind == "put":
                conn.execute(
                    "INSERT INTO effects (key, value, writes) VALUES (?, ?, 1) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, writes = effects.writes + 1",
                    (key, value),
                )
    finally:
        conn.close()
    return {"value": value}


@tool
def charge(ms: int, salt: str, inputs: list[int]) -> dict[str, int]:
    """Append a charge (not idempotent: calling it twice charges twice)."""
    return _call("charge", ms, salt, inputs)


@tool(idempotent=True)
def put(ms: int, salt: str, inputs: list[int]) -> dict[str, int]:
    """Upsert an effect by idempotency key (calling it twice has the effect of calling it once)."""
    return _call("put", ms, salt, inputs)


@tool(read_only=True)
def look(ms: int, salt: str, inputs: list[int]) -> dict[str, int]:
    """Read only: changes nothing outside (its call is still written to the ledger's ``calls``)."""
    return _call("look", ms, salt, inputs)
