"""The store's tables (SQLAlchemy Core) and its ordered migrations, applied when a store opens.

SQLAlchemy owns the schema and the dialects; the hot path (`_writer.py`) runs prebuilt statements
on the driver's connection. A database written by a newer toolplan is refused, never altered.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from .._errors import StoreError

__all__ = (
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "api_keys",
    "blobs",
    "budget_windows",
    "chunks",
    "declarations",
    "events",
    "executions",
    "idempotency",
    "meta",
    "metadata",
    "migrate",
    "plans",
    "requests",
    "result_cache",
    "schedule_firings",
    "schedules",
    "skills",
    "steps",
    "tool_stats",
)

metadata = sa.MetaData()

meta = sa.Table(
    "toolplan_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

plans = sa.Table(
    "toolplan_plans",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False, default=1),
    sa.Column("parent_id", sa.String(128), nullable=True),  # the plan this one repairs
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("dialect", sa.String(16), nullable=False),
    sa.Column(
        "body", sa.Text, nullable=False
    ),  # the plan IR as JSON (`_codec.py`); "null" for a draft that did not parse
    sa.Column("created_at", sa.Float, nullable=False),
    # v2: a planner's draft (`Store.save_request`): its request, the model's text, its issues
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("text", sa.Text, nullable=True),
    sa.Column("issues", sa.Text, nullable=True),
    sa.Column("valid", sa.Integer, nullable=True),
)

requests = sa.Table(  # v2: a question a planner turned into a plan
    "toolplan_requests",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("query", sa.Text, nullable=False),
    sa.Column("plan_id", sa.String(128), nullable=True),  # the final version
    sa.Column("usage", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

executions = sa.Table(
    "toolplan_executions",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("plan_id", sa.String(128), nullable=False),
    sa.Column("parent_id", sa.String(128), nullable=True),  # e.g. the agent run that ran this plan
    sa.Column("status", sa.String(16), nullable=False),  # queued, running, succeeded, failed, cancelled
    sa.Column("limits", sa.Text, nullable=False),
    sa.Column("calls", sa.Integer, nullable=False, default=0),  # budget used
    sa.Column("cost", sa.Float, nullable=False, default=0.0),
    sa.Column("owner", sa.String(128), nullable=True),  # the process holding the lease
    sa.Column("lease_until", sa.Float, nullable=True),  # wall-clock seconds
    sa.Column("result", sa.Text, nullable=True),  # plan-level facts of a finished run (JSON)
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Index("toolplan_executions_claim", "status", "lease_until"),
    # v3: the service's columns: the API key that made it, the plan id it was asked to run (a
    # planner's draft or a posted plan; ``plan_id`` is the content-addressed row it ran), and a
    # cancel asked of whichever process holds it.
    sa.Column("api_key", sa.String(64), nullable=True),
    sa.Column("source_plan_id", sa.String(128), nullable=True),
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default="0"),
    # v9: the run's sessions so far: the claim that creates or takes it up (a resume, a worker's
    # claim) counts one more. A step whose row ended in an earlier session was reused by the later ones.
    sa.Column("session", sa.Integer, nullable=False, server_default="0"),
)

steps = sa.Table(
    "toolplan_steps",
    metadata,
    sa.Column("execution_id", sa.String(128), primary_key=True),
    sa.Column("step_id", sa.String(256), primary_key=True),
    sa.Column("tool", sa.String(256), nullable=False),
    sa.Column("call_tool", sa.String(256), nullable=False),  # the tool of the last call started
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("fallback", sa.Integer, nullable=False, default=0),  # the last call was the fallback
    sa.Column("idempotency_key", sa.String(512), nullable=False),
    sa.Column("output", sa.Text, nullable=True),  # JSON; NULL when kept in toolplan_blobs
    sa.Column("output_blob", sa.String(160), nullable=True),
    sa.Column("output_note", sa.Text, nullable=True),  # set when the output was not JSON data
    sa.Column("error_kind", sa.String(32), nullable=True),
    sa.Column("error_message", sa.Text, nullable=True),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.Column("used_fallback", sa.Integer, nullable=False, default=0),
    sa.Column("warnings", sa.Text, nullable=True),
    sa.Column("arguments", sa.Text, nullable=True),
    sa.Column(
        "session", sa.Integer, nullable=False, server_default="0"
    ),  # v9: the run's session its row was written in
    # v10: the steps of the run that had the same call (JSON list; NULL: none), and a result from the cache
    sa.Column("shared_with", sa.Text, nullable=True),
    sa.Column("cached", sa.Integer, nullable=False, server_default="0"),
)

events = sa.Table(
    "toolplan_events",
    metadata,
    sa.Column("execution_id", sa.String(128), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),  # gap-free per execution, from 1
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("step_id", sa.String(256), nullable=True),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)

blobs = sa.Table(
    "toolplan_blobs",
    metadata,
    sa.Column("id", sa.String(160), primary_key=True),
    sa.Column("execution_id", sa.String(128), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
)


api_keys = sa.Table(  # v3: the service's API keys, hashed
    "toolplan_api_keys",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),  # SHA-256 of the secret, hex
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
    # v12: whether the key may answer executions that wait for approval (1: yes, as every key before).
    sa.Column("can_approve", sa.Integer, nullable=False, server_default="1"),
    # v13: seconds its executions keep read_only results in the result cache (NULL: the service's setting).
    sa.Column("cache_ttl", sa.Float, nullable=True),
)

idempotency = sa.Table(  # v3: one row per (API key, Idempotency-Key) the service has seen
    "toolplan_idempotency",
    metadata,
    sa.Column("api_key", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),  # method, route and body, hashed
    sa.Column("reserved_id", sa.String(128), nullable=False),  # the id the request creates
    sa.Column("status_code", sa.Integer, nullable=True),  # NULL while the request is in progress
    sa.Column("response", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)


tool_stats = sa.Table(  # v4: a ToolPolicy's decayed statistics per (group, tool), shared by every process
    "toolplan_tool_stats",
    metadata,
    sa.Column("group_name", sa.String(512), primary_key=True),
    sa.Column("tool", sa.String(256), primary_key=True),
    sa.Column("n", sa.Float, nullable=False),
    sa.Column("reward", sa.Float, nullable=False),
    sa.Column("successes", sa.Float, nullable=False),
    sa.Column("latency", sa.Float, nullable=False),
    sa.Column("cost", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),  # wall-clock seconds: the decay counts from here
)


schedules = sa.Table(  # v5: plans to run later (`toolplan.schedules`)
    "toolplan_schedules",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # cron, every, once
    sa.Column("spec", sa.String(200), nullable=False),  # the cron expression, seconds, or the time (ISO)
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("plan_id", sa.String(128), nullable=False),  # the content-addressed row of toolplan_plans; "" for a task
    sa.Column("limits", sa.Text, nullable=False),
    sa.Column("catch_up", sa.String(16), nullable=False),  # once, skip
    sa.Column("next_at", sa.Float, nullable=True),  # wall-clock seconds of the next firing; NULL: no more
    sa.Column("enabled", sa.Integer, nullable=False),
    sa.Column("fired", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("task", sa.Text, nullable=True),  # v8: an agent task the planner turns into a plan at each firing
    sa.Index("toolplan_schedules_due", "enabled", "next_at"),
)

schedule_firings = sa.Table(  # v5: one row per due time of a schedule: its run, or why none ran
    "toolplan_schedule_firings",
    metadata,
    sa.Column("schedule_id", sa.String(64), primary_key=True),
    sa.Column("due_at", sa.Float, primary_key=True),  # the unique key: a due time fires at most once
    sa.Column("run_id", sa.String(128), nullable=True),  # NULL for a missed firing skipped (catch_up=skip)
    sa.Column("fired_at", sa.Float, nullable=False),
    sa.Column("missed", sa.Integer, nullable=False),  # earlier due times this firing stands for
    sa.Column("owner", sa.String(128), nullable=False),  # the scheduler process that fired it
    sa.Column("error", sa.Text, nullable=True),  # v8: why a task's firing started no run (its plan failed)
)

skills = sa.Table(  # v5: saved plans (`toolplan.skills`), one row per version
    "toolplan_skills",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("plan", sa.Text, nullable=False),  # the plan template as JSON (with {{params.x}})
    sa.Column("parameters", sa.Text, nullable=False),  # JSON Schema of the parameters
    sa.Column("embedding", sa.Text, nullable=True),  # JSON list of floats, when an embedder was given
    sa.Column("created_at", sa.Float, nullable=False),
)

budget_windows = sa.Table(  # v7: budget windows beyond one run (per API key and hour, ...), shared by workers
    "toolplan_budget_windows",
    metadata,
    sa.Column("key", sa.String(256), primary_key=True),
    sa.Column("window_start", sa.Float, primary_key=True),  # seconds since the epoch
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("cost", sa.Float, nullable=False),
    # v10: the key's model spend in the window
    sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("money", sa.Float, nullable=False, server_default="0"),
)


chunks = sa.Table(  # v6: the knowledge base's chunks (toolplan.knowledge), their vectors and text index
    "toolplan_chunks",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),  # the full-text index's row id
    sa.Column("id", sa.String(64), nullable=False, unique=True),  # hash of namespace, source, document, position
    sa.Column("namespace", sa.String(128), nullable=False),
    sa.Column("source", sa.String(1024), nullable=False),
    sa.Column("doc_hash", sa.String(64), nullable=False),  # SHA-256 of the whole ingested text
    sa.Column("position", sa.Integer, nullable=False),  # the chunk's index in its document
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),  # JSON object
    sa.Column("model", sa.String(200), nullable=False),  # the embedding provider's name
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("embedding", sa.LargeBinary, nullable=False),  # float32, little-endian, L2-normalised
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("toolplan_chunks_source", "namespace", "source"),
    sa.Index("toolplan_chunks_model", "namespace", "model", "seq"),  # a vector cache's cheap "has it changed?"
    sqlite_autoincrement=True,  # a seq is never reused: (count, max seq) changes with every write
)

declarations = sa.Table(  # v7: the plans an agent run declared (`declare_plan`), for `toolplan audit`
    "toolplan_declarations",
    metadata,
    sa.Column("run_id", sa.String(128), primary_key=True),  # the agent run's id (agent_...)
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),  # from 1, in the order declared
    sa.Column("body", sa.Text, nullable=False),  # the declared plan as the model sent it (JSON)
    sa.Column("created_at", sa.Float, nullable=False),
)


result_cache = sa.Table(  # v10: results of read_only tools kept across runs (`toolplan.ResultCache`)
    "toolplan_result_cache",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),  # SHA-256 of the tool and its canonical arguments, hex
    sa.Column("tool", sa.String(256), nullable=False),
    sa.Column("value", sa.Text, nullable=False),  # JSON
    sa.Column("stored_at", sa.Float, nullable=False),  # wall-clock seconds
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Index("toolplan_result_cache_expiry", "expires_at"),
)


def _v1(conn: sa.Connection) -> None:
    # Tables are made in their newest shape; later migrations add only what a database made by an
    # earlier toolplan lacks.
    for table in (plans, executions, steps, events, blobs):
        table.create(conn, checkfirst=True)


def _v2(conn: sa.Connection) -> None:
    """The planner's requests, and the draft columns of plans."""
    requests.create(conn, checkfirst=True)
    _add_columns(conn, plans, ("request_id", "text", "issues", "valid"))


def _v3(conn: sa.Connection) -> None:
    """The service's API keys and idempotency records, and its columns of executions."""
    api_keys.create(conn, checkfirst=True)
    idempotency.create(conn, checkfirst=True)
    _add_columns(conn, executions, ("api_key", "source_plan_id", "cancel_requested"))


def _v4(conn: sa.Connection) -> None:
    """The tool policy's statistics."""
    tool_stats.create(conn, checkfirst=True)


def _v5(conn: sa.Connection) -> None:
    """Schedules, their firings, and saved plans (skills)."""
    for table in (schedules, schedule_firings, skills):
        table.create(conn, checkfirst=True)


def _v6(conn: sa.Connection) -> None:
    """The knowledge base's chunks, with a full-text index: FTS5 in SQLite, a tsvector in PostgreSQL."""
    chunks.create(conn, checkfirst=True)
    if conn.dialect.name == "postgresql":
        conn.execute(
            sa.text(
                "ALTER TABLE toolplan_chunks ADD COLUMN IF NOT EXISTS tsv tsvector "
                "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
            )
        )
        conn.execute(sa.text("CREATE INDEX IF NOT EXISTS toolplan_chunks_tsv ON toolplan_chunks USING GIN (tsv)"))
        return
    # An external-content FTS5 index over the chunks' text, kept in step by triggers.
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS toolplan_chunks_fts USING fts5("
        "content, content='toolplan_chunks', content_rowid='seq', tokenize='porter unicode61')"
    )
    conn.exec_driver_sql(
        "CREATE TRIGGER IF NOT EXISTS toolplan_chunks_ai AFTER INSERT ON toolplan_chunks BEGIN "
        "INSERT INTO toolplan_chunks_fts(rowid, content) VALUES (new.seq, new.content); END"
    )
    conn.exec_driver_sql(
        "CREATE TRIGGER IF NOT EXISTS toolplan_chunks_ad AFTER DELETE ON toolplan_chunks BEGIN "
        "INSERT INTO toolplan_chunks_fts(toolplan_chunks_fts, rowid, content) "
        "VALUES ('delete', old.seq, old.content); END"
    )


def _v7(conn: sa.Connection) -> None:
    """Budget windows, and agent runs' declared plans."""
    budget_windows.create(conn, checkfirst=True)
    declarations.create(conn, checkfirst=True)


def _v8(conn: sa.Connection) -> None:
    """Schedules whose target is an agent task, and the error of a firing that started no run."""
    _add_columns(conn, schedules, ("task",))
    _add_columns(conn, schedule_firings, ("error",))


def _v9(conn: sa.Connection) -> None:
    """The session of a run and of each step row: which steps a resumed run reused.

    Rows written before have session 0 on both sides: shown as not reused, as they were.
    """
    _add_columns(conn, executions, ("session",))
    _add_columns(conn, steps, ("session",))


def _v10(conn: sa.Connection) -> None:
    """Model spend (tokens, money) in budget windows."""
    _add_columns(conn, budget_windows, ("input_tokens", "output_tokens", "money"))


def _v11(conn: sa.Connection) -> None:
    """Repeated calls: which steps shared a call, which results came from the cache, and the cache itself."""
    _add_columns(conn, steps, ("shared_with", "cached"))
    result_cache.create(conn, checkfirst=True)


def _v12(conn: sa.Connection) -> None:
    """Approval in the service: a key may run executions and not answer them. Keys made before may."""
    _add_columns(conn, api_keys, ("can_approve",))


def _v13(conn: sa.Connection) -> None:
    """A result cache per API key: how long its executions keep results of read_only tools."""
    _add_columns(conn, api_keys, ("cache_ttl",))


def _add_columns(conn: sa.Connection, table: sa.Table, names: tuple[str, ...]) -> None:
    have = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
    for name in names:
        if name not in have:
            column = table.c[name]
            kind = column.type.compile(dialect=conn.dialect)
            default = f" NOT NULL DEFAULT {column.server_default.arg}" if column.server_default is not None else ""  # type: ignore[attr-defined]
            conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}{default}"))


#: Ordered migrations: migration ``n`` takes the schema from version ``n - 1`` to ``n``.
MIGRATIONS: tuple[Callable[[sa.Connection], None], ...] = (
    _v1,
    _v2,
    _v3,
    _v4,
    _v5,
    _v6,
    _v7,
    _v8,
    _v9,
    _v10,
    _v11,
    _v12,
    _v13,
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(engine: sa.Engine) -> int:
    """Bring the database's schema to `SCHEMA_VERSION`; returns the version found before.

    Raises:
        StoreError: the database was written by a newer toolplan (its schema version is higher).
    """
    with engine.begin() as conn:
        # One migrating process at a time: the others wait here, then find the schema made.
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301885150)"))
        else:  # SQLite's driver starts no transaction before DDL: take the write lock first
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        meta.create(conn, checkfirst=True)
        row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
        found = int(row[0]) if row is not None else 0
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"This database holds toolplan schema version {found}, newer than this toolplan knows "
                f"({SCHEMA_VERSION}). Upgrade toolplan (pip install -U toolplan) to use it."
            )
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](conn)
        if found == 0:
            conn.execute(sa.insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
        elif found < SCHEMA_VERSION:
            conn.execute(sa.update(meta).where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
    return found
