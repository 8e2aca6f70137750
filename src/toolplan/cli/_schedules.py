"""``toolplan scheduler``: fire due schedules and run what they start."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from .._errors import RunConflictError, ToolplanError
from ..tools import ToolRegistry
from ._common import EXIT_OK, ToolsOpt, db_option, err, fail, model_option, out, parse_model, tools_of, with_store
from ._render import say

if TYPE_CHECKING:
    from ..store import Store

__all__ = ("run_queued", "scheduler_command")


async def run_queued(store: Store, registry: ToolRegistry, failed: set[str]) -> int:
    """Run queued runs (and runs whose process died) one after another until none is left; returns how many."""
    from ..store import resume

    done = 0
    while (run_id := await store.claim_next(skip=failed)) is not None:
        try:
            result = await resume(run_id, registry, store=store)
        except RunConflictError:  # taken by another process in between
            continue
        except ToolplanError as exc:  # this process cannot run it (a tool it lacks): leave it
            failed.add(run_id)
            say(err, f"{run_id}: not run here: {' '.join(exc.message.split())}", "yellow")
            continue
        done += 1
        say(out, f"{run_id}: {result.status}")
    return done


def scheduler_command(
    tools: ToolsOpt = None,
    db: Annotated[
        str | None, db_option("The database of the schedules; the runs they start are stored there too.")
    ] = None,
    poll: Annotated[
        float, typer.Option("--poll", metavar="SECONDS", min=0.05, help="Seconds between looks for due schedules.")
    ] = 1.0,
    once: Annotated[
        bool, typer.Option("--once", help="Fire what is due now, run it, and stop (for cron or a test).")
    ] = False,
    no_run: Annotated[
        bool,
        typer.Option("--no-run", help="Only fire (queue runs); leave running them to workers or the service."),
    ] = False,
    model: Annotated[
        str | None,
        model_option(
            "The planner's model (e.g. openai:gpt-4o-mini), which turns task schedules into plans over "
            "--tools at each firing. Without it a task schedule's firings are recorded as failed.",
        ),
    ] = None,
) -> NoReturn:
    """Fire due schedules as queued durable runs, and run them with the tools of --tools.

    Several schedulers may share one database: each due time fires exactly once. A time missed
    while no scheduler ran fires once (or not, per the schedule's catch_up) when one starts.
    """
    from ..schedules import Scheduler

    registry: ToolRegistry | None = None
    if not no_run and tools is None:
        fail("the scheduler runs what it fires: pass --tools FILE.py[:NAME] (or --no-run to only fire).")
    if model is not None and tools is None:
        fail("--model plans task schedules over tools: pass --tools FILE.py[:NAME] too.")
    if tools is not None:
        registry = tools_of(tools)
    model_obj = parse_model(model)

    async def loop(store: Store) -> int:
        planner = None
        if model_obj is not None and registry is not None:
            from ..planner import Planner

            planner = Planner(model_obj, registry, store=store)
        scheduler = Scheduler(store, planner=planner)
        failed: set[str] = set()
        fired = 0
        while True:
            started = time.monotonic()
            for firing in await scheduler.tick():
                fired += 1
                if firing.error is not None:
                    say(err, f"{firing.schedule_id}: fired, no run: {firing.error}", "yellow")
                    continue
                what = firing.run_id or "skipped (missed, catch_up=skip)"
                say(err, f"{firing.schedule_id}: fired {what}", "dim")
            if registry is not None and not no_run:
                await run_queued(store, registry, failed)
            if once:
                return fired
            await asyncio.sleep(max(0.0, poll - (time.monotonic() - started)))

    n = with_store(db, loop, what="schedules", existing=False)
    say(err, f"Fired {n}.", "dim")
    raise typer.Exit(EXIT_OK)
