"""An execution's states and transitions (docs/service.md, "States of an execution").

A pure model of the machine is property-tested (every sequence of cancel, resume, claim, begin, stop
and lease expiry keeps its invariants), then the store is driven through the same random sequences,
one transaction per transition, on SQLite and PostgreSQL, and must agree with the model: the stored
status, holder and cancel flag, and the events, whose last lifecycle event always tells the stored
status. The runner's own races (a cancel or a resume while it takes an execution up) run for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from svc_tools import TOOLS

from toolplan._errors import RunConflictError
from toolplan.execute import RunLimits
from toolplan.plan import parse_plan
from toolplan.service import Service, ServiceConfig
from toolplan.service._store import ServiceStore
from toolplan.store import Store, open_store

PLAN: dict[str, Any] = {"steps": [{"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}}]}
WORKERS = 2
LIFECYCLE = {"run_queued": "queued", "run_started": "running", "run_resumed": "running"}


# -- the model ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class State:
    status: str = "queued"
    owner: int | None = None  # the worker holding the claim
    begun: bool = False  # its run took the claim up (an event says so)
    cancel_requested: bool = False
    expired: bool = False  # the holder's lease ended
    sessions: int = 0


def transition(s: State, op: str, w: int) -> tuple[State, str | None]:
    """The state after ``op`` by worker ``w`` (clients: w is ignored) and the lifecycle event it writes."""
    if op == "cancel":
        if s.status == "queued":
            return dataclasses.replace(s, status="cancelled", cancel_requested=False), "plan_finished"
        if s.status == "running":
            return dataclasses.replace(s, cancel_requested=True), None
        return s, None
    if op == "resume":
        if s.status == "cancelled":
            return dataclasses.replace(s, status="queued", cancel_requested=False), "run_queued"
        if s.status in ("queued", "running"):
            return dataclasses.replace(s, cancel_requested=False), None
        return s, None
    if op == "claim":  # a worker takes a queued execution, or one whose holder's lease ended
        if s.status == "queued" or (s.status == "running" and s.expired):
            return dataclasses.replace(s, status="running", owner=w, begun=False, expired=False), None
        return s, None
    if op == "begin":  # the holder's run takes the claim up; that write renews its lease (ended or not)
        if s.status == "running" and s.owner == w and not s.begun:
            kind = "run_started" if s.sessions == 0 else "run_resumed"
            return dataclasses.replace(s, begun=True, expired=False, sessions=s.sessions + 1), kind
        return s, None
    if op == "stop":  # the holder stops (a cancel reached it, or its process stops): hand back
        if s.status == "running" and s.owner == w:
            status = "cancelled" if s.cancel_requested else "queued"
            kind = "plan_finished" if status == "cancelled" else "run_queued"
            return dataclasses.replace(s, status=status, owner=None, begun=False, expired=False), kind
        return s, None
    if op == "expire":
        if s.status == "running":
            return dataclasses.replace(s, expired=True), None
        return s, None
    raise AssertionError(op)


OPS = st.lists(
    st.tuples(st.sampled_from(["cancel", "resume", "claim", "begin", "stop", "expire"]), st.integers(0, WORKERS - 1)),
    max_size=14,
)


def status_of_events(kinds: list[str], payloads: list[Any]) -> str:
    status = "queued"
    for kind, payload in zip(kinds, payloads, strict=True):
        if kind in LIFECYCLE:
            status = LIFECYCLE[kind]
        elif kind == "plan_finished":
            status = payload["status"]
    return status


# The holder's run takes its claim up after its lease ended (no one took it over meanwhile): that
# write renews the lease, so a later claim by another worker finds it held.
BEGUN_AFTER_EXPIRY = [("claim", 0), ("expire", 0), ("begin", 0), ("claim", 1)]

ALL_OPS = [(op, w) for op in ("cancel", "resume", "claim", "begin", "stop", "expire") for w in range(WORKERS)]


def test_the_model_keeps_its_invariants_in_every_interleaving_of_four() -> None:
    for ops in itertools.product(ALL_OPS, repeat=4):
        check_model(list(ops))


@given(OPS)
def test_the_model_keeps_its_invariants(ops: list[tuple[str, int]]) -> None:
    check_model(ops)


def check_model(ops: list[tuple[str, int]]) -> None:
    s, kinds = State(), ["plan_started", "run_queued"]
    payloads: list[Any] = [{}, {}]
    for op, w in ops:
        s, kind = transition(s, op, w)
        if kind is not None:
            kinds.append(kind)
            payloads.append({"status": s.status})
        assert (s.status == "running") == (s.owner is not None)  # held exactly while running
        if s.status != "running" or s.begun:  # the events tell the status (a claim not taken up: not yet)
            assert status_of_events(kinds, payloads) == s.status
        assert not (s.cancel_requested and s.status == "queued")  # a queued execution is cancelled at once
        if s.status == "running":  # its holder stopping it ends it as the last client asked: never stuck
            after, _ = transition(s, "stop", s.owner or 0)
            assert after.status == ("cancelled" if s.cancel_requested else "queued")


# -- the store against the model ---------------------------------------------------------------------


class Driver:
    """The store's transitions, one transaction each, as the service and its runners make them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stores: list[Store] = []
        self.journals: dict[int, Any] = {}

    async def __aenter__(self) -> Driver:
        self.stores = [open_store(self.url, lease=600) for _ in range(WORKERS)]
        self.data = ServiceStore(self.stores[0])
        return self

    async def __aexit__(self, *exc: object) -> None:
        e = sa.table("toolplan_executions", sa.column("status"), sa.column("owner"))

        def finish_all(engine: sa.Engine) -> None:  # the next example's claims find only its own execution
            with engine.begin() as conn:
                conn.execute(sa.update(e).values(status="succeeded", owner=None))

        await self.stores[0].db.transact(finish_all)
        for store in self.stores:
            await store.close()

    async def do(self, run_id: str, op: str, w: int) -> None:
        store = self.stores[w]
        if op == "cancel":
            with contextlib.suppress(RunConflictError):
                await self.data.request_cancel(run_id)
        elif op == "resume":
            with contextlib.suppress(RunConflictError):
                await self.data.requeue(run_id)
        elif op == "claim":
            if await store.claim_next() is not None:
                self.journals.pop(w, None)
        elif op == "begin":
            if await self.holder(run_id) == w and w not in self.journals:
                journal, _ = await store.begin(run_id, parse_plan(PLAN), RunLimits())
                if journal.claimed:
                    self.journals[w] = journal
                    written = journal._future  # its event commits with its next write: wait for it here
                    journal._flush()
                    if written is not None:
                        await written
        elif op == "stop":
            journal = self.journals.pop(w, None)
            if journal is not None:
                store.hand_back(run_id)
                with contextlib.suppress(RunConflictError):
                    await journal.close(None, 0, 0.0)
            else:
                await ServiceStore(store).let_go(run_id, store.owner)
        elif op == "expire":
            e = sa.table("toolplan_executions", sa.column("id"), sa.column("lease_until"), sa.column("status"))

            def write(engine: sa.Engine) -> None:
                with engine.begin() as conn:
                    conn.execute(sa.update(e).where(e.c.id == run_id, e.c.status == "running").values(lease_until=1.0))

            await store.db.transact(write)

    async def holder(self, run_id: str) -> int | None:
        owner = (await self.stores[0].get_run(run_id)).summary.owner
        return next((i for i, s in enumerate(self.stores) if s.owner == owner), None)


def check_against_model(url: str, ops: list[tuple[str, int]]) -> None:
    async def go() -> None:
        async with Driver(url) as d:
            run_id = f"run_{secrets.token_hex(8)}"
            await d.data.enqueue(
                run_id, parse_plan(PLAN), RunLimits(), source_plan_id=None, api_key=None, max_active=None
            )
            s = State()
            for op, w in ops:
                s, _ = transition(s, op, w)
                await d.do(run_id, op, w)
                info = (await d.stores[0].get_run(run_id)).summary
                events = await d.stores[0].events(run_id)
                kinds = [e.type for e in events]
                told = status_of_events(kinds, [e.payload for e in events])
                where = f"after {op} by {w} in {ops}: {kinds}"
                assert info.status == s.status, where
                assert (await d.holder(run_id)) == s.owner, where
                assert info.cancel_requested == s.cancel_requested, where
                if s.status != "running" or s.begun:
                    assert told == s.status, where  # the events tell the stored status
                assert kinds.count("run_started") <= 1, where  # the first claim starts it, the later ones resume
                if "run_resumed" in kinds:
                    assert kinds.index("run_started") < kinds.index("run_resumed"), where

    asyncio.run(go())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=BEGUN_AFTER_EXPIRY)
def test_the_store_follows_the_model_on_sqlite(tmp_path: Path, ops: list[tuple[str, int]]) -> None:
    check_against_model(f"sqlite:///{tmp_path / 'states.db'}", ops)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=BEGUN_AFTER_EXPIRY)
def test_the_store_follows_the_model_on_postgresql(postgres_url: str, ops: list[tuple[str, int]]) -> None:
    check_against_model(postgres_url, ops)


# -- the runner's races, for real ---------------------------------------------------------------------


def with_service(url: str, body: Callable[[Service, asyncio.Event, asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``body(service, entered, gate)`` with the service's runner going; its runs wait at ``gate``
    before they take their claim up (``entered`` is set then)."""

    async def go() -> None:
        async with open_store(url) as store:
            service = Service(store, TOOLS, config=ServiceConfig(poll_interval=0.05))
            entered, gate = asyncio.Event(), asyncio.Event()
            real = store.plan_of

            async def plan_of(run_id: str) -> Any:
                entered.set()
                await gate.wait()
                return await real(run_id)

            store.plan_of = plan_of  # type: ignore[method-assign]
            runner = asyncio.create_task(service.runner.run())
            try:
                await service.post_plan("plan_states", PLAN, None)
                await body(service, entered, gate)
            finally:
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner

    asyncio.run(go())


async def settled(service: Service, run_id: str, want: str) -> tuple[str, list[str]]:
    for _ in range(200):
        status = await service.data.status_of(run_id)
        if status == want:
            break
        await asyncio.sleep(0.02)
    events = await service.store.events(run_id)
    return status, [e.type for e in events]


@pytest.mark.parametrize("resume_too", [False, True])
def test_a_cancel_while_the_runner_takes_an_execution_up(tmp_path: Path, resume_too: bool) -> None:
    async def body(service: Service, entered: asyncio.Event, gate: asyncio.Event) -> None:
        await service.execute("exe_race", "plan_states", "k", 0)
        await entered.wait()  # claimed, its run not begun
        assert (await service.cancel("exe_race"))["status"] == "cancelling"
        if resume_too:  # a second client resumes it at once
            await service.resume("exe_race")
        gate.set()
        want = "succeeded" if resume_too else "cancelled"
        status, kinds = await settled(service, "exe_race", want)
        assert status == want, kinds  # never left running with nothing running
        if not resume_too:
            assert kinds[-1] == "plan_finished" and (await service.store.events("exe_race"))[-1].payload == {
                "status": "cancelled"
            }

    with_service(f"sqlite:///{tmp_path / 'race.db'}", body)


def test_a_cancel_then_a_resume_of_a_running_execution_agree_on_postgresql(postgres_url: str) -> None:
    async def body(service: Service, entered: asyncio.Event, gate: asyncio.Event) -> None:
        gate.set()
        for i in range(6):
            run_id = f"exe_pg{i}"
            await service.execute(run_id, "plan_states", "k", 0)
            await asyncio.gather(service.cancel(run_id), service.resume(run_id), return_exceptions=True)
            status = await service.runner.wait(run_id, 20)
            events = await service.store.events(run_id)
            told = status_of_events([e.type for e in events], [e.payload for e in events])
            row = (await service.store.get_run(run_id)).summary
            where = ([(e.type, e.payload) for e in events], row.owner, row.cancel_requested, service.runner.tasks)
            assert status in ("succeeded", "cancelled") and told == status, where

    with_service(postgres_url, body)
