"""HttpTools against a real HTTP server on 127.0.0.1: allow-list, private addresses, redirects, limits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from builtin_support import make_tls
from http_server import Server, serve

from toolplan import ToolError, UserError, execute_plan
from toolplan.builtin import HttpTools


def local(server: Server, **options: Any) -> HttpTools:
    """Tools allowed to reach the test server (on loopback, so private networks must be allowed)."""
    return HttpTools(allow_hosts=[f"127.0.0.1:{server.port}"], allow_private_networks=True, **options)


# -- the happy paths ---------------------------------------------------------------------------------
async def test_get_json_text_and_binary(server: Server) -> None:
    http = local(server)
    got = await http.http_get(server.url("/json"))
    assert got["status"] == 200 and got["json"] == {"ok": True, "items": [1, 2, 3]} and not got["truncated"]
    assert got["content_type"] == "application/json" and "text" not in got
    text = await http.http_get(server.url("/text"))
    assert text["text"] == "héllo" and "json" not in text
    binary = await http.http_get(server.url("/binary"))
    assert "base64" in binary and binary["bytes"] == 256


async def test_params_headers_and_post_bodies(server: Server) -> None:
    http = local(server, headers={"Authorization": "Bearer dev-key"})
    got = await http.http_get(server.url("/echo"), params={"q": "a b"}, headers={"X-Trace": "1"})
    echo = got["json"]
    assert echo["query"] == {"q": "a b"} and echo["headers"]["x-trace"] == "1"
    assert echo["headers"]["authorization"] == "Bearer dev-key"
    assert echo["headers"]["host"] == f"127.0.0.1:{server.port}"
    posted = (await http.http_post(server.url("/echo"), body={"n": 1}))["json"]
    assert posted["method"] == "POST" and posted["body"] == '{"n": 1}'
    assert posted["headers"]["content-type"] == "application/json"
    raw = (await http.http_post(server.url("/echo"), body="plain", content_type="text/csv"))["json"]
    assert raw["body"] == "plain" and raw["headers"]["content-type"] == "text/csv"


async def test_deflate_is_decoded(server: Server) -> None:
    got = await local(server).http_get(server.url("/deflate"))
    assert got["text"] == "deflated text"


async def test_annotations() -> None:
    http = HttpTools(allow_hosts=["api.example.com"])
    by_name = {d.name: d.annotations for d in http.definitions()}
    assert by_name["http_get"].read_only and by_name["http_get"].idempotent and not by_name["http_get"].destructive
    assert not by_name["http_post"].read_only and not by_name["http_post"].idempotent
    assert by_name["http_post"].destructive
    assert [d.name for d in HttpTools(read_only=True).definitions()] == ["http_get"]
    assert [d.name for d in HttpTools(prefix="web_").definitions()] == ["web_http_get", "web_http_post"]


async def test_in_a_plan(server: Server) -> None:
    plan = {
        "steps": [
            {"id": "get", "tool": "http_get", "arguments": {"url": server.url("/json")}},
            {"id": "echo", "tool": "http_post", "arguments": {"url": server.url("/echo"), "body": "$ref:get.json"}},
        ],
        "output_steps": ["echo"],
    }
    result = await execute_plan(plan, [local(server)])
    assert result.ok, result.steps
    assert result.outputs["echo"]["json"]["body"] == '{"ok": true, "items": [1, 2, 3]}'


async def test_https_pins_the_address_and_verifies_the_name(tmp_path: Path) -> None:
    server_ctx, client_ctx = make_tls(tmp_path, "localhost")
    names: list[str | None] = []
    server_ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)
    async with serve(server_ctx) as tls:
        http = HttpTools(allow_hosts=[f"localhost:{tls.port}"], allow_private_networks=True, verify=client_ctx)
        got = await http.http_get(tls.url("/json", host="localhost"))
        assert got["json"]["ok"] is True
        assert names == ["localhost"]  # SNI is the name; the connection went to the address that was checked
        assert tls.requests[-1].headers["host"] == f"localhost:{tls.port}"
        # The certificate is for "localhost": the same server by address does not pass verification.
        by_address = HttpTools(allow_hosts=[f"127.0.0.1:{tls.port}"], allow_private_networks=True, verify=client_ctx)
        with pytest.raises(ConnectionError):
            await by_address.http_get(tls.url("/json"))


# -- the allow-list ----------------------------------------------------------------------------------
async def test_nothing_is_allowed_by_default(server: Server) -> None:
    with pytest.raises(ToolError, match=r"no host is allowed at all.*HttpTools\(allow_hosts="):
        await HttpTools().http_get(server.url("/json"))
    assert server.requests == []


async def test_a_host_not_on_the_list_is_refused(server: Server) -> None:
    http = HttpTools(allow_hosts=["api.example.com", "*.example.org"], allow_private_networks=True)
    with pytest.raises(ToolError, match=r"127\.0\.0\.1:\d+ are not allowed; allowed hosts: api\.example\.com"):
        await http.http_get(server.url("/json"))
    other_port = HttpTools(allow_hosts=["127.0.0.1:1"], allow_private_networks=True)
    with pytest.raises(ToolError, match="not allowed"):
        await other_port.http_get(server.url("/json"))
    assert server.requests == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1:70/", "http:///nohost"])
async def test_other_schemes_and_hostless_urls_are_refused(url: str) -> None:
    with pytest.raises(ToolError):
        await HttpTools(allow_hosts=["*"], allow_private_networks=True).http_get(url)


def test_bad_allow_list_entries_are_developer_errors() -> None:
    for entry in ["http://example.com/", "user@example.com", "exa mple.com", "", "a/b"]:
        with pytest.raises(UserError):
            HttpTools(allow_hosts=[entry])


async def test_private_addresses_are_refused_unless_allowed(server: Server) -> None:
    for host in ("127.0.0.1", "localhost"):
        http = HttpTools(allow_hosts=[f"{host}:{server.port}"])
        with pytest.raises(ToolError, match=r"resolves to 127\.0\.0\.1, a loopback, private.*allow_private_networks"):
            await http.http_get(server.url("/json", host=host))
    wildcard = HttpTools(allow_hosts=["*"])  # any public host: still not this machine
    for url in (server.url("/json"), f"http://[::1]:{server.port}/", "http://10.0.0.1/", "http://169.254.169.254/"):
        with pytest.raises(ToolError, match="non-public address"):
            await wildcard.http_get(url)
    with pytest.raises(ToolError, match="non-public address"):  # an IPv4 address mapped into IPv6
        await wildcard.http_get("http://[::ffff:127.0.0.1]/")
    assert server.requests == []


# -- redirects ---------------------------------------------------------------------------------------
async def test_a_redirect_is_followed_and_rechecked(server: Server) -> None:
    http = local(server)
    got = await http.http_get(server.url(f"/redirect?to={server.url('/json')}"))
    assert got["json"]["ok"] is True and got["redirects"] == [server.url("/json")]


async def test_a_redirect_to_a_forbidden_host_is_not_followed(server: Server) -> None:
    async with serve() as forbidden:
        http = local(server)
        target = forbidden.url("/json")  # same address, another port: not on the list
        with pytest.raises(ToolError, match=r"A redirect from .*: Requests to 127\.0\.0\.1:\d+ are not allowed"):
            await http.http_get(server.url(f"/redirect?to={target}"))
        assert forbidden.requests == []
    with pytest.raises(ToolError, match="not an http or https URL"):
        await http.http_get(server.url("/redirect?to=file:///etc/passwd"))
    public_only = HttpTools(allow_hosts=["*"])
    with pytest.raises(ToolError, match="non-public address"):  # a redirect to the loopback is refused
        await public_only.http_get(server.url("/json"))


async def test_redirect_loops_stop(server: Server) -> None:
    with pytest.raises(ToolError, match="redirected more than 3 times"):
        await local(server, max_redirects=3).http_get(server.url("/loop"))
    assert len(server.requests) == 4


async def test_credentials_do_not_follow_a_redirect_to_another_origin(server: Server) -> None:
    http = HttpTools(
        allow_hosts=[f"127.0.0.1:{server.port}", f"localhost:{server.port}"],
        allow_private_networks=True,
        headers={"Authorization": "Bearer secret"},
    )
    await http.http_get(server.url(f"/redirect?to={server.url('/echo', host='localhost')}"))
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer secret"
    assert "authorization" not in second.headers and second.headers["host"] == f"localhost:{server.port}"


async def test_no_policy_or_call_header_follows_a_redirect_to_another_origin(server: Server) -> None:
    http = HttpTools(
        allow_hosts=[f"127.0.0.1:{server.port}", f"localhost:{server.port}"],
        allow_private_networks=True,
        headers={"X-API-Key": "policy-secret", "Accept": "application/json"},
        forward_headers=["accept", "X-Trace"],
    )
    call = {"X-Model-Key": "call-secret", "X-Trace": "t1"}
    await http.http_post(
        server.url(f"/redirect?status=307&to={server.url('/echo', host='localhost')}"), body={"a": 1}, headers=call
    )
    first, second = server.requests
    assert first.headers["x-api-key"] == "policy-secret" and first.headers["x-model-key"] == "call-secret"
    assert "x-api-key" not in second.headers and "x-model-key" not in second.headers
    assert second.headers["accept"] == "application/json" and second.headers["x-trace"] == "t1"
    assert second.headers["content-type"] == "application/json"  # the body's type goes with the body
    same_origin = local(server, headers={"X-API-Key": "policy-secret"})
    got = await same_origin.http_get(server.url(f"/redirect?to={server.url('/echo')}"))
    assert got["json"]["headers"]["x-api-key"] == "policy-secret"  # the same origin keeps everything


def test_forward_headers_must_be_header_names() -> None:
    with pytest.raises(UserError, match="forward_headers"):
        HttpTools(allow_hosts=["api.example.com"], forward_headers=["bad name"])


async def test_ipv6_forms_of_private_ipv4_addresses_are_refused() -> None:
    wildcard = HttpTools(allow_hosts=["*"])
    for host in (
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::a9fe:a9fe",  # a local-use NAT64 prefix
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:c0a8:101::",  # 6to4 of 192.168.1.1
        "::10.0.0.1",  # IPv4-compatible
        "::127.0.0.1",
        "::ffff:0:10.0.0.1",  # IPv4-translated
        "::ffff:0:169.254.169.254",
    ):
        with pytest.raises(ToolError, match="non-public address"):
            await wildcard.http_get(f"http://[{host}]/")


@pytest.mark.parametrize(("status", "method", "body"), [(303, "GET", ""), (302, "GET", ""), (307, "POST", "x")])
async def test_post_redirects(server: Server, status: int, method: str, body: str) -> None:
    http = local(server)
    got = await http.http_post(server.url(f"/redirect?status={status}&to=/echo"), body="x")
    assert got["json"]["method"] == method and got["json"]["body"] == body


# -- size, time, status ------------------------------------------------------------------------------
async def test_a_huge_response_is_cut(server: Server) -> None:
    got = await local(server, max_response_bytes=100_000).http_get(server.url("/huge"))
    assert got["truncated"] and got["bytes"] == 100_000 and got["text"] == "x" * 100_000


async def test_a_compression_bomb_is_cut(server: Server) -> None:
    got = await local(server, max_response_bytes=1_000_000).http_get(server.url("/gzip-bomb"))
    assert got["truncated"] and got["bytes"] == 1_000_000


async def test_an_unknown_content_encoding_is_refused(server: Server) -> None:
    with pytest.raises(ToolError, match="content-encoding 'br'"):
        await local(server).http_get(server.url("/brotli"))


async def test_a_slow_body_hits_the_deadline(server: Server) -> None:
    http = local(server, timeout=0.5)
    with pytest.raises(TimeoutError, match=r"No complete response .* within 0\.5 s"):
        await http.http_get(server.url("/drip"))
    assert server.streaming.is_set()


async def test_status_errors(server: Server) -> None:
    http = local(server)
    with pytest.raises(ToolError, match=r"answered 404 .*nope"):
        await http.http_get(server.url("/status?code=404"))
    with pytest.raises(httpx.HTTPStatusError, match="answered 503"):
        await http.http_get(server.url("/status?code=503"))
    got = await http.http_get(server.url("/status?code=404"), check_status=False)
    assert got["status"] == 404 and got["json"] == {"error": "nope"}


async def test_status_errors_in_a_plan_are_business_and_infrastructure(server: Server) -> None:
    plan = {
        "steps": [
            {"id": "missing", "tool": "http_get", "arguments": {"url": server.url("/status?code=404")}},
            {"id": "down", "tool": "http_get", "arguments": {"url": server.url("/status?code=503")}},
            {"id": "forbidden", "tool": "http_get", "arguments": {"url": "http://example.com/"}},
        ]
    }
    result = await execute_plan(plan, [local(server)], retry_delay=0)
    kinds = {sid: step.error.kind if step.error else None for sid, step in result.steps.items()}
    assert kinds == {"missing": "business", "down": "infrastructure", "forbidden": "business"}
    assert result.steps["down"].attempts == 3  # http_get is idempotent: retried twice
    assert result.steps["forbidden"].attempts == 1


@pytest.mark.parametrize(
    "headers", [{"Host": "evil.com"}, {"X-A": "a\r\nInjected: 1"}, {"Bad Name": "x"}, {"Transfer-Encoding": "chunked"}]
)
async def test_hostile_request_headers_are_refused(server: Server, headers: dict[str, str]) -> None:
    with pytest.raises(ToolError):
        await local(server).http_get(server.url("/echo"), headers=headers)
    assert server.requests == []


async def test_request_body_limit(server: Server) -> None:
    with pytest.raises(ToolError, match="request body is 11 bytes; the limit is 10"):
        await local(server, max_request_bytes=10).http_post(server.url("/echo"), body="x" * 11)


async def test_calls_run_concurrently(server: Server) -> None:
    http = local(server)
    results = await asyncio.gather(*(http.http_get(server.url("/json")) for _ in range(10)))
    assert all(r["status"] == 200 for r in results)
