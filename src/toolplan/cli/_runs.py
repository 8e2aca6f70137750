"""``toolplan runs``: list, show, resume and work through the runs of a store."""

from __future__ import annotations

import asyncio
import time
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .._defaults import DEFAULT_PAGE_SIZE
from .._errors import RunConflictError, ToolplanError
from ..execute import Approval, ApprovalRequest, ApprovalRule, PlanResult
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    Command,
    JsonOpt,
    RerunUnknownOpt,
    ToolsOpt,
    command_group,
    db_option,
    err,
    fail,
    needed_tools,
    out,
    show_result,
    stdout_to_stderr,
    when,
    with_store,
)
from ._render import print_json, print_listing, say

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported when a command runs, not when the CLI starts
    from ..store import RunSummary, Store

__all__ = ("runs_app",)

runs_app = command_group()

RunIdArg = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id (toolplan runs list shows them).")]
ListDbOpt = Annotated[str | None, db_option("The database of the runs to list.")]
ShowDbOpt = Annotated[str | None, db_option("The database the run is stored in.")]
ResumeDbOpt = Annotated[str | None, db_option("The database the run is stored in; it goes on there.")]
WorkDbOpt = Annotated[str | None, db_option("The database to take runs from; their results are stored there.")]


def _summary_dict(s: RunSummary) -> dict[str, Any]:
    # every field but the two only the service sets
    return {f.name: getattr(s, f.name) for f in fields(s) if f.name not in ("source_plan_id", "cancel_requested")}


@runs_app.command("list", cls=Command, short_help="List the stored runs, newest first.")
def list_runs(
    db: ListDbOpt = None,
    as_json: JsonOpt = False,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, max=10_000, help="Most runs shown.")
    ] = DEFAULT_PAGE_SIZE,
    status: Annotated[
        str | None, typer.Option("--status", metavar="STATUS", help="Only runs with this status (e.g. running).")
    ] = None,
) -> NoReturn:
    """List the stored runs, newest first: id, status, steps that succeeded, tool calls, times."""
    found = with_store(db, lambda store: store.list_runs(limit=limit, status=status))
    if as_json:
        print_json(out, [_summary_dict(s) for s in found])
        raise typer.Exit(EXIT_OK)
    if not found:
        say(out, "No runs are stored in this database yet.")
        raise typer.Exit(EXIT_OK)
    headers = ("run id", "status", "steps ok", "calls", "created (UTC)", "updated (UTC)")
    rows = [
        (s.run_id, s.status, f"{s.succeeded}/{s.steps}", str(s.calls), when(s.created_at), when(s.updated_at))
        for s in found
    ]
    print_listing(out, headers, rows, whole=2)
    raise typer.Exit(EXIT_OK)


@runs_app.command("show", cls=Command, short_help="Show a stored run: the same table as toolplan run.")
def show(run_id: RunIdArg, db: ShowDbOpt = None, as_json: JsonOpt = False) -> NoReturn:
    """Show a stored run: status, then each step's status, attempts, output or error, as `toolplan run` does.

    Exit code 0 when the run succeeded, 1 otherwise (failed, unfinished or cancelled), 2 when there is no such run.
    """
    info = with_store(db, lambda store: store.get_run(run_id))
    s = info.summary
    if as_json:
        print_json(out, {**_summary_dict(s), "result": info.result.to_dict()})
        raise typer.Exit(EXIT_OK if s.status == "succeeded" else EXIT_FAILED)
    running = s.status in ("running", "queued") and s.lease_until is not None and s.lease_until > time.time()
    who = f", held by {s.owner}" if running else ""
    say(out, f"Run {s.run_id}: {s.status}{who}; created {when(s.created_at)} UTC, plan {s.plan_id}.", "bold")
    unfinished = s.status not in ("succeeded", "failed")
    if unfinished:
        say(out, f"It has not finished: `toolplan runs resume {s.run_id} --tools FILE.py --db URL` goes on with it.")
    show_result(info.result, as_json=False, unfinished=unfinished)


@runs_app.command("resume", cls=Command, short_help="Go on with a stored run that stopped.")
def resume_run(
    run_id: RunIdArg,
    tools: ToolsOpt = None,
    db: ResumeDbOpt = None,
    as_json: JsonOpt = False,
    rerun_unknown: RerunUnknownOpt = False,
) -> NoReturn:
    """Go on with a stored run: finished steps are reused, the rest run. A finished run is shown as stored.

    A step whose call was in flight when the run stopped is called again only if its tool is read_only
    or idempotent (or with --rerun-unknown); otherwise it ends unknown_outcome.
    Exit code 0 when every step succeeded, 1 when some failed, 2 when an input is invalid.
    """
    from ..store import resume

    with stdout_to_stderr(as_json):
        registry = needed_tools(tools, "resume")
        result: PlanResult = with_store(
            db, lambda store: resume(run_id, registry, store=store, rerun_unknown=rerun_unknown)
        )
    show_result(result, as_json=as_json)


@runs_app.command("approve", cls=Command, short_help="Answer a stored run that waits for approval, and go on.")
def approve(
    run_id: RunIdArg,
    tools: ToolsOpt = None,
    db: ResumeDbOpt = None,
    as_json: JsonOpt = False,
    step: Annotated[
        list[str] | None,
        typer.Option(
            "--step",
            metavar="ID",
            help="Answer this step only: one that waits, or one listed ahead of time (repeat for more; default: all).",
        ),
    ] = None,
    reject: Annotated[
        str | None,
        typer.Option("--reject", metavar="REASON", help="Reject the steps with this reason (default: approve them)."),
    ] = None,
) -> NoReturn:
    """Approve (or, with --reject, reject) the steps a stored run waits for, then go on with the run.

    Steps that ran are not run again; steps left unanswered keep waiting. The answers may name the
    steps listed ahead of time (not ready yet: their inputs are still being computed): each answer is
    kept and applied when its step is ready, so the whole plan can be answered at once. The run may have returned
    waiting, or its process may have died while a person was being asked. Exit code 0 when every step
    succeeded, 1 when some did not (or some still wait), 2 when an input is invalid.
    """
    from ..store import resume

    with stdout_to_stderr(as_json):
        registry = needed_tools(tools, "approve")

        async def go(store: Store) -> PlanResult:
            request = await waiting_request(store, run_id)
            if request.rule is None:
                fail(f"Run {run_id}'s approval rule has a function: answer it from Python (toolplan.store.resume).")
            waiting = request.step_ids
            chosen = list(step or waiting)
            unknown = [s for s in chosen if s not in waiting]
            if unknown:
                fail(f"Run {run_id} does not wait for {', '.join(unknown)}; it waits for: {', '.join(waiting)}.")
            answer = Approval() if reject is None else Approval.reject(reject)
            rule = ApprovalRule.from_dict(request.rule)
            approvals = dict.fromkeys(chosen, answer)
            return await resume(run_id, registry, store=store, approval=rule, approvals=approvals)

        result: PlanResult = with_store(db, go)
    show_result(result, as_json=as_json)


async def waiting_request(store: Store, run_id: str) -> ApprovalRequest:
    """What stored run ``run_id`` waits for: its stored request, or the last one asked before its process died."""
    info = await store.get_run(run_id)
    if info.result.approval is not None:
        return info.result.approval
    if not info.finished:  # its process may have died while a person was being asked
        asked = [e for e in await store.events(run_id) if e.type == "approval_requested"]
        if asked and isinstance(asked[-1].payload, dict):
            return ApprovalRequest.from_dict(asked[-1].payload)
    fail(f"Run {run_id} does not wait for approval (its status is {info.summary.status}).")


@runs_app.command("work", cls=Command, short_help="Run stored runs that need a process, until none is left.")
def work(
    tools: ToolsOpt = None,
    db: WorkDbOpt = None,
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

    registry = needed_tools(tools, "work")

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
                say(err, f"{run_id}: {' '.join(exc.message.split())}", "yellow")
                continue
            except ToolplanError as exc:  # this worker cannot run it: leave it for another (or a person)
                failed.add(run_id)
                say(err, f"{run_id}: not run here: {' '.join(exc.message.split())}", "yellow")
                continue
            done += 1
            say(out, f"{run_id}: {result.status}")
            quiet_since = time.monotonic()

    n = with_store(db, loop, existing=False)
    say(err, f"No more runs to take; ran {n}.", "dim")
    raise typer.Exit(EXIT_OK)
