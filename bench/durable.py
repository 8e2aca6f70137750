"""Benchmark 5: durable runs: per-step cost of a run recorded in a store, on SQLite and PostgreSQL.

Contenders, all in one process and one event loop, interleaved per (database, shape, size):

- ``toolplan``: ``execute_plan`` without a store (the baseline: nothing is recorded).
- ``toolplan_durable``: the same call with ``store=open_store(url)`` (``toolplan.store``); skipped
  with the reason when that module does not import.
- ``dbos``: DBOS Transact (Python), launched in-process with its system database on the same kind
  of database: an ``async`` ``@DBOS.workflow`` whose steps are ``async`` ``@DBOS.step`` no-ops. The
  chain awaits them one after the other; the fan-out awaits the root, then starts the N-2 middle
  steps at once with ``asyncio.gather`` and awaits the join (the same DAG as toolplan's fan-out).
- ``dbos_sync``: the chain only, as a plain ``def`` workflow of ``def`` steps (DBOS's cheaper path:
  the checkpoint writes run inline instead of in ``asyncio.to_thread``); it cannot run steps at once.

Shapes (``bench.dags``): ``chain`` (each step reads the previous) and ``fanout`` (one root, N-2
parallel steps, one join). Per-step ms = wall time of one whole run (toolplan: validate, compile,
run; DBOS: the workflow call, its status rows included) / N. Every contender gets a fresh database
(a file in a temporary directory on SQLite; a database created on the server for PostgreSQL, dropped
afterwards) that it keeps for all its runs on that backend. On SQLite both sides run WAL with
synchronous=NORMAL, toolplan's own setting (DBOS's engine is built here as DBOS builds it, with that
level; see `dbos_sqlite_engine`). After
every DBOS run its ``operation_outputs`` rows for the workflow are counted: one checkpoint per step.
toolplan's store counts its own writes (`store_counts`): each row gives ``toolplan_durable_per_step``,
the commits, round trips to PostgreSQL and wake-ups of the event loop of the sampled runs divided by
their steps (the run's creation and end included).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import sqlite3
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from toolplan import execute_plan, tool
from toolplan.execute import PlanResult

from . import common
from .dags import Shape, make, to_plan

SIZES = (10, 100, 1_000)
QUICK_SIZES = (10, 100)
SHAPES: tuple[Shape, ...] = ("chain", "fanout")
Backend = Literal["sqlite", "postgresql"]
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgresql")
CONTENDERS = ("toolplan", "toolplan_durable", "dbos", "dbos_sync")
MAX_CONCURRENCY = 64  # toolplan's limit on steps in flight: the fan-out's middle steps run 64 at a time
POSTGRES_ENV = "TOOLPLAN_TEST_POSTGRES_URL"
POSTGRES_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
DBOS_APP = "toolplan-bench-durable"
DBOS_SQLITE_SYNCHRONOUS = "NORMAL"  # toolplan's store's level on SQLite (see dbos_sqlite_engine)

# What each side guarantees when the process dies in the middle of a run (shown in the report).
DBOS_CRASH = (
    "a step's output is checkpointed in the system database after its function returns (one "
    "transaction per step; the workflow's inputs and status have rows of their own). Recovery runs "
    "the workflow again from the start: a step with a checkpoint returns its recorded output without "
    "running, and a step that was running at the crash has no checkpoint and runs again. Steps are "
    "at-least-once; the workflow's outcome is recorded exactly once "
    "(docs.dbos.dev: Python step tutorial, explanations/concurrent-executions)"
)
TOOLPLAN_CRASH = (
    "a step's `running` row (tool, attempt, idempotency key) commits before its tool is called, and its "
    "result commits with its event before any dependent's tool is called (group-committed: what one turn "
    "of the event loop wrote, in one transaction). `resume(run_id, ...)` reuses every step whose result "
    "committed, without calling it; a step whose call was in flight is called again, with the same "
    "idempotency key, only if its tool is `read_only` or `idempotent`, and otherwise ends "
    "`unknown_outcome` until resumed with `rerun_unknown=True` (this bench's no-op is neither). A finished "
    "step is never repeated; an unmarked tool is called at most once unless you ask (docs/durable.md)"
)
TOOLPLAN_CRASH_MISSING = "not stated (toolplan.store does not import)"
SQLITE_DURABILITY = (
    "both sides run WAL with synchronous=NORMAL: a commit survives the process being killed; a power "
    "cut may lose the last commits (toolplan's store sets this itself; DBOS's default is synchronous=FULL, "
    "an fsync per commit, and this bench gives it NORMAL to match)"
)


@tool
async def noop(deps: list[int]) -> int:
    """Do nothing."""
    return 1


def store_module() -> tuple[Any, str | None]:
    """``toolplan.store`` and None, or None and why it cannot be used."""
    try:
        module = importlib.import_module("toolplan.store")
    except ImportError as e:
        return None, f"toolplan.store does not import: {e}"
    if not callable(getattr(module, "open_store", None)):
        return None, "toolplan.store has no open_store()"
    return module, None


def postgres_url() -> str:
    return os.environ.get(POSTGRES_ENV) or POSTGRES_DEFAULT


def _with_database(url: str, name: str) -> str:
    return urlsplit(url)._replace(path=f"/{name}").geturl()


def postgres_server(url: str) -> tuple[dict[str, Any], str | None]:
    """The server's version and commit settings, and None; or {} and why it cannot be used."""
    try:
        import psycopg
    except ImportError:
        return {}, "psycopg is not installed"
    facts: dict[str, Any] = {}
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            for setting in ("server_version", "synchronous_commit", "fsync"):
                row = conn.execute(f"SHOW {setting}").fetchone()
                facts[setting] = row[0] if row else None
    except Exception as e:  # any failure to connect: the rows are skipped with the reason
        first = (str(e).strip().splitlines() or [""])[0]
        return {}, f"PostgreSQL at {url} is unreachable ({type(e).__name__}: {first})"
    return facts, None


@contextlib.contextmanager
def postgres_databases(url: str, names: list[str]) -> Iterator[dict[str, str]]:
    """Fresh databases on the server at ``url``, one per name (URL each), dropped on exit."""
    import psycopg

    tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
    dbs = {name: f"toolplan_bench_{name}_{tag}" for name in names}
    with psycopg.connect(url, autocommit=True) as conn:
        for db in dbs.values():
            conn.execute(f'CREATE DATABASE "{db}"')
    try:
        yield {name: _with_database(url, db) for name, db in dbs.items()}
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for db in dbs.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def fsync_probe(path: Path, times: int = 100) -> list[float]:
    """Milliseconds for one 100-byte write + fsync of a file next to the databases, ``times`` times."""
    out: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(times):
            t0 = common.now()
            os.write(fd, b"x" * 100)
            os.fsync(fd)
            out.append((common.now() - t0) * 1e3)
    finally:
        os.close(fd)
        path.unlink()
    return out


# --- DBOS ---------------------------------------------------------------------------------------


@dataclass
class DbosFlows:
    """The DBOS workflows, decorated once per process (DBOS registers them globally)."""

    chain: Callable[[int], Awaitable[int]]
    fanout: Callable[[int], Awaitable[int]]
    chain_sync: Callable[[int], int]


_FLOWS: list[DbosFlows] = []


def dbos_flows() -> DbosFlows:
    if _FLOWS:
        return _FLOWS[0]
    from dbos import DBOS

    @DBOS.step()
    async def dbos_noop(deps: list[int]) -> int:
        return 1

    @DBOS.step()
    def dbos_noop_sync(deps: list[int]) -> int:
        return 1

    @DBOS.workflow()
    async def dbos_chain(n: int) -> int:
        value = await dbos_noop([])
        for _ in range(n - 1):
            value = await dbos_noop([value])
        return value

    @DBOS.workflow()
    async def dbos_fanout(n: int) -> int:
        root = await dbos_noop([])
        middle = await asyncio.gather(*(dbos_noop([root]) for _ in range(n - 2)))
        return await dbos_noop(list(middle))

    @DBOS.workflow()
    def dbos_chain_sync(n: int) -> int:
        value = dbos_noop_sync([])
        for _ in range(n - 1):
            value = dbos_noop_sync([value])
        return value

    _FLOWS.append(DbosFlows(dbos_chain, dbos_fanout, dbos_chain_sync))
    return _FLOWS[0]


def dbos_sqlite_engine(url: str) -> Any:
    """DBOS's system database engine on SQLite, as DBOS builds it, at toolplan's synchronous level.

    DBOS's own engine (``dbos/_sys_db_sqlite.py``) opens IMMEDIATE transactions with a 30 s busy
    timeout and foreign keys on, and leaves SQLite's synchronous=FULL (an fsync per commit); the file
    is already in WAL mode. toolplan's store runs WAL with synchronous=NORMAL (docs/durable.md), so
    both sides get that: a commit survives the process being killed, not necessarily a power cut.
    """
    import sqlalchemy as sa

    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        dbapi_conn.execute(f"PRAGMA synchronous={DBOS_SQLITE_SYNCHRONOUS}")

    return engine


def sqlite_settings(engine: Any) -> dict[str, Any]:
    """journal_mode and synchronous of a connection of ``engine``."""
    with engine.connect() as conn:
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {"journal_mode": journal, "synchronous": names.get(int(sync or 0), sync)}


class Dbos:
    """DBOS launched on one system database; runs a workflow and counts its checkpoints."""

    def __init__(self, backend: Backend, url: str) -> None:
        from dbos import DBOS, DBOSConfig

        self.backend, self.url = backend, url
        self.flows = dbos_flows()
        config: DBOSConfig = {"name": DBOS_APP, "system_database_url": url, "log_level": "WARNING"}
        self.engine = dbos_sqlite_engine(url) if backend == "sqlite" else None
        if self.engine is not None:
            config["system_database_engine"] = self.engine
        t0 = common.now()
        DBOS(config=config)
        DBOS.launch()
        self.launch_s = common.now() - t0
        self.settings: dict[str, Any] = {"system_database": backend, "launch_s": self.launch_s}
        if self.engine is not None:
            self.settings.update(sqlite_settings(self.engine))

    def close(self) -> None:
        """Destroy DBOS, and give the running loop a default executor again.

        An async DBOS workflow makes DBOS's thread pool the running loop's default executor (what
        ``asyncio.to_thread`` uses); ``DBOS.destroy()`` shuts that pool down and leaves it in place.
        """
        from dbos import DBOS

        DBOS.destroy()
        if self.engine is not None:
            self.engine.dispose()
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to restore
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="bench-durable"))

    async def run(self, shape: Shape, n: int, *, sync: bool = False) -> float:
        from dbos import SetWorkflowID

        workflow_id = f"bench-{uuid.uuid4().hex}"
        with SetWorkflowID(workflow_id):
            t0 = common.now()
            if sync:
                value = self.flows.chain_sync(n)  # blocks the loop: nothing else runs meanwhile
            else:
                value = await (self.flows.chain if shape == "chain" else self.flows.fanout)(n)
            t = common.now() - t0
        assert value == 1, value
        steps = self.checkpoints(workflow_id)
        assert steps == n, f"DBOS recorded {steps} step outputs for {n} steps"
        return t

    def checkpoints(self, workflow_id: str) -> int:
        """Rows in DBOS's ``operation_outputs`` for one workflow (read with a separate connection)."""
        query = "SELECT count(*) FROM {}operation_outputs WHERE workflow_uuid = {}"
        if self.backend == "sqlite":
            with contextlib.closing(sqlite3.connect(self.url.removeprefix("sqlite:///"))) as conn:
                row = conn.execute(query.format("", "?"), (workflow_id,)).fetchone()
        else:
            import psycopg

            with psycopg.connect(self.url) as pg:
                row = pg.execute(query.format("dbos.", "%s"), (workflow_id,)).fetchone()
        return int(row[0]) if row else 0


# --- one backend --------------------------------------------------------------------------------


@dataclass
class Side:
    """What runs on one backend: the store and DBOS (None when skipped) and why they were skipped."""

    backend: Backend
    store: Any = None
    dbos: Dbos | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def store_counts(store: Any) -> dict[str, int]:
    """What the store's write path has done so far: commits, round trips to the server, wake-ups of the loop.

    Counted by the store itself (``Store.db.counts``): ``commits`` are the transactions of journal
    writes (a group commit counts once); ``round_trips`` the waits for PostgreSQL's answer they took
    (none on SQLite, which runs in-process); ``wakeups`` the hand-offs from the store's database
    thread back to the event loop. {} for a store that does not count.
    """
    counts = getattr(getattr(store, "db", None), "counts", None)
    if counts is None:
        return {}
    return {k: int(getattr(counts, k)) for k in ("commits", "round_trips", "wakeups")}


async def run_toolplan(plan: dict[str, Any], n: int, store: Any) -> float:
    options: dict[str, Any] = {"max_steps": n, "max_concurrency": MAX_CONCURRENCY}
    if store is not None:
        options["store"] = store
    run: Callable[..., Awaitable[PlanResult]] = execute_plan  # store= is not in LimitOptions' types
    t0 = common.now()
    result = await run(plan, [noop], **options)
    t = common.now() - t0
    assert result.ok, result.errors
    assert store is None or result.run_id, "a durable run has no run_id"
    return t


@contextlib.asynccontextmanager
async def backend_side(backend: Backend, *, store_mod: Any, store_skip: str | None) -> AsyncIterator[Side]:
    """Fresh databases for toolplan's store and for DBOS on ``backend``; DBOS launched on its own."""
    side = Side(backend)
    if store_skip:
        side.skipped["toolplan_durable"] = store_skip
    dbos_missing = bool(common.not_installed(["dbos"]))
    if dbos_missing:
        side.skipped["dbos"] = side.skipped["dbos_sync"] = "not installed"
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-durable-")))
            urls = {"toolplan": f"sqlite:///{tmp / 'toolplan.db'}", "dbos": f"sqlite:///{tmp / 'dbos.sqlite'}"}
            with contextlib.closing(sqlite3.connect(tmp / "dbos.sqlite")) as conn:  # WAL persists in the file
                conn.execute("PRAGMA journal_mode=WAL")
            side.settings["fsync_ms"] = common.summarize(fsync_probe(tmp / "probe.bin"))
        else:
            url = postgres_url()
            side.settings["server"] = urlsplit(url)._replace(path="").geturl()
            facts, why = postgres_server(url)
            side.settings.update(facts)
            if why:
                side.skipped.update(dict.fromkeys(CONTENDERS, why))
                yield side
                return
            urls = stack.enter_context(postgres_databases(url, ["toolplan", "dbos"]))
        if store_mod is not None:
            side.store = store_mod.open_store(urls["toolplan"])
        try:
            if not dbos_missing:
                side.dbos = Dbos(backend, urls["dbos"])
                side.settings["dbos"] = side.dbos.settings
            yield side
        finally:
            try:
                if side.store is not None:
                    await side.store.close()
            finally:
                if side.dbos is not None:
                    side.dbos.close()


def contenders_for(side: Side, shape: Shape) -> list[str]:
    out = [c for c in CONTENDERS if c not in side.skipped]
    return [c for c in out if c != "dbos_sync" or shape == "chain"]


def _skipped(side: Side, shape: Shape) -> dict[str, str]:
    return {c: why for c, why in side.skipped.items() if c != "dbos_sync" or shape == "chain"}


def skipped_case(side: Side, shape: Shape, n: int) -> dict[str, Any]:
    return {"backend": side.backend, "shape": shape, "n": n, "ms_per_step": {}, "skipped": _skipped(side, shape)}


async def run_case(side: Side, shape: Shape, n: int, reps: int) -> dict[str, Any]:
    plan = to_plan(make(shape, n))
    contenders = contenders_for(side, shape)

    async def once(name: str) -> float:
        if name == "toolplan":
            return await run_toolplan(plan, n, None)
        if name == "toolplan_durable":
            return await run_toolplan(plan, n, side.store)
        assert side.dbos is not None
        return await side.dbos.run(shape, n, sync=name == "dbos_sync")

    for c in contenders:  # warm-up outside the samples (imports, schema creation, caches)
        await once(c)
    samples: dict[str, list[float]] = {c: [] for c in contenders}
    writes: dict[str, int] = {}  # the store's write path over toolplan_durable's sampled runs
    for r in range(reps):
        for c in common.rotate(contenders, r):
            common.settle()
            before = store_counts(side.store) if c == "toolplan_durable" else None
            samples[c].append(await once(c) / n * 1e3)  # ms per step
            if before is not None:
                for k, v in store_counts(side.store).items():
                    writes[k] = writes.get(k, 0) + v - before.get(k, 0)
    ms = {c: common.summarize(v) for c, v in samples.items()}
    row: dict[str, Any] = {
        "backend": side.backend,
        "shape": shape,
        "n": n,
        "ms_per_step": ms,
        "skipped": _skipped(side, shape),
    }
    if "toolplan_durable" in ms:
        durable = ms["toolplan_durable"]["median"]
        row["store_added_ms_per_step"] = durable - ms["toolplan"]["median"]
        row["ratio_dbos_to_toolplan_durable"] = {c: ms[c]["median"] / durable for c in ("dbos", "dbos_sync") if c in ms}
        if writes:  # per step, the run's own rows (its creation and its end) included
            row["toolplan_durable_per_step"] = {k: v / (n * reps) for k, v in writes.items()}
    per_step = row.get("toolplan_durable_per_step", {})
    common.log(
        f"durable {side.backend:10} {shape:6} n={n:<5} "
        + " ".join(f"{c}={ms[c]['median']:.3f}" for c in contenders)
        + " ms/step"
        + "".join(f" {k}/step={v:.2f}" for k, v in per_step.items())
    )
    return row


async def run(
    *, quick: bool, reps: int | None, sizes: tuple[int, ...] | None, backends: tuple[Backend, ...]
) -> dict[str, Any]:
    sizes = sizes or (QUICK_SIZES if quick else SIZES)

    def reps_for(n: int) -> int:
        return reps or (3 if quick else 5 if n >= 1_000 else 9)

    load_before = os.getloadavg()
    store_mod, store_skip = store_module()
    cases: list[dict[str, Any]] = []
    sides: dict[str, Any] = {}
    for backend in backends:
        async with backend_side(backend, store_mod=store_mod, store_skip=store_skip) as side:
            for n in sizes:
                for shape in SHAPES:
                    if "toolplan" in side.skipped:  # the whole backend is unavailable: rows say why
                        cases.append(skipped_case(side, shape, n))
                    else:
                        cases.append(await run_case(side, shape, n, reps_for(n)))
            sides[backend] = {"skipped": side.skipped, **side.settings}
            if "toolplan" in side.skipped:
                common.log(f"durable {backend}: skipped ({side.skipped['toolplan']})")
    return {
        "cases": cases,
        "backends": sides,
        "toolplan_crash_guarantee": TOOLPLAN_CRASH if store_mod is not None else TOOLPLAN_CRASH_MISSING,
        "sqlite_durability": SQLITE_DURABILITY,
        "dbos_crash_guarantee": DBOS_CRASH,
        "not_installed": common.not_installed(CONTENDERS),
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},  # 1, 5, 15 minutes
    }


def main(args: Any, argv: list[str]) -> Path:
    backends = tuple(getattr(args, "backends", None) or BACKENDS)
    data = common.header(
        "durable",
        quick=args.quick,
        argv=argv,
        toolplan_max_concurrency=MAX_CONCURRENCY,
        shapes="chain: each step reads the previous; fanout: one root, N-2 parallel steps, one join",
        dbos_steps=(
            "async @DBOS.step no-ops in an async @DBOS.workflow; fan-out middle steps started at once with "
            "asyncio.gather; dbos_sync: the chain as def steps in a def workflow"
        ),
        sqlite="a fresh file per contender in a temporary directory; DBOS's file is put in WAL mode before launch "
        f"and its engine sets synchronous={DBOS_SQLITE_SYNCHRONOUS}, as toolplan's store does",
        postgresql=f"a fresh database per contender on the server of ${POSTGRES_ENV} (default {POSTGRES_DEFAULT}), "
        "dropped afterwards",
        unit="milliseconds per step (wall time of one whole run / steps), median of repetitions",
    )
    data.update(
        asyncio.run(
            run(
                quick=args.quick,
                reps=args.reps,
                sizes=tuple(args.sizes) if args.sizes else None,
                backends=backends,
            )
        )
    )
    return common.write("durable", data, Path(args.out))
