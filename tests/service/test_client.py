"""`toolplan.client` against a real uvicorn server on 127.0.0.1 and a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from svc_support import ProcessServer, ThreadServer, make_key

import toolplan
from toolplan.client import (
    AsyncClient,
    Client,
    Event,
    Execution,
    RetryPolicy,
    ServiceError,
    StoredPlan,
)
from toolplan.models import AssistantMessage, ToolCall
from toolplan.planner import SUBMIT_TOOL_NAME
from toolplan.testing import ScriptedModel

CHAIN = {
    "steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "arguments": {"a": "$ref:a", "b": 10}},
    ],
    "output_steps": ["b"],
}
GATED = {
    "steps": [
        {"id": "first", "tool": "charge", "arguments": {"amount": 5}},
        {"id": "wait", "tool": "gate", "arguments": {"name": "open"}, "depends_on": ["first"]},
        {"id": "last", "tool": "add", "arguments": {"a": 1, "b": 1}, "depends_on": ["wait"]},
    ]
}
FAST = RetryPolicy(attempts=3, reconnects=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def client(server: ThreadServer) -> Iterator[Client]:
    with Client(server.url, server.key, retry=FAST) as c:
        yield c


def _submit(plan: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id="p1", name=SUBMIT_TOOL_NAME, arguments=json.dumps(plan)),))


def _all_events(c: Client, execution_id: str, after: int = 0) -> list[Event]:
    return list(c.events(execution_id, after=after))


# -- every operation -------------------------------------------------------------------------------


def test_plans_are_created_read_and_listed_across_pages(client: Client) -> None:
    stored = client.create_plan(CHAIN)
    assert isinstance(stored, StoredPlan) and stored.plan_id.startswith("plan_")
    assert stored.plan == CHAIN and stored.dialect == "native" and stored.valid and stored.warnings == ()
    again = client.get_plan(stored.plan_id)
    assert again.plan == CHAIN and again.created_at is not None and again.request_id is None
    ids = [stored.plan_id] + [client.create_plan(CHAIN).plan_id for _ in range(4)]
    assert len(set(ids)) == 5  # a fresh Idempotency-Key per call: five plans, not one
    listed = list(client.list_plans(page_size=2))  # three pages
    assert [p.plan_id for p in listed] == ids[::-1]
    assert all(p.valid and p.dialect == "native" for p in listed)
    plan_ir = toolplan.parse_plan(CHAIN)
    assert client.create_plan(plan_ir).plan == CHAIN  # a toolplan.Plan is sent as its dict


def test_execute_wait_get_and_list_executions(client: Client, gates: Path) -> None:
    plan_id = client.create_plan(CHAIN).plan_id
    done = client.execute(plan_id, wait=30)
    assert isinstance(done, Execution) and done.ok and done.finished and done.plan_id == plan_id
    assert done.outputs == {"b": 13} and [s.output for s in done.steps] == [3, 13]
    assert done.step("b").tool == "add" and done.step("b").ok and done.step("b").attempts == 1
    assert client.get_execution(done.execution_id) == done
    gated = client.create_plan(GATED).plan_id
    queued = client.execute(gated)
    assert queued.status == "queued" and queued.steps == () and not queued.finished
    ids = [done.execution_id, queued.execution_id] + [client.execute(plan_id).execution_id for _ in range(3)]
    listed = list(client.list_executions(page_size=2))
    assert [e.execution_id for e in listed] == ids[::-1]
    assert [e.execution_id for e in client.list_executions(plan_id=gated)] == [queued.execution_id]
    (gates / "open").touch()
    finished = client.execute(gated, wait=30, idempotency_key="same")  # a new execution, waited for
    assert finished.ok and finished.outputs == {"first": "charged 5", "wait": "passed open", "last": 2}
    assert client.get_execution(queued.execution_id).status in ("queued", "running", "succeeded")
    _all_events(client, queued.execution_id)  # ends once it has finished
    succeeded = {e.execution_id for e in client.list_executions(status="succeeded", page_size=3)}
    assert succeeded >= {done.execution_id, queued.execution_id, finished.execution_id}


def test_a_step_reads_as_the_record_the_store_keeps_but_its_arguments(server: ThreadServer, client: Client) -> None:
    import asyncio
    import dataclasses

    from toolplan.store import open_store

    done = client.execute(client.create_plan(CHAIN).plan_id, wait=30)

    async def stored() -> list[toolplan.StepResult]:
        async with open_store(server.db_url) as store:
            return list((await store.get_run(done.execution_id)).result.steps.values())

    records = asyncio.run(stored())
    assert [r.arguments for r in records] == [{"a": 1, "b": 2}, {"a": 3, "b": 10}]
    assert list(done.steps) == [dataclasses.replace(r, arguments=None) for r in records]  # every other field


def test_events_come_in_order_and_after_a_number(client: Client, gates: Path) -> None:
    execution = client.execute(client.create_plan(GATED).plan_id)
    seen: list[Event] = []
    for event in client.events(execution.execution_id):
        seen.append(event)
        if event.type == "step_started" and event.step_id == "wait":
            (gates / "open").touch()
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert seen[0].type == "plan_started" and seen[-1].final and seen[-1].payload == {"status": "succeeded"}
    assert {e.step_id for e in seen if e.type == "step_finished"} == {"first", "wait", "last"}
    assert _all_events(client, execution.execution_id, after=3) == seen[3:]
    assert _all_events(client, execution.execution_id, after=seen[-1].seq) == []  # finished: nothing later


def test_cancel_then_resume(client: Client, gates: Path, tmp_path: Path) -> None:
    execution_id = client.execute(client.create_plan(GATED).plan_id).execution_id
    for event in client.events(execution_id):
        if event.type == "step_started" and event.step_id == "wait":
            break
    assert client.cancel(execution_id) in ("cancelling", "cancelled")
    stopped = _all_events(client, execution_id)
    assert stopped[-1].payload == {"status": "cancelled"}
    assert client.get_execution(execution_id).status == "cancelled"
    (gates / "open").touch()
    assert client.resume(execution_id) == "queued"
    rest = _all_events(client, execution_id, after=stopped[-1].seq)
    assert rest[-1].payload == {"status": "succeeded"} and rest[0].seq == stopped[-1].seq + 1
    final = client.get_execution(execution_id)
    assert final.ok and final.step("first").attempts == 1 and (tmp_path / "ledger.txt").read_text() == "5\n"
    assert [final.step(sid).reused for sid in ("first", "wait", "last")] == [True, False, False]
    with pytest.raises(ServiceError) as info:
        client.resume(execution_id)
    assert info.value.code == "run_conflict" and info.value.status == 409


def test_plan_a_question_then_run_it_by_request_id(db_url: str, gates: Path) -> None:
    wrong = {"steps": [{"id": "a", "tool": "ad", "arguments": {"a": 1, "b": 2}}]}
    right = {"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]}
    server = ThreadServer(db_url, model=ScriptedModel([_submit(wrong), _submit(right)])).start()
    try:
        with Client(server.url, server.key, retry=FAST) as c:
            planned = c.plan("What is 1 + 2?")
            assert planned.repaired and planned.usage.requests == 2 and planned.plan == right
            assert planned.parent_id is not None and planned.request_id.startswith("req_")
            request = c.get_request(planned.request_id)
            assert request.query == "What is 1 + 2?" and request.plan_id == planned.plan_id
            assert [v.plan_id for v in request.versions] == [planned.parent_id, planned.plan_id]
            assert not request.versions[0].valid and request.versions[0].issues[0].code == "unknown_tool"
            assert request.versions[1].parent_id == planned.parent_id and request.versions[1].valid
            assert [r.request_id for r in c.list_requests()] == [planned.request_id]
            assert {p.plan_id for p in c.list_plans(request_id=planned.request_id)} == {
                planned.parent_id,
                planned.plan_id,
            }
            execution = c.execute_request(planned.request_id, wait=30)
            assert execution.ok and execution.outputs == {"a": 3} and execution.plan_id == planned.plan_id
    finally:
        server.stop()


# -- errors ----------------------------------------------------------------------------------------


def test_error_answers_raise_service_error_with_the_code(server: ThreadServer, client: Client) -> None:
    with pytest.raises(ServiceError) as info:
        client.get_execution("exec_nope")
    error = info.value
    assert (error.code, error.status) == ("run_not_found", 404) and "exec_nope" in error.message
    assert isinstance(error, toolplan.ToolplanError) and toolplan.ServiceError is ServiceError
    assert str(error).startswith("[404 run_not_found] ")
    with pytest.raises(ServiceError) as info:
        client.create_plan({"steps": [{"id": "a", "tool": "nope", "arguments": {}}]})
    assert info.value.code == "invalid_plan" and info.value.status == 422
    assert info.value.details[0]["code"] == "unknown_tool"
    with pytest.raises(ServiceError) as info:
        client.plan("hello?")
    assert info.value.code == "no_model" and info.value.status == 503  # not retried: it needs configuring
    with pytest.raises(ServiceError) as info:
        list(client.events("exec_nope"))
    assert info.value.code == "run_not_found"
    with Client(server.url, "tpk_wrong_key", retry=FAST) as bad, pytest.raises(ServiceError) as info:
        bad.get_plan("plan_x")
    assert info.value.code == "unauthorized" and info.value.status == 401
    with pytest.raises(toolplan.UserError):
        client.execute("", wait=1)
    with pytest.raises(toolplan.UserError):
        client.list_executions(page_size=0)


def test_no_answer_is_service_error_unreachable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    with Client(f"http://127.0.0.1:{port}", "tpk_x_y", retry=RetryPolicy(attempts=2, backoff=0)) as c:
        with pytest.raises(ServiceError) as info:
            c.get_execution("exec_1")
        assert info.value.code == "unreachable" and info.value.status is None and "2 tries" in info.value.message
        with pytest.raises(ServiceError) as info:
            list(c.events("exec_1"))
        assert info.value.code == "stream_lost" and info.value.details == {"execution_id": "exec_1", "last_event_id": 0}


async def test_no_answer_is_service_error_unreachable_for_the_async_client_too() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    async with AsyncClient(f"http://127.0.0.1:{port}", "tpk_x_y", retry=RetryPolicy(attempts=2, backoff=0)) as c:
        with pytest.raises(ServiceError) as info:
            await c.get_execution("exec_1")
        assert info.value.code == "unreachable" and "2 tries" in info.value.message
        with pytest.raises(ServiceError) as info:
            [e async for e in c.events("exec_1", after=4)]
        assert info.value.code == "stream_lost" and info.value.details == {"execution_id": "exec_1", "last_event_id": 4}
        assert "after=4" in info.value.message


# -- idempotency on retries ------------------------------------------------------------------------


class DropFirstAnswer(httpx.HTTPTransport):
    """Sends every request, but loses the first answer to a POST whose path ends with ``suffix``."""

    def __init__(self, suffix: str) -> None:
        super().__init__()
        self.suffix = suffix
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith(self.suffix):
            self.keys.append(request.headers.get("Idempotency-Key"))
            if len(self.keys) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("connection lost before the answer", request=request)
        return response


def test_a_retried_post_runs_once_with_the_same_key(server: ThreadServer) -> None:
    transport = DropFirstAnswer("/executions")
    with Client(server.url, server.key, retry=FAST, transport=transport) as c:
        plan_id = c.create_plan(CHAIN).plan_id
        execution = c.execute(plan_id, wait=30)
        assert execution.ok
        assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1] is not None
        assert [e.execution_id for e in c.list_executions()] == [execution.execution_id]  # one, not two
        c.execute(plan_id)
        assert transport.keys[2] != transport.keys[0]  # each call its own key


# -- asyncio ---------------------------------------------------------------------------------------


async def test_async_client_has_every_operation(server: ThreadServer, gates: Path) -> None:
    async with AsyncClient(server.url, server.key, retry=FAST) as c:
        stored = await c.create_plan(CHAIN, idempotency_key="p-1")
        assert (await c.create_plan(CHAIN, idempotency_key="p-1")).plan_id == stored.plan_id
        assert (await c.get_plan(stored.plan_id)).plan == CHAIN
        assert [p.plan_id async for p in c.list_plans(page_size=1)] == [stored.plan_id]
        done = await c.execute(stored.plan_id, wait=30)
        assert done.ok and done.outputs == {"b": 13} and await c.get_execution(done.execution_id) == done
        gated = await c.execute((await c.create_plan(GATED)).plan_id)
        seen: list[Event] = []
        async for event in c.events(gated.execution_id):
            seen.append(event)
            if event.type == "step_started" and event.step_id == "wait":
                assert await c.cancel(gated.execution_id) in ("cancelling", "cancelled")
        assert seen[-1].payload == {"status": "cancelled"}
        (gates / "open").touch()
        assert await c.resume(gated.execution_id) == "queued"
        rest = [e async for e in c.events(gated.execution_id, after=seen[-1].seq)]
        assert [e.seq for e in rest] == list(range(seen[-1].seq + 1, seen[-1].seq + 1 + len(rest)))
        assert rest[-1].payload == {"status": "succeeded"}
        listed = [e.execution_id async for e in c.list_executions(page_size=1)]
        assert listed == [gated.execution_id, done.execution_id]
        assert [e.execution_id async for e in c.list_executions(status="succeeded")] == listed
        assert [r async for r in c.list_requests()] == []
        with pytest.raises(ServiceError) as info:
            await c.get_request("req_nope")
        assert info.value.code == "plan_not_found"
        with pytest.raises(ServiceError) as info:
            await c.plan("anything")
        assert info.value.code == "no_model"
        with pytest.raises(ServiceError) as info:
            await c.execute_request("req_nope")
        assert info.value.status == 404


# -- reconnecting event streams --------------------------------------------------------------------


@pytest.fixture
def key_file(db_url: str, tmp_path: Path) -> Path:
    path = tmp_path / "keys.txt"
    path.write_text(make_key(db_url) + "\n")
    return path


def _kill(server: ProcessServer) -> None:
    server.kill()  # SIGKILL
    _stop(server)


def _stop(server: ProcessServer) -> None:
    server.stop()
    if server.process is not None and server.process.stderr is not None:
        server.process.stderr.close()  # ProcessServer.stop leaves its pipe open


@pytest.mark.slow
def test_events_resume_from_the_last_id_when_the_server_is_killed_and_restarted(
    db_url: str, key_file: Path, process_env: dict[str, str], gates: Path, tmp_path: Path
) -> None:
    first = ProcessServer(db_url, key_file, process_env).start()
    second = ProcessServer(db_url, key_file, process_env, port=first.port)  # the same port and database
    patient = RetryPolicy(reconnects=40, backoff=0.05, max_backoff=0.5)

    def restart() -> None:  # while the client reconnects: it backs off until the new server answers
        (gates / "open").touch()
        second.start()

    seen: list[Event] = []
    restarter = threading.Thread(target=restart)
    try:
        with Client(first.url, key_file.read_text().strip(), retry=patient) as c:
            execution_id = c.execute(c.create_plan(GATED).plan_id).execution_id
            for event in c.events(execution_id):
                seen.append(event)
                if event.type == "step_started" and event.step_id == "wait" and restarter.ident is None:
                    _kill(first)  # the stream breaks mid-way
                    restarter.start()
            restarter.join(120)
            assert second.process is not None and second.process.poll() is None
            assert [e.seq for e in seen] == list(range(1, len(seen) + 1))  # each once, in order, no gap
            assert seen[-1].final and seen[-1].payload == {"status": "succeeded"}
            assert "run_resumed" in [e.type for e in seen]  # the new server took it over
            assert list(c.events(execution_id)) == seen  # exactly the stored events
            assert c.get_execution(execution_id).outputs["last"] == 2
        assert (tmp_path / "ledger.txt").read_text() == "5\n"
    finally:
        if restarter.ident is not None:
            restarter.join(120)
        _stop(second)
        _stop(first)


@pytest.mark.slow
def test_a_stream_that_cannot_reconnect_says_where_to_take_up(
    db_url: str, key_file: Path, process_env: dict[str, str], gates: Path
) -> None:
    server = ProcessServer(db_url, key_file, process_env).start()
    try:
        with Client(server.url, key_file.read_text().strip(), retry=FAST) as c:
            execution_id = c.execute(c.create_plan(GATED).plan_id).execution_id
            seen: list[Event] = []
            with pytest.raises(ServiceError) as info:
                for event in c.events(execution_id):
                    seen.append(event)
                    if event.type == "step_started" and event.step_id == "wait":
                        _kill(server)
        assert info.value.code == "stream_lost" and info.value.status is None
        assert info.value.details == {"execution_id": execution_id, "last_event_id": seen[-1].seq}
        assert f"after={seen[-1].seq}" in info.value.message
    finally:
        _stop(server)


@pytest.mark.slow
def test_the_per_key_limit_is_429_and_serve_can_raise_it(
    db_url: str, key_file: Path, process_env: dict[str, str], gates: Path
) -> None:
    server = ProcessServer(db_url, key_file, process_env, args=["--max-active-per-key", "1"]).start()
    try:
        with Client(server.url, key_file.read_text().strip(), retry=FAST) as c:
            plan_id = c.create_plan(GATED).plan_id
            first = c.execute(plan_id)
            with pytest.raises(ServiceError) as info:
                c.execute(plan_id)
            assert (info.value.code, info.value.status) == ("too_many_executions", 429)  # not retried
            assert [e.execution_id for e in c.list_executions()] == [first.execution_id]
            (gates / "open").touch()
            list(c.events(first.execution_id))
            assert c.execute(plan_id, wait=30).ok  # room again
    finally:
        _stop(server)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "client.md"


@pytest.mark.parametrize("number", [0, 1])
def test_the_examples_of_docs_client_md_run_against_a_service(server: ThreadServer, number: int) -> None:
    import re

    blocks = re.findall(r'^```python test="skip"\n(.*?)^```', DOCS.read_text(), re.DOTALL | re.MULTILINE)
    assert len(blocks) == 2
    env = {**os.environ, "TOOLPLAN_URL": server.url, "TOOLPLAN_API_KEY": server.key}
    done = subprocess.run([sys.executable, "-c", blocks[number]], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    if number == 0:
        assert "succeeded {'b': 13}" in done.stdout and "422 invalid_plan" in done.stdout
    else:
        assert "{'a': 4}" in done.stdout and "True" in done.stdout


def test_the_client_imports_neither_the_service_nor_fastapi() -> None:
    code = (
        "import sys, toolplan.client\n"
        "print(','.join(m for m in ('fastapi', 'toolplan.service', 'uvicorn', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_base_url_ending_in_v1_reaches_the_same_api(server: ThreadServer) -> None:
    stored = None
    for base in (f"{server.url}/v1", f"{server.url}/v1/"):
        with Client(base, server.key, retry=FAST) as c:
            assert c.base_url == server.url
            stored = c.create_plan(CHAIN)
            assert c.get_plan(stored.plan_id).plan == CHAIN
