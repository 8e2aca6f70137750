"""Benchmark 6: the planner service under load: concurrent clients creating and executing small plans.

A real ``toolplan serve`` subprocess on 127.0.0.1 (default settings: ``--slots 16``, the per-key limit
of 32 active executions; a fresh SQLite file, or with ``--postgres`` a fresh database on the server
of ``$TOOLPLAN_TEST_POSTGRES_URL``), and N clients (default 50) in this process, each an
``AsyncClient`` with an API key of its own (made in the store as ``toolplan keys create`` does). For
a bounded time (default 30 s) each client loops: create a plan of 2 or 3 chained ``add`` steps
(``POST /v1/plans``), execute it (``POST /v1/plans/{id}/executions``, answered 202), and read its
status (``GET /v1/executions/{id}``) every ``POLL_S`` until it has finished. Every POST carries the
client's default Idempotency-Key. At the deadline the clients finish the plan in hand and stop.

Measured: plans completed per second (from the first request to the last client's end), the latency
of each status read, of create, of execute and of both together, and from create to the read that saw
the end; errors (any exception, by code; the target is 0). Then the server is stopped and the store
is read directly: every execution id a client got must be stored, succeeded, with the output the
client computed, and no execution or posted plan may exist that no client got (nothing lost, nothing
doubled).

Then the floor (``bench/service_floor.py``, skipped with ``--no-floor``): the same clients, keys and
seconds against a minimal server on the same web stack (FastAPI under uvicorn) and the same database
(tables ``floor_*`` of the same shape), doing one indexed read of the execution's row per status
read and no toolplan at all. Reported: each server's status-read p50/p99 and CPU per plan and per
request, toolplan's over the floor's (``versus_floor``), and the targets: toolplan's p99 status read
at most ``FLOOR_P99_TARGET`` times the floor's, and its CPU per plan at most half of
``CPU_BASELINE_MS`` (the figure when the floor was added).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from . import common

Backend = Literal["sqlite", "postgresql"]
CLIENTS = 50
SECONDS = 30.0
QUICK_CLIENTS = 5
QUICK_SECONDS = 3.0
POLL_S = 0.05  # a client's pause between two status reads of an unfinished execution
TOOLS_FILE = Path(__file__).with_name("service_tools.py")
FLOOR_FILE = Path(__file__).with_name("service_floor.py")
FLOOR_P99_TARGET = 2.0  # toolplan's p99 status read under load within 2x of the floor's
CPU_BASELINE_MS = {"sqlite": 22.0, "postgresql": 54.0}  # server CPU per plan when the floor was added (low end)
CPU_TARGET_FACTOR = 0.5  # ... to be at least halved
SAMPLES_KEPT = 2_000  # latencies kept in the JSON per measure (evenly spaced), besides the percentiles


def _percentiles(xs: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p99/max (nearest rank), mean and count, in the unit of ``xs``; a thinned sample list."""
    if not xs:
        return {"n": 0}
    s = sorted(xs)

    def rank(q: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]

    step = max(1, len(s) // SAMPLES_KEPT)
    return {
        "n": len(s),
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "max": s[-1],
        "mean": sum(s) / len(s),
        "samples_sorted": s[::step],
    }


def make_plan(x: int, steps: int) -> tuple[dict[str, Any], str, int]:
    """A chain of ``steps`` adds from ``x`` (s1 = x+1, s2 = s1+2, ...): the plan, its output step, its value."""
    plan_steps: list[dict[str, Any]] = [{"id": "s1", "tool": "add", "arguments": {"a": x, "b": 1}}]
    for k in range(2, steps + 1):
        plan_steps.append({"id": f"s{k}", "tool": "add", "arguments": {"a": f"$ref:s{k - 1}", "b": k}})
    last = f"s{steps}"
    return {"steps": plan_steps, "output_steps": [last]}, last, x + steps * (steps + 1) // 2


# --- the server ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return None


@dataclass
class Server:
    """``toolplan serve`` in a subprocess, its log in a file."""

    db_url: str
    log_path: Path
    floor: bool = False  # the floor (bench/service_floor.py) in place of ``toolplan serve``
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return "the floor server" if self.floor else "toolplan serve"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        if self.floor:
            return [
                sys.executable,
                str(FLOOR_FILE),
                "--db",
                self.db_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ]
        return [sys.executable, "-m", "toolplan", "serve", "--tools", f"{TOOLS_FILE}:TOOLS", "--db", self.db_url,
                "--host", "127.0.0.1", "--port", str(self.port)]  # fmt: skip

    def start(self) -> None:
        import httpx

        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=1) as c:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-2000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if c.get(f"{self.url}/healthz").status_code == 200:
                        return
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer within a minute")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)

    def log_problems(self) -> list[str]:
        """Lines of the server's log that report an error (uvicorn's access lines excluded)."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [ln for ln in lines if ("ERROR" in ln or "Traceback" in ln) and '" 200' not in ln][:20]


# --- the clients --------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the clients saw: latencies (ms), the executions they got, errors."""

    status_ms: list[float] = field(default_factory=list)
    create_ms: list[float] = field(default_factory=list)
    execute_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    end_to_end_ms: list[float] = field(default_factory=list)
    got: dict[str, tuple[str, int]] = field(default_factory=dict)  # execution id -> (output step, value)
    plans: set[str] = field(default_factory=set)
    completed: int = 0
    wrong: list[str] = field(default_factory=list)  # finished, but not succeeded with the right output
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)

    def error(self, code: str, message: str) -> None:
        self.errors[code] += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(f"{code}: {message[:300]}")


async def client_loop(index: int, url: str, key: str, deadline: float, tally: Tally) -> None:
    from toolplan.client import AsyncClient, ServiceError

    now = time.perf_counter
    async with AsyncClient(url, key, timeout=60) as client:
        n = 0
        while now() < deadline:
            n += 1
            plan, out_step, value = make_plan(index * 1_000_000 + n, 2 + n % 2)
            try:
                t0 = now()
                stored = await client.create_plan(plan)
                t1 = now()
                tally.plans.add(stored.plan_id)
                execution = await client.execute(stored.plan_id)
                t2 = now()
                tally.got[execution.execution_id] = (out_step, value)
                tally.create_ms.append((t1 - t0) * 1e3)
                tally.execute_ms.append((t2 - t1) * 1e3)
                tally.submit_ms.append((t2 - t0) * 1e3)
                while True:
                    t = now()
                    execution = await client.get_execution(execution.execution_id)
                    tally.status_ms.append((now() - t) * 1e3)
                    if execution.finished:
                        break
                    await asyncio.sleep(POLL_S)
                tally.end_to_end_ms.append((now() - t0) * 1e3)
                tally.completed += 1
                if execution.status != "succeeded" or dict(execution.outputs) != {out_step: value}:
                    tally.wrong.append(f"{execution.execution_id}: {execution.status} {dict(execution.outputs)}")
            except ServiceError as exc:
                tally.error(exc.code, exc.message)
            except Exception as exc:  # anything else is an error of the run too, counted and shown
                tally.error(type(exc).__name__, str(exc))


async def make_keys(db_url: str, count: int) -> list[str]:
    """``count`` API keys in the store (as ``toolplan keys create`` makes them); creates the schema."""
    from toolplan.service._store import ServiceStore  # bench-only: the keys CLI's own call
    from toolplan.store import open_store

    async with open_store(db_url) as store:
        data = ServiceStore(store)
        return [(await data.create_key(f"bench-client-{i}"))[1] for i in range(count)]


async def run_clients(url: str, keys: list[str], seconds: float) -> tuple[Tally, float]:
    tally = Tally()
    start = time.perf_counter()
    deadline = start + seconds
    async with asyncio.TaskGroup() as group:
        for i, key in enumerate(keys):
            group.create_task(client_loop(i, url, key, deadline, tally))
    return tally, time.perf_counter() - start


async def verify(db_url: str, tally: Tally) -> dict[str, Any]:
    """Read the store itself: every execution a client got is there, succeeded, with its output."""
    from toolplan.service._store import ServiceStore  # bench-only: the listing the API pages through
    from toolplan.store import open_store

    lost: list[str] = []
    async with open_store(db_url) as store:
        data = ServiceStore(store)

        async def every(kind: Literal["executions", "plans"]) -> list[str]:
            ids: list[str] = []
            cursor = None
            while True:
                page = await data.page(kind, limit=200, cursor=cursor)
                ids += [row["execution_id" if kind == "executions" else "plan_id"] for row in page.items]
                if page.next_cursor is None:
                    return ids
                cursor = page.next_cursor

        stored_executions = await every("executions")
        stored_plans = await every("plans")
        for execution_id, (out_step, value) in tally.got.items():
            try:
                info = await store.get_run(execution_id)
            except Exception as exc:
                lost.append(f"{execution_id}: not stored ({type(exc).__name__})")
                continue
            outputs = dict(info.result.outputs)
            if info.summary.status != "succeeded" or outputs != {out_step: value}:
                lost.append(f"{execution_id}: {info.summary.status} {outputs}, expected {{{out_step!r}: {value}}}")
    extra_executions = set(stored_executions) - set(tally.got)
    extra_plans = set(stored_plans) - tally.plans
    return {
        "executions_got": len(tally.got),
        "executions_stored": len(stored_executions),
        "duplicate_execution_rows": len(stored_executions) - len(set(stored_executions)),
        "plans_got": len(tally.plans),
        "plans_stored": len(stored_plans),
        "lost": len(lost),
        "lost_samples": lost[:10],
        "extra_executions": len(extra_executions),
        "extra_plans": len(extra_plans),
        "ok": not lost and not extra_executions and not extra_plans and len(stored_executions) == len(tally.got),
    }


# --- one backend --------------------------------------------------------------------------------


@contextlib.contextmanager
def database(backend: Backend, tmp: Path) -> Iterator[tuple[str | None, str | None, dict[str, Any]]]:
    """A fresh database: (its URL, None, facts), or (None, why it cannot be used, facts)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp / 'service.db'}", None, {}
        return
    from .durable import postgres_databases, postgres_server, postgres_url

    url = postgres_url()
    facts, why = postgres_server(url)
    facts["server"] = urlsplit(url)._replace(path="").geturl()
    if why:
        yield None, why, facts
        return
    with postgres_databases(url, ["service"]) as urls:
        yield urls["service"], None, facts


def _measures(tally: Tally, elapsed: float, cpu_s: float | None) -> dict[str, Any]:
    """What the clients saw of one server, with its CPU time per plan and per request."""
    requests = len(tally.status_ms) + len(tally.create_ms) + len(tally.execute_ms)
    return {
        "elapsed_s": elapsed,
        "plans_completed": tally.completed,
        "plans_per_s": tally.completed / elapsed if elapsed else 0.0,
        "requests": requests,
        "requests_per_s": requests / elapsed if elapsed else 0.0,
        "status_reads_per_plan": len(tally.status_ms) / tally.completed if tally.completed else None,
        "status_read_ms": _percentiles(tally.status_ms),
        "create_ms": _percentiles(tally.create_ms),
        "execute_ms": _percentiles(tally.execute_ms),
        "create_and_execute_ms": _percentiles(tally.submit_ms),
        "end_to_end_ms": _percentiles(tally.end_to_end_ms),
        "errors": sum(tally.errors.values()),
        "errors_by_code": dict(tally.errors),
        "error_samples": tally.error_samples,
        "wrong": len(tally.wrong),
        "wrong_samples": tally.wrong[:10],
        "server_cpu_ms_per_plan": cpu_s * 1e3 / tally.completed if tally.completed and cpu_s else None,
        "server_cpu_ms_per_request": cpu_s * 1e3 / requests if requests and cpu_s else None,
    }


def load(server: Server, keys: list[str], seconds: float) -> tuple[Tally, float, dict[str, Any]]:
    """Start ``server``, run the clients against it for ``seconds``, stop it: what they saw, and its facts."""
    server.start()
    try:
        assert server.process is not None
        pid = server.process.pid
        cpu_before, load_before = _cpu_seconds(pid), os.getloadavg()
        client_cpu = time.process_time()
        tally, elapsed = asyncio.run(run_clients(server.url, keys, seconds))
        client_cpu = time.process_time() - client_cpu
        cpu_after, load_after = _cpu_seconds(pid), os.getloadavg()
        rss = _peak_rss_mb(pid)
    finally:
        server.stop()
    facts = {
        "cpu_s": None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2),
        "peak_rss_mb": rss,
        "log_problems": server.log_problems(),
        "client_cpu_s": round(client_cpu, 2),
        "load_average": {"before": list(load_before), "after": list(load_after)},
    }
    return tally, elapsed, facts


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def versus_floor(backend: Backend, row: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    """toolplan over the floor: status read p50 and p99, CPU per plan and per request; the two targets."""
    mine, theirs = row["status_read_ms"], floor["status_read_ms"]
    p99 = _ratio(mine.get("p99"), theirs.get("p99"))
    cpu = row.get("server_cpu_ms_per_plan")
    cpu_target = CPU_BASELINE_MS[backend] * CPU_TARGET_FACTOR
    return {
        "status_read_p50_ratio": _ratio(mine.get("p50"), theirs.get("p50")),
        "status_read_p99_ratio": p99,
        "cpu_per_plan_ratio": _ratio(cpu, floor.get("server_cpu_ms_per_plan")),
        "cpu_per_request_ratio": _ratio(row.get("server_cpu_ms_per_request"), floor.get("server_cpu_ms_per_request")),
        "p99_target": FLOOR_P99_TARGET,
        "p99_met": p99 is not None and p99 <= FLOOR_P99_TARGET,
        "cpu_baseline_ms_per_plan": CPU_BASELINE_MS[backend],
        "cpu_target_ms_per_plan": cpu_target,
        "cpu_met": cpu is not None and cpu <= cpu_target,
    }


def run_backend(backend: Backend, *, clients: int, seconds: float, floor: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {"backend": backend, "clients": clients, "seconds": seconds}
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp_dir:
        tmp = Path(tmp_dir)
        with database(backend, tmp) as (db_url, why, facts):
            row["database"] = facts
            if db_url is None:
                row["skipped"] = why
                common.log(f"service {backend}: skipped ({why})")
                return row
            keys = asyncio.run(make_keys(db_url, clients))
            tally, elapsed, server = load(Server(db_url, tmp / "server.log"), keys, seconds)
            row["verified"] = asyncio.run(verify(db_url, tally))
            row["server"] = {
                "command": "toolplan serve --tools bench/service_tools.py:TOOLS --db URL --host 127.0.0.1 --port P",
                **{k: server[k] for k in ("cpu_s", "peak_rss_mb", "log_problems")},
            }
            row.update(_measures(tally, elapsed, server["cpu_s"]))
            row["client_cpu_s"] = server["client_cpu_s"]
            row["load_average"] = server["load_average"]
            if floor:  # the same clients and keys against the floor, on the same database (tables floor_*)
                f_tally, f_elapsed, f_server = load(Server(db_url, tmp / "floor.log", floor=True), keys, seconds)
                row["floor"] = {
                    "command": "python bench/service_floor.py --db URL --host 127.0.0.1 --port P",
                    "server": {k: f_server[k] for k in ("cpu_s", "peak_rss_mb", "log_problems")},
                    **_measures(f_tally, f_elapsed, f_server["cpu_s"]),
                    "client_cpu_s": f_server["client_cpu_s"],
                    "load_average": f_server["load_average"],
                }
                row["versus_floor"] = versus_floor(backend, row, row["floor"])
    v = row["verified"]
    common.log(
        f"service {backend}: {clients} clients, {elapsed:.1f}s: {tally.completed} plans "
        f"({row['plans_per_s']:.1f}/s), status read p50 {row['status_read_ms'].get('p50', 0):.1f} ms "
        f"p99 {row['status_read_ms'].get('p99', 0):.1f} ms, errors {row['errors']}, wrong {row['wrong']}, "
        f"lost {v['lost']}, extra {v['extra_executions']}+{v['extra_plans']}, "
        f"CPU/plan {row['server_cpu_ms_per_plan'] or 0:.1f} ms"
    )
    if floor:
        f, vs = row["floor"], row["versus_floor"]
        common.log(
            f"service {backend} floor: {f['plans_completed']} plans ({f['plans_per_s']:.1f}/s), status read p50 "
            f"{f['status_read_ms'].get('p50', 0):.1f} ms p99 {f['status_read_ms'].get('p99', 0):.1f} ms, errors "
            f"{f['errors']}, wrong {f['wrong']}, CPU/plan {f['server_cpu_ms_per_plan'] or 0:.2f} ms; toolplan/floor: "
            f"p99 {vs['status_read_p99_ratio'] or 0:.2f}x, CPU/plan {vs['cpu_per_plan_ratio'] or 0:.2f}x"
        )
    return row


def main(args: Any, argv: list[str]) -> Path:
    quick = bool(args.quick)
    clients = getattr(args, "clients", None) or (QUICK_CLIENTS if quick else CLIENTS)
    seconds = getattr(args, "seconds", None) or (QUICK_SECONDS if quick else SECONDS)
    backends: tuple[Backend, ...] = ("sqlite", "postgresql") if getattr(args, "postgres", False) else ("sqlite",)
    data = common.header(
        "service",
        quick=quick,
        argv=argv,
        clients=clients,
        seconds=seconds,
        poll_s=POLL_S,
        plan="a chain of 2 or 3 `add` steps (alternately), each client's numbers its own",
        loop="create the plan, execute it (202), read its status every poll_s until finished",
        keys="one API key per client, made in the store (as `toolplan keys create`)",
        server="`toolplan serve` in a subprocess on 127.0.0.1, default settings (--slots 16, 32 active per key)",
        client="toolplan.client.AsyncClient, one per client task, all in one process and event loop",
        idempotency="every POST carries the client's default Idempotency-Key (a fresh uuid)",
        unit="latencies in ms (nearest-rank percentiles); plans/s from the first request to the last client's end",
    )
    floor = not getattr(args, "no_floor", False)
    data["settings"]["floor"] = (
        "bench/service_floor.py: FastAPI under uvicorn, one INSERT per create, one read and one INSERT per "
        "execute (the chain added up in a task, one UPDATE), one indexed read per status read; no toolplan, "
        "no key check, no access log; the same clients and keys, after toolplan, on the same database"
        if floor
        else None
    )
    data["runs"] = [run_backend(b, clients=clients, seconds=seconds, floor=floor) for b in backends]
    return common.write("service", data, Path(args.out))
