"""The result cache from the command line: ``run --cache``, ``serve --cache-ttl``, ``keys create --cache-ttl``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import Calls, Cli, WritePlan

from toolplan.store import open_store

CACHE_TOOLS = '''
import os

from toolplan import tool


def _record(name: str) -> None:
    with open(os.environ["TOOLPLAN_TEST_CALLS"], "a", encoding="utf-8") as f:
        f.write(name + "\\n")


@tool(read_only=True)
def weather(city: str) -> dict:
    """The weather of a city."""
    _record(city)
    return {"city": city, "temp": 21}


@tool
def book(city: str) -> str:
    """Book a trip (changes something: never cached)."""
    _record("book")
    return f"booked {city}"
'''

OSLO = {"id": "a", "tool": "weather", "arguments": {"city": "Oslo"}}


@pytest.fixture
def cache_tools(tmp_path: Path) -> Path:
    path = tmp_path / "cache_tools.py"
    path.write_text(CACHE_TOOLS, encoding="utf-8")
    return path


def _steps(done: Any) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in done.json()["steps"]}


async def test_run_cache_store_answers_a_later_run_from_the_database(
    cli: Cli, cache_tools: Path, write_plan: WritePlan, tool_calls: Calls, tmp_path: Path
) -> None:
    plan = write_plan([OSLO, {"id": "b", "tool": "book", "arguments": {"city": "$ref:a.city"}}])
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    args = ("run", str(plan), "--tools", str(cache_tools), "--db", db, "--cache", "store", "--json")
    first = cli(*args)
    second = cli(*args)
    assert first.code == 0 and second.code == 0, second.stderr
    assert tool_calls() == ["Oslo", "book", "book"]  # the read_only call once; book every time
    assert not _steps(first)["a"]["cached"] and _steps(second)["a"]["cached"]
    assert _steps(second)["a"]["output"] == {"city": "Oslo", "temp": 21} and not _steps(second)["b"]["cached"]
    async with open_store(db) as store:  # the stored record and event say so, as for any cached step
        run_id = second.json()["run_id"]
        info = await store.get_run(run_id)
        events = [e.type for e in await store.events(run_id)]
    assert info.result.steps["a"].cached and "cache_hit" in events


def test_run_cache_memory_answers_a_later_step_of_the_same_command(
    cli: Cli, cache_tools: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    # weather is read_only but not idempotent: the two calls are not shared, the cache answers the later one
    plan = write_plan([OSLO, {**OSLO, "id": "b", "after": ["a"]}])
    plain = cli("run", str(plan), "--tools", str(cache_tools), "--json")
    assert plain.code == 0 and tool_calls() == ["Oslo", "Oslo"]
    cached = cli("run", str(plan), "--tools", str(cache_tools), "--json", "--cache", "memory", "--cache-ttl", "30")
    assert cached.code == 0, cached.stderr
    assert tool_calls() == ["Oslo", "Oslo", "Oslo"] and _steps(cached)["b"]["cached"]
    table = cli("run", str(plan), "--tools", str(cache_tools), "--cache", "memory")
    assert table.code == 0 and any(line.startswith("b    │ weather │ cached ") for line in table.stdout.splitlines())
    assert "Plan succeeded: 2 succeeded (1 answered from the cache, not called) in " in table.stdout


def test_run_cache_tool_sets_a_tool_ttl_and_zero_turns_it_off(
    cli: Cli, cache_tools: Path, write_plan: WritePlan, tool_calls: Calls
) -> None:
    plan = write_plan([OSLO, {**OSLO, "id": "b", "after": ["a"]}])
    off = cli("run", str(plan), "--tools", str(cache_tools), "--json", "--cache", "memory", "--cache-tool", "weather=0")
    assert off.code == 0 and tool_calls() == ["Oslo", "Oslo"] and not _steps(off)["b"]["cached"]
    only = cli(
        "run", str(plan), "--tools", str(cache_tools), "--json",
        "--cache", "memory", "--cache-ttl", "0", "--cache-tool", "weather=60",
    )  # fmt: skip
    assert only.code == 0 and _steps(only)["b"]["cached"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--cache", "store"], "Error: --cache store keeps results in the run's database: add --db URL"),
        (["--cache-ttl", "5"], "Error: --cache-ttl and --cache-tool go with --cache"),
        (["--cache-tool", "weather=5"], "Error: --cache-ttl and --cache-tool go with --cache"),
        (["--cache", "memory", "--cache-ttl", "-1"], "Error: --cache-ttl must be a finite number of seconds >= 0"),
        (["--cache", "memory", "--cache-tool", "weather"], "Error: --cache-tool takes TOOL=SECONDS"),
        (["--cache", "memory", "--cache-tool", "weather=nan"], "Error: --cache-tool 'weather' must be a finite"),
        (["--cache", "memory", "--cache-tool", "book=60"], "tool 'book', which is not marked read_only"),
        (["--cache", "memory", "--dry-run"], "Error: --dry-run calls no tool, so --cache would do nothing"),
        (["--cache", "disk"], "'disk' is not one of"),
    ],
)
def test_run_cache_options_are_checked_before_any_call(
    cli: Cli, cache_tools: Path, write_plan: WritePlan, tool_calls: Calls, extra: list[str], message: str
) -> None:
    done = cli("run", str(write_plan([OSLO])), "--tools", str(cache_tools), *extra)
    assert done.code == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and tool_calls() == []


# -- the service -------------------------------------------------------------------------------------


@contextlib.contextmanager
def _serving(cwd: Path, calls: Path, *args: str) -> Iterator[str]:
    """``toolplan serve ARGS`` on a free port of 127.0.0.1, until it answers; its base URL. Stopped after."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TOOLPLAN_TEST_CALLS": str(calls)}
    command = [sys.executable, "-m", "toolplan", "serve", *args, "--no-scheduler", "--port", str(port)]
    with (cwd / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((cwd / "serve.log").read_text(errors="replace")) from None
                time.sleep(0.05)  # polling a port that is not open yet: there is no event to wait on
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def _execute(url: str, secret: str, plan_id: str) -> dict[str, Any]:
    """The steps of a new execution of ``plan_id`` by key ``secret`` (by id), and its ``execution_id``."""
    import httpx

    headers = {"X-API-Key": secret}
    done = httpx.post(f"{url}/v1/plans/{plan_id}/executions?wait=30", headers=headers, timeout=60)
    assert done.status_code == 200 and done.json()["status"] == "succeeded", done.text
    return {"execution_id": done.json()["execution_id"], **{s["id"]: s for s in done.json()["steps"]}}


def test_a_key_made_with_cache_ttl_has_its_executions_answered_from_the_store_cache(
    cli: Cli, cache_tools: Path, tool_calls: Calls, calls_file: Path, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn", reason="toolplan serve needs toolplan[service]")
    import httpx

    db = f"sqlite:///{tmp_path / 'service.db'}"
    made = cli("keys", "create", "cached", "--db", db, "--cache-ttl", "300", "--json")
    assert made.code == 0, made.stderr
    cached = made.json()
    assert cached["cache_ttl"] == 300
    plain = cli("keys", "create", "plain", "--db", db, "--json").json()
    assert plain["cache_ttl"] is None
    listed = {k["name"]: k["cache_ttl"] for k in cli("keys", "list", "--db", db, "--json").json()}
    assert listed == {"cached": 300, "plain": None}
    table = cli("keys", "list", "--db", db)
    assert "cache" in table.stdout and "300s" in table.stdout and "service's" in table.stdout
    with _serving(tmp_path, calls_file, "--tools", str(cache_tools), "--db", db) as url:
        posted = httpx.post(
            f"{url}/v1/plans", json={"plan": {"steps": [OSLO]}}, headers={"X-API-Key": plain["secret"]}, timeout=30
        )
        assert posted.status_code == 201, posted.text
        plan_id = posted.json()["plan_id"]
        assert not _execute(url, plain["secret"], plan_id)["a"]["cached"]  # no cache for this key: not kept
        assert not _execute(url, cached["secret"], plan_id)["a"]["cached"]  # a miss: kept now
        again = _execute(url, cached["secret"], plan_id)
        assert again["a"]["cached"] and again["a"]["output"] == {"city": "Oslo", "temp": 21}
        assert not _execute(url, plain["secret"], plan_id)["a"]["cached"]  # the service keeps none for it
    assert tool_calls() == ["Oslo", "Oslo", "Oslo"]
    events = asyncio.run(_event_types(db, again["execution_id"]))  # the hit is an event, as in any cached run
    assert "cache_hit" in events and "step_started" not in events


async def _event_types(db: str, run_id: str) -> list[str]:
    async with open_store(db) as store:
        return [e.type for e in await store.events(run_id)]


def test_serve_cache_ttl_is_the_service_default_and_a_key_may_turn_it_off(
    cache_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi")
    from typer.testing import CliRunner

    import toolplan.cli._serve
    import toolplan.service
    from toolplan.cli import app

    seen: dict[str, Any] = {}

    @functools.wraps(toolplan.service.serve)  # the same signature: serve reads its defaults from it
    async def fake_serve(store: Any, tools: Any, **options: Any) -> None:
        seen.update(options)

    monkeypatch.setattr(toolplan.service, "serve", fake_serve)
    monkeypatch.setattr(toolplan.cli._serve, "_check_port", lambda host, port: None)
    keys = tmp_path / "keys.txt"
    keys.write_text("a-test-key\n", encoding="utf-8")
    args = ["serve", "--tools", str(cache_tools), "--db", str(tmp_path / "s.db"), "--api-key-file", str(keys)]
    result = CliRunner().invoke(app, [*args, "--no-scheduler", "--cache-ttl", "120"])
    assert result.exit_code == 0, result.output
    assert seen["config"].cache_ttl == 120
    for value in ("nan", "-1"):
        bad = CliRunner().invoke(app, [*args, "--no-scheduler", "--cache-ttl", value])
        assert bad.exit_code == 2 and "Invalid value for '--cache-ttl'" in bad.output
    off = CliRunner().invoke(app, ["keys", "create", "off", "--db", str(tmp_path / "s.db"), "--cache-ttl", "0"])
    assert off.exit_code == 0, off.output


async def test_the_service_default_ttl_and_a_key_turned_off(cache_tools: Path, tmp_path: Path) -> None:
    """The runner's cache: the key's setting wins; a key without one (or of --api-key-file) gets the service's."""
    from toolplan import UserError
    from toolplan.service import ServiceConfig
    from toolplan.service._cache import cache_of, key_of
    from toolplan.service._internal import ServiceStore

    async def cache_for(store: Any, run_id: str, default_ttl: float | None) -> Any:
        _key, ttl = await key_of(store, run_id)  # as the runner makes an execution's cache
        return cache_of(store, ttl, default_ttl)

    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        data = ServiceStore(store)
        off, _ = await data.create_key("off", cache_ttl=0)
        plain, _ = await data.create_key("plain")
        plan = {"steps": [OSLO]}
        for run_id, key in (("r-off", off.key_id), ("r-plain", plain.key_id), ("r-file", "file1")):
            await store.submit(plan, run_id=run_id)
            await _set_key(store, run_id, key)
        assert await cache_for(store, "r-off", 120) is None
        by_service = await cache_for(store, "r-plain", 120)
        assert by_service is not None and by_service.ttl == 120 and by_service.store is store
        file_key = await cache_for(store, "r-file", 120)
        assert file_key is not None and file_key.ttl == 120
        assert await cache_for(store, "r-plain", None) is None
        with pytest.raises(UserError, match="cache_ttl must be a finite number of seconds >= 0"):
            await data.create_key("bad", cache_ttl=float("nan"))
    with pytest.raises(UserError, match=r"ServiceConfig\.cache_ttl must be seconds >= 0"):
        ServiceConfig(cache_ttl=-1)


async def _set_key(store: Any, run_id: str, key: str) -> None:
    import sqlalchemy as sa

    from toolplan.store import _internal as t

    def write(engine: sa.Engine) -> None:
        with engine.begin() as conn:
            conn.execute(sa.update(t.executions).where(t.executions.c.id == run_id).values(api_key=key))

    await store.db.transact(write)


def test_keys_create_refuses_a_bad_cache_ttl(cli: Cli, tmp_path: Path) -> None:
    done = cli("keys", "create", "x", "--db", f"sqlite:///{tmp_path / 'k.db'}", "--cache-ttl", "-5")
    assert done.code == 2 and "--cache-ttl" in done.stderr and "Traceback" not in done.stderr
