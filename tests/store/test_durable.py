"""Durable runs in a real store (a SQLite file and a real PostgreSQL database): what is stored, reused and refused."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa

from toolplan import (
    RunConflictError,
    RunNotFoundError,
    StoreError,
    UserError,
    current_call,
    execute_plan,
    stream_plan,
    tool,
)
from toolplan.execute import PlanStarted, StepFinished
from toolplan.store import open_store, resume
from toolplan.store._journal import BLOB_THRESHOLD

CALLS: Counter[str] = Counter()
KEYS: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    KEYS.clear()


@tool(idempotent=True)
def fetch(n: int) -> dict[str, int]:
    """Read something (safe to repeat)."""
    CALLS["fetch"] += 1
    return {"n": n}


@tool
def pay(amount: int) -> str:
    """Pay (not safe to repeat)."""
    CALLS["pay"] += 1
    KEYS.append(current_call().idempotency_key)
    return f"paid {amount}"


@tool
def fail(reason: str) -> str:
    """Always fails."""
    CALLS["fail"] += 1
    raise RuntimeError(reason)


TOOLS = [fetch, pay, fail]

PLAN: dict[str, Any] = {
    "steps": [
        {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
        {"id": "b", "tool": "fetch", "arguments": {"n": "$ref:a.n"}},
        {"id": "p", "tool": "pay", "arguments": {"amount": "$ref:b.n"}},
        {"id": "x", "tool": "fail", "arguments": {"reason": "down"}},
        {"id": "y", "tool": "fetch", "arguments": {"n": 2}, "depends_on": ["x"]},
    ],
}


def _expire(url: str, run_id: str) -> None:
    """Make the run's lease run out now (as if its process died long ago), through a connection of its own."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE toolplan_executions SET lease_until = 0 WHERE id = :id"), {"id": run_id})
    engine.dispose()


async def test_a_durable_run_stores_every_step_and_a_gap_free_event_log(store_url: str) -> None:
    async with open_store(store_url) as store:
        result = await execute_plan(PLAN, TOOLS, store=store)
        assert [r.status for r in result.steps.values()] == ["succeeded", "succeeded", "succeeded", "failed", "skipped"]
        info = await store.get_run(result.run_id)
        assert info.summary.status == "failed"
        assert info.summary.calls == 4  # a, b, p, x: y never ran
        assert {sid: r.status for sid, r in info.result.steps.items()} == {
            sid: r.status for sid, r in result.steps.items()
        }
        assert info.result.steps["p"].output == "paid 1"
        assert info.result.steps["x"].error is not None and "down" in info.result.steps["x"].error.message
        events = await store.events(result.run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[0].type == "plan_started" and events[-1].type == "plan_finished"
        kinds = Counter(e.type for e in events)
        assert kinds["step_started"] == 4 and kinds["step_finished"] == 5
        assert not any(r.reused for r in info.result.steps.values())  # one session: nothing reused
        listed = await store.list_runs()
        assert [s.run_id for s in listed] == [result.run_id]


async def test_a_finished_run_given_again_calls_nothing(store_url: str) -> None:
    async with open_store(store_url) as store:
        first = await execute_plan(PLAN, TOOLS, store=store, run_id="order-1")
        before = dict(CALLS)
        again = await execute_plan(PLAN, TOOLS, store=store, run_id="order-1")
        resumed = await resume("order-1", TOOLS, store=store)
    assert dict(CALLS) == before
    for r in (again, resumed):
        assert r.status == first.status and r.run_id == "order-1"
        assert all(s.reused for s in r.steps.values())
        assert r.outputs == first.outputs


async def test_the_same_run_id_with_another_plan_is_a_conflict(store_url: str) -> None:
    async with open_store(store_url) as store:
        await execute_plan(PLAN, TOOLS, store=store, run_id="r")
        other = {"steps": [{"id": "a", "tool": "fetch", "arguments": {"n": 9}}]}
        with pytest.raises(RunConflictError) as caught:
            await execute_plan(other, TOOLS, store=store, run_id="r")
    assert caught.value.code == "run_conflict"
    assert "another plan" in caught.value.message


async def test_resuming_an_unknown_run_names_it(store_url: str) -> None:
    async with open_store(store_url) as store:
        with pytest.raises(RunNotFoundError) as caught:
            await resume("nope", TOOLS, store=store)
    assert caught.value.code == "run_not_found" and "toolplan runs list" in caught.value.message


async def _cancel_while(store_url: str, run_id: str, plan: dict[str, Any], gate: asyncio.Event, **kw: Any) -> None:
    """Run ``plan`` durably and cancel it while the step waiting on ``gate`` is in its call."""
    async with open_store(store_url) as store:
        task = asyncio.create_task(execute_plan(plan, [*TOOLS, *kw.pop("tools", [])], store=store, run_id=run_id))
        await gate.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _blocking_tool(name: str, *, idempotent: bool, entered: asyncio.Event) -> Any:
    async def block(n: int) -> int:
        CALLS[name] += 1
        KEYS.append(current_call().idempotency_key)
        if CALLS[name] == 1:  # the first call hangs until its run is cancelled
            entered.set()
            await asyncio.Event().wait()
        return n * 10

    block.__name__ = name
    block.__doc__ = "Wait for the test."
    return tool(idempotent=idempotent)(block)


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_call_in_flight_is_repeated_only_when_its_tool_allows_it(store_url: str, idempotent: bool) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=idempotent, entered=entered)
    plan = {
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
            {"id": "s", "tool": "slow", "arguments": {"n": "$ref:a.n"}},
            {"id": "after", "tool": "fetch", "arguments": {"n": "$ref:s"}},
        ]
    }
    await _cancel_while(store_url, "r1", plan, entered, tools=[slow])
    assert Counter({"fetch": 1, "slow": 1}) == CALLS
    async with open_store(store_url) as store:
        result = await resume("r1", [*TOOLS, slow], store=store)
        events = await store.events("r1")
    assert result.steps["a"].reused and CALLS["fetch"] >= 1
    if idempotent:
        assert result.ok
        assert CALLS["slow"] == 2 and KEYS == ["r1:s", "r1:s"]  # the same key both times
        assert result.steps["s"].attempts == 2 and result.steps["after"].output == {"n": 10}
    else:
        assert CALLS["slow"] == 1
        s = result.steps["s"]
        assert s.status == "unknown_outcome" and s.error is not None and s.error.kind == "unknown_outcome"
        assert "'r1:s'" in s.error.message and "rerun_unknown=True" in s.error.message
        assert result.steps["after"].status == "skipped"
        assert result.status == "failed"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "run_resumed" in {e.type for e in events}


async def test_rerun_unknown_calls_the_step_again_with_its_key(store_url: str) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=False, entered=entered)
    plan = {"steps": [{"id": "s", "tool": "slow", "arguments": {"n": 4}}]}
    await _cancel_while(store_url, "r2", plan, entered, tools=[slow])
    async with open_store(store_url) as store:
        result = await resume("r2", [slow], store=store, rerun_unknown=True)
    assert result.ok and result.steps["s"].output == 40
    assert KEYS == ["r2:s", "r2:s"]


async def test_a_process_cannot_take_a_run_another_holds_until_its_lease_expires(store_url: str) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=True, entered=entered)
    plan = {"steps": [{"id": "s", "tool": "slow", "arguments": {"n": 1}}]}
    async with open_store(store_url) as holder, open_store(store_url) as other:
        task = asyncio.create_task(execute_plan(plan, [slow], store=holder, run_id="held"))
        await entered.wait()
        with pytest.raises(RunConflictError) as caught:
            await resume("held", [slow], store=other)
        assert "another process" in caught.value.message
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # An expired lease (its process gone without letting go) can be taken.
    _expire(store_url, "held")
    async with open_store(store_url) as other:
        assert (await resume("held", [slow], store=other)).ok


@pytest.mark.parametrize("idempotent", [True, False])
async def test_the_stored_run_says_which_steps_a_resume_reused(store_url: str, idempotent: bool) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=idempotent, entered=entered)
    plan = {
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
            {"id": "x", "tool": "fail", "arguments": {"reason": "down"}},
            {"id": "s", "tool": "slow", "arguments": {"n": "$ref:a.n"}, "depends_on": ["x"]},
            {"id": "t", "tool": "slow", "arguments": {"n": "$ref:a.n"}},
            {"id": "after", "tool": "fetch", "arguments": {"n": "$ref:t"}},
        ]
    }
    await _cancel_while(store_url, "sessions", plan, entered, tools=[slow])
    async with open_store(store_url) as store:
        cut = await store.get_run("sessions")
        result = await resume("sessions", [*TOOLS, slow], store=store)
        info = await store.get_run("sessions")
        again = await resume("sessions", [*TOOLS, slow], store=store)  # finished: nothing runs, nothing changes
        later = await store.get_run("sessions")
    assert not any(r.reused for r in cut.result.steps.values())  # before the resume: one session
    # Steps that ended before the resume are reused: a (t was in its call, so a had committed), and
    # x if it had ended by then (it runs beside a). s is skipped again or ran after x, t was in flight
    # (called again, or ended unknown_outcome), after ran (or was skipped) after the resume.
    ended = {"succeeded", "failed", "timed_out", "unknown_outcome"}
    expected = {sid: cut.result.steps[sid].status in ended for sid in ("a", "x", "s", "t", "after")}
    assert expected["a"] and not expected["t"] and not expected["after"] and not expected["s"]
    assert {sid: r.reused for sid, r in result.steps.items()} == expected
    assert {sid: r.reused for sid, r in info.result.steps.items()} == expected
    assert {sid: r.reused for sid, r in later.result.steps.items()} == expected
    assert all(r.reused for r in again.steps.values())  # what the caller got back: all taken from the store
    assert info.result.steps["t"].status == ("succeeded" if idempotent else "unknown_outcome")
    assert info.result.steps["after"].status == ("succeeded" if idempotent else "skipped")
    assert info.result.steps["a"].to_dict()["reused"] is True and info.result.steps["t"].to_dict()["reused"] is False


async def test_budget_counters_go_on_from_the_stored_count(store_url: str) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=True, entered=entered)
    plan = {
        "budget": {"max_tool_calls": 4},
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
            {"id": "b", "tool": "fetch", "arguments": {"n": 2}},
            {"id": "s", "tool": "slow", "arguments": {"n": "$ref:a.n"}, "depends_on": ["b"]},
            {"id": "c", "tool": "fetch", "arguments": {"n": 3}, "depends_on": ["s"]},
        ],
    }
    await _cancel_while(store_url, "budget", plan, entered, tools=[slow])
    async with open_store(store_url) as store:
        result = await resume("budget", [*TOOLS, slow], store=store)
        info = await store.get_run("budget")
    # a, b and the lost call of s used three calls (that call happened); the re-run of s is the fourth; c is refused.
    assert result.steps["s"].ok and result.steps["s"].attempts == 2
    assert result.steps["c"].status == "not_run" and "max_tool_calls=4" in str(result.steps["c"].error)
    assert info.summary.calls == 4


async def test_outputs_that_are_not_json_or_large_are_kept(store_url: str) -> None:
    @tool
    def odd() -> Any:
        """Returns a set and NaN."""
        return {"s": {1}, "nan": float("nan")}

    @tool
    def big() -> str:
        """Returns a long text."""
        return "x" * (BLOB_THRESHOLD + 10)

    plan = {"steps": [{"id": "o", "tool": "odd"}, {"id": "b", "tool": "big"}]}
    async with open_store(store_url) as store:
        result = await execute_plan(plan, [odd, big], store=store, run_id="odd")
        assert result.ok
        info = await store.get_run("odd")
        again = await execute_plan(plan, [odd, big], store=store, run_id="odd")
    stored = info.result.steps
    assert stored["b"].output == "x" * (BLOB_THRESHOLD + 10)
    assert stored["o"].output == {"s": [1], "nan": "NaN"}  # as the model sees it
    assert any("not JSON data" in w for w in stored["o"].warnings)
    assert again.steps["b"].output == stored["b"].output


async def test_a_commit_that_fails_once_is_retried(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolplan import _faults

    monkeypatch.setattr(_faults, "_AT", {"commit_error": 2})
    monkeypatch.setattr(_faults, "_SEEN", {"commit_error": 0})
    monkeypatch.setattr(_faults, "ACTIVE", True)
    async with open_store(store_url) as store:
        result = await execute_plan(PLAN, TOOLS, store=store, run_id="flaky")
        events = await store.events("flaky")
    assert _faults._SEEN["commit_error"] > 2  # the fault fired, and commits went on after it
    assert result.steps["p"].ok and CALLS["pay"] == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_an_unreachable_database_runs_nothing() -> None:
    store = open_store("postgresql://postgres@127.0.0.1:9/none")
    with pytest.raises(StoreError) as caught:
        await execute_plan(PLAN, TOOLS, store=store)
    await store.close()
    assert Counter() == CALLS
    assert "could not be opened" in caught.value.message and "database server is running" in caught.value.message


def test_bad_urls_and_ids_are_user_errors(tmp_path: Any) -> None:
    with pytest.raises(UserError, match="SQLite or PostgreSQL"):
        open_store("mysql://x@y/z")
    with pytest.raises(UserError, match="not a database URL"):
        open_store("not a url")
    with pytest.raises(UserError, match="lease"):
        open_store(f"sqlite:///{tmp_path}/x.db", lease=0)

    async def bad_id() -> None:
        async with open_store(f"sqlite:///{tmp_path}/x.db") as store:
            await execute_plan(PLAN, TOOLS, store=store, run_id="has space")

    with pytest.raises(UserError, match="run_id 'has space' is not valid"):
        asyncio.run(bad_id())


async def test_a_newer_schema_is_refused(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    async with open_store(url) as store:
        await execute_plan(PLAN, TOOLS, store=store)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '999' WHERE key = 'schema_version'"))
    engine.dispose()
    async with open_store(url) as store:
        with pytest.raises(StoreError, match="schema version 999"):
            await store.list_runs()


async def test_stores_opening_a_new_sqlite_file_at_once_all_work(tmp_path: Any) -> None:
    # Service workers started together on a fresh file: each makes or finds the schema, none fails.
    for attempt in range(5):
        url = f"sqlite:///{tmp_path}/fresh{attempt}.db"
        stores = [open_store(url) for _ in range(4)]
        try:
            listed = await asyncio.gather(*(s.list_runs() for s in stores))
        finally:
            for s in stores:
                await s.close()
        assert listed == [[]] * 4


async def test_a_lock_sqlite_refuses_without_waiting_is_waited_out(tmp_path: Any, monkeypatch: Any) -> None:
    # SQLite returns "database is locked" at once where waiting could deadlock: the store tries again.
    from toolplan.store import _schema

    real, refusals = _schema.migrate, [2]

    def refusing(engine: sa.Engine) -> int:
        if refusals[0]:
            refusals[0] -= 1
            raise sa.exc.OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))
        return real(engine)

    monkeypatch.setattr(_schema, "migrate", refusing)
    async with open_store(f"sqlite:///{tmp_path}/runs.db") as store:
        assert await store.list_runs() == []
    assert refusals == [0]

    def broken(engine: sa.Engine) -> int:
        raise sa.exc.OperationalError("CREATE TABLE", {}, sqlite3.OperationalError("disk I/O error"))

    monkeypatch.setattr(_schema, "migrate", broken)  # any other failure is reported at once
    async with open_store(f"sqlite:///{tmp_path}/other.db") as store:
        with pytest.raises(StoreError, match="disk I/O error"):
            await store.list_runs()


async def test_stream_plan_runs_durably_too(store_url: str) -> None:
    async with open_store(store_url) as store:
        async with stream_plan(PLAN, TOOLS, store=store, run_id="streamed") as events:
            kinds = [type(e).__name__ async for e in events]
        assert kinds[0] == PlanStarted.__name__
        assert events.result is not None and events.result.run_id == "streamed"
        info = await store.get_run("streamed")
    assert info.summary.status == "failed" and info.result.steps["p"].ok


async def test_a_fallback_has_its_own_key(store_url: str) -> None:
    plan = {
        "steps": [
            {
                "id": "f",
                "tool": "fail",
                "arguments": {"reason": "x"},
                "fallback": {"tool": "pay", "arguments": {"amount": 3}},
            }
        ]
    }
    async with open_store(store_url) as store:
        result = await execute_plan(plan, TOOLS, store=store, run_id="fb")
    assert result.ok and result.steps["f"].used_fallback
    assert KEYS == ["fb:f:fallback"]


async def test_each_plan_an_agent_runs_is_stored_under_the_agent_run(store_url: str) -> None:
    from toolplan import Agent
    from toolplan.models import AssistantMessage, ToolCall
    from toolplan.testing import ScriptedModel

    plan = {
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 5}},
            {"id": "p", "tool": "pay", "arguments": {"amount": "$ref:a.n"}},
        ]
    }
    turn = AssistantMessage(tool_calls=(ToolCall(id="c1", name="execute_tool_plan", arguments=json.dumps(plan)),))
    model = ScriptedModel([turn, turn, "done"])
    async with open_store(store_url) as store:
        result = await Agent(model, tools=TOOLS, tool_planning=True, store=store).run("pay twice")
        runs = [await store.get_run(r.run_id) for r in result.plan_results]
    assert len(runs) == 2 and runs[0].summary.run_id != runs[1].summary.run_id
    parents = {r.summary.parent_id for r in runs}
    assert len(parents) == 1 and next(iter(parents)).startswith("agent_")  # type: ignore[union-attr]
    assert all(r.summary.status == "succeeded" and r.result.steps["p"].output == "paid 5" for r in runs)
    assert [f"{runs[0].summary.run_id}:p", f"{runs[1].summary.run_id}:p"] == KEYS


async def _pieces(text: str, stop_after: int | None = None, gate: asyncio.Event | None = None) -> Any:
    for i in range(0, len(text), 7):
        if stop_after is not None and i >= stop_after:
            assert gate is not None
            await gate.wait()  # the model stops writing here
        yield text[i : i + 7]


async def test_a_streamed_plan_is_stored_as_it_runs_and_whole_once_complete(store_url: str) -> None:
    from toolplan.execute import execute_plan_stream

    text = json.dumps(PLAN)
    async with open_store(store_url) as store:
        result = await execute_plan_stream(_pieces(text), TOOLS, store=store, run_id="streamed-1")
        info = await store.get_run("streamed-1")
        again = await resume("streamed-1", TOOLS, store=store)
    assert result.steps["p"].ok and info.summary.plan_id.startswith("plan_")
    assert [s.id for s in info.plan.steps] == ["a", "b", "p", "x", "y"]
    assert all(r.reused for r in again.steps.values()) and CALLS["pay"] == 1


async def test_a_streamed_plan_cut_off_cannot_be_resumed_and_says_why(store_url: str) -> None:
    from toolplan.execute import execute_plan_stream

    text = json.dumps(PLAN)
    never, first = asyncio.Event(), asyncio.Event()

    def on_event(event: Any) -> None:
        if isinstance(event, StepFinished):
            first.set()

    async with open_store(store_url) as store:
        pieces = _pieces(text, stop_after=len(text) // 2, gate=never)
        task = asyncio.create_task(execute_plan_stream(pieces, TOOLS, store=store, run_id="cut", on_event=on_event))
        await first.wait()  # the first step has run; the plan is half written
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        info = await store.get_run("cut")
        with pytest.raises(StoreError, match="never arrived whole"):
            await resume("cut", TOOLS, store=store)
    assert info.summary.plan_id == "streaming" and info.result.steps["a"].ok


async def test_a_process_that_lost_its_lease_writes_nothing_more(store_url: str) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @tool(idempotent=True)
    async def slow(n: int) -> int:
        """Blocks on its first call until the test releases it."""
        CALLS["slow"] += 1
        if CALLS["slow"] == 1:
            entered.set()
            await release.wait()
        return n + CALLS["slow"] * 100

    plan = {
        "steps": [
            {"id": "s", "tool": "slow", "arguments": {"n": 1}},
            {"id": "t", "tool": "fetch", "arguments": {"n": "$ref:s"}},
        ]
    }
    async with open_store(store_url) as first, open_store(store_url) as second:
        stale = asyncio.create_task(execute_plan(plan, [slow, fetch], store=first, run_id="taken"))
        await entered.wait()
        _expire(store_url, "taken")  # as if the first process had stalled past its lease:
        for journal in first.db._writers.values():  # its clock moved on too, so its next write checks it
            journal.renewed_at = 0.0
        taken = await resume("taken", [slow, fetch], store=second)  # the second process takes the run over
        release.set()
        late = await stale  # the first process's writes are refused: it stops, and says why
        info = await second.get_run("taken")
        events = await second.events("taken")
    assert taken.ok and taken.steps["s"].output == 201
    assert info.summary.status == "succeeded" and info.result.steps["s"].output == 201
    assert late.steps["t"].status == "not_run" and "taken over by another process" in str(late.steps["t"].error)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_an_agents_streamed_plan_is_stored_too(store_url: str) -> None:
    from toolplan import Agent
    from toolplan.models import ToolReturnMessage
    from toolplan.testing import FunctionModel, ToolCallChunk

    text = json.dumps(PLAN)

    async def stream_fn(messages: list[Any], info: Any) -> Any:
        if any(isinstance(m, ToolReturnMessage) for m in messages):
            yield "done"
            return
        yield ToolCallChunk(index=0, id="p1", name="execute_tool_plan", arguments="")
        for i in range(0, len(text), 9):
            yield ToolCallChunk(index=0, arguments=text[i : i + 9])

    async with open_store(store_url) as store:
        agent = Agent(
            FunctionModel(stream_function=stream_fn), tools=TOOLS, tool_planning=True, stream_plans=True, store=store
        )
        async with agent.run_stream("go") as stream:
            async for _ in stream:
                pass
        assert stream.result is not None
        (ran,) = stream.result.plan_results
        info = await store.get_run(ran.run_id)
    assert info.summary.parent_id is not None and info.summary.parent_id.startswith("agent_")
    assert info.summary.status == "failed" and info.result.steps["p"].output == "paid 1"
    assert [s.id for s in info.plan.steps] == ["a", "b", "p", "x", "y"]


async def test_a_per_tool_budget_goes_on_after_a_resume(store_url: str) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=True, entered=entered)
    plan = {
        "budget": {"max_tool_calls_per_tool": {"fetch": 2}},
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
            {"id": "b", "tool": "fetch", "arguments": {"n": 2}},
            {"id": "s", "tool": "slow", "arguments": {"n": "$ref:a.n"}, "depends_on": ["b"]},
            {"id": "c", "tool": "fetch", "arguments": {"n": 3}, "depends_on": ["s"]},
        ],
    }
    await _cancel_while(store_url, "per-tool", plan, entered, tools=[slow])
    async with open_store(store_url) as store:
        result = await resume("per-tool", [*TOOLS, slow], store=store)
    assert result.steps["s"].ok and CALLS["fetch"] == 2
    assert result.steps["c"].status == "not_run" and "at most 2 calls of 'fetch'" in str(result.steps["c"].error)


async def test_a_version_1_database_is_migrated_on_open_and_keeps_its_runs(store_url: str) -> None:
    from toolplan.planner import PlanVersion, get_request
    from toolplan.planner._store import save_request
    from toolplan.store._schema import SCHEMA_VERSION

    async with open_store(store_url) as store:
        await execute_plan(PLAN, TOOLS, store=store, run_id="old")
    # Take the database back to schema version 1, as an earlier toolplan left it.
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE toolplan_requests"))
        conn.execute(sa.text("DROP TABLE toolplan_api_keys"))
        conn.execute(sa.text("DROP TABLE toolplan_idempotency"))
        conn.execute(sa.text("DROP TABLE toolplan_tool_stats"))
        for table in ("toolplan_schedules", "toolplan_schedule_firings", "toolplan_skills"):
            conn.execute(sa.text(f"DROP TABLE {table}"))
        conn.execute(sa.text("DROP TABLE toolplan_chunks"))
        if store_url.startswith("sqlite"):
            conn.execute(sa.text("DROP TABLE toolplan_chunks_fts"))
        conn.execute(sa.text("DROP TABLE toolplan_budget_windows"))
        conn.execute(sa.text("DROP TABLE toolplan_declarations"))
        for column in ("api_key", "source_plan_id", "cancel_requested"):
            conn.execute(sa.text(f"ALTER TABLE toolplan_executions DROP COLUMN {column}"))
        for column in ("request_id", "text", "issues", "valid"):
            conn.execute(sa.text(f"ALTER TABLE toolplan_plans DROP COLUMN {column}"))
        for table in ("toolplan_executions", "toolplan_steps"):
            conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN session"))
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '1' WHERE key = 'schema_version'"))
    async with open_store(store_url) as store:
        info = await store.get_run("old")
        await save_request(
            store,
            "req_1",
            "a question",
            [PlanVersion(plan_id="plan_1", parent_id=None, plan=None, text="", issues=(), valid=False)],
        )
        kept = await get_request(store, "req_1")
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT value FROM toolplan_meta WHERE key = 'schema_version'")).scalar()
    engine.dispose()
    assert info.summary.status == "failed" and info.result.steps["p"].output == "paid 1"
    assert kept.versions[0].plan_id == "plan_1" and version == str(SCHEMA_VERSION) == "13"


async def test_a_version_8_database_is_migrated_and_a_run_it_left_cut_off_resumes_with_its_steps_reused(
    store_url: str,
) -> None:
    entered = asyncio.Event()
    slow = _blocking_tool("slow", idempotent=True, entered=entered)
    plan = {
        "steps": [
            {"id": "a", "tool": "fetch", "arguments": {"n": 1}},
            {"id": "s", "tool": "slow", "arguments": {"n": "$ref:a.n"}},
        ]
    }
    await _cancel_while(store_url, "v8", plan, entered, tools=[slow])
    async with open_store(store_url) as store:
        await execute_plan(PLAN, TOOLS, store=store, run_id="v8-done")
    # Take the database back to schema version 8, as toolplan left it before sessions were stored.
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        for table in ("toolplan_executions", "toolplan_steps"):
            conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN session"))
        conn.execute(sa.text("UPDATE toolplan_meta SET value = '8' WHERE key = 'schema_version'"))
    async with open_store(store_url) as store:
        done = await store.get_run("v8-done")
        result = await resume("v8", [*TOOLS, slow], store=store)
        info = await store.get_run("v8")
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT value FROM toolplan_meta WHERE key = 'schema_version'")).scalar()
    engine.dispose()
    assert version == "13"
    assert not any(r.reused for r in done.result.steps.values())  # a run finished before: as it was shown
    assert result.ok and CALLS["slow"] == 2
    assert {sid: r.reused for sid, r in info.result.steps.items()} == {"a": True, "s": False}


async def test_a_plan_run_again_by_one_store_is_stored_once_and_every_run_reads_back(store_url: str) -> None:
    async with open_store(store_url) as store:
        first = await execute_plan(PLAN, TOOLS, store=store)
        second = await execute_plan(PLAN, TOOLS, store=store, max_concurrency=3)  # other limits, same plan
        infos = [await store.get_run(r.run_id) for r in (first, second)]
        limits = [(await store.plan_of(r.run_id))[1] for r in (first, second)]
    assert infos[0].summary.plan_id == infos[1].summary.plan_id
    assert [i.result.steps["p"].output for i in infos] == ["paid 1", "paid 1"]
    assert limits[0].max_concurrency != 3 and limits[1].max_concurrency == 3
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        plans = conn.execute(sa.text("SELECT count(*) FROM toolplan_plans")).scalar()
    engine.dispose()
    assert plans == 1


def test_a_step_row_is_given_by_column_name_and_written_in_the_statement_s_column_order() -> None:
    from toolplan.store import _schema
    from toolplan.store._journal import STARTED_COLUMNS, STEP_COLUMNS, started_row, step_call, step_outcome

    head = step_call.__code__.co_kwonlyargcount
    named: dict[str, Any] = {c: c for c in (*STEP_COLUMNS, *STARTED_COLUMNS)}
    call = {c: named[c] for c in STEP_COLUMNS[:head]}
    row = step_call(**call) + step_outcome(**{c: named[c] for c in STEP_COLUMNS[head:]})
    assert row == STEP_COLUMNS and started_row(**{c: named[c] for c in STARTED_COLUMNS}) == STARTED_COLUMNS
    assert set(STEP_COLUMNS) | set(STARTED_COLUMNS) <= set(_schema.steps.c.keys())
