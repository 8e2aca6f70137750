"""What every ``toolplan`` command shares: options, consoles, exit codes, usage lines and helpers.

The command modules import from here; none of them imports the app (``_app.py``), which only
creates it and registers the commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from .._defaults import MAX_LEASE, MIN_LEASE
from .._errors import PlanValidationError, ToolplanError
from ..execute import Backend, PlanResult
from ..plan import DEFAULT_MAX_STEPS, ValidationReport, validate_plan
from ..tools import ToolRegistry
from ._loader import CliInputError, load_plan, load_tools
from ._render import print_errors, print_issues, print_json, print_outputs, print_step_table, print_summary, say

if TYPE_CHECKING:
    from ..models import Model
    from ..store import Store

__all__ = (
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_OK",
    "BackendOpt",
    "Command",
    "DialectChoice",
    "DialectOpt",
    "JsonOpt",
    "MaxStepsOpt",
    "PlanArg",
    "RerunUnknownOpt",
    "ToolsOpt",
    "close_backend",
    "command_group",
    "db_option",
    "err",
    "fail",
    "model_option",
    "opened_store",
    "out",
    "parse_model",
    "print_result",
    "read_inputs",
    "report_invalid",
    "running_model",
    "show_result",
    "start_backend",
    "stdout_to_stderr",
    "store_url",
    "validate_inputs",
    "when",
    "with_store",
)

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

T = TypeVar("T")

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

# -- commands -----------------------------------------------------------------------------------

# The usage line of each command, written to read as it is typed (typer's puts [OPTIONS] first and
# wraps a required argument in braces). A command of a group is named with its group ("runs list").
_USAGE = {
    "run": "PLAN.json --tools FILE.py[:NAME] [OPTIONS]",
    "validate": "PLAN.json [--tools FILE.py[:NAME]] [OPTIONS]",
    "graph": "PLAN.json [--tools FILE.py[:NAME]] [-o FILE] [OPTIONS]",
    "demo": "[--model PROVIDER:NAME]",
    "agent": "TASK --tools FILE.py[:NAME] [--model MODEL] [OPTIONS]",
    "serve": "--tools FILE.py[:NAME] --db URL [OPTIONS]",
    "audit": "RUN_ID --db URL [OPTIONS]",
    "runs list": "--db URL [OPTIONS]",
    "runs show": "RUN_ID --db URL [OPTIONS]",
    "runs resume": "RUN_ID --tools FILE.py[:NAME] --db URL [OPTIONS]",
    "runs work": "--tools FILE.py[:NAME] --db URL [OPTIONS]",
    "keys create": "NAME --db URL [OPTIONS]",
    "keys list": "--db URL [OPTIONS]",
    "keys revoke": "KEY_ID --db URL",
    "skills list": "--db URL [OPTIONS]",
    "skills run": "NAME --tools FILE.py[:NAME] --db URL [OPTIONS]",
    "mcp tools": "--stdio CMD | --url URL [OPTIONS]",
    "mcp serve": "--tools FILE.py[:NAME] [OPTIONS]",
}


class Command(typer.core.TyperCommand):
    """A command whose usage line is `_USAGE`'s and whose arguments are listed by name only."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        parent = ctx.parent
        grouped = parent is not None and parent.parent is not None  # "runs list", not "toolplan run"
        usage = _USAGE.get(f"{parent.info_name} {self.name}" if grouped else self.name or "")
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


# -- options ------------------------------------------------------------------------------------


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

_DB_FORMS = "sqlite:///runs.db or postgresql://user@host/db; a plain file path is a SQLite database"


def db_option(what: str) -> Any:
    """The ``--db`` option of a command; ``what`` says what the command does with the database."""
    return typer.Option(
        "--db", metavar="URL", envvar="TOOLPLAN_DB", help=f"{what} A URL ({_DB_FORMS}). Default: $TOOLPLAN_DB."
    )


def model_option(help_text: str) -> Any:
    """The ``--model PROVIDER:NAME`` option of a command; ``help_text`` says what the command does with it."""
    return typer.Option("--model", metavar="PROVIDER:NAME", help=help_text)


# -- output and failure -------------------------------------------------------------------------


def fail(message: str) -> NoReturn:
    """Print a one-line error to stderr and exit with code 2."""
    sys.stderr.write(f"Error: {message}\n")
    raise typer.Exit(EXIT_INVALID)


@contextlib.contextmanager
def stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """While enabled, whatever tools print goes to stderr, so stdout holds only the JSON."""
    if not enabled:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def show_result(result: PlanResult, *, as_json: bool, live: bool = False, unfinished: bool = False) -> NoReturn:
    """Print a run's result (JSON, or the step table, errors, outputs and summary) and exit with its code."""
    print_result(result, as_json=as_json, live=live, unfinished=unfinished)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


def print_result(result: PlanResult, *, as_json: bool, live: bool = False, unfinished: bool = False) -> None:
    """Print a run's result: JSON, or the step table (unless a live one showed it), errors, outputs and summary."""
    if as_json:
        print_json(out, result.to_dict())
    else:
        if not live:
            print_step_table(out, result)
        print_errors(out, result)
        print_outputs(out, result)
        print_summary(out, result, unfinished=unfinished)


def when(ts: float | None) -> str:
    """A stored time as the listings show it (UTC), or blank."""
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


# -- plans --------------------------------------------------------------------------------------


def tools_of(spec: str) -> ToolRegistry:
    """The tools of ``--tools FILE.py[:NAME]``; an unusable file or name is an error line."""
    try:
        return load_tools(spec)
    except CliInputError as exc:
        fail(exc.message)


def needed_tools(spec: str | None, command: str, what: str = "the tools to call") -> ToolRegistry:
    """`tools_of` for a command that cannot work without ``--tools``: its absence is an error line too."""
    if spec is None:
        fail(f"{command} needs {what}: pass --tools FILE.py[:NAME].")
    return tools_of(spec)


def read_inputs(plan_path: str, tools_spec: str | None) -> tuple[Any, ToolRegistry | None]:
    """The plan's data and the tools of ``--tools`` (None without it); an unusable input is an error line."""
    try:
        data = load_plan(plan_path)
        registry = load_tools(tools_spec) if tools_spec is not None else None
    except CliInputError as exc:
        fail(exc.message)
    return data, registry


def validate_inputs(
    data: Any, registry: ToolRegistry | None, dialect: DialectChoice | None, max_steps: int | None
) -> ValidationReport:
    """The plan checked against the tools (its structure only without them)."""
    if max_steps is not None and max_steps < 1:
        fail(f"--max-steps must be at least 1, got {max_steps}.")
    return validate_plan(
        data,
        registry,
        dialect=dialect.value if dialect is not None else None,
        max_steps=max_steps or DEFAULT_MAX_STEPS,
    )


def report_invalid(report: ValidationReport, *, as_json: bool, console: Console) -> NoReturn:
    """Print why the plan is invalid (JSON, or a list) and exit with code 2."""
    if as_json:
        print_json(out, PlanValidationError([*report.errors, *report.warnings]).to_dict())
    else:
        n = len(report.errors)
        say(console, f"The plan is invalid ({n} problem{'s' if n != 1 else ''}); no tool was run:", "bold red")
        print_issues(console, report.errors, style="red")
        if report.warnings:
            say(console, "Warnings:", "bold yellow")
            print_issues(console, report.warnings, style="yellow")
    raise typer.Exit(EXIT_INVALID)


# -- models and backends ------------------------------------------------------------------------


def parse_model(spec: str | None) -> Model | None:
    """The model ``--model PROVIDER:NAME`` names, with its credentials checked (no network), or None."""
    if spec is None:
        return None
    from ..models import infer_model

    try:
        model = infer_model(spec)
        model.check_credentials()
    except Exception as exc:  # any provider's refusal of the name or key: one line, never a traceback
        fail(f"--model {spec!r}: {' '.join(str(exc).split())}")
    return model


@contextlib.contextmanager
def running_model(model: Model | None, spec: str | None) -> Iterator[None]:
    """A local model's llama.cpp server: started before the command's work, stopped after it.

    A server that cannot start is one error line; other models need nothing.
    """
    from ..models import LocalModel

    if not isinstance(model, LocalModel):
        yield
        return
    say(err, f"Starting the local model {model.name} (llama.cpp server, context {model.n_ctx} tokens)...", "dim")
    try:
        model.start()
    except ToolplanError as exc:
        fail(f"--model {spec!r}: {exc.message}")
    try:
        yield
    finally:
        model.stop()


RAY_PROBE_SECONDS = 5.0  # how long a Ray address has to accept a connection
RAY_START_SECONDS = 120.0  # how long joining (or starting) a Ray cluster may take in all


def start_backend(spec: str | None) -> Backend | None:
    """The backend ``--backend`` names, started (joining a Ray cluster takes seconds), or None (local).

    A Ray address is first tried with a plain connection (a few seconds at most), and joining has a
    deadline too: a wrong address is one error line, never a wait without end or a traceback.
    """
    from ..backends import backend_from_spec

    try:
        backend = backend_from_spec(spec)
    except ToolplanError as exc:
        fail(f"--backend: {exc.message}")
    start = getattr(backend, "start", None)
    if start is None:
        return backend
    address = getattr(backend, "address", None)
    if isinstance(address, str):
        _probe_ray(address)
    say(err, f"Starting the {spec} backend...", "dim")
    _start_with_deadline(start, str(spec), address)
    return backend


def _ray_advice(address: str | None) -> str:
    if address is None:
        return "Check that Ray can start here (docs/ray.md), or run without --backend."
    if address == "auto":
        return "Start one with `ray start --head` (or set RAY_ADDRESS), or use --backend ray for a local one."
    port = address.rpartition(":")[2]
    port = port if port.isdigit() and not address.startswith("ray://") else "PORT"  # ray:// is the client port
    return (
        f"Check the address, or start a cluster there (`ray start --head --port {port}` on that machine), "
        "or use --backend ray for a local one."
    )


def _probe_ray(address: str) -> None:
    """Fail at once when nothing listens at a ``host:port`` (or ``ray://host:port``) Ray address."""
    text = address.removeprefix("ray://")
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        return  # "auto", or a form Ray resolves itself
    host = host.strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, int(port_text)), timeout=RAY_PROBE_SECONDS):
            return
    except OSError as exc:
        why = "nothing answered in time" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        fail(f"--backend ray:{address}: no Ray cluster answers at {text} ({why}). {_ray_advice(address)}")


def _start_with_deadline(start: Callable[[], Any], spec: str, address: str | None) -> None:
    """``start()`` (in this thread: Ray wants the main one) with a deadline; its failure is one error line."""
    done = threading.Event()

    def watchdog() -> None:
        if done.wait(RAY_START_SECONDS):
            return
        # Ray is still trying to connect, in code that cannot be interrupted: end the process.
        sys.stderr.write(
            f"Error: --backend {spec}: the Ray cluster did not answer within {RAY_START_SECONDS:.0f}s. "
            f"{_ray_advice(address)}\n"
        )
        sys.stderr.flush()
        os._exit(EXIT_INVALID)

    threading.Thread(target=watchdog, name="toolplan:backend-deadline", daemon=True).start()
    try:
        start()
    except ToolplanError as exc:
        fail(f"--backend {spec}: {' '.join(exc.message.split())}")
    except Exception as exc:  # Ray's own errors (ConnectionError, RuntimeError...): one line, never a traceback
        message = " ".join(str(exc).split()).split(". ", 1)[0].rstrip(".")[:300] or type(exc).__name__
        fail(f"--backend {spec}: {message}. {_ray_advice(address)}")
    finally:
        done.set()


def close_backend(backend: Backend | None) -> None:
    """Stop what `start_backend` started."""
    close = getattr(backend, "close", None)
    if close is not None:
        close()


# -- stores -------------------------------------------------------------------------------------


def store_url(db: str | None, *, what: str, existing: bool) -> str:
    """The database URL of ``--db``, checked before anything opens it.

    A value without ``://`` is a SQLite file path. With ``existing``, a SQLite file that is not there
    is an error (a command that only reads must not create an empty database); ``what`` names what
    the database holds, for the error when there is no ``--db`` at all.
    """
    if db is None or not db.strip():
        fail(f"Name the database of the {what}: pass --db URL ({_DB_FORMS}) or set TOOLPLAN_DB.")
    text = db.strip()
    if "\x00" in text:
        fail("--db holds a NUL character: give a URL or a file path.")
    url = text if "://" in text else "sqlite:///" + text
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        fail(f"--db {text[:200]!r} is not a database URL: give {_DB_FORMS}.")
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql", "postgres"):
        fail(f"--db {text[:200]!r}: toolplan stores in SQLite or PostgreSQL, not {backend[:40]!r}: give {_DB_FORMS}.")
    path = parsed.database
    file = backend == "sqlite" and path not in (None, "", ":memory:") and "uri" not in parsed.query
    if existing and file and not Path(str(path)).is_file():
        fail(
            f"No database at {path!r} (--db {text[:200]}): check the path. This command reads the {what} "
            "of an existing database and does not create one."
        )
    return url


def _lease() -> float | None:
    """The lease of the runs this process takes (seconds): ``$TOOLPLAN_LEASE``, else the store's default."""
    text = os.environ.get("TOOLPLAN_LEASE", "").strip()
    if not text:
        return None
    try:
        lease = float(text)
    except ValueError:
        lease = float("nan")
    if not MIN_LEASE <= lease <= MAX_LEASE:
        fail(f"TOOLPLAN_LEASE must be a number of seconds from {MIN_LEASE} to {MAX_LEASE:.0f}, not {text[:40]!r}.")
    return lease


@contextlib.asynccontextmanager
async def opened_store(url: str, lease: float | None = None) -> AsyncIterator[Store]:
    """The store at ``url`` (with ``lease``, else the store's default), closed when the block ends."""
    from ..store import open_store

    store = open_store(url) if lease is None else open_store(url, lease=lease)
    try:
        yield store
    finally:
        await store.close()


def with_store(
    db: str | None, action: Callable[[Store], Awaitable[T]], *, what: str = "runs", existing: bool = True
) -> T:
    """Open the store of ``--db``, run ``action`` with it, close it; a toolplan error is one line, exit 2.

    ``existing``: the command only reads, so the database must be there already (see `store_url`).
    The lease of the runs it takes is ``$TOOLPLAN_LEASE`` seconds (default: the store's): how soon
    another process may take over a run whose process died elsewhere.
    """
    url, lease = store_url(db, what=what, existing=existing), _lease()

    async def go() -> T:
        async with opened_store(url, lease) as store:
            return await action(store)

    try:
        return asyncio.run(go())
    except ToolplanError as exc:
        fail(" ".join(exc.message.split()))
    except KeyboardInterrupt:
        err.print("Interrupted.")
        raise typer.Exit(130) from None
