"""``toolplan run``: run a plan with the tools of a Python file and of MCP servers."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any, NoReturn

import typer

from .._errors import PlanValidationError, ToolplanError, UserError
from ..execute import DEFAULT_MAX_CONCURRENCY, Backend, EventHandler, PlanResult, RunLimits, execute_plan
from ..execute._internal import check_run_id, forgetful
from ..plan import ValidationReport
from ..tools import ToolRegistry
from ._approve import APPROVE_HELP, TerminalApprover, approval_rule
from ._cache import CacheOpt, CacheSpec, CacheToolOpt, CacheTtlOpt, cache_spec
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    BackendOpt,
    DialectOpt,
    JsonOpt,
    MaxStepsOpt,
    PlanArg,
    RerunUnknownOpt,
    ToolsOpt,
    close_backend,
    db_option,
    err,
    fail,
    opened_store,
    out,
    print_result,
    read_inputs,
    report_invalid,
    show_result,
    start_backend,
    stdout_to_stderr,
    store_url,
    validate_inputs,
)
from ._loader import CliInputError, with_skills
from ._openapi import OpenAPIOpt, add_openapi
from ._render import print_issues, say
from ._trace import TRACE_HELP, start_tracing

__all__ = ("run_command",)

_UI_KEEP = 300.0  # seconds the live page stays up after the run (--ui-keep)

_FLAGS = {"max_concurrency": "--max-concurrency", "deadline": "--timeout", "step_timeout": "--step-timeout"}


def _limits(**options: Any) -> RunLimits:
    """The run's limits from the command line's options: checked once, by `RunLimits`."""
    try:
        return RunLimits.of(None, **options)
    except UserError as exc:
        message = exc.message.replace(", or None for no limit", "")
        for name, flag in _FLAGS.items():
            message = message.replace(f"{name} must", f"{flag} must", 1)
        fail(message)


def run_command(
    plan: PlanArg,
    tools: ToolsOpt = None,
    as_json: JsonOpt = False,
    max_concurrency: Annotated[
        int | None,
        typer.Option(
            "--max-concurrency", metavar="N", help=f"Most steps running at once (default {DEFAULT_MAX_CONCURRENCY})."
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", metavar="SECONDS", help="Plan deadline in seconds (unstarted steps end not_run)."),
    ] = None,
    step_timeout: Annotated[
        float | None,
        typer.Option("--step-timeout", metavar="SECONDS", help="Default timeout of each tool call in seconds."),
    ] = None,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Stop at the first failure and cancel running steps.")
    ] = False,
    dialect: DialectOpt = None,
    max_steps: MaxStepsOpt = None,
    db: Annotated[
        str | None,
        db_option(
            "Store the run in this database: a durable run, which can be resumed if it stops (finished steps "
            "are not run again)."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            metavar="ID",
            help="The run's id (tools see it in their idempotency keys). With --db, an unfinished stored run "
            "of this id is resumed: its finished steps are reused, not run again.",
        ),
    ] = None,
    rerun_unknown: RerunUnknownOpt = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Call no tool and store no run: validate the plan and show what it would do: its waves, each "
            "step's tool, annotations and arguments, the budget's worst case against the limits, and the expected "
            "duration from the runs stored in --db. With --json, the report as JSON.",
        ),
    ] = False,
    mcp_stdio: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-stdio", metavar="CMD", help='Also the tools of this MCP server, run over stdio: "python server.py".'
        ),
    ] = None,
    mcp_url: Annotated[
        list[str] | None,
        typer.Option("--mcp-url", metavar="URL", help="Also the tools of this MCP server over streamable HTTP."),
    ] = None,
    openapi: OpenAPIOpt = None,
    ui: Annotated[
        bool,
        typer.Option(
            "--ui",
            help="Watch the run in a browser: serve a live page on 127.0.0.1 (its address is printed) with the "
            "plan's graph, a timeline and the step table. See docs/live-view.md.",
        ),
    ] = False,
    ui_port: Annotated[
        int, typer.Option("--ui-port", metavar="PORT", help="With --ui: the port (default 0: any free port).")
    ] = 0,
    ui_keep: Annotated[
        float,
        typer.Option(
            "--ui-keep",
            metavar="SECONDS",
            help="With --ui: how long the page stays up after the run ends (default 300; Ctrl-C stops it sooner).",
        ),
    ] = _UI_KEEP,
    backend: BackendOpt = None,
    trace: Annotated[str | None, typer.Option("--trace", metavar="TARGET", help=TRACE_HELP)] = None,
    approve: Annotated[list[str] | None, typer.Option("--approve", metavar="RULE", help=APPROVE_HELP)] = None,
    approve_timeout: Annotated[
        float | None,
        typer.Option(
            "--approve-timeout",
            metavar="SECONDS",
            help="With --approve: a step unanswered this long ends rejected ('approval timed out').",
        ),
    ] = None,
    cache: CacheOpt = None,
    cache_ttl: CacheTtlOpt = None,
    cache_tool: CacheToolOpt = None,
) -> NoReturn:
    """Run a plan with the tools of a Python file, of MCP servers and of OpenAPI documents.

    Exit code 0 when every step succeeded, 1 when some failed, 2 when the plan or an input is invalid.
    """
    if not ui and (ui_port != 0 or ui_keep != _UI_KEEP):
        fail("--ui-port and --ui-keep go with --ui: add --ui to watch the run in a browser.")
    if not ui_keep >= 0:
        fail(f"--ui-keep must be 0 or more seconds, got {ui_keep}.")
    if tools is None and not mcp_stdio and not mcp_url and not openapi:
        fail(
            "run needs the tools to call: pass --tools FILE.py[:NAME] (or --mcp-stdio CMD, --mcp-url URL, "
            "--openapi SPEC)."
        )
    if rerun_unknown and db is None:
        fail("--rerun-unknown applies when resuming a stored run: pass --db URL and --run-id ID as well.")
    if dry_run:
        _check_dry_run(
            ui=ui, run_id=run_id, rerun_unknown=rerun_unknown, backend=backend, trace=trace, cache=cache is not None
        )
    caching = cache_spec(cache, cache_ttl, cache_tool, db=db)
    if db is not None:  # a dry run only reads the stored runs: it creates no database
        db = store_url(db, what="runs", existing=dry_run)
    if run_id is not None:
        try:
            check_run_id(run_id)
        except UserError as exc:
            fail(exc.message.replace("run_id", "--run-id", 1).replace(" (or leave it out for a new id)", ""))
    approval = _approval(approve, approve_timeout, plan, db is not None, dry_run)
    limits = _limits(
        max_concurrency=max_concurrency,
        deadline=timeout,
        step_timeout=step_timeout,
        failure_mode="fail_fast" if fail_fast else None,
    )
    # One event loop for the whole command: MCP servers start once, for the listing and the run.
    with asyncio.Runner() as loop:
        registry: ToolRegistry | None = None
        backend_obj: Backend | None = None
        try:
            with stdout_to_stderr(as_json):
                data, registry = read_inputs(plan, tools)
                if registry is not None:
                    try:  # so plans may name saved plans (skill:NAME)
                        registry = loop.run(with_skills(registry))
                    except CliInputError as exc:
                        fail(exc.message)
                if mcp_stdio or mcp_url:
                    from ._mcp import connect_mcp

                    registry = connect_mcp(registry, mcp_stdio or (), mcp_url or (), loop)
                if openapi:
                    registry = add_openapi(registry, openapi, loop)
                assert registry is not None
                report = validate_inputs(data, registry, dialect, max_steps)
            if not report.ok:
                report_invalid(report, as_json=as_json, console=err)
            _check_cache(caching, registry)
            warnings = list(report.warnings)
            if db is None and report.compiled is not None and not dry_run:  # this process's learning ends with it
                forgets = forgetful(report.compiled, registry)
                warnings += [forgets] if forgets is not None else []
            if warnings and not as_json:
                say(err, "Warnings:", "bold yellow")
                print_issues(err, warnings, style="yellow")
            if dry_run:
                from ._dryrun import dry_run as show_dry_run

                show_dry_run(
                    data,
                    registry,
                    limits=limits,
                    db=db,
                    dialect=dialect.value if dialect is not None else None,
                    max_steps=max_steps,
                    as_json=as_json,
                    loop=loop,
                    approval=approval.get("approval"),
                )
            live = sys.stdout.isatty() and not as_json and not approve  # (a prompt and a live table do not mix)
            backend_obj = start_backend(backend)  # after validation: an invalid plan starts no cluster
            stop_tracing = None
            if trace is not None:
                try:
                    stop_tracing = start_tracing(trace)
                except CliInputError as exc:
                    fail(exc.message)
            options: dict[str, Any] = {
                "live": live,
                "tools": _step_tools(report),
                "db": db,
                "run_id": run_id,
                "rerun_unknown": rerun_unknown,
                "limits": limits,
                "max_steps": max_steps,
                "dialect": dialect.value if dialect is not None else None,
                "caching": caching,
            }
            if backend_obj is not None:
                options["backend"] = backend_obj
            options.update(approval)
            if not ui:
                with stdout_to_stderr(as_json):
                    try:
                        result = _execute(data, registry, loop=loop, **options)
                    finally:
                        if stop_tracing is not None:
                            stop_tracing()
                show_result(result, as_json=as_json, live=live)
            from ._live import live_page, new_local_run_id

            assert report.compiled is not None
            if run_id is None:  # the page's address names the run, so its id is chosen first
                from ..store import new_run_id

                options["run_id"] = new_run_id() if db is not None else new_local_run_id()
            try:
                with live_page(report.compiled, options["run_id"], port=ui_port, console=err) as page:
                    with stdout_to_stderr(as_json):
                        try:
                            result = _execute(data, registry, on_event=page.feed, loop=loop, **options)
                        finally:
                            if stop_tracing is not None:
                                stop_tracing()
                    try:
                        print_result(result, as_json=as_json, live=live)
                        page.linger(ui_keep)
                    except KeyboardInterrupt:  # the run has ended: Ctrl-C stops the page, the exit code stays the run's
                        say(err, "Stopped the live view.", "dim")
            except CliInputError as exc:
                fail(exc.message)
            raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)
        finally:  # MCP servers started for the command stop with it, also when it ends early
            close_backend(backend_obj)
            if (mcp_stdio or mcp_url) and registry is not None:
                from ._mcp import close_toolsets

                loop.run(close_toolsets(registry))


def _check_cache(caching: CacheSpec | None, registry: ToolRegistry) -> None:
    """Refuse a --cache-tool time to live for a tool that is not read_only, before anything runs."""
    if caching is None:
        return
    try:
        caching.make(None).check(registry)
    except ToolplanError as exc:
        fail(" ".join(exc.message.split()).replace("the cache's 'tools'", "--cache-tool"))


def _check_dry_run(
    *, ui: bool, run_id: str | None, rerun_unknown: bool, backend: str | None, trace: str | None, cache: bool
) -> None:
    """Refuse the options that make no sense without a run."""
    given = [
        name
        for name, on in (
            ("--ui", ui),
            ("--run-id", run_id is not None),
            ("--rerun-unknown", rerun_unknown),
            ("--backend", backend is not None),
            ("--trace", trace is not None),
            ("--cache", cache),
        )
        if on
    ]
    if given:
        them = "it" if len(given) == 1 else "them"
        fail(f"--dry-run calls no tool, so {', '.join(given)} would do nothing: leave {them} out.")


def _approval(
    values: list[str] | None, timeout: float | None, plan: str, durable: bool, dry_run: bool = False
) -> dict[str, Any]:
    """The options of `execute_plan` that ``--approve`` and ``--approve-timeout`` make.

    Without 'ask', a stored run (``--db``) returns waiting: ``toolplan runs approve`` answers it later.
    A dry run only reports the steps the rule would hold: it asks nobody.
    """
    if not values:
        if timeout is not None:
            fail("--approve-timeout goes with --approve: add --approve ask.")
        return {}
    try:
        rule, ask = approval_rule(values, timeout)
    except UserError as exc:
        fail(exc.message.replace("ApprovalRule timeout", "--approve-timeout"))
    if dry_run:
        return {"approval": rule}
    if not ask:
        if not durable:
            fail(
                "--approve needs 'ask' to answer on this terminal (add --approve ask), or --db to store the run "
                "and answer it later with toolplan runs approve."
            )
        return {"approval": rule}
    if plan == "-":
        fail("--approve ask reads the answers from stdin: give the plan as a file, not '-'.")
    return {"approval": rule, "on_approval": TerminalApprover()}


def _step_tools(report: ValidationReport) -> dict[str, str]:
    """Each step's tool, so the live table shows it while the step waits."""
    compiled = report.compiled
    return {sid: c.step.tool for sid, c in compiled.steps.items()} if compiled is not None else {}


async def _go(data: Any, registry: ToolRegistry, db: str | None, **options: Any) -> PlanResult:
    """`execute_plan`, in a store when ``db`` is given (the run id is announced before anything runs)."""
    from ._mcp import open_toolsets

    async with open_toolsets(registry):  # MCP servers (--mcp-stdio, --mcp-url) connect before the run starts
        return await _go_connected(data, registry, db, **options)


async def _go_connected(
    data: Any, registry: ToolRegistry, db: str | None, caching: CacheSpec | None = None, **options: Any
) -> PlanResult:
    result: PlanResult
    if db is None:
        result = await execute_plan(data, registry, cache=None if caching is None else caching.make(None), **options)
        return result
    from ..store import new_run_id

    run_id = options.pop("run_id", None) or new_run_id()
    async with opened_store(db) as store:
        if registry.default_policy is None:  # plans naming a strategy learn across runs, in the database
            from ..policy import ToolPolicy

            registry.default_policy = ToolPolicy(store=store)
        say(
            err,
            f"Run {run_id} is stored in {store.url_shown}. If it stops, run the same command with --run-id {run_id} "
            "to resume it: finished steps are not run again.",
            "dim",
        )
        cache = None if caching is None else caching.make(store)
        result = await execute_plan(data, registry, store=store, run_id=run_id, cache=cache, **options)
        return result


def _execute(
    data: Any,
    registry: ToolRegistry,
    *,
    live: bool,
    tools: dict[str, str],
    db: str | None = None,
    on_event: EventHandler | None = None,
    loop: asyncio.Runner | None = None,
    **options: Any,
) -> PlanResult:
    from ._progress import ProgressView, live_progress

    run = asyncio.run if loop is None else loop.run
    try:
        if not live:
            return run(_go(data, registry, db, on_event=on_event, **options))
        view = ProgressView(tools)
        if on_event is not None:
            from ._live import both

            handler: EventHandler = both(view, on_event)
        else:
            handler = view
        with live_progress(out, view):
            return run(_go(data, registry, db, on_event=handler, **options))
    except PlanValidationError as exc:  # already validated; kept so a mismatch never shows a traceback
        fail(" ".join(exc.message.split()))
    except ToolplanError as exc:  # any other error toolplan raises on purpose: one line, never a traceback
        fail(f"The run failed: {' '.join(exc.message.split())}")
    except ExceptionGroup as group:  # the same, raised inside the run's task group
        matched = group.subgroup(ToolplanError)
        if matched is None:
            raise
        first = _first_leaf(matched)
        fail(f"The run failed: {' '.join(str(first).split())}")
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        raise typer.Exit(130) from None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    inner = group.exceptions[0]
    return _first_leaf(inner) if isinstance(inner, BaseExceptionGroup) else inner
