"""web_search against local HTTP servers on 127.0.0.1 that answer in each provider's documented JSON shape."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from toolplan import ToolError, UserError, execute_plan
from toolplan.builtin import (
    BraveSearch,
    SearchProviderError,
    SearxNG,
    WebSearchTools,
    search_provider_from_env,
)

# The shapes documented by each provider (trimmed to the fields the tool reads, plus some it ignores).
BRAVE_ANSWER = {
    "type": "search",
    "query": {"original": "toolplan"},
    "web": {
        "type": "search",
        "results": [
            {"title": "toolplan &amp; <strong>plans</strong>", "url": "https://example.org/a",
             "description": "Run <strong>many</strong> tool calls.", "language": "en"},
            {"title": "No URL here", "description": "dropped"},
            {"title": "Bad scheme", "url": "javascript:alert(1)", "description": "dropped"},
            {"title": "Second", "url": "https://example.org/b", "description": "two"},
            {"title": "Third", "url": "https://example.org/c", "description": "three"},
        ],
    },
}  # fmt: skip
SEARX_ANSWER = {
    "query": "toolplan",
    "number_of_results": 2,
    "results": [
        {"url": "https://example.net/x", "title": "X", "content": "first " * 400, "engine": "duckduckgo"},
        {"url": "https://example.net/y", "title": None, "content": 7, "engine": "bing"},
    ],
    "answers": [],
    "suggestions": [],
}


@dataclass
class Server:
    url: str
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            state.seen.append((parts.path, parse_qs(parts.query), dict(self.headers.items())))
            status, body = state.answers.get(parts.path, (404, b"{}"))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


async def test_brave_results_are_normalised_and_bounded(server: Server) -> None:
    server.answers["/res/v1/web/search"] = (200, _json(BRAVE_ANSWER))
    tools = WebSearchTools(BraveSearch("secret-key", url=server.url + "/res/v1/web/search"))
    hits = await tools.web_search("toolplan", limit=2)
    assert hits == [
        {"title": "toolplan & plans", "url": "https://example.org/a", "snippet": "Run many tool calls."},
        {"title": "Second", "url": "https://example.org/b", "snippet": "two"},
    ]
    path, query, headers = server.seen[0]
    assert path == "/res/v1/web/search"
    assert query == {"q": ["toolplan"], "count": ["2"]} and headers["X-Subscription-Token"] == "secret-key"
    assert "secret-key" not in repr(tools.provider)


async def test_searxng_results_are_normalised_and_bounded(server: Server) -> None:
    server.answers["/search"] = (200, _json(SEARX_ANSWER))
    hits = await WebSearchTools(SearxNG(server.url + "/")).web_search("toolplan")
    assert [h["url"] for h in hits] == ["https://example.net/x", "https://example.net/y"]
    assert len(hits[0]["snippet"]) == 1000 and hits[0]["snippet"].endswith("…")
    assert hits[1] == {"title": "https://example.net/y", "url": "https://example.net/y", "snippet": ""}
    assert server.seen[0][1] == {"q": ["toolplan"], "format": ["json"]}


async def test_web_search_runs_from_a_plan_and_is_read_only(server: Server) -> None:
    server.answers["/search"] = (200, _json(SEARX_ANSWER))
    tools = WebSearchTools(SearxNG(server.url))
    (definition,) = tools.definitions()
    assert definition.annotations.read_only and definition.annotations.idempotent
    plan = {"steps": [{"id": "q", "tool": "web_search", "arguments": {"query": "toolplan", "limit": 1}}]}
    result = await execute_plan(plan, [tools])
    assert result.ok and [hit["url"] for hit in result.steps["q"].output] == ["https://example.net/x"]


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (429, b"{}", ConnectionError, "rate limit"),
        (503, b"{}", ConnectionError, "HTTP 503"),
        (401, b"{}", PermissionError, "BRAVE_SEARCH_API_KEY"),
        (422, b"{}", ToolError, "refused the query"),
        (200, b"<html>not json</html>", SearchProviderError, "not JSON"),
        (200, b"\xff\xfe", SearchProviderError, "not JSON"),
        (200, _json({"web": {"results": "nope"}}), SearchProviderError, "not a list"),
        (200, _json(["a", "list"]), SearchProviderError, "without"),
        (200, b"[" + b"1," * 1_200_000 + b"1]", SearchProviderError, "more than"),
    ],
)
async def test_a_provider_answering_errors_or_garbage_maps_to_an_error_kind(
    server: Server, status: int, body: bytes, error: type[Exception], message: str
) -> None:
    server.answers["/brave"] = (status, body)
    tools = WebSearchTools(BraveSearch("k", url=server.url + "/brave"))
    with pytest.raises(error, match=message):
        await tools.web_search("x")


async def test_a_plan_step_gets_the_error_kind(server: Server) -> None:
    server.answers["/brave"] = (200, b"garbage")
    plan = {"steps": [{"id": "q", "tool": "web_search", "arguments": {"query": "x"}}]}
    result = await execute_plan(plan, [WebSearchTools(BraveSearch("k", url=server.url + "/brave"))])
    error = result.steps["q"].error
    assert error is not None and error.kind == "infrastructure" and "not JSON" in error.message


async def test_unreachable_and_hostile_queries() -> None:
    tools = WebSearchTools(SearxNG("http://127.0.0.1:9"))  # the discard port: nothing listens
    with pytest.raises(ConnectionError, match="could not be reached"):
        await tools.web_search("x")
    with pytest.raises(ToolError, match="empty"):
        await tools.web_search("   ")
    with pytest.raises(ToolError, match="at most 400"):
        await tools.web_search("q" * 401)


def test_web_search_is_off_unless_a_provider_is_configured() -> None:
    assert search_provider_from_env({}) is None
    assert isinstance(search_provider_from_env({"BRAVE_SEARCH_API_KEY": "k"}), BraveSearch)
    assert isinstance(search_provider_from_env({"SEARXNG_URL": "http://127.0.0.1:8888"}), SearxNG)
    chosen = search_provider_from_env(
        {"TOOLPLAN_WEBSEARCH": "searxng", "BRAVE_SEARCH_API_KEY": "k", "SEARXNG_URL": "http://s"}
    )
    assert isinstance(chosen, SearxNG)
    with pytest.raises(UserError, match="'brave' or 'searxng'"):
        search_provider_from_env({"TOOLPLAN_WEBSEARCH": "google"})
    with pytest.raises(UserError, match="API key"):
        search_provider_from_env({"TOOLPLAN_WEBSEARCH": "brave"})
    with pytest.raises(UserError, match="URL"):
        SearxNG("ftp://x")


def test_web_search_tools_without_a_provider_say_how_to_turn_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOLPLAN_WEBSEARCH", "BRAVE_SEARCH_API_KEY", "SEARXNG_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match="Web search is off"):
        WebSearchTools()


@pytest.mark.slow  # toolplan in a subprocess
def test_web_search_in_a_plan_run_by_the_cli(server: Server, tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    server.answers["/search"] = (200, _json(SEARX_ANSWER))
    (tmp_path / "tools.py").write_text(
        "from toolplan.builtin import WebSearchTools\n\nTOOLS = [WebSearchTools()]  # SEARXNG_URL\n",
        encoding="utf-8",
    )
    plan = {"steps": [{"id": "q", "tool": "web_search", "arguments": {"query": "toolplan", "limit": 1}}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SEARXNG_URL": server.url}
    env.pop("BRAVE_SEARCH_API_KEY", None)
    env.pop("TOOLPLAN_WEBSEARCH", None)
    command = [sys.executable, "-m", "toolplan", "run", "plan.json", "--tools", "tools.py:TOOLS", "--json"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert [hit["url"] for hit in json.loads(done.stdout)["outputs"]["q"]] == ["https://example.net/x"]
