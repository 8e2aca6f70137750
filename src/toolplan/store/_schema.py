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
    "blobs",
    "events",
    "executions",
    "meta",
    "metadata",
    "migrate",
    "plans",
    "requests",
    "steps",
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


def _v1(conn: sa.Connection) -> None:
    # Tables are made in their newest shape; later migrations add only what a database made by an
    # earlier toolplan lacks.
    for table in (plans, executions, steps, events, blobs):
        table.create(conn, checkfirst=True)


def _v2(conn: sa.Connection) -> None:
    """The planner's requests, and the draft columns of plans."""
    requests.create(conn, checkfirst=True)
    have = {c["name"] for c in sa.inspect(conn).get_columns(plans.name)}
    for column in ("request_id", "text", "issues", "valid"):
        if column not in have:
            kind = plans.c[column].type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {plans.name} ADD COLUMN {column} {kind}"))


#: Ordered migrations: migration ``n`` takes the schema from version ``n - 1`` to ``n``.
MIGRATIONS: tuple[Callable[[sa.Connection], None], ...] = (_v1, _v2)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(engine: sa.Engine) -> int:
    """Bring the database's schema to `SCHEMA_VERSION`; returns the version found before.

    Raises:
        StoreError: the database was written by a newer toolplan (its schema version is higher).
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # one migrating process at a time
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301885150)"))
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
