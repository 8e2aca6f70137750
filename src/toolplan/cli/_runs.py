"""``toolplan runs``: list, show, resume and work through the runs of a store."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.table import Table

from .._errors import RunConflictError, ToolplanError
from ..execute import PlanResult
from ._app import (
    EXIT_FAILED,
    EXIT_OK,
    DbOpt,
    JsonOpt,
    RerunUnknownOpt,
    ToolsOpt,
    _Command,
    _err,
    _fail,
    _out,
    _stdout_to_stderr,
    command_group,
    show_result,
)
from ._loader import CliInputError, load_tools
from ._render import print_json, say

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported when a command runs, not when the CLI starts
    from ..store import RunSummary, Store

__all__ = ("runs_app",)

runs_app = command_group()

RunIdArg = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id (toolplan runs list shows them).")]
T = TypeVar("T")


def _db(db: str | None) -> str:
    if db is None:
        _fail(
            "Name the database of the runs: pass --db URL (sqlite:///runs.db or postgresql://...) or set TOOLPLAN_DB."
        )
    return db


def _lease() -> float:
    """The lease of the runs this process takes (seconds): ``$TOOLPLAN_LEASE``, default 30."""
    text = os.environ.get("TOOLPLAN_LEASE", "").strip()
    if not text:
        return 30.0
    try:
        lease = float(text)
    except ValueError:
        lease = float("nan")
    if not 0.1 <= lease <= 86_400:
        _fail(f"TOOLPLAN_LEASE must be a number of seconds from 0.1 to 86400, not {text[:40]!r}.")
    return lease


def _with_store(db: str | None, action: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store, run ``action`` with it, close it; a toolplan error is one line on stderr, exit 2.

    The lease of the runs it takes is ``$TOOLPLAN_LEASE`` seconds (default 30): how soon another
    process may take over a run whose process died elsewhere.
    """

    from ..store import open_store

    url, lease = _db(db), _lease()

    async def go() -> T:
        store = open_store(url, lease=lease)
        try:
            return await action(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except ToolplanError as exc:
        _fail(" ".join(exc.message.split()))
    except KeyboardInterrupt:
        _err.print("Interrupted.")
        raise typer.Exit(130) from None


def _when(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _summary_dict(s: RunSummary) -> dict[str, Any]:
    return {
        "run_id": s.run_id,
        "status": s.status,
        "plan_id": s.plan_id,
        "parent_id": s.parent_id,
        "steps": s.steps,
        "succeeded": s.succeeded,
        "calls": s.calls,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "owner": s.owner,
        "lease_until": s.lease_until,
    }


@runs_app.command("list", cls=_Command, short_help="List the stored runs, newest first.")
def list_runs(
    db: DbOpt = None,
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", metavar="N", min=1, max=10_000, help="Most runs shown.")] = 50,
    status: Annotated[
        str | None, typer.Option("--status", metavar="STATUS", help="Only runs with this status (e.g. running).")
    ] = None,
) -> NoReturn:
    """List the stored runs, newest first: id, status, steps that succeeded, tool calls, times."""
    found = _with_store(db, lambda store: store.list_runs(limit=limit, status=status))
    if as_json:
        print_json(_out, [_summary_dict(s) for s in found])
        raise typer.Exit(EXIT_OK)
    if not found:
        say(_out, "No runs are stored in this database yet.")
        raise typer.Exit(EXIT_OK)
    table = Table(box=None, show_edge=False, pad_edge=False)
    for column in ("run id", "status", "steps ok", "calls", "created (UTC)", "updated (UTC)"):
        table.add_column(column, no_wrap=True)
    for s in found:
        table.add_row(
            s.run_id, s.status, f"{s.succeeded}/{s.steps}", str(s.calls), _when(s.created_at), _when(s.updated_at)
        )
    _out.print(table)
    raise typer.Exit(EXIT_OK)


@runs_app.command("show", cls=_Command, short_help="Show a stored run: the same table as toolplan run.")
def show(run_id: RunIdArg, db: DbOpt = None, as_json: JsonOpt = False) -> NoReturn:
    """Show a stored run: status, then each step's status, attempts, output or error, as `toolplan run` does.

    Exit code 0 when the run succeeded, 1 otherwise (failed, unfinished or cancelled), 2 when there is no such run.
    """
    info = _with_store(db, lambda store: store.get_run(run_id))
    s = info.summary
    if as_json:
        print_json(_out, {**_summary_dict(s), "result": info.result.to_dict()})
        raise typer.Exit(EXIT_OK if s.status == "succeeded" else EXIT_FAILED)
    running = s.status in ("running", "queued") and s.lease_until is not None and s.lease_until > time.time()
    who = f", held by {s.owner}" if running else ""
    say(_out, f"Run {s.run_id}: {s.status}{who}; created {_when(s.created_at)} UTC, plan {s.plan_id}.", "bold")
    unfinished = s.status not in ("succeeded", "failed")
    if unfinished:
        say(_out, f"It has not finished: `toolplan runs resume {s.run_id} --tools FILE.py --db URL` goes on with it.")
    show_result(info.result, as_json=False, unfinished=unfinished)


@runs_app.command("resume", cls=_Command, short_help="Go on with a stored run that stopped.")
def resume_run(
    run_id: RunIdArg,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
    rerun_unknown: RerunUnknownOpt = False,
) -> NoReturn:
    """Go on with a stored run: finished steps are reused, the rest run. A finished run is shown as stored.

    A step whose call was in flight when the run stopped is called again only if its tool is read_only
    or idempotent (or with --rerun-unknown); otherwise it ends unknown_outcome.
    Exit code 0 when every step succeeded, 1 when some failed, 2 when an input is invalid.
    """
    from ..store import resume

    if tools is None:
        _fail("resume needs the tools to call: pass --tools FILE.py[:NAME].")
    with _stdout_to_stderr(as_json):
        try:
            registry = load_tools(tools)
        except CliInputError as exc:
            _fail(exc.message)
        result: PlanResult = _with_store(
            db, lambda store: resume(run_id, registry, store=store, rerun_unknown=rerun_unknown)
        )
    show_result(result, as_json=as_json)


@runs_app.command("work", cls=_Command, short_help="Run stored runs that need a process, until none is left.")
def work(
    tools: ToolsOpt = None,
    db: DbOpt = None,
    idle: Annotated[
        float,
        typer.Option(
            "--idle", metavar="SECONDS", min=0.0, help="Stop after this long with nothing to do (default 0: at once)."
        ),
    ] = 0.0,
    poll: Annotated[
        float, typer.Option("--poll", metavar="SECONDS", min=0.05, help="Seconds between looks for work.")
    ] = 1.0,
) -> NoReturn:
    """Take runs that need a process (queued, or whose process died and whose lease expired) and run them.

    Several workers may share one PostgreSQL database: each run is held by one of them at a time.
    """
    from ..store import resume

    if tools is None:
        _fail("work needs the tools to call: pass --tools FILE.py[:NAME].")
    try:
        registry = load_tools(tools)
    except CliInputError as exc:
        _fail(exc.message)

    async def loop(store: Store) -> int:
        done = 0
        quiet_since = time.monotonic()
        failed: set[str] = set()  # runs this worker could not run (an invalid plan for its tools...)
        while True:
            run_id = await store.claim_next(skip=failed)
            if run_id is None:
                if time.monotonic() - quiet_since >= idle:
                    return done
                await asyncio.sleep(poll)
                continue
            try:
                result = await resume(run_id, registry, store=store)
            except RunConflictError as exc:  # taken by another worker in between
                say(_err, f"{run_id}: {' '.join(exc.message.split())}", "yellow")
                continue
            except ToolplanError as exc:  # this worker cannot run it: leave it for another (or a person)
                failed.add(run_id)
                say(_err, f"{run_id}: not run here: {' '.join(exc.message.split())}", "yellow")
                continue
            done += 1
            say(_out, f"{run_id}: {result.status}")
            quiet_since = time.monotonic()

    n = _with_store(db, loop)
    say(_err, f"No more runs to take; ran {n}.", "dim")
    raise typer.Exit(EXIT_OK)
