"""``toolplan mcp tools``, ``toolplan mcp serve`` and ``toolplan run --mcp-stdio``, as a user runs them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_support import KV_SERVER, ROOT

pytestmark = pytest.mark.slow  # subprocesses that import the MCP SDK

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
KV = shlex.join([sys.executable, str(KV_SERVER)])


def toolplan(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolplan", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=90,
        check=False,
    )


def test_mcp_tools_lists_the_mapped_annotations() -> None:
    done = toolplan("mcp", "tools", "--stdio", KV, "--json")
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    tools = {t["name"]: t for t in listing["tools"]}
    assert set(tools) == {"get", "put", "keys", "echo", "stats", "sleep"}
    assert (tools["get"]["read_only"], tools["get"]["idempotent"]) == (True, True)
    assert (tools["put"]["read_only"], tools["put"]["destructive"]) == (False, False)
    assert tools["put"]["hints"] == {"read_only": False, "destructive": False, "idempotent": True, "open_world": True}
    table = toolplan("mcp", "tools", "--stdio", KV)
    assert table.returncode == 0 and "hints trusted" in table.stdout and "read_only" in table.stdout


def test_mcp_tools_says_what_is_wrong() -> None:
    assert "one server" in toolplan("mcp", "tools").stderr
    missing = toolplan("mcp", "tools", "--stdio", "/nonexistent/server")
    assert missing.returncode == 2 and missing.stderr.startswith("Error: Cannot connect to the MCP server")
    assert "Traceback" not in missing.stderr
    assert "not an http(s) URL" in toolplan("mcp", "tools", "--url", "localhost:8000").stderr


def test_run_a_plan_over_a_stdio_server() -> None:
    done = toolplan("run", str(ROOT / "examples" / "mcp" / "plan.json"), "--mcp-stdio", KV, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"a": {"result": "apples"}, "b": {"result": "bananas"}, "all": {"result": ["a", "b"]}}


def test_run_starts_a_stdio_server_once(tmp_path: Path) -> None:
    # The listing (for validation) and the run share one connection: the server starts one time.
    log = tmp_path / "starts.log"
    logged = shlex.join(["sh", "-c", f'echo started >> "$0"; exec {KV}', str(log)])
    done = toolplan("run", str(ROOT / "examples" / "mcp" / "plan.json"), "--mcp-stdio", logged, "--json")
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["started"]


def test_serve_over_stdio_with_an_upstream_server(tmp_path: Path) -> None:
    tools = tmp_path / "tools.py"
    tools.write_text(
        textwrap.dedent(
            """
            def shout(text: str) -> str:
                \"\"\"Upper-case a text.\"\"\"
                return text.upper()
            """
        ),
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolplan", "mcp", "serve", "--tools", str(tools), "--mcp-upstream", KV],
        env={"PYTHONPATH": ENV["PYTHONPATH"]},
        cwd=str(tmp_path),
    )

    async def session() -> tuple[list[str], object]:
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            plan = {
                "steps": [
                    {"id": "save", "tool": "put", "arguments": {"key": "greeting", "value": "hello"}},
                    {"id": "read", "tool": "get", "arguments": {"key": "greeting"}, "depends_on": ["save"]},
                    {"id": "loud", "tool": "shout", "arguments": {"text": "$ref:read.result"}},
                ],
                "output_steps": ["loud"],
            }
            result = await client.call_tool("execute_tool_plan", plan)
            return names, result.structured_content

    import asyncio

    names, body = asyncio.run(session())
    assert names == ["shout", "get", "put", "keys", "echo", "stats", "sleep", "execute_tool_plan"]
    assert body == {"status": "succeeded", "outputs": {"loud": "HELLO"}, "errors": {}}


def test_serve_refuses_the_network_without_a_token() -> None:
    done = toolplan("mcp", "serve", "--mcp-upstream", KV, "--transport", "streamable-http", "--host", "0.0.0.0")
    assert done.returncode == 2 and "--token" in done.stderr and "Traceback" not in done.stderr
    assert "--transport" in toolplan("mcp", "serve", "--mcp-upstream", KV, "--transport", "sse").stderr


def test_mcp_tools_on_a_toolplan_server_says_what_a_missing_or_wrong_token_is(tmp_path: Path) -> None:
    import socket
    import time

    tools = tmp_path / "tools.py"
    tools.write_text(
        textwrap.dedent(
            '''
            from toolplan import tool

            @tool(read_only=True)
            def shout(text: str) -> str:
                """Upper case."""
                return text.upper()
            '''
        ),
        encoding="utf-8",
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = ["mcp", "serve", "--tools", str(tools), "--transport", "streamable-http", "--port", str(port)]
    server = subprocess.Popen(
        [sys.executable, "-m", "toolplan", *serve, "--token", "s3cret"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until it listens (or the bound for a slow machine passes)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the MCP server did not start"
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        env = {k: v for k, v in os.environ.items() if k != "TOOLPLAN_MCP_TOKEN"}
        missing = subprocess.run(
            [sys.executable, "-m", "toolplan", "mcp", "tools", "--url", url],
            capture_output=True, text=True, env={**env, "PYTHONPATH": ENV["PYTHONPATH"]}, timeout=90, check=False,
        )  # fmt: skip
        assert missing.returncode == 2 and "wants a token, and none was sent (HTTP 401)" in missing.stderr
        assert "Check that it is running" not in missing.stderr
        wrong = toolplan("mcp", "tools", "--url", url, "--token", "nope")
        assert wrong.returncode == 2 and "refused the token it was sent (HTTP 401)" in wrong.stderr
        listed = toolplan("mcp", "tools", "--url", url, "--token", "s3cret")
        assert listed.returncode == 0, listed.stderr
        assert "shout" in listed.stdout and "give the toolset a prefix" not in listed.stdout
        assert "Left out 'execute_tool_plan': the server's own plan tool" in " ".join(listed.stdout.split())
    finally:
        server.terminate()
        server.wait(timeout=30)
