"""``toolplan serve`` (the planner service) and ``toolplan keys`` (its API keys)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._errors import OptionalDependencyError, UserError
from ..execute import WindowLimits
from ._common import (
    BackendOpt,
    Command,
    JsonOpt,
    ToolsOpt,
    close_backend,
    command_group,
    db_option,
    fail,
    model_option,
    out,
    parse_model,
    running_model,
    start_backend,
    tools_of,
    when,
    with_store,
)
from ._loader import CliInputError, with_skills
from ._render import print_json, print_listing, say
from ._spend import MaxMoneyOpt, MaxTotalTokensOpt, PriceOpt, PricesFileOpt, spend_limits

if TYPE_CHECKING:
    from ..store import Store

__all__ = ("ServeCommand", "keys_app", "serve_command")

keys_app = command_group()

KeysDbOpt = Annotated[str | None, db_option("The service's database, which keeps its API keys.")]


def _cache_ttl_option(help_text: str) -> Any:
    """``--cache-ttl SECONDS`` (zero or more), of the service or of one key."""
    return typer.Option("--cache-ttl", min=0, metavar="SECONDS", help=help_text)


def _service_defaults() -> dict[str, Any] | None:
    """What the service does without options (`ServiceConfig`, and `serve`'s address), or None without it."""
    try:
        from ..service import ServiceConfig, serve
    except OptionalDependencyError:
        return None
    config, where = ServiceConfig(), inspect.signature(serve).parameters
    return {
        "host": where["host"].default,
        "port": where["port"].default,
        "slots": config.slots,
        "max_active_per_key": config.max_active_per_key,
    }


class ServeCommand(Command):
    """``toolplan serve``: its help shows the service's own defaults, read when the help is shown."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        defaults = _service_defaults()
        for param in self.get_params(ctx):
            help_text = getattr(param, "help", None)
            if param.param_type_name == "option" and param.name in _DEFAULTED and help_text:
                shown = "the service's" if defaults is None else defaults[str(param.name)]
                param.help = f"{help_text.rstrip('.')} (default {shown})."  # type: ignore[attr-defined]
        super().format_options(ctx, formatter)


_DEFAULTED = ("host", "port", "slots", "max_active_per_key")  # options whose default is the service's


def _check_port(host: str, port: int) -> None:
    """Fail before anything starts when the service could not listen at ``host:port``."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        fail(f"--host {host!r} is not an address to listen on: {exc.strerror or exc}.")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
        except OSError as exc:
            fail(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Stop what uses that port, "
                "or pass --port N (another port)."
            )


def _read_keys(path: Path | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"Cannot read the API key file {str(path)!r}: {exc}. Pass --api-key-file with one key per line.")
    keys = tuple(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if not keys:
        fail(f"The API key file {str(path)!r} holds no key: write one key per line (# starts a comment).")
    return keys


def serve_command(
    tools: ToolsOpt = None,
    db: Annotated[
        str | None,
        db_option("The service's database: its plans, executions, API keys and schedules (made if it is not there)."),
    ] = None,
    model: Annotated[
        str | None,
        model_option(
            "The planner's model (e.g. openai:gpt-4o-mini, or local:smollm2 with toolplan[local]); it plans "
            "task schedules too. Without it POST /v1/requests answers 503; plans posted by clients still run.",
        ),
    ] = None,
    api_key_file: Annotated[
        Path | None,
        typer.Option("--api-key-file", metavar="FILE", help="Accept the keys in FILE too (one per line)."),
    ] = None,
    host: Annotated[str | None, typer.Option("--host", metavar="ADDRESS", help="Address to listen on.")] = None,
    port: Annotated[
        int | None, typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port to listen on.")
    ] = None,
    slots: Annotated[
        int | None, typer.Option("--slots", metavar="N", min=1, max=10_000, help="Executions run at once here.")
    ] = None,
    max_active_per_key: Annotated[
        int | None,
        typer.Option(
            "--max-active-per-key",
            min=1,
            max=1_000_000,
            metavar="N",
            help="Executions one API key may have queued or running at once; more are answered 429.",
        ),
    ] = None,
    no_scheduler: Annotated[
        bool, typer.Option("--no-scheduler", help="Do not fire due schedules here (another process does).")
    ] = False,
    backend: BackendOpt = None,
    key_budget_calls: Annotated[
        int | None,
        typer.Option(
            "--key-budget-calls",
            min=0,
            metavar="N",
            help="Tool calls one API key may make per --key-budget-period, over all its executions "
            "(kept in the store, shared by every process on it); more steps end not_run.",
        ),
    ] = None,
    key_budget_cost: Annotated[
        float | None,
        typer.Option(
            "--key-budget-cost",
            min=0,
            metavar="COST",
            help="Cost (the tools' cost annotations) one API key may spend per --key-budget-period.",
        ),
    ] = None,
    key_budget_period: Annotated[
        float,
        typer.Option(
            "--key-budget-period",
            min=1,
            metavar="SECONDS",
            help="The length of a key's budget window (3600: per hour, 86400: per day).",
        ),
    ] = 3600,
    key_budget_tokens: Annotated[
        int | None,
        typer.Option(
            "--key-budget-tokens",
            min=0,
            metavar="N",
            help="Model tokens (input plus output) one API key's planning requests may use per --key-budget-period; "
            "more are answered 429.",
        ),
    ] = None,
    key_budget_money: Annotated[
        float | None,
        typer.Option(
            "--key-budget-money",
            min=0,
            metavar="AMOUNT",
            help="Money one API key's planning requests may spend on the model per --key-budget-period (at --price).",
        ),
    ] = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    max_money: MaxMoneyOpt = None,
    price: PriceOpt = None,
    prices: PricesFileOpt = None,
    cache_ttl: Annotated[
        float | None,
        _cache_ttl_option(
            "Keep the results of read_only tools this long in the store's result cache: a later execution's "
            "identical call is answered from it (step cached: true, a cache_hit event). A key made with "
            "`toolplan keys create --cache-ttl` uses its own. Default: no cache.",
        ),
    ] = None,
) -> None:
    """Serve the planner API (REST under /v1, GraphQL at /graphql, OpenAPI at /docs) until stopped.

    On start it takes up the executions a dead process left running; on stop it queues the ones
    still running here for the next process. It fires due schedules too, unless --no-scheduler.
    Keys: `toolplan keys create --db URL NAME`.
    """
    if tools is None:
        fail("serve needs the tools its plans call: pass --tools FILE.py[:NAME].")
    try:
        from ..service import ServiceConfig, serve
    except OptionalDependencyError as exc:
        fail(str(exc))
    defaults = _service_defaults()
    assert defaults is not None
    host = defaults["host"] if host is None else host
    port = defaults["port"] if port is None else port
    model_obj = parse_model(model)  # its API key too: refused now, not in every answer
    registry = tools_of(tools)
    keys = _read_keys(api_key_file)
    config = ServiceConfig()  # the service's defaults, for what the command line leaves out
    changes: dict[str, Any] = {"slots": slots, "max_active_per_key": max_active_per_key, "cache_ttl": cache_ttl}
    try:
        # per planning request, and the price table
        changes["spend"] = spend_limits(
            max_total_tokens=max_total_tokens, max_money=max_money, prices=price, prices_file=prices
        )
        budget = (key_budget_calls, key_budget_cost, key_budget_tokens, key_budget_money)
        if any(b is not None for b in budget):
            changes["key_budget"] = WindowLimits(
                period=key_budget_period,
                max_tool_calls=key_budget_calls,
                max_cost=key_budget_cost,
                max_total_tokens=key_budget_tokens,
                max_money=key_budget_money,
            )
        config = dataclasses.replace(config, **{k: v for k, v in changes.items() if v is not None})
        if model_obj is not None and config.spend is not None:
            config.spend.check(model_obj, money=key_budget_money is not None)
        elif model_obj is not None and key_budget_money is not None:
            fail(f"--key-budget-money needs the model's price: pass --price {model_obj.name}=IN,OUT (per million).")
    except UserError as exc:
        fail(exc.message)
    backend_obj = start_backend(backend)
    if backend_obj is not None:
        config = dataclasses.replace(config, backend=backend_obj)

    async def run(store: Store) -> None:
        try:
            tools = await with_skills(registry)  # plans may name saved plans (skill:NAME), as saved at start
        except CliInputError as exc:
            fail(str(exc))
        if not keys and not await _any_key(store):
            fail(
                "This service has no API key yet, and every route needs one: make one with "
                f"`toolplan keys create --db {store.url_shown} NAME` (or pass --api-key-file FILE)."
            )
        say(out, f"toolplan service on http://{host}:{port} (API docs: /docs), store {store.url_shown}")
        if no_scheduler:
            await serve(store, tools, model=model_obj, api_keys=keys, config=config, host=host, port=port)
            return
        from ..planner import Planner
        from ..schedules import Scheduler

        planner = Planner(model_obj, tools, store=store, spend=config.spend) if model_obj is not None else None
        stop = asyncio.Event()  # due schedules become queued executions, which the service runs
        async with asyncio.TaskGroup() as group:
            group.create_task(Scheduler(store, planner=planner).run(stop=stop), name="toolplan:scheduler")
            try:
                await serve(store, tools, model=model_obj, api_keys=keys, config=config, host=host, port=port)
            finally:
                stop.set()

    try:
        _check_port(host, port)  # before the banner: a busy port is an error line, not a banner and a traceback
        with running_model(model_obj, model):  # a local model's server: started now, stopped with the service
            with_store(db, run, what="service", existing=False)
    finally:
        close_backend(backend_obj)


async def _any_key(store: Store) -> bool:
    from ..service._internal import ServiceStore

    return any(k.revoked_at is None for k in await ServiceStore(store).list_keys())


NameArg = Annotated[str, typer.Argument(metavar="NAME", help="Who or what uses the key (e.g. 'ci', 'alice').")]
KeyIdArg = Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (toolplan keys list shows them).")]


@keys_app.command("create", cls=Command, short_help="Make an API key; its secret is printed once.")
def keys_create(
    name: NameArg,
    db: KeysDbOpt = None,
    as_json: JsonOpt = False,
    approve: Annotated[
        bool,
        typer.Option("--approve/--no-approve", help="Whether the key may answer executions that wait for approval."),
    ] = True,
    cache_ttl: Annotated[
        float | None,
        _cache_ttl_option(
            "Keep the results of read_only tools this key's executions call this long in the store's result "
            "cache, and answer its identical calls from it (0: no cache for this key). Default: the service's "
            "--cache-ttl.",
        ),
    ] = None,
) -> None:
    """Make an API key for the planner service. The secret is printed once; only its hash is stored.

    A key may run executions and, unless made with --no-approve, answer those that wait for approval.
    """
    from ..service._internal import ServiceStore

    key, secret = with_store(
        db,
        lambda store: ServiceStore(store).create_key(name, can_approve=approve, cache_ttl=cache_ttl),
        what="API keys",
        existing=False,
    )
    if as_json:
        shown = {"key_id": key.key_id, "name": key.name, "secret": secret, "can_approve": key.can_approve}
        print_json(out, {**shown, "cache_ttl": key.cache_ttl})
        return
    say(out, f"API key {key.key_id} ({key.name}). Its secret, shown only now; send it as X-API-Key:")
    out.print(secret, highlight=False, soft_wrap=True)


@keys_app.command("list", cls=Command, short_help="List the API keys (never their secrets).")
def keys_list(db: KeysDbOpt = None, as_json: JsonOpt = False) -> None:
    """List the API keys, newest first."""
    from ..service._internal import ServiceStore

    keys = with_store(db, lambda store: ServiceStore(store).list_keys(), what="API keys")
    if as_json:
        print_json(
            out,
            [
                {
                    "key_id": k.key_id,
                    "name": k.name,
                    "created_at": k.created_at,
                    "revoked_at": k.revoked_at,
                    "can_approve": k.can_approve,
                    "cache_ttl": k.cache_ttl,
                }
                for k in keys
            ],
        )
        return
    rows = [
        (k.key_id, k.name, "yes" if k.can_approve else "no", _ttl(k.cache_ttl), when(k.created_at), when(k.revoked_at))
        for k in keys
    ]
    print_listing(out, ("key id", "name", "approves", "cache", "created (UTC)", "revoked (UTC)"), rows)


def _ttl(seconds: float | None) -> str:
    """A key's cache setting as `keys list` shows it."""
    if seconds is None:
        return "service's"
    return f"{seconds:g}s" if seconds else "off"


@keys_app.command("revoke", cls=Command, short_help="Revoke an API key (refused from its next request).")
def keys_revoke(key_id: KeyIdArg, db: KeysDbOpt = None) -> None:
    """Revoke an API key: the service refuses it from its next request."""
    from ..service._internal import ServiceStore

    with_store(db, lambda store: ServiceStore(store).revoke_key(key_id), what="API keys")
    say(out, f"API key {key_id} revoked.")
