"""Benchmark 7b: replicas, several ``toolplan serve`` processes on one PostgreSQL database sharing the work.

For 1 and then 2 processes (``PROCESSES``) on a fresh PostgreSQL database each (on the server of
``$TOOLPLAN_TEST_POSTGRES_URL``), the same client load as `bench.service` (its client loop, keys and
store check, imported): N clients (default 50) in 2 processes of their own (``CLIENT_PROCESSES``),
client i talking to process ``i mod P``, each creating, executing and polling small chained plans
for a bounded time. Each process is ``toolplan serve`` on 127.0.0.1 with default settings, its tool
`bench.replicas_tools.add`, which records every call in a file of its process: no plan makes the
same call twice, so a line seen twice is a step run twice, and the files show which process ran what.

Measured per configuration: plans per second, each process's CPU per plan and share of the work,
PostgreSQL's side (from its statistics for the bench's database: transactions committed, rows
written, connections open and active, CPU of the database's backends) per plan and per process, the
idle cost of a process (its polling, in commits per second). The speed-up is plans/s with 2
processes over 1 (goal: >= 1.6x on 2 cores).

`model` turns those per-plan and per-process figures into what 8 and 32 replicas ask of PostgreSQL:
connections, commits per second and backend CPU at the plan rate they would reach, one core each.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import common
from .service import Server, Tally, _cpu_seconds, _percentiles, client_loop, make_keys, verify

PROCESSES = (1, 2)
CLIENTS = 50
SECONDS = 30.0
QUICK_CLIENTS = 6
QUICK_SECONDS = 3.0
IDLE_S = 3.0  # how long the idle processes' commits are counted before the load (1 s with --quick)
SAMPLE_S = 0.25  # between two looks at the database's connections during the load
CLIENT_PROCESSES = 2  # the clients run in this many processes (see `load`)
REPLICAS_MODELLED = (8, 32)
TOOLS_FILE = Path(__file__).with_name("replicas_tools.py")
CALLS_ENV = "TOOLPLAN_BENCH_CALLS"
GOAL_SPEEDUP = 1.6


@dataclass
class Replica(Server):
    """`bench.service.Server` with the tool that records its calls."""

    @property
    def command(self) -> list[str]:
        command = super().command
        return [*command[:5], f"{TOOLS_FILE}:TOOLS", *command[6:]]


# --- PostgreSQL's side ----------------------------------------------------------------------------


def _backend_cpu(pids: set[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := _cpu_seconds(pid)) is not None}


@dataclass
class Watch:
    """PostgreSQL's statistics of one database, read on a connection to the server's admin database."""

    admin_url: str
    database: str
    samples: list[tuple[int, int, int]] = field(default_factory=list)  # (connections, active, waiting on a lock)
    backends: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            return list(conn.execute(sql, (self.database,)).fetchall())

    def counters(self) -> dict[str, int]:
        """Transactions committed and rolled back, rows written, in the database so far."""
        row = self._query(
            "SELECT xact_commit, xact_rollback, tup_inserted + tup_updated + tup_deleted "
            "FROM pg_stat_database WHERE datname = %s"
        )[0]
        return {"commits": int(row[0]), "rollbacks": int(row[1]), "rows_written": int(row[2])}

    def connections(self) -> list[tuple[int, str]]:
        return [
            (int(pid), str(state))
            for pid, state in self._query("SELECT pid, coalesce(state, '') FROM pg_stat_activity WHERE datname = %s")
        ]

    def _sample(self) -> None:
        import psycopg

        sql = "SELECT pid, coalesce(state, ''), coalesce(wait_event_type, '') FROM pg_stat_activity WHERE datname = %s"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_S):
                rows = conn.execute(sql, (self.database,)).fetchall()
                active = sum(1 for _, state, _ in rows if state == "active")
                self.samples.append((len(rows), active, sum(1 for *_, wait in rows if wait == "Lock")))
                self.backends.update(int(pid) for pid, *_ in rows)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sample, name="bench-replicas-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


async def settled_counters(watch: Watch) -> dict[str, int]:
    """`Watch.counters` once the backends have sent their figures (PostgreSQL flushes them each second)."""
    await asyncio.sleep(1.1)
    return watch.counters()


# --- the calls each process made ------------------------------------------------------------------


def expected_calls(tally: Tally) -> set[tuple[int, int]]:
    """The ``(a, b)`` of every call of every execution a client got (`bench.service.make_plan`'s chains)."""
    out: set[tuple[int, int]] = set()
    for out_step, value in tally.got.values():
        steps = int(out_step[1:])
        x = value - steps * (steps + 1) // 2
        out.update((x + (k - 1) * k // 2, k) for k in range(1, steps + 1))
    return out


def check_calls(calls_dir: Path, tally: Tally) -> dict[str, Any]:
    """Every call of every execution made exactly once, by whichever process; the work each process did."""
    seen: Counter[tuple[int, int]] = Counter()
    per_process: dict[str, int] = {}
    for path in sorted(calls_dir.glob("calls-*.txt")):
        lines = path.read_text().split("\n")
        calls = [(int(a), int(b)) for a, b in (line.split() for line in lines if line)]
        seen.update(calls)
        per_process[path.stem.removeprefix("calls-")] = len(calls)
    expected = expected_calls(tally)
    twice = sorted(call for call, n in seen.items() if n > 1)
    missing = sorted(expected - set(seen))
    extra = sorted(set(seen) - expected)
    return {
        "calls_expected": len(expected),
        "calls_made": sum(seen.values()),
        "made_twice": len(twice),
        "made_twice_samples": [list(c) for c in twice[:10]],
        "missing": len(missing),
        "extra": len(extra),
        "calls_per_process": per_process,
        "ok": not twice and not missing and not extra,
    }


# --- one configuration ----------------------------------------------------------------------------


async def drive(urls: list[str], clients: list[tuple[int, str]], seconds: float) -> tuple[Tally, float]:
    """`bench.service.run_clients` over several servers: client i talks to server ``i mod len(urls)``."""
    tally = Tally()
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for i, key in clients:
            group.create_task(client_loop(i, urls[i % len(urls)], key, start + seconds, tally))
    return tally, time.perf_counter() - start


def _drive_here(urls: list[str], clients: list[tuple[int, str]], seconds: float) -> tuple[Tally, float, float]:
    """`drive` in a client process of its own: what it saw, how long it ran, its CPU seconds."""
    import toolplan.client  # noqa: F401  # imported before the clock starts (`client_loop` imports it)

    cpu = time.process_time()
    tally, elapsed = asyncio.run(drive(urls, clients, seconds))
    return tally, elapsed, time.process_time() - cpu


def load(urls: list[str], keys: list[str], seconds: float) -> tuple[Tally, float, float]:
    """The clients in ``CLIENT_PROCESSES`` processes (client i in process ``i mod CLIENT_PROCESSES``), merged.

    One process for all of them is one thread: on a busy machine the scheduler gives it one share,
    and the load it makes, not the servers, sets the plans/s.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    parts = [[(i, k) for i, k in enumerate(keys) if i % CLIENT_PROCESSES == p] for p in range(CLIENT_PROCESSES)]
    parts = [p for p in parts if p]
    with ProcessPoolExecutor(len(parts), mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_drive_here, [urls] * len(parts), parts, [seconds] * len(parts)))
    tally = Tally()
    for part, _, _ in done:
        for name in ("status_ms", "create_ms", "execute_ms", "submit_ms", "end_to_end_ms", "wrong", "error_samples"):
            getattr(tally, name).extend(getattr(part, name))
        tally.got.update(part.got)
        tally.plans |= part.plans
        tally.completed += part.completed
        tally.errors.update(part.errors)
    return tally, max(e for _, e, _ in done), sum(c for _, _, c in done)


def run_processes(
    processes: int, *, admin_url: str, db_url: str, clients: int, seconds: float, tmp: Path, idle_s: float = IDLE_S
) -> dict[str, Any]:
    from urllib.parse import urlsplit

    database = urlsplit(db_url).path.lstrip("/")
    watch = Watch(admin_url, database)
    keys = asyncio.run(make_keys(db_url, clients))
    calls_dir = tmp / f"calls-{processes}"
    calls_dir.mkdir()
    os.environ[CALLS_ENV] = str(calls_dir)  # inherited by the servers
    servers = [Replica(db_url, tmp / f"server-{processes}-{i}.log") for i in range(processes)]
    row: dict[str, Any] = {"processes": processes, "clients": clients, "seconds": seconds}
    try:
        for server in servers:
            server.start()
        pids = [s.process.pid for s in servers if s.process is not None]
        # Idle: what the processes cost the database with nothing to do (their runners' polling).
        idle0 = asyncio.run(settled_counters(watch))
        t_idle = time.perf_counter()
        time.sleep(idle_s)
        idle1 = watch.counters()
        idled = time.perf_counter() - t_idle
        idle_commits_per_s = (idle1["commits"] - idle0["commits"]) / idled
        idle_connections = watch.connections()
        # The load.
        backends0 = _backend_cpu({pid for pid, _ in idle_connections})
        cpu0 = [_cpu_seconds(pid) or 0.0 for pid in pids]
        load0 = os.getloadavg()
        watch.start()
        t_load = time.perf_counter()
        tally, elapsed, client_cpu = load([s.url for s in servers], keys, seconds)
        watch.stop()
        cpu1 = [_cpu_seconds(pid) or 0.0 for pid in pids]
        load1 = os.getloadavg()
        backends1 = _backend_cpu(watch.backends | backends0.keys())
        after = asyncio.run(settled_counters(watch))
        window = time.perf_counter() - t_load
    finally:
        for server in servers:
            server.stop()
    verified = asyncio.run(verify(db_url, tally))
    calls = check_calls(calls_dir, tally)
    done = tally.completed or 1
    # The window counted (load + the wait for the statistics) minus what idle polling made outside the load.
    commits = after["commits"] - idle1["commits"] - idle_commits_per_s * (window - elapsed)
    backend_cpu = sum(cpu - backends0.get(pid, 0.0) for pid, cpu in backends1.items())
    conns = [c for c, _, _ in watch.samples] or [len(idle_connections)]
    active = [a for _, a, _ in watch.samples] or [0]
    locked = [w for _, _, w in watch.samples] or [0]
    server_cpu = [round(b - a, 2) for a, b in zip(cpu0, cpu1, strict=True)]
    row.update(
        {
            "elapsed_s": elapsed,
            "plans_completed": tally.completed,
            "plans_per_s": tally.completed / elapsed if elapsed else 0.0,
            "end_to_end_ms": {k: v for k, v in _percentiles(tally.end_to_end_ms).items() if k != "samples_sorted"},
            "status_read_ms": {k: v for k, v in _percentiles(tally.status_ms).items() if k != "samples_sorted"},
            "errors": sum(tally.errors.values()),
            "errors_by_code": dict(tally.errors),
            "error_samples": tally.error_samples,
            "wrong": len(tally.wrong),
            "verified": verified,
            "calls": calls,
            "servers": {
                "cpu_s": server_cpu,
                "cpu_ms_per_plan": round(sum(server_cpu) * 1e3 / done, 2),
                "log_problems": [p for s in servers for p in s.log_problems()],
            },
            "client_cpu_s": round(client_cpu, 2),
            "postgresql": {
                "commits_per_plan": round(commits / done, 2),
                # SQLAlchemy ends a read-only checkout with a rollback: each is a transaction too.
                "rollbacks_per_plan": round((after["rollbacks"] - idle1["rollbacks"]) / done, 2),
                "rows_written_per_plan": round((after["rows_written"] - idle1["rows_written"]) / done, 2),
                "idle_commits_per_s_per_process": round(idle_commits_per_s / processes, 2),
                "connections_idle": len(idle_connections),
                "connections_peak": max(conns),
                "connections_mean": round(sum(conns) / len(conns), 1),
                "active_mean": round(sum(active) / len(active), 2),
                "active_peak": max(active),
                # Backends waiting for a row or table lock (claims racing for the same execution, say).
                "lock_waits_mean": round(sum(locked) / len(locked), 3),
                "lock_waits_peak": max(locked),
                "samples_with_lock_waits": sum(1 for w in locked if w),
                "samples": len(locked),
                "backend_cpu_s": round(backend_cpu, 2),
                "backend_cpu_ms_per_plan": round(backend_cpu * 1e3 / done, 3),
            },
            "load_average": {"before": list(load0), "after": list(load1)},
        }
    )
    pg = row["postgresql"]
    common.log(
        f"replicas {processes}: {clients} clients, {elapsed:.1f}s: {tally.completed} plans "
        f"({row['plans_per_s']:.1f}/s), "
        f"server CPU {row['servers']['cpu_ms_per_plan']} ms/plan, {pg['commits_per_plan']} commits/plan, "
        f"connections peak {pg['connections_peak']} (active mean {pg['active_mean']}, waiting on a lock in "
        f"{pg['samples_with_lock_waits']} of {pg['samples']} looks), "
        f"calls twice {calls['made_twice']}, missing {calls['missing']}, per process {calls['calls_per_process']}, "
        f"errors {row['errors']}, store ok {verified['ok']}"
    )
    return row


# --- the model ------------------------------------------------------------------------------------


def model(run: dict[str, Any], replicas: tuple[int, ...] = REPLICAS_MODELLED) -> dict[str, Any]:
    """What ``replicas`` processes ask of PostgreSQL, from one measured configuration (per plan, per process).

    Each replica is given one core, so it completes ``1000 / cpu_ms_per_plan`` plans a second; at R
    replicas the database then sees R times that rate, times the commits (and backend CPU) of a plan,
    plus R times a process's idle polling; and R times the connections one process keeps open.
    """
    n = run["processes"]
    pg = run["postgresql"]
    per_core = 1e3 / run["servers"]["cpu_ms_per_plan"]
    conns = pg["connections_peak"] / n
    active = pg["active_mean"] / n
    rows = []
    for r in replicas:
        rate = r * per_core
        rows.append(
            {
                "replicas": r,
                "plans_per_s": round(rate),
                "connections": round(r * conns),
                "active_connections_mean": round(r * active, 1),
                "commits_per_s": round(rate * pg["commits_per_plan"] + r * pg["idle_commits_per_s_per_process"]),
                "transactions_per_s": round(
                    rate * (pg["commits_per_plan"] + pg["rollbacks_per_plan"])
                    + r * pg["idle_commits_per_s_per_process"]
                ),
                "rows_written_per_s": round(rate * pg["rows_written_per_plan"]),
                "backend_cores": round(rate * pg["backend_cpu_ms_per_plan"] / 1e3, 1),
            }
        )
    return {
        "from": f"the {n}-process run",
        "assumes": "one core per replica (plans/s = 1000 / server CPU ms per plan), PostgreSQL keeping up",
        "per_process": {
            "plans_per_s_per_core": round(per_core, 1),
            "connections_peak": round(conns, 1),
            "active_connections_mean": round(active, 2),
            "idle_commits_per_s": pg["idle_commits_per_s_per_process"],
        },
        "per_plan": {
            "commits": pg["commits_per_plan"],
            "rollbacks": pg["rollbacks_per_plan"],
            "rows_written": pg["rows_written_per_plan"],
            "backend_cpu_ms": pg["backend_cpu_ms_per_plan"],
        },
        "replicas": rows,
    }


def print_model(m: dict[str, Any]) -> None:
    common.log(f"model ({m['from']}; {m['assumes']}): per process {m['per_process']}, per plan {m['per_plan']}")
    for r in m["replicas"]:
        common.log(
            f"  {r['replicas']:>3} replicas: {r['plans_per_s']:,} plans/s, {r['connections']} connections "
            f"({r['active_connections_mean']} active on average), {r['commits_per_s']:,} commits/s "
            f"({r['transactions_per_s']:,} transactions/s with read-only ones), "
            f"{r['rows_written_per_s']:,} rows written/s, {r['backend_cores']} backend cores"
        )


def projection(runs: list[dict[str, Any]], cores: int | None = None) -> dict[str, Any]:
    """Plans/s that the measured CPU per plan allows on ``cores`` idle cores, for 1 and 2 processes.

    A process runs on one core at most (``1000 / server ms per plan``), and the servers, the clients
    (in the bench's own process) and the database's backends share the cores. On a machine that
    others are using the measured plans/s fall short of this; the ratio is what an idle run shows.
    """
    cores = cores or os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores}
    for run in runs:
        n, done = run["processes"], run["plans_completed"] or 1
        server = run["servers"]["cpu_ms_per_plan"]
        total = server + run["client_cpu_s"] * 1e3 / done + run["postgresql"]["backend_cpu_ms_per_plan"]
        rate = min(n * 1e3 / server, cores * 1e3 / total)
        out.setdefault(str(n), []).append({"total_cpu_ms_per_plan": round(total, 1), "plans_per_s": round(rate, 1)})
    rates = {n: max(r["plans_per_s"] for r in out.get(str(n), [])) for n in PROCESSES if str(n) in out}
    if PROCESSES[0] in rates and PROCESSES[-1] in rates:
        out["speedup"] = round(rates[PROCESSES[-1]] / rates[PROCESSES[0]], 2)
    return out


# --- the benchmark --------------------------------------------------------------------------------


def main(args: Any, argv: list[str]) -> Path:
    import tempfile

    from .durable import postgres_databases, postgres_server, postgres_url

    quick = bool(args.quick)
    clients = getattr(args, "clients", None) or (QUICK_CLIENTS if quick else CLIENTS)
    seconds = getattr(args, "seconds", None) or (QUICK_SECONDS if quick else SECONDS)
    reps = getattr(args, "reps", None) or 1
    data = common.header(
        "replicas",
        quick=quick,
        argv=argv,
        clients=clients,
        seconds=seconds,
        processes=list(PROCESSES),
        repetitions=reps,
        load="bench.service's client loop: create a 2- or 3-step chain of `add`, execute it, poll its status",
        routing="client i talks to process i mod P; any process may run any execution (claims)",
        client_processes=f"{CLIENT_PROCESSES}: client i in process i mod {CLIENT_PROCESSES}, not the bench's own",
        server="`toolplan serve --tools bench/replicas_tools.py:TOOLS --db URL` on 127.0.0.1, default settings",
        database="a fresh PostgreSQL database per configuration, on $TOOLPLAN_TEST_POSTGRES_URL's server",
        calls="each tool call appends `a b` to its process's file; no plan makes the same call twice",
    )
    url = postgres_url()
    facts, why = postgres_server(url)
    data["database"] = facts
    if quick and args.benchmark == "all":  # three servers to start: the quick suite keeps to its minute
        why = "--quick with all (three servers to start: run `python -m bench replicas --quick`)"
    if why:
        common.log(f"replicas: skipped ({why})")
        data.update(skipped=why, runs=[])
        return common.write("replicas", data, Path(args.out))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp_dir:
        for rep in range(reps):
            for n in PROCESSES:
                with postgres_databases(url, [f"replicas_{n}"]) as urls:
                    tmp = Path(tmp_dir) / f"rep{rep}"
                    tmp.mkdir(exist_ok=True)
                    run = run_processes(n, admin_url=url, db_url=urls[f"replicas_{n}"], clients=clients,
                                        seconds=seconds, tmp=tmp, idle_s=1.0 if quick else IDLE_S)  # fmt: skip
                    run["repetition"] = rep
                    runs.append(run)
    data["runs"] = runs
    best = {n: max((r for r in runs if r["processes"] == n), key=lambda r: r["plans_per_s"]) for n in PROCESSES}
    one, two = best[PROCESSES[0]], best[PROCESSES[-1]]
    data["speedup"] = round(two["plans_per_s"] / one["plans_per_s"], 2) if one["plans_per_s"] else None
    data["speedups_per_repetition"] = [
        round(b["plans_per_s"] / a["plans_per_s"], 2)
        for a, b in zip(runs[:: len(PROCESSES)], runs[len(PROCESSES) - 1 :: len(PROCESSES)], strict=True)
        if a["plans_per_s"]
    ]
    data["goal_speedup"] = GOAL_SPEEDUP
    # Robust to a busy machine (plans/s is not): what a plan costs the servers with 2 processes against 1.
    # 1.0 means sharing adds no work per plan (no claim races or lease polling paid per plan).
    one_cpu, two_cpu = one["servers"]["cpu_ms_per_plan"], two["servers"]["cpu_ms_per_plan"]
    data["server_cpu_per_plan_ratio"] = round(two_cpu / one_cpu, 2) if one_cpu else None
    data["exactly_once"] = all(r["calls"]["ok"] and r["verified"]["ok"] for r in runs)
    data["cpu_bound_projection"] = projection(runs)
    data["model"] = model(two)
    common.log(
        f"replicas: {PROCESSES[-1]} processes / 1 = {data['speedup']}x (goal {GOAL_SPEEDUP}x), server CPU "
        f"per plan {data['server_cpu_per_plan_ratio']}x, every call exactly once: {data['exactly_once']}"
    )
    print_model(data["model"])
    return common.write("replicas", data, Path(args.out))
