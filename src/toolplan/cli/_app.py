"""The ``toolplan`` command: run, validate and graph plans, and a demo."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from .._errors import PlanValidationError, ToolplanError, UserError
from .._version import __version__
from ..execute import DEFAULT_MAX_CONCURRENCY, Backend, EventHandler, PlanResult, RunLimits, execute_plan
from ..execute._journal import check_run_id
from ..plan import DEFAULT_MAX_STEPS, ValidationReport, validate_plan
from ..tools import ToolRegistry
from ._loader import CliInputError, load_plan, load_tools, with_skills
from ._render import print_errors, print_issues, print_json, print_outputs, print_step_table, print_summary, say
from ._trace import TRACE_HELP, start_tracing

if TYPE_CHECKING:
    from ..models import Model

__all__ = ("app", "main")

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

# The usage line of each command, written to read as it is typed (typer's puts [OPTIONS] first and
# wraps a required argument in braces).
_USAGE = {
    "run": "PLAN.json --tools FILE.py[:NAME] [OPTIONS]",
    "validate": "PLAN.json [--tools FILE.py[:NAME]] [OPTIONS]",
    "graph": "PLAN.json [--tools FILE.py[:NAME]] [-o FILE] [OPTIONS]",
    "demo": "[--model PROVIDER:NAME]",
    "list": "--db URL [OPTIONS]",
    "show": "RUN_ID --db URL [OPTIONS]",
    "resume": "RUN_ID --tools FILE.py[:NAME] --db URL [OPTIONS]",
    "work": "--tools FILE.py[:NAME] --db URL [OPTIONS]",
    "serve": "--tools FILE.py[:NAME] --db URL [OPTIONS]",
    "create": "NAME --db URL [OPTIONS]",
    "revoke": "KEY_ID --db URL",
    "mcp tools": "--stdio CMD | --url URL [OPTIONS]",
    "mcp serve": "--tools FILE.py[:NAME] [OPTIONS]",
    "audit": "RUN_ID --db URL [OPTIONS]",
}


class _Command(typer.core.TyperCommand):
    """A command whose usage line is `_USAGE`'s and whose arguments are listed by name only."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        parent = ctx.parent.info_name if ctx.parent is not None else None
        usage = _USAGE.get(f"{parent} {self.name}") or _USAGE.get(self.name or "")
        return [usage] if usage is not None else super().collect_usage_pieces(ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":  # "PLAN.json", not "PLAN.json <str>"
                arguments.append((param.metavar or record[0], record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def command_group(**options: Any) -> typer.Typer:
    """A Typer app as every toolplan command group is made: -h for help, plain text, no tracebacks."""
    return typer.Typer(
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
        **options,
    )


app = command_group(
    name="toolplan",
    help="Validate, run and inspect toolplan plans: many tool calls from one model turn.",
    epilog="'toolplan COMMAND -h' shows a command's usage and options; 'toolplan demo' shows what toolplan does.",
)


class DialectChoice(enum.StrEnum):
    """Plan dialects the CLI accepts."""

    native = "native"
    chaining = "chaining"
    batch = "batch"


PlanArg = Annotated[str, typer.Argument(metavar="PLAN.json", help="The plan file, or '-' to read it from stdin.")]
ToolsOpt = Annotated[
    str | None,
    typer.Option(
        "--tools",
        "-t",
        metavar="FILE.py[:NAME]",
        help="Python file of tools, or an importable module (pkg.tools[:NAME]); NAME picks a list, dict or "
        "ToolRegistry in it (default: the file's public functions and @tool objects).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON only (machine-readable).")]
DialectOpt = Annotated[
    DialectChoice | None,
    typer.Option(
        "--dialect", metavar="native|chaining|batch", help="Force a dialect (default: detected from the plan)."
    ),
]
BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        metavar="SPEC",
        help="Where tool calls run: local (default), ray (a local Ray cluster) or ray:ADDRESS (join a cluster). "
        "See docs/ray.md.",
    ),
]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        envvar="TOOLPLAN_DB",
        help="Store the run in this database (sqlite:///runs.db or postgresql://...): a durable run, which "
        "can be resumed if it stops. Default: $TOOLPLAN_DB.",
    ),
]
RerunUnknownOpt = Annotated[
    bool,
    typer.Option(
        "--rerun-unknown",
        help="When resuming: call again steps that were in flight when the run stopped even if their tool is "
        "not read_only or idempotent (otherwise they end unknown_outcome).",
    ),
]
MaxStepsOpt = Annotated[
    int | None,
    typer.Option("--max-steps", metavar="N", help=f"Most steps a plan may have (default {DEFAULT_MAX_STEPS})."),
]

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)


def _fail(message: str) -> NoReturn:
    """Print a one-line error to stderr and exit with code 2."""
    sys.stderr.write(f"Error: {message}\n")
    raise typer.Exit(EXIT_INVALID)


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """While enabled, whatever tools print goes to stderr, so stdout holds only the JSON."""
    if not enabled:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"toolplan {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Validate, run and inspect toolplan plans: many tool calls from one model turn."""


def _inputs(plan_path: str, tools_spec: str | None) -> tuple[Any, ToolRegistry | None]:
    try:
        data = load_plan(plan_path)
        registry = load_tools(tools_spec) if tools_spec is not None else None
    except CliInputError as exc:
        _fail(exc.message)
    return data, registry


def _validate(
    data: Any, registry: ToolRegistry | None, dialect: DialectChoice | None, max_steps: int | None
) -> ValidationReport:
    if max_steps is not None and max_steps < 1:
        _fail(f"--max-steps must be at least 1, got {max_steps}.")
    return validate_plan(
        data,
        registry,
        dialect=dialect.value if dialect is not None else None,
        max_steps=max_steps or DEFAULT_MAX_STEPS,
    )


def _report_invalid(report: ValidationReport, *, as_json: bool, console: Console) -> NoReturn:
    if as_json:
        print_json(_out, PlanValidationError([*report.errors, *report.warnings]).to_dict())
    else:
        n = len(report.errors)
        say(console, f"The plan is invalid ({n} problem{'s' if n != 1 else ''}); no tool was run:", "bold red")
        print_issues(console, report.errors, style="red")
        if report.warnings:
            say(console, "Warnings:", "bold yellow")
            print_issues(console, report.warnings, style="yellow")
    raise typer.Exit(EXIT_INVALID)


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
        _fail(message)


@app.command(cls=_Command, short_help="Run a plan with the tools of a Python file.")
def run(
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
    db: DbOpt = None,
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
) -> NoReturn:
    """Run a plan with the tools of a Python file and of MCP servers.

    Exit code 0 when every step succeeded, 1 when some failed, 2 when the plan or an input is invalid.
    """
    if not ui and (ui_port != 0 or ui_keep != _UI_KEEP):
        _fail("--ui-port and --ui-keep go with --ui: add --ui to watch the run in a browser.")
    if not ui_keep >= 0:
        _fail(f"--ui-keep must be 0 or more seconds, got {ui_keep}.")
    if tools is None and not mcp_stdio and not mcp_url:
        _fail("run needs the tools to call: pass --tools FILE.py[:NAME] (or --mcp-stdio CMD, --mcp-url URL).")
    if rerun_unknown and db is None:
        _fail("--rerun-unknown applies when resuming a stored run: pass --db URL and --run-id ID as well.")
    if run_id is not None:
        try:
            check_run_id(run_id)
        except UserError as exc:
            _fail(exc.message.replace("run_id", "--run-id", 1).replace(" (or leave it out for a new id)", ""))
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
            with _stdout_to_stderr(as_json):
                data, registry = _inputs(plan, tools)
                if registry is not None:
                    try:  # so plans may name saved plans (skill:NAME)
                        registry = loop.run(with_skills(registry))
                    except CliInputError as exc:
                        _fail(exc.message)
                if mcp_stdio or mcp_url:
                    from ._mcp import connect_mcp

                    registry = connect_mcp(registry, mcp_stdio or (), mcp_url or (), loop)
                assert registry is not None
                report = _validate(data, registry, dialect, max_steps)
            if not report.ok:
                _report_invalid(report, as_json=as_json, console=_err)
            if report.warnings and not as_json:
                say(_err, "Warnings:", "bold yellow")
                print_issues(_err, report.warnings, style="yellow")
            live = sys.stdout.isatty() and not as_json
            backend_obj = start_backend(backend)  # after validation: an invalid plan starts no cluster
            stop_tracing = None
            if trace is not None:
                try:
                    stop_tracing = start_tracing(trace)
                except CliInputError as exc:
                    _fail(exc.message)
            options: dict[str, Any] = {
                "live": live,
                "tools": _step_tools(report),
                "db": db,
                "run_id": run_id,
                "rerun_unknown": rerun_unknown,
                "limits": limits,
                "max_steps": max_steps,
                "dialect": dialect.value if dialect is not None else None,
            }
            if backend_obj is not None:
                options["backend"] = backend_obj
            if not ui:
                with _stdout_to_stderr(as_json):
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
                with live_page(report.compiled, options["run_id"], port=ui_port, console=_err) as page:
                    with _stdout_to_stderr(as_json):
                        try:
                            result = _execute(data, registry, on_event=page.feed, loop=loop, **options)
                        finally:
                            if stop_tracing is not None:
                                stop_tracing()
                    try:
                        print_result(result, as_json=as_json, live=live)
                        page.linger(ui_keep)
                    except KeyboardInterrupt:  # the run has ended: Ctrl-C stops the page, the exit code stays the run's
                        say(_err, "Stopped the live view.", "dim")
            except CliInputError as exc:
                _fail(exc.message)
            raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)
        finally:  # MCP servers started for the command stop with it, also when it ends early
            close_backend(backend_obj)
            if (mcp_stdio or mcp_url) and registry is not None:
                from ._mcp import close_toolsets

                loop.run(close_toolsets(registry))


def start_backend(spec: str | None) -> Backend | None:
    """The backend ``--backend`` names, started (joining a Ray cluster takes seconds), or None (local)."""
    from ..backends import backend_from_spec

    try:
        backend = backend_from_spec(spec)
        start = getattr(backend, "start", None)
        if start is not None:
            say(_err, f"Starting the {spec} backend...", "dim")
            start()
    except ToolplanError as exc:
        _fail(f"--backend: {exc.message}")
    return backend


def parse_model(spec: str | None) -> Model | None:
    """The model ``--model PROVIDER:NAME`` names, or None without the option."""
    if spec is None:
        return None
    from ..models import infer_model

    try:
        return infer_model(spec)
    except Exception as exc:  # any provider's refusal of the name: one line, never a traceback
        _fail(f"--model {spec!r}: {exc}")


def close_backend(backend: Backend | None) -> None:
    """Stop what `start_backend` started."""
    close = getattr(backend, "close", None)
    if close is not None:
        close()


def show_result(result: PlanResult, *, as_json: bool, live: bool = False, unfinished: bool = False) -> NoReturn:
    """Print a run's result (JSON, or the step table, errors, outputs and summary) and exit with its code."""
    print_result(result, as_json=as_json, live=live, unfinished=unfinished)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


def print_result(result: PlanResult, *, as_json: bool, live: bool = False, unfinished: bool = False) -> None:
    """Print a run's result: JSON, or the step table (unless a live one showed it), errors, outputs and summary."""
    if as_json:
        print_json(_out, result.to_dict())
    else:
        if not live:
            print_step_table(_out, result)
        print_errors(_out, result)
        print_outputs(_out, result)
        print_summary(_out, result, unfinished=unfinished)


def _step_tools(report: ValidationReport) -> dict[str, str]:
    """Each step's tool, so the live table shows it while the step waits."""
    compiled = report.compiled
    return {sid: c.step.tool for sid, c in compiled.steps.items()} if compiled is not None else {}


async def _go(data: Any, registry: ToolRegistry, db: str | None, **options: Any) -> PlanResult:
    """`execute_plan`, in a store when ``db`` is given (the run id is announced before anything runs)."""
    from ._mcp import open_toolsets

    async with open_toolsets(registry):  # MCP servers (--mcp-stdio, --mcp-url) connect before the run starts
        return await _go_connected(data, registry, db, **options)


async def _go_connected(data: Any, registry: ToolRegistry, db: str | None, **options: Any) -> PlanResult:
    if db is None:
        return await execute_plan(data, registry, **options)
    from ..store import new_run_id, open_store

    run_id = options.pop("run_id", None) or new_run_id()
    store = open_store(db)
    try:
        say(
            _err,
            f"Run {run_id} is stored in {store.url_shown}. If it stops, run the same command with --run-id {run_id} "
            "to resume it: finished steps are not run again.",
            "dim",
        )
        return await execute_plan(data, registry, store=store, run_id=run_id, **options)
    finally:
        await store.close()


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
        with live_progress(_out, view):
            return run(_go(data, registry, db, on_event=handler, **options))
    except PlanValidationError as exc:  # already validated; kept so a mismatch never shows a traceback
        _fail(" ".join(exc.message.split()))
    except ToolplanError as exc:  # any other error toolplan raises on purpose: one line, never a traceback
        _fail(f"The run failed: {' '.join(exc.message.split())}")
    except ExceptionGroup as group:  # the same, raised inside the run's task group
        matched = group.subgroup(ToolplanError)
        if matched is None:
            raise
        first = _first_leaf(matched)
        _fail(f"The run failed: {' '.join(str(first).split())}")
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        raise typer.Exit(130) from None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    inner = group.exceptions[0]
    return _first_leaf(inner) if isinstance(inner, BaseExceptionGroup) else inner


@app.command(cls=_Command, short_help="Check a plan without running any tool.")
def validate(
    plan: PlanArg,
    tools: ToolsOpt = None,
    as_json: JsonOpt = False,
    dialect: DialectOpt = None,
    max_steps: MaxStepsOpt = None,
) -> None:
    """Check a plan without running anything (without --tools: its structure and references only).

    Exit code 0 when the plan is valid, 2 when it is not.
    """
    with _stdout_to_stderr(as_json):
        data, registry = _inputs(plan, tools)
        report = _validate(data, registry, dialect, max_steps)
    if as_json:
        print_json(_out, report.to_dict())
        raise typer.Exit(EXIT_OK if report.ok else EXIT_INVALID)
    if not report.ok:
        _report_invalid(report, as_json=False, console=_out)
    compiled = report.compiled
    assert compiled is not None
    n, w = len(compiled.steps), len(compiled.waves())
    checked = "" if registry is not None else " (structure only: pass --tools to check tools and arguments)"
    say(
        _out,
        f"The plan is valid: {n} step{'s' if n != 1 else ''} in {w} wave{'s' if w != 1 else ''}{checked}.",
        "green",
    )
    if report.warnings:
        say(_out, "Warnings:", "bold yellow")
        print_issues(_out, report.warnings, style="yellow")
    raise typer.Exit(EXIT_OK)


@app.command(cls=_Command, short_help="See toolplan work: a plan, then an agent task three ways.")
def demo(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            metavar="PROVIDER:NAME",
            help="Run the agent part with a real model, e.g. openai:gpt-4o-mini (default: the built-in demo model).",
        ),
    ] = None,
) -> None:
    """Run a built-in plan, then one agent task three ways: one call per turn, parallel calls, one plan."""
    from ._agent_demo import real_demo_model, run_agent_demo
    from ._demo import run_demo

    real = None
    if model is not None:  # checked before anything runs: provider, extra, API key
        try:
            real = real_demo_model(model)
        except ToolplanError as exc:
            _fail(exc.message)
    code = run_demo(_out)
    try:
        run_agent_demo(_out, real)
    except ToolplanError as exc:
        _fail(f"The agent demo failed: {exc.message}")
    raise typer.Exit(code)


def _tolerant_output() -> None:
    """Write characters the terminal's encoding lacks as backslash escapes, never a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):  # a replaced or detached stream: leave it as it is
                reconfigure(errors="backslashreplace")


def _add_runs() -> None:
    from ._graph import graph_command

    app.command("graph", cls=_Command, short_help="Draw a plan's dependency graph: Mermaid text, SVG or PNG.")(
        graph_command
    )
    from ._runs import runs_app

    app.add_typer(runs_app, name="runs", help="List, show, resume and work through stored (durable) runs.")
    from ._serve import keys_app, serve_command

    app.command("serve", cls=_Command, short_help="Serve the planner API (REST, GraphQL) over a store.")(serve_command)
    app.add_typer(keys_app, name="keys", help="Make, list and revoke the planner service's API keys.")
    from ._schedules import scheduler_command

    app.command("scheduler", cls=_Command, short_help="Fire due schedules and run the plans they start.")(
        scheduler_command
    )
    from ._skills import skills_app

    app.add_typer(skills_app, name="skills", help="List and run saved plans (skills).")
    from ._audit import audit_command

    app.command("audit", cls=_Command, short_help="Compare what a stored run declared with what it did.")(audit_command)
    from ._mcp import mcp_app

    app.add_typer(mcp_app, name="mcp", help="List an MCP server's tools, or serve tools and plans over MCP.")


_add_runs()


def main() -> None:
    """Entry point of the ``toolplan`` console script."""
    _tolerant_output()
    app(prog_name="toolplan")
