"""Shared helpers of the durable-run crash tests: subprocesses, the external ledger, plans and the checks.

A uniquely named module (conftest.py holds the fixtures). The tools the subprocesses call are in
``ledger_tools.py``; they write to the ledger this module creates and reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolplan
from toolplan.store import RunInfo, StoredEvent, open_store

HERE = Path(__file__).resolve().parent
TOOLS = HERE / "ledger_tools.py"
SRC = Path(toolplan.__file__).resolve().parents[1]  # the toolplan the subprocesses must import too

#: The tools of ledger_tools.py and what they are: charge may not be repeated; put and look may.
NON_IDEMPOTENT = "charge"
IDEMPOTENT = "put"
READ_ONLY = "look"
SAFE = frozenset({IDEMPOTENT, READ_ONLY})

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS starts (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, "
    "step TEXT NOT NULL, tool TEXT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, "
    "run_id TEXT NOT NULL, step TEXT NOT NULL, tool TEXT NOT NULL, attempt INTEGER NOT NULL, "
    "pid INTEGER NOT NULL, value INTEGER NOT NULL, at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, "
    "value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, value INTEGER NOT NULL, writes INTEGER NOT NULL)",
)

_REF = re.compile(r"^\$ref:([A-Za-z0-9_]+)\.value$")


# -- subprocesses ------------------------------------------------------------------------------------


def toolplan_env(ledger: Path, **extra: str) -> dict[str, str]:
    """The environment of a toolplan subprocess: this toolplan on its path, the ledger, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPLAN_") and k != "FORCE_COLOR"}
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + path if path else "")
    env["TOOLPLAN_LEDGER"] = str(ledger)
    env.update(extra)
    return env


def toolplan_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolplan", *args]


@dataclass
class Proc:
    """A toolplan subprocess whose output goes to files (read them with `out` and `err`)."""

    popen: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def out(self) -> str:
        return self.stdout.read_text(encoding="utf-8", errors="replace")

    def err(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def kill9(self) -> int:
        """SIGKILL it and reap it (a zombie would still look alive to a process taking its run over)."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        return self.popen.wait(timeout=30)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            message = f"process {self.pid} did not end within {timeout}s; stderr:\n{self.err()[-3000:]}"
            raise AssertionError(message) from None

    def describe(self) -> str:
        code = self.popen.returncode
        return f"pid {self.pid}, exit {code}\nstdout:\n{self.out()[-2000:]}\nstderr:\n{self.err()[-3000:]}"


class Procs:
    """Starts toolplan subprocesses and, on exit, kills (SIGKILL) and reaps every one still running."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[Proc] = []
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, args: Sequence[str], env: Mapping[str, str], name: str) -> Proc:
        n = len(self.started)
        stdout, stderr = self.logs / f"{n:02d}-{name}.out", self.logs / f"{n:02d}-{name}.err"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            popen = subprocess.Popen(list(args), stdout=out, stderr=err, env=dict(env), cwd=self.logs)
        proc = Proc(popen, stdout, stderr)
        self.started.append(proc)
        return proc

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.started:
            if proc.popen.poll() is None:
                proc.kill9()


def wait_until(condition: Callable[[], bool], proc: Proc | None, timeout: float, what: str) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` has ended (False); fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if proc is not None and proc.popen.poll() is not None:
            return False
        if time.monotonic() > end:
            detail = proc.describe() if proc is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{detail}")
        time.sleep(0.002)


# -- the ledger --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One raw call of a ledger tool that ran to its end."""

    key: str
    run_id: str
    step: str
    tool: str
    attempt: int
    pid: int
    value: int


@dataclass(frozen=True)
class Start:
    """One call of a ledger tool that began."""

    key: str
    step: str
    tool: str
    attempt: int
    pid: int


class Ledger:
    """The external ledger the tools write to (a SQLite file shared by every process of a test)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in SCHEMA:
                conn.execute(statement)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            return list(conn.execute(query, params))

    def count(self, table: str) -> int:
        return int(self.rows(f"SELECT count(*) FROM {table}")[0][0])

    def at_least(self, table: str, n: int) -> bool:
        return self.count(table) >= n

    def calls(self) -> list[Call]:
        return [
            Call(*r) for r in self.rows("SELECT key, run_id, step, tool, attempt, pid, value FROM calls ORDER BY id")
        ]

    def starts(self) -> list[Start]:
        return [Start(*r) for r in self.rows("SELECT key, step, tool, attempt, pid FROM starts ORDER BY id")]

    def in_flight(self, pid: int | None = None, tool: str | None = None) -> list[Start]:
        """Calls that began and have not ended (by process ``pid``, of ``tool``)."""
        query = (
            "SELECT key, step, tool, attempt, pid FROM starts s WHERE NOT EXISTS "
            "(SELECT 1 FROM calls c WHERE c.key = s.key AND c.attempt = s.attempt AND c.pid = s.pid)"
        )
        params: list[Any] = []
        if pid is not None:
            query += " AND pid = ?"
            params.append(pid)
        if tool is not None:
            query += " AND tool = ?"
            params.append(tool)
        return [Start(*r) for r in self.rows(query, params)]

    def charges(self) -> dict[str, int]:
        return {k: int(n) for k, n in self.rows("SELECT key, count(*) FROM charges GROUP BY key")}

    def effects(self) -> dict[str, tuple[int, int]]:
        return {k: (int(v), int(w)) for k, v, w in self.rows("SELECT key, value, writes FROM effects")}


# -- plans -------------------------------------------------------------------------------------------


def random_plan(seed: int, n: int, *, ms: tuple[int, int], window: int = 10, prefix: str = "s") -> dict[str, Any]:
    """A seeded random DAG of ``n`` ledger-tool steps: a third each of charge, put and look.

    Each step reads the value of 0-3 of the ``window`` steps before it (``$ref:ID.value``; a charge
    less often) and sleeps a seeded number of milliseconds in ``ms``.
    """
    rng = random.Random(seed)
    tools = [(NON_IDEMPOTENT, IDEMPOTENT, READ_ONLY)[i % 3] for i in range(n)]
    rng.shuffle(tools)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        sid = f"{prefix}{i:02d}"
        # A charge is read by a later step less often (1 in 5): a charge that ends unknown_outcome
        # then skips a few steps, not half the plan, and most steps still compare with the reference.
        before = [s["id"] for s in steps[max(0, i - window) : i] if s["tool"] != NON_IDEMPOTENT or rng.random() < 0.2]
        deps = sorted(rng.sample(before, min(len(before), rng.choice((0, 1, 1, 2, 2, 3)))))
        arguments = {"ms": rng.randint(*ms), "salt": f"{seed}:{sid}", "inputs": [f"$ref:{d}.value" for d in deps]}
        steps.append({"id": sid, "tool": tools[i], "arguments": arguments})
    return {"steps": steps}


def chain_plan(tools: Sequence[str], *, ms: int = 20) -> dict[str, Any]:
    """Steps ``s0``, ``s1``, ... calling ``tools`` one after another (each reads the one before)."""
    steps: list[dict[str, Any]] = []
    for i, name in enumerate(tools):
        inputs = [f"$ref:s{i - 1}.value"] if i else []
        steps.append({"id": f"s{i}", "tool": name, "arguments": {"ms": ms, "salt": f"chain:s{i}", "inputs": inputs}})
    return {"steps": steps}


def write_plan(path: Path, plan: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def tools_of(plan: Mapping[str, Any]) -> dict[str, str]:
    return {s["id"]: s["tool"] for s in plan["steps"]}


def deps_of(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in plan["steps"]:
        refs = [_REF.match(x) for x in s["arguments"]["inputs"]]
        out[s["id"]] = [m.group(1) for m in refs if m is not None]
    return out


def downstream(plan: Mapping[str, Any], roots: set[str]) -> set[str]:
    """``roots`` and every step that depends on one of them, directly or not."""
    deps = deps_of(plan)
    found = set(roots)
    for s in plan["steps"]:  # steps come after their dependencies
        if any(d in found for d in deps[s["id"]]):
            found.add(s["id"])
    return found


# -- the store ---------------------------------------------------------------------------------------


def read_run(url: str, run_id: str) -> tuple[RunInfo, list[StoredEvent]]:
    """What the store holds of ``run_id``: its record and its events."""

    async def read() -> tuple[RunInfo, list[StoredEvent]]:
        async with open_store(url) as store:
            return await store.get_run(run_id), await store.events(run_id)

    return asyncio.run(read())


def outputs(info: RunInfo) -> dict[str, Any]:
    return {sid: r.output for sid, r in info.result.steps.items() if r.status == "succeeded"}


def statuses(info: RunInfo) -> dict[str, str]:
    return {sid: r.status for sid, r in info.result.steps.items()}


# -- the checks --------------------------------------------------------------------------------------


def check_events(events: Sequence[StoredEvent]) -> None:
    """The run's events are numbered 1..N without a gap and end with the one plan_finished of its end."""
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"event numbers have a gap or repeat: {seqs}"
    ends = [e.payload["status"] for e in events if e.type == "plan_finished"]
    # A submitted run was let go as "queued" once (Store.submit) before a worker took it.
    assert [x for x in ends if x != "queued"] == [ends[-1]], ends
    assert events[-1].type == "plan_finished" and ends[-1] in ("succeeded", "failed"), events[-1]


def check_run(
    plan: Mapping[str, Any],
    run_id: str,
    info: RunInfo,
    events: Sequence[StoredEvent],
    ledger: Ledger,
    *,
    reference: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Check one finished run against the ledger (and a crash-free run's outputs); returns counts for the report.

    - the run finished; each step succeeded, ended ``unknown_outcome`` (a non-idempotent call in flight
      when a process died), or was skipped because a step it depends on did;
    - a non-idempotent step is never called twice, and one that succeeded was called exactly once;
    - an idempotent step's effect is one row per key, however often it was called;
    - every call began with a ``step_started`` event of its attempt already committed, and each call
      of a step has its own attempt number; a succeeded step's output is its last call's;
    - a succeeded step's output equals the crash-free run's (``reference``);
    - the stored call count covers every call whose result committed, and only calls that began;
    - the run's events are numbered 1..N with no gap.
    """
    tools = tools_of(plan)
    status = statuses(info)
    result = info.result.steps
    assert info.finished, f"run {run_id} did not finish: {info.summary.status}"
    calls: dict[str, list[Call]] = defaultdict(list)
    for c in ledger.calls():
        if c.run_id == run_id:
            calls[c.step].append(c)
    starts: dict[str, list[Start]] = defaultdict(list)
    for s in ledger.starts():
        if s.key.startswith(f"{run_id}:"):
            starts[s.step].append(s)
    charges, effects = ledger.charges(), ledger.effects()
    started_events = {
        (e.step_id, e.payload["attempt"]) for e in events if e.type == "step_started" and not e.payload.get("fallback")
    }
    finished_events = Counter(e.step_id for e in events if e.type == "step_finished")
    started_count = Counter(e.step_id for e in events if e.type == "step_started")
    unknown = {sid for sid, st in status.items() if st == "unknown_outcome"}
    below = downstream(plan, unknown)
    counts = {"unknown_outcome": len(unknown), "skipped": 0, "repeated_safe_calls": 0}
    for sid, tool in tools.items():
        key = f"{run_id}:{sid}"
        mine, began, st = calls.get(sid, []), starts.get(sid, []), status[sid]
        where = f"step {sid} ({tool}, {st}): calls {mine}, starts {began}"
        assert all(c.key == key and c.tool == tool for c in mine), where
        assert len({c.attempt for c in mine}) == len(mine), f"an attempt number was called twice: {where}"
        assert len({s.attempt for s in began}) == len(began), f"an attempt number began twice: {where}"
        for s in began:
            assert (sid, s.attempt) in started_events, f"a call began without its step_started event: {where}"
        if st in ("succeeded", "unknown_outcome"):  # an outcome of its own commits once, and stands
            assert finished_events[sid] == 1, f"{finished_events[sid]} step_finished events: {where}"
        if tool == NON_IDEMPOTENT:
            assert len(mine) <= 1 and len(began) <= 1, f"a non-idempotent step was called twice: {where}"
            assert started_count[sid] <= 1, f"a non-idempotent step was started twice: {where}"
            assert charges.get(key, 0) == len(mine), (where, charges.get(key))
        elif tool == IDEMPOTENT and mine:
            assert effects.get(key) == (mine[-1].value, len(mine)), (where, effects.get(key))
        if len(mine) > 1:
            counts["repeated_safe_calls"] += 1
        if st == "succeeded":
            assert mine, f"a succeeded step has no call in the ledger: {where}"
            last = max(mine, key=lambda c: c.attempt)
            assert result[sid].attempts == last.attempt, (where, result[sid].attempts)
            assert result[sid].output == {"value": last.value}, (where, result[sid].output)
            if tool == NON_IDEMPOTENT:
                assert len(mine) == 1, where
            if reference is not None:
                assert result[sid].output == reference[sid], (where, reference[sid])
        elif st == "unknown_outcome":
            assert tool == NON_IDEMPOTENT, f"only a non-idempotent step may end unknown_outcome: {where}"
            assert len(began) <= 1, where
        elif st == "skipped":
            counts["skipped"] += 1
            assert sid in below, f"a step was skipped though no step it depends on ended unknown_outcome: {where}"
            assert not mine and not began, f"a skipped step was called: {where}"
        else:
            raise AssertionError(f"unexpected status: {where}")
        if reference is not None and sid not in below:
            assert st == "succeeded", f"a step not downstream of an unknown_outcome did not succeed: {where}"
    # The budget counter: every call whose result committed is counted (a resumed run goes on from
    # the stored count), and no call is counted that did not begin on record (its step_started).
    succeeded = sum(1 for st in status.values() if st == "succeeded")
    assert succeeded <= info.summary.calls <= sum(started_count.values()), (info.summary.calls, succeeded)
    check_events(events)
    return counts
