"""`MCPToolset` against in-process MCP servers: listing, names, results, annotations, _meta, locks,
timeouts, cancellation, closing from any task."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
import pytest
from mcp import Client, MCPError
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from toolplan import Agent, ToolRegistry, UserError, execute_plan, tool
from toolplan.mcp import IDEMPOTENCY_META_KEY, MCPConnectionError, MCPHints, MCPToolset
from toolplan.mcp._convert import convert_result
from toolplan.testing import TestModel

READ_ONLY = mt.ToolAnnotations(read_only_hint=True)


def kv_server() -> MCPServer:
    """A small in-process server: reads, writes and a tool that reports what it was sent."""
    server = MCPServer("kv", log_level="ERROR")
    store: dict[str, str] = {}

    @server.tool(annotations=READ_ONLY)
    def get(key: str) -> str | None:
        return store.get(key)

    @server.tool()
    def put(key: str, value: str) -> str:
        store[key] = value
        return "ok"

    @server.tool(annotations=READ_ONLY)
    async def meta(ctx: Context) -> dict[str, Any]:
        return dict(ctx.request_context.meta or {})

    return server


async def test_definitions_need_a_listing_first() -> None:
    toolset = MCPToolset(kv_server())
    with pytest.raises(UserError, match="async with toolset"):
        toolset.definitions()
    async with toolset:
        assert [d.name for d in toolset.definitions()] == ["get", "put", "meta"]
    assert [d.name for d in toolset.definitions()] == ["get", "put", "meta"]  # the listing outlives the connection


async def test_names_are_prefixed_and_checked() -> None:
    server = MCPServer("odd", log_level="ERROR")
    for name in ["files.read", "files/read", "x" * 70, "execute_tool_plan", "ok-name"]:
        server.add_tool(lambda: "x", name=name)
    async with MCPToolset(server) as plain, MCPToolset(server, prefix="fs") as prefixed:
        assert [d.name for d in plain.definitions()] == ["files_read", "ok-name"]
        assert plain.remote_name("files_read") == "files.read"
        assert set(plain.skipped) == {"files/read", "x" * 70, "execute_tool_plan"}
        assert "files_read" in plain.skipped["files/read"] and "meta-tool" in plain.skipped["execute_tool_plan"]
        assert [d.name for d in prefixed.definitions()] == ["fs_files_read", "fs_execute_tool_plan", "fs_ok-name"]
        result = await execute_plan({"steps": [{"id": "a", "tool": "fs_files_read", "arguments": {}}]}, [prefixed])
        assert result.outputs == {"a": "x"}
    with pytest.raises(UserError, match="prefix"):
        MCPToolset(server, prefix="no spaces")


async def test_every_page_of_the_listing_is_read() -> None:
    pages = {None: ("a", "p2"), "p2": ("b", "p3"), "p3": ("c", None)}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        name, cursor = pages[params.cursor if params else None]
        return mt.ListToolsResult(tools=[mt.Tool(name=name, input_schema={"type": "object"})], next_cursor=cursor)

    async def call_tool(ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        return mt.CallToolResult(content=[mt.TextContent(text=params.name)])

    server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with MCPToolset(server) as toolset:
        assert [d.name for d in toolset.definitions()] == ["a", "b", "c"]
        assert (await toolset.execute("c", {})).content == "c"


async def test_a_changed_tool_list_is_listed_again() -> None:
    server = MCPServer("growing", log_level="ERROR")

    @server.tool()
    async def grow(ctx: Context) -> str:
        server.add_tool(lambda: "new", name="added")
        await ctx.notify_tools_changed()
        return "grown"

    changed = asyncio.Event()
    async with MCPToolset(server, on_tools_changed=lambda ts: changed.set()) as toolset:
        assert [d.name for d in toolset.definitions()] == ["grow"]
        await toolset.execute("grow", {})
        await changed.wait()
        assert [d.name for d in toolset.definitions()] == ["grow", "added"]
        server.remove_tool("added")
        assert [d.name for d in await toolset.refresh()] == ["grow"]


def test_results_map_to_outputs_and_typed_parts() -> None:
    text = mt.TextContent(text='{"a": [1, 2]}')
    image = mt.ImageContent(data="aGk=", mime_type="image/png")
    resource = mt.EmbeddedResource(
        resource=mt.TextResourceContents(uri="file:///x.txt", text="hello", mime_type="text/plain")
    )
    link = mt.ResourceLink(uri="file:///y", name="y")
    assert convert_result(mt.CallToolResult(content=[text], structured_content={"n": 1}), "t").content == {"n": 1}
    assert convert_result(mt.CallToolResult(content=[text]), "t").content == '{"a": [1, 2]}'
    assert convert_result(mt.CallToolResult(content=[text, text]), "t").content == ['{"a": [1, 2]}'] * 2
    assert convert_result(mt.CallToolResult(content=[]), "t").content is None
    assert convert_result(mt.CallToolResult(content=[text, image, resource, link]), "t").content == [
        {"type": "text", "text": '{"a": [1, 2]}'},
        {"type": "image", "mime_type": "image/png", "data": "aGk="},
        {"type": "resource", "uri": "file:///x.txt", "mime_type": "text/plain", "text": "hello"},
        {"type": "resource_link", "uri": "file:///y", "name": "y", "mime_type": None, "description": None},
    ]
    failed = convert_result(mt.CallToolResult(content=[mt.TextContent(text="no such city")], is_error=True), "t")
    assert failed.error == "no such city"
    assert convert_result(mt.CallToolResult(content=[], is_error=True), "t").error is not None


async def test_errors_are_business_and_failures_infrastructure() -> None:
    server = MCPServer("errors", log_level="ERROR")

    @server.tool(structured_output=False)  # text content only
    def text(n: int) -> str:
        return f'{{"items": [{{"id": {n + 6}}}]}}'

    @server.tool()
    def refuse() -> str:
        raise ToolError("city not found")  # the SDK's way to fail a call with a message

    @server.tool()
    def protocol() -> str:
        raise MCPError(mt.INVALID_PARAMS, "bad params")

    plan = {
        "steps": [
            {"id": "t", "tool": "text", "arguments": {"n": 1}},
            {"id": "ref", "tool": "text", "arguments": {"n": "$ref:t.items.0.id"}},
            {"id": "r", "tool": "refuse", "arguments": {}},
            {"id": "p", "tool": "protocol", "arguments": {}},
        ]
    }
    async with MCPToolset(server) as toolset:
        result = await execute_plan(plan, [toolset])
    assert result.steps["t"].output == '{"items": [{"id": 7}]}'
    assert result.steps["ref"].output == '{"items": [{"id": 13}]}'  # a reference into the JSON text of "t"
    assert result.errors["r"].kind == "business" and "city not found" in result.errors["r"].message
    assert result.errors["p"].kind == "infrastructure" and "bad params" in result.errors["p"].message


def test_hints_use_the_spec_defaults() -> None:
    assert MCPHints.of(None) == MCPHints(read_only=False, destructive=True, idempotent=False, open_world=True)
    assert MCPHints.of(READ_ONLY) == MCPHints(read_only=True, destructive=False, idempotent=True, open_world=True)
    claims = mt.ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    assert MCPHints.of(claims) == MCPHints(read_only=False, destructive=False, idempotent=True, open_world=False)


async def test_untrusted_hints_never_make_a_tool_repeatable() -> None:
    server = MCPServer("claims", log_level="ERROR")
    calls: list[str] = []

    @server.tool(annotations=mt.ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    def flaky() -> str:
        calls.append("flaky")
        raise RuntimeError("try again")

    @server.tool()
    def plain() -> str:
        return "x"

    async with MCPToolset(server) as trusted, MCPToolset(server, trust_hints=False, prefix="u") as untrusted:
        t, u = trusted.definitions()[0].annotations, untrusted.definitions()[0].annotations
        assert (t.idempotent, t.destructive, t.retries) == (True, False, 2)
        assert (u.read_only, u.idempotent, u.destructive, u.retries) == (False, False, True, 0)
        unannotated = trusted.definitions()[1].annotations
        assert (unannotated.read_only, unannotated.idempotent, unannotated.destructive) == (False, False, True)
        result = await execute_plan({"steps": [{"id": "a", "tool": "u_flaky", "arguments": {}}]}, [untrusted])
        assert result.steps["a"].attempts == 1 and calls == ["flaky"]
    assert MCPToolset("http://127.0.0.1:1/mcp").trusted is False
    assert MCPToolset(server).trusted is True


async def test_meta_carries_the_idempotency_key_and_trace_context() -> None:
    span = NonRecordingSpan(
        SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )
    async with MCPToolset(kv_server()) as toolset:
        with trace.use_span(span):
            result = await execute_plan(
                {"steps": [{"id": "m", "tool": "meta", "arguments": {}}]}, [toolset], run_id="r1"
            )
        outside = await toolset.execute("meta", {})  # not a plan step: no key
    meta = result.outputs["m"]
    assert meta[IDEMPOTENCY_META_KEY] == "r1:m" and meta["toolplan/step"] == "m" and meta["toolplan/attempt"] == 1
    assert meta["traceparent"].split("-")[1] == f"{0x1234:032x}"
    assert IDEMPOTENCY_META_KEY not in outside.content


async def test_an_empty_idempotency_argument_is_filled() -> None:
    server = MCPServer("pay", log_level="ERROR")

    @server.tool()
    def pay(amount: int, idempotency_key: str) -> str:
        return idempotency_key

    @server.tool()
    def book(idempotencyKey: str = "") -> str:  # the camelCase spelling is filled too
        return idempotencyKey

    plan = {
        "steps": [
            {"id": "p", "tool": "pay", "arguments": {"amount": 3}},  # required, left out: not a validation error
            {"id": "q", "tool": "pay", "arguments": {"amount": 3, "idempotency_key": ""}},
            {"id": "own", "tool": "pay", "arguments": {"amount": 3, "idempotency_key": "mine"}},
            {"id": "b", "tool": "book", "arguments": {}},
        ]
    }
    async with MCPToolset(server) as toolset:
        assert "idempotency_key" not in toolset.definitions()[0].parameters_json_schema["required"]
        result = await execute_plan(plan, [toolset], run_id="run7")
    assert {k: v["result"] for k, v in result.outputs.items()} == {
        "p": "run7:p",
        "q": "run7:q",
        "own": "mine",
        "b": "run7:b",
    }


async def test_a_step_timeout_cancels_the_call_on_the_server() -> None:
    server = MCPServer("slow", log_level="ERROR")
    started, cancelled = asyncio.Event(), asyncio.Event()

    @server.tool(annotations=READ_ONLY)
    async def hang() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async with MCPToolset(server) as toolset:
        result = await execute_plan(
            {"steps": [{"id": "h", "tool": "hang", "arguments": {}, "timeout": 0.2}]}, [toolset]
        )
        assert result.steps["h"].status == "timed_out"
        await cancelled.wait()
        started.clear()
        task = asyncio.create_task(toolset.execute("hang", {}))
        await started.wait()
        cancelled.clear()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await cancelled.wait()  # a cancelled step's call is cancelled on the server too
        assert toolset.connected  # the connection goes on


async def test_mutations_take_turns_and_reads_overlap() -> None:
    server = MCPServer("gate", log_level="ERROR")
    running = {"read": 0, "write": 0}
    most = {"read": 0, "write": 0}
    both_reads = asyncio.Event()
    second_write = asyncio.Event()

    async def enter(kind: str) -> None:
        running[kind] += 1
        most[kind] = max(most[kind], running[kind])

    @server.tool(annotations=READ_ONLY)
    async def read() -> str:
        await enter("read")
        if running["read"] >= 2:
            both_reads.set()
        await both_reads.wait()  # the two reads must run at once, or this never returns
        running["read"] -= 1
        return "r"

    @server.tool()
    async def write() -> str:
        await enter("write")
        if running["write"] >= 2:
            second_write.set()
        await asyncio.sleep(0)  # give a second write the chance to come in (it cannot while locked)
        running["write"] -= 1
        return "w"

    steps: list[dict[str, Any]] = [
        {"id": f"{k}{i}", "tool": k, "arguments": {}} for k in ("read", "write") for i in range(2)
    ]
    # The two reads are the same call of a read-only tool: sharing is off so that both are made.
    async with MCPToolset(server) as locked:
        result = await execute_plan({"steps": steps, "share_calls": False}, [locked])
        assert result.ok and most == {"read": 2, "write": 1}
    most["write"] = 0
    both_reads.clear()
    async with MCPToolset(server, parallel_mutations=True) as free:
        result = await execute_plan({"steps": steps, "share_calls": False}, [free])
        assert result.ok and most["write"] == 2 and second_write.is_set()


async def test_closing_from_another_task_fails_the_running_call() -> None:
    server = MCPServer("slow", log_level="ERROR")
    started = asyncio.Event()

    @server.tool()  # not idempotent: its failed step is not tried again (a read-only one would connect again)
    async def hang() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    toolset = MCPToolset(server)
    await toolset.connect()
    plan = asyncio.create_task(execute_plan({"steps": [{"id": "h", "tool": "hang", "arguments": {}}]}, [toolset]))
    await started.wait()

    async def close() -> None:
        await toolset.aclose()

    await asyncio.create_task(close())
    result = await plan
    assert result.errors["h"].kind == "infrastructure" and "closed" in result.errors["h"].message
    assert not toolset.connected


async def test_a_hundred_connect_close_cycles_in_a_task_group() -> None:
    server = kv_server()
    toolsets = [MCPToolset(server) for _ in range(100)]
    async with asyncio.TaskGroup() as tg:
        for toolset in toolsets:
            await toolset.connect()  # opened by this task ...
            tg.create_task(toolset.aclose())  # ... closed by another
    async with asyncio.TaskGroup() as tg:
        for toolset in toolsets:
            tg.create_task(toolset.connect())  # opened by many tasks ...
    for toolset in toolsets:
        assert toolset.connected
        await toolset.aclose()  # ... closed by this one
        await toolset.aclose()  # twice: nothing happens


async def test_a_call_connects_lazily_and_a_failed_connect_is_an_infrastructure_error() -> None:
    toolset = MCPToolset(kv_server())
    await toolset.connect()
    await toolset.aclose()
    assert (await toolset.execute("put", {"key": "k", "value": "v"})).content == {"result": "ok"}  # connects again
    assert toolset.connected
    await toolset.aclose()
    unreachable = MCPToolset.stdio(["/nonexistent/mcp-server"])
    with pytest.raises(MCPConnectionError, match="Cannot connect"):
        await unreachable.connect()


async def test_a_ready_client_and_agents_take_toolsets() -> None:
    async with Client(kv_server()) as client, MCPToolset(client) as toolset:
        assert (await toolset.execute("get", {"key": "none"})).content == {"result": None}

        def same(x: int) -> int:
            return x

        agent = Agent(TestModel(call_tools=["put"]), tools=[toolset, tool(same)])
        assert {"get", "put", "meta", "same"} <= set(agent.registry.names)
        result = await agent.run("store something")
        assert result.output
    assert ToolRegistry.of([toolset]).names == ["get", "put", "meta"]
