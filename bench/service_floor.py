"""The floor of ``python -m bench service``: the least a server on the same web stack does for the same calls.

Run as a script (``python bench/service_floor.py --db URL --port P``), it serves the three calls the
bench's clients make, with FastAPI under uvicorn (what ``toolplan serve`` runs) and nothing of
toolplan:

- ``POST /v1/plans``: one INSERT of the plan's JSON text, keyed by a fresh id.
- ``POST /v1/plans/{id}/executions``: one indexed read of the plan, one INSERT of an execution row
  (``running``); answered 202 at once, and a task on the event loop adds up the chain and writes the
  outputs with one UPDATE (``succeeded``).
- ``GET /v1/executions/{id}``: one indexed read of the execution's row (primary key), its JSON.

The tables have the shape of toolplan's (``toolplan_plans``, ``toolplan_executions``: the same
columns and index), prefixed ``floor_``. SQLite runs in WAL mode with ``synchronous=NORMAL`` as the
store does, on one connection called from the event loop (each statement is microseconds);
PostgreSQL through psycopg's async connections in autocommit mode, a pool of ``POOL`` of them. No
API key is checked, no idempotency record kept and no access line logged: the floor is what the web
stack and one indexed read cost, not a service.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response

POOL = 15  # PostgreSQL connections: as many as the store's pool holds at most (5 + 10 overflow)

SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_plans (
    id VARCHAR(128) PRIMARY KEY, version INTEGER NOT NULL, parent_id VARCHAR(128), hash VARCHAR(64) NOT NULL,
    dialect VARCHAR(16) NOT NULL, body TEXT NOT NULL, created_at FLOAT NOT NULL, request_id VARCHAR(64),
    text TEXT, issues TEXT, valid INTEGER
);
CREATE TABLE IF NOT EXISTS floor_executions (
    id VARCHAR(128) PRIMARY KEY, plan_id VARCHAR(128) NOT NULL, parent_id VARCHAR(128),
    status VARCHAR(16) NOT NULL, limits TEXT NOT NULL, calls INTEGER NOT NULL, cost FLOAT NOT NULL,
    owner VARCHAR(128), lease_until FLOAT, result TEXT, created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL,
    api_key VARCHAR(64), source_plan_id VARCHAR(128), cancel_requested INTEGER NOT NULL DEFAULT 0,
    session INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS floor_executions_claim ON floor_executions (status, lease_until);
"""

INSERT_PLAN = "INSERT INTO floor_plans (id, version, hash, dialect, body, created_at) VALUES (?, 1, ?, 'native', ?, ?)"
READ_PLAN = "SELECT body FROM floor_plans WHERE id = ?"
INSERT_RUN = (
    "INSERT INTO floor_executions (id, plan_id, status, limits, calls, cost, created_at, updated_at, source_plan_id)"
    " VALUES (?, ?, 'running', '{}', 0, 0, ?, ?, ?)"
)
FINISH_RUN = "UPDATE floor_executions SET status = 'succeeded', calls = ?, result = ?, updated_at = ? WHERE id = ?"
READ_RUN = "SELECT id, source_plan_id, status, calls, result, created_at, updated_at FROM floor_executions WHERE id = ?"

Execute = Callable[[str, tuple[Any, ...]], Awaitable[tuple[Any, ...] | None]]  # a statement -> its first row


def add_up(plan: dict[str, Any]) -> dict[str, Any]:
    """The outputs of a chain of ``add`` steps (arguments ``a``, ``b``: numbers or ``$ref:<step>``)."""
    values: dict[str, Any] = {}
    for step in plan["steps"]:
        args = step["arguments"]
        a, b = (values[v[5:]] if isinstance(v, str) and v.startswith("$ref:") else v for v in (args["a"], args["b"]))
        values[step["id"]] = a + b
    return {sid: values[sid] for sid in plan["output_steps"]}


@asynccontextmanager
async def sqlite_database(path: str) -> AsyncIterator[Execute]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.executescript(SCHEMA)

    async def execute(sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(sql, params).fetchone()
        return row

    try:
        yield execute
    finally:
        conn.close()


@asynccontextmanager
async def postgres_database(url: str) -> AsyncIterator[Execute]:
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    pool: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
    for _ in range(POOL):
        pool.put_nowait(await psycopg.AsyncConnection.connect(conninfo, autocommit=True))
    conn = await pool.get()
    for statement in SCHEMA.split(";"):
        if statement.strip():
            await conn.execute(statement.replace("FLOAT", "DOUBLE PRECISION"))
    pool.put_nowait(conn)

    async def execute(sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        conn = await pool.get()
        try:
            cur = await conn.execute(sql.replace("?", "%s"), params, prepare=True)
            return await cur.fetchone() if cur.description else None
        finally:
            pool.put_nowait(conn)

    try:
        yield execute
    finally:
        while not pool.empty():
            await pool.get_nowait().close()


def create_app(db_url: str) -> FastAPI:
    state: dict[str, Execute] = {}
    tasks: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        opened = (
            sqlite_database(db_url.split("///", 1)[1]) if db_url.startswith("sqlite") else postgres_database(db_url)
        )
        async with opened as execute:
            state["db"] = execute
            yield
            while tasks:
                await asyncio.gather(*tasks)

    app = FastAPI(title="floor", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/plans", status_code=201)
    async def create_plan(request: Request) -> Response:
        body = await request.body()
        plan = json.loads(body)["plan"]
        plan_id = f"plan_{uuid.uuid4().hex}"
        await state["db"](INSERT_PLAN, (plan_id, plan_id[5:37], json.dumps(plan), time.time()))
        return JSONResponse({"plan_id": plan_id, "plan": plan}, status_code=201)

    async def finish(execution_id: str, plan: dict[str, Any]) -> None:
        outputs = add_up(plan)
        await state["db"](FINISH_RUN, (len(plan["steps"]), json.dumps({"outputs": outputs}), time.time(), execution_id))

    @app.post("/v1/plans/{plan_id}/executions", status_code=202)
    async def execute(plan_id: str) -> Response:
        row = await state["db"](READ_PLAN, (plan_id,))
        if row is None:
            raise HTTPException(404, "no such plan")
        execution_id = f"exec_{uuid.uuid4().hex}"
        now = time.time()
        await state["db"](INSERT_RUN, (execution_id, plan_id, now, now, plan_id))
        task = asyncio.create_task(finish(execution_id, json.loads(row[0])))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return JSONResponse({"execution_id": execution_id, "plan_id": plan_id, "status": "running"}, status_code=202)

    @app.get("/v1/executions/{execution_id}")
    async def get_execution(execution_id: str) -> dict[str, Any]:
        row = await state["db"](READ_RUN, (execution_id,))
        if row is None:
            raise HTTPException(404, "no such execution")
        result = json.loads(row[4]) if row[4] else {}
        return {
            "execution_id": row[0],
            "plan_id": row[1],
            "status": row[2],
            "calls": row[3],
            "outputs": result.get("outputs", {}),
            "created_at": row[5],
            "updated_at": row[6],
        }

    return app


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--db", required=True, help="sqlite:///PATH or a postgresql:// URL")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    config = uvicorn.Config(
        create_app(args.db), host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="on"
    )
    asyncio.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
