"""The store's write path in a real database: what one chain step costs it, and values written exactly."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from chain_support import chain, step

from toolplan import execute_plan, tool
from toolplan.store import open_store

TRICKY = [
    "it's",
    "back\\slash \\' \\x00-looking",
    "per%cent %s %(name)s",
    "semi; colon; DROP TABLE x; --",
    "$$dollar$$ $tag$",
    "é ü 漢字 🙂",
    "\n\t\r",
    "",
]


@tool
def echo(value: Any) -> Any:
    """Return the value."""
    return value


def test_a_chain_step_commits_once(store_url: str) -> None:
    """A chain step is one commit (its ``running`` row, with its predecessor's result): one round trip on PostgreSQL."""

    async def main() -> None:
        async with open_store(store_url) as store:
            assert (await execute_plan(chain(3), [step], store=store)).ok  # opens the database
            before = (store.db.counts.commits, store.db.counts.round_trips)
            result = await execute_plan(chain(20), [step], store=store)
            assert result.ok and result.steps["s19"].output == 20
            commits = store.db.counts.commits - before[0]
            trips = store.db.counts.round_trips - before[1]
            assert commits == 21  # 20 steps, then the run's end
            assert trips == (0 if store_url.startswith("sqlite") else commits)
            info = await store.get_run(result.run_id)
            assert info.summary.status == "succeeded" and info.result.steps["s19"].output == 20

    asyncio.run(main())


def test_values_are_stored_exactly(store_url: str) -> None:
    """Strings with quotes, backslashes, placeholders and any text, and numbers of every sign, read back unchanged."""
    values: list[Any] = [
        *TRICKY,
        {"k'ey": "v'al", "n": -3, "f": -0.1, "big": 1e300, "small": 5e-324, "i": 2**62},
        [1.5, -2, math.pi, 0.1 + 0.2],
    ]
    plan = {"steps": [{"id": f"v{i}", "tool": "echo", "arguments": {"value": v}} for i, v in enumerate(values)]}

    async def main() -> None:
        async with open_store(store_url) as store:
            result = await execute_plan(plan, [echo], store=store)
            assert result.ok, result.errors
            info = await store.get_run(result.run_id)
            for i, v in enumerate(values):
                assert info.result.steps[f"v{i}"].output == v
                assert info.result.steps[f"v{i}"].arguments == {"value": v}
            events = await store.events(result.run_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))

    asyncio.run(main())


def test_sqlite_commit_never_waits_on_the_loop_for_another_writer(tmp_path: Path) -> None:
    """While another connection holds SQLite's write lock, the loop's commit fails at once and the thread waits."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def main() -> None:
        async with open_store(url) as store:
            assert (await execute_plan(chain(2), [step], store=store)).ok  # opens the database
            other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # holds the write lock
            wakeups = store.db.counts.wakeups
            run = asyncio.ensure_future(execute_plan(chain(3), [step], store=store))
            for _ in range(1000):  # the first step's running row went to the thread, which waits for the lock
                await asyncio.sleep(0.01)
                if store.db._pending:
                    break
            assert store.db._pending and not run.done()
            other.execute("COMMIT")
            other.close()
            result = await run
            assert result.ok and result.steps["s2"].output == 3
            assert store.db.counts.wakeups > wakeups  # completed from the thread

    asyncio.run(main())


def test_a_statement_with_an_escaped_percent_is_left_to_the_drivers_quoting() -> None:
    from toolplan.store._literals import Literals

    seen: list[str] = []

    def quote(sql: str, params: Any) -> str:
        seen.append(sql)
        return "quoted by the driver"

    literals = Literals(quote)
    assert literals.statement("SELECT 1 WHERE a = %s", ["it's"]) == "SELECT 1 WHERE a = 'it''s'"
    assert literals.statement("SELECT 1 WHERE a LIKE '10%%' AND b = %s", ["x"]) == "quoted by the driver"
    assert literals.statement("SELECT %s", [b"bytes"]) == "quoted by the driver"
    assert len(seen) == 2
