"""PostgreSQL: a turn's writes committed from the event loop (`toolplan.store._onloop`), and their way to the thread."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from chain_support import chain, step

from toolplan import execute_plan
from toolplan.store import open_store


@dataclass
class _Writer:
    """A writer with nothing to renew (its rows are being created)."""

    run_id: str = "loop-path"
    owner: str = "test"
    broken: str | None = None
    creating: bool = True
    renewed_at: float = 0.0

    def lease_statement(self, until: float, now: float) -> tuple[str, tuple[Any, ...]]:
        raise AssertionError("no lease is due")


def _event(db: Any, seq: int) -> tuple[str, tuple[Any, ...]]:
    columns = "execution_id, seq, type, step_id, payload, at"
    sql = db.sql(f"INSERT INTO toolplan_events ({columns}) VALUES (?, ?, ?, ?, ?, ?)")
    return sql, ("loop-path", seq, "note", None, "{}", 1.5)


def _seqs(engine: Any) -> list[int]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT seq FROM toolplan_events WHERE execution_id = 'loop-path' ORDER BY seq")
        return [row[0] for row in rows]


def test_a_chain_commits_from_the_loop_without_waking_it_from_the_thread(postgres_url: str) -> None:
    async def main() -> None:
        async with open_store(postgres_url) as store:
            assert (await execute_plan(chain(3), [step], store=store)).ok  # opens the database
            counts = store.db.counts
            before = (counts.commits, counts.round_trips, counts.wakeups)
            result = await execute_plan(chain(20), [step], store=store)
            assert result.ok and result.steps["s19"].output == 20
            assert counts.commits - before[0] == 21 == counts.round_trips - before[1]
            assert counts.wakeups == before[2]  # no future completed from the thread
            info = await store.get_run(result.run_id)
            assert info.summary.status == "succeeded" and info.result.steps["s19"].output == 20

    asyncio.run(main())


def test_a_batch_the_server_rejects_on_the_loop_is_committed_by_the_thread(postgres_url: str) -> None:
    """The server forgets the prepared statements: the loop's pipeline fails whole, the thread commits it."""

    async def main() -> None:
        async with open_store(postgres_url) as store:
            assert (await execute_plan(chain(3), [step], store=store)).ok
            await store.db.call(lambda _engine, raw: raw.execute("DEALLOCATE ALL"))
            wakeups = store.db.counts.wakeups
            result = await execute_plan(chain(5), [step], store=store)
            assert result.ok and result.steps["s4"].output == 5
            assert store.db.counts.wakeups > wakeups  # the failed batch was the thread's
            wakeups = store.db.counts.wakeups
            again = await execute_plan(chain(5), [step], store=store)  # prepared again: on the loop
            assert again.ok and store.db.counts.wakeups == wakeups
            for run in (result, again):
                events = await store.events(run.run_id)
                assert [e.seq for e in events] == list(range(1, len(events) + 1))
                assert (await store.get_run(run.run_id)).summary.status == "succeeded"

    asyncio.run(main())


def test_a_query_left_in_flight_by_a_stopped_loop_is_finished_by_the_thread(postgres_url: str) -> None:
    store = open_store(postgres_url)
    db = store.db
    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(execute_plan(chain(2), [step], store=store))  # opens the database

        async def send() -> asyncio.Future[None]:
            done = asyncio.get_running_loop().create_future()
            db.write(_Writer(), [_event(db, 1), _event(db, 2)], done)
            await asyncio.sleep(0)  # the turn ends: the batch is sent from this loop
            return done

        done = first.run_until_complete(send())  # the loop stops with the query in flight
        assert not done.done()

        async def after() -> int:
            return int(await db.call(lambda _engine, _raw: 7))  # the thread needs the connection

        assert asyncio.run(after()) == 7
        first.run_until_complete(asyncio.wait_for(done, 10))  # completed from the thread
        assert _seqs(db.engine) == [1, 2]
    finally:
        asyncio.run(store.close())
        first.close()


def test_prepared_statements_take_values_as_text_and_leave_others_to_psycopg() -> None:
    from toolplan.store._prepared import Prepared

    class Info:
        encoding = "utf-8"

    class Raw:
        info = Info()

    prepared, raw = Prepared(), Raw()
    sql = "INSERT INTO t (a, b, c, d) VALUES (%s, %s, %s, %s)"
    calls = prepared.calls([(sql, ("it's", -3, 0.1, None)), (sql, ("x", 1, 2.5, None))], raw)
    assert calls is not None
    (name, text, types, values), again = calls
    assert text == b"INSERT INTO t (a, b, c, d) VALUES ($1, $2, $3, $4)" and list(types or ()) == [0, 20, 701, 0]
    assert values == [b"it's", b"-3", b"0.1", None]
    assert again[0] == name and again[1] is None  # prepared once per pipeline
    prepared.known([name])
    assert (prepared.calls([(sql, ("y", 2, 3.5, None))], raw) or [])[0][1] is None  # known: not prepared again
    for value in (True, b"bytes", "nul\x00", float("inf"), 2**64):
        assert prepared.calls([(sql, (value, 1, 1.0, None))], raw) is None
    assert prepared.calls([("SELECT 1 WHERE a LIKE '10%%' AND b = %s", ("x",))], raw) is None
