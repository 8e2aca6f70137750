"""What the planner service keeps beside runs, and the pages its listings read.

That is posted plans, queued executions with their API key, cancel requests, API keys (hashed)
and idempotency records.

Each operation is one transaction on the store's database thread.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from .._errors import ConcurrencyLimitError, PlanIssue, PlanNotFoundError, RunConflictError, StoreError, UserError
from .._json import dumps, loads
from .._numbers import finite_number
from ..execute import RunLimits
from ..plan import Plan
from ..store import RunInfo, Store
from ..store import _internal as t
from ..store._internal import decode, encode, insert_queued, load_info, not_found, plan_row
from ._keep import IDEM_FINISH, IDEM_INSERT, IDEM_READ, Claimed, Finish, Keep
from ._read import Readers, read

__all__ = (
    "ApiKey",
    "Page",
    "ServiceStore",
)

_ACTIVE = ("queued", "running")
_KEY_PREFIX = "tpk"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """A stored API key (its secret is never stored: only its SHA-256)."""

    key_id: str
    name: str
    created_at: float
    revoked_at: float | None
    can_approve: bool = True  # it may answer executions that wait for approval
    cache_ttl: float | None = None  # seconds its executions keep read_only results (None: the service's)


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One page of a listing: rows (JSON data), and the cursor of the next page (None at the end)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


# The statements of every request (key check, idempotency, queueing), built once: on SQLite building a
# statement and its cache key costs more than running it.
_ACTIVE_KEY = sa.select(t.api_keys.c.hash).where(
    t.api_keys.c.id == sa.bindparam("key_id"), t.api_keys.c.revoked_at.is_(None)
)
_PLAN_INSERT = sa.insert(t.plans)
_RUN_EXISTS = sa.select(t.executions.c.id).where(t.executions.c.id == sa.bindparam("run_id"))
_ACTIVE_OF_KEY = sa.select(sa.func.count()).where(
    t.executions.c.api_key == sa.bindparam("api_key"), t.executions.c.status.in_(_ACTIVE)
)
_PLAN = sa.select(t.plans).where(t.plans.c.id == sa.bindparam("plan_id"))
_CANCELS = sa.select(t.executions.c.id).where(
    t.executions.c.id.in_(sa.bindparam("run_ids", expanding=True)),
    t.executions.c.owner == sa.bindparam("owner"),
    t.executions.c.cancel_requested == 1,
)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _cursor(created_at: float, row_id: str) -> str:
    return base64.urlsafe_b64encode(dumps([created_at, row_id]).encode()).decode().rstrip("=")


def _uncursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, row_id = loads(raw.decode())
        if not isinstance(created_at, int | float) or not isinstance(row_id, str):
            raise ValueError
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cursor {cursor[:40]!r} is not a cursor this service gave: pass the next_cursor of the previous page."
        ) from exc
    return float(created_at), row_id


class ServiceStore:
    """The service's operations on a `Store` (its tables are part of the store's schema)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.readers: Readers | None = None  # the app's read pool on PostgreSQL, while it runs

    async def _call(self, fn: Any) -> Any:
        return await self.store.db.transact(fn)

    async def _read(self, fn: Any) -> Any:
        return await read(self.store, fn, self.readers)

    async def run_info(self, execution_id: str) -> RunInfo:
        """Everything stored about an execution (as `Store.get_run`; RunNotFoundError if there is none)."""
        return await self._read(lambda engine: load_info(engine, execution_id))  # type: ignore[no-any-return]

    # -- plans and executions ----------------------------------------------------------------------

    async def save_plan(
        self, plan_ref: str, plan: Plan, warnings: Sequence[PlanIssue] = (), *, keep: Keep | None = None
    ) -> None:
        """Store a posted plan under ``plan_ref`` (a ``plan_...`` id), valid, with no request, and its warnings.

        ``keep``: an Idempotency-Key's response, kept in the same transaction (see `Finish`).
        """
        body = encode(plan)
        issues = dumps([i.to_dict(severity=True) for i in warnings])
        now = time.time()

        def write(engine: sa.Engine) -> None:
            row = plan_row(body, now, plan.dialect) | {"id": plan_ref, "valid": 1, "text": None, "issues": issues}
            with engine.begin() as conn:
                if keep is not None:  # first: a key known already stores nothing
                    keep[0].write(conn, keep[1], keep[2])
                conn.execute(_PLAN_INSERT, row)

        await self._call(write)
        if keep is not None:
            keep[0].kept = keep[1], keep[2]

    async def enqueue(
        self,
        run_id: str,
        plan: Plan,
        limits: RunLimits,
        *,
        source_plan_id: str | None,
        api_key: str | None,
        max_active: int | None,
        approval: Mapping[str, Any] | None = None,
        keep: Keep | None = None,
    ) -> None:
        """Store a queued execution of ``plan`` (for a worker to claim), in one transaction.

        ``approval`` (an `ApprovalRule` as JSON data) is kept as its ``approval_rule`` event;
        ``keep``, an Idempotency-Key's response, in the same transaction (see `Finish`).

        Raises:
            RunConflictError: ``run_id`` is stored already.
            ConcurrencyLimitError: ``api_key`` has ``max_active`` executions queued or running.
        """
        body = encode(plan)
        now = time.time()

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                if keep is not None:  # first: a key known already stores nothing (and is not a 429)
                    keep[0].write(conn, keep[1], keep[2])
                if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is not None:
                    raise RunConflictError(f"Execution {run_id!r} exists already.", run_id=run_id)
                if api_key is not None and max_active is not None:
                    active = conn.execute(_ACTIVE_OF_KEY, {"api_key": api_key}).scalar_one()
                    if active >= max_active:
                        raise ConcurrencyLimitError(
                            f"This API key has {active} executions queued or running, its limit: wait for one "
                            "to finish (GET /v1/executions?status=running) or cancel one, then try again."
                        )
                insert_queued(conn, run_id, plan, body, limits, now, api_key=api_key, source_plan_id=source_plan_id)
                if approval is not None:
                    _append_event(conn, run_id, "approval_rule", approval, now)

        await self._call(write)
        if keep is not None:
            keep[0].kept = keep[1], keep[2]

    async def plan_info(self, plan_ref: str) -> dict[str, Any]:
        """A stored plan with what is known of it, as JSON data.

        The keys: ``plan_id``, ``plan`` (None for a draft that did not parse), ``dialect``,
        ``request_id``, ``parent_id``, ``valid``, ``issues``, ``created_at``.

        Raises:
            PlanNotFoundError: no plan has that id.
        """

        def read(engine: sa.Engine) -> dict[str, Any]:
            with engine.connect() as conn:
                row = conn.execute(_PLAN, {"plan_id": plan_ref}).mappings().first()
            if row is None:
                raise PlanNotFoundError(f"No plan {plan_ref!r} is stored here.", plan_id=plan_ref)
            plan = decode(row["body"]).to_dict() if row["body"] != "null" else None
            return {
                "plan_id": row["id"],
                "plan": plan,
                "dialect": row["dialect"],
                "request_id": row["request_id"],
                "parent_id": row["parent_id"],
                "valid": bool(row["valid"]) if row["valid"] is not None else plan is not None,
                "issues": loads(row["issues"]) if row["issues"] else [],
                "created_at": row["created_at"],
            }

        return await self._read(read)  # type: ignore[no-any-return]

    async def request_cancel(self, run_id: str) -> str:
        """Cancel an execution (the ``cancel`` transition); its process stops a running one.

        A queued one (or one waiting for approval) is cancelled at once; a running one has its cancel
        asked, and its process stores it cancelled as it stops (``stop``).

        Returns the status now: ``cancelled``, or ``running`` with the cancel asked.

        Raises:
            RunNotFoundError: no execution has that id.
            RunConflictError: it has finished (succeeded or failed).
        """

        def step(conn: sa.Connection, now: float) -> str | None:
            status, owner = _unfinished(conn, run_id, "there is nothing to cancel.")
            if status == "cancelled":
                return "cancelled"
            if status in ("queued", "pending_approval"):  # nobody holds it: cancelled now
                if _move(conn, run_id, status, status="cancelled", cancel_requested=0, updated_at=now):
                    _append_event(conn, run_id, "plan_finished", {"status": "cancelled"}, now)
                    return "cancelled"
            elif _move(conn, run_id, "running", owner=owner, cancel_requested=1, updated_at=now):
                return "running"  # its process stops it (at once, or at its next look)
            return None

        return await self._call(_until_moved(step))  # type: ignore[no-any-return]

    async def cancels_for(self, owner: str, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` (held by ``owner``) have a cancel asked."""
        if not run_ids:
            return []

        def read(engine: sa.Engine) -> list[str]:
            with engine.connect() as conn:
                return [r[0] for r in conn.execute(_CANCELS, {"run_ids": list(run_ids), "owner": owner})]

        return await self._read(read)  # type: ignore[no-any-return]

    async def requeue(self, run_id: str) -> str:
        """Resume an execution (the ``resume`` transition): queue a cancelled one, withdraw a cancel asked.

        A cancelled one is queued again, for a worker to take up where it stopped; a running one whose
        cancel was asked goes on (if its process stops it meanwhile, it is queued again, not cancelled).

        Returns the status now: ``queued``, or ``running`` (a running execution whose process died is
        taken up when its lease ends).

        Raises:
            RunNotFoundError: no execution has that id.
            RunConflictError: it has finished (succeeded or failed).
        """

        def step(conn: sa.Connection, now: float) -> str | None:
            status, owner = _unfinished(
                conn,
                run_id,
                "resume takes up only a cancelled or stopped execution. "
                "Start a new one: POST /v1/plans/{plan_id}/executions.",
            )
            if status == "cancelled":
                if _move(conn, run_id, "cancelled", status="queued", cancel_requested=0, updated_at=now):
                    _append_event(conn, run_id, "run_queued", {"status": "queued"}, now)
                    return "queued"
            elif _move(conn, run_id, status, owner=owner, cancel_requested=0, updated_at=now):
                return str(status)
            return None

        return await self._call(_until_moved(step))  # type: ignore[no-any-return]

    async def let_go(self, run_id: str, owner: str) -> str | None:
        """The ``stop`` transition of a claim ``owner`` holds but no run took up.

        For a claim cancelled, or whose process stops, before its run began: stored ``cancelled`` if
        a cancel was asked, else ``queued``.

        Returns the status it was left in; None when ``owner`` does not hold it (the run let go of it).
        """
        e = t.executions

        def write(engine: sa.Engine) -> str | None:
            now = time.time()
            with engine.begin() as conn:
                asked = conn.execute(
                    sa.select(e.c.cancel_requested).where(e.c.id == run_id, e.c.owner == owner, e.c.status == "running")
                ).scalar()
                if asked is None:
                    return None
                status = "cancelled" if asked else "queued"
                if not _move(conn, run_id, "running", owner=owner, status=status, owner_to=None, updated_at=now):
                    return None
                kind = "plan_finished" if status == "cancelled" else "run_queued"
                _append_event(conn, run_id, kind, {"status": status}, now)
                return status

        # On the database thread, behind the journal's writes: a run stopped just after it claimed
        # may have queued some (its first event), which commit first, in their order.
        return await self.store.db.call(lambda engine, _raw: write(engine))  # type: ignore[no-any-return]

    async def status_of(self, run_id: str) -> str:
        """An execution's status.

        Raises:
            RunNotFoundError: no execution has that id.
        """
        status = await self._execution_value(run_id, t.executions.c.status)
        if status is None:
            raise not_found(run_id)
        return str(status)

    async def _execution_value(self, run_id: str, column: sa.Column[Any]) -> Any:
        def read(engine: sa.Engine) -> Any:
            with engine.connect() as conn:
                return conn.execute(sa.select(column).where(t.executions.c.id == run_id)).scalar()

        return await self._read(read)

    # -- listings ----------------------------------------------------------------------------------

    async def page(
        self,
        kind: Literal["executions", "requests", "plans"],
        *,
        limit: int,
        cursor: str | None = None,
        filters: Mapping[str, str | None] | None = None,
    ) -> Page:
        """Newest first, ``limit`` rows after ``cursor``; ``filters`` are column equalities."""
        table = {"executions": t.executions, "requests": t.requests, "plans": t.plans}[kind]
        after = _uncursor(cursor) if cursor else None
        columns = {
            "executions": ("id", "status", "plan_id", "source_plan_id", "parent_id", "calls", "created_at",
                           "updated_at"),
            "requests": ("id", "query", "plan_id", "created_at"),
            "plans": ("id", "version", "parent_id", "request_id", "dialect", "valid", "created_at"),
        }[kind]  # fmt: skip

        def read(engine: sa.Engine) -> Page:
            query = sa.select(*(table.c[c] for c in columns))
            for name, value in (filters or {}).items():
                if value is not None:
                    query = query.where(table.c[name] == value)
            if kind == "plans":  # posted plans and planner drafts, not the rows executions keep of what they ran
                query = query.where(table.c.valid.is_not(None))
            if after is not None:
                query = query.where(sa.tuple_(table.c.created_at, table.c.id) < sa.tuple_(*after))
            query = query.order_by(table.c.created_at.desc(), table.c.id.desc()).limit(limit + 1)
            with engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(query).mappings()]
            more = len(rows) > limit
            rows = rows[:limit]
            cursor_out = _cursor(rows[-1]["created_at"], rows[-1]["id"]) if more and rows else None
            if kind == "executions":
                for r in rows:  # the plan the client asked to run, when it gave one by id
                    r["plan_id"] = r.pop("source_plan_id") or r["plan_id"]
            name = {"executions": "execution_id", "requests": "request_id", "plans": "plan_id"}[kind]
            rows = [{name: r.pop("id"), **r} for r in rows]
            if kind == "plans":
                for r in rows:
                    r["valid"] = bool(r["valid"]) if r["valid"] is not None else True
            return Page(items=rows, next_cursor=cursor_out)

        return await self._read(read)  # type: ignore[no-any-return]

    # -- API keys ----------------------------------------------------------------------------------

    async def create_key(
        self, name: str, *, can_approve: bool = True, cache_ttl: float | None = None
    ) -> tuple[ApiKey, str]:
        """A new API key named ``name``: its record and its secret (shown once, stored only hashed).

        ``can_approve=False`` makes a key that may run executions but not answer their approvals.
        ``cache_ttl``: seconds its executions keep results of ``read_only`` tools in the store's result
        cache (0: none); None: the service's ``ServiceConfig.cache_ttl``.
        """
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise UserError("An API key needs a name of 1 to 200 characters (who or what uses it).")
        if cache_ttl is not None and (not finite_number(cache_ttl) or cache_ttl < 0):
            raise UserError(f"cache_ttl must be a finite number of seconds >= 0, got {cache_ttl!r}.")
        key_id = secrets.token_hex(6)
        secret = f"{_KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        now = time.time()

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(
                    sa.insert(t.api_keys).values(
                        id=key_id,
                        name=name,
                        hash=_hash(secret),
                        created_at=now,
                        can_approve=int(can_approve),
                        cache_ttl=cache_ttl,
                    )
                )

        await self._call(write)
        key = ApiKey(
            key_id=key_id, name=name, created_at=now, revoked_at=None, can_approve=can_approve, cache_ttl=cache_ttl
        )
        return key, secret

    async def list_keys(self) -> list[ApiKey]:
        """Every key, newest first (revoked ones too)."""

        def read(engine: sa.Engine) -> list[ApiKey]:
            k = t.api_keys
            with engine.connect() as conn:
                rows = conn.execute(sa.select(k).order_by(k.c.created_at.desc())).mappings()
                return [
                    ApiKey(
                        key_id=r["id"],
                        name=r["name"],
                        created_at=r["created_at"],
                        revoked_at=r["revoked_at"],
                        can_approve=bool(r["can_approve"]),
                        cache_ttl=r["cache_ttl"],
                    )
                    for r in rows
                ]

        return await self._read(read)  # type: ignore[no-any-return]

    async def revoke_key(self, key_id: str) -> None:
        """Revoke a key: the service refuses it from its next request.

        Raises:
            StoreError: no key has that id.
        """
        k = t.api_keys

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                done = conn.execute(
                    sa.update(k).where(k.c.id == key_id, k.c.revoked_at.is_(None)).values(revoked_at=time.time())
                ).rowcount
            if done != 1:
                raise StoreError(f"No active API key {key_id!r}: `toolplan keys list` shows the keys.")

        await self._call(write)

    async def check_key(self, secret: str) -> str | None:
        """The id of the active key whose secret this is, or None. Compared in constant time."""
        parts = secret.split("_")
        if len(parts) < 3 or parts[0] != _KEY_PREFIX or len(secret) > 200:
            return None
        key_id = parts[1]

        def read(engine: sa.Engine) -> str | None:
            with engine.connect() as conn:
                return conn.execute(_ACTIVE_KEY, {"key_id": key_id}).scalar()

        stored = await self._read(read)
        if stored is None:
            hmac.compare_digest(_hash(secret), _hash(""))  # the same work either way
            return None
        return key_id if hmac.compare_digest(_hash(secret), stored) else None

    # -- idempotency -------------------------------------------------------------------------------

    async def claim_idempotency(
        self, api_key: str, key: str, fingerprint: str, reserved_id: str, *, stale: float = 120.0
    ) -> Claimed:
        """Record ``key`` as in progress with ``reserved_id``, or report what it already holds.

        A key in progress is ``busy`` for ``stale`` seconds; after that its attempt counts as dead
        and the key is ``new`` again with the id that attempt reserved, so a retry finishes that
        attempt's work instead of repeating it.
        """

        def write(engine: sa.Engine) -> Claimed:
            now = time.time()
            try:
                with engine.begin() as conn:
                    row = conn.execute(IDEM_READ, {"k_api_key": api_key, "k_key": key}).mappings().first()
                    if row is None:
                        new = {"fingerprint": fingerprint, "reserved_id": reserved_id, "created_at": now}
                        conn.execute(IDEM_INSERT, {"api_key": api_key, "key": key, **new})
                        return Claimed(state="new", reserved_id=reserved_id)
            except sa.exc.IntegrityError:  # a concurrent first use of the key
                return Claimed(state="busy", reserved_id=reserved_id)
            if row["fingerprint"] != fingerprint:
                return Claimed(state="mismatch", reserved_id=row["reserved_id"])
            if row["status_code"] is None:  # in progress; or its attempt died, once it is older than `stale`
                state: Literal["new", "busy"] = "busy" if row["created_at"] > now - stale else "new"
                return Claimed(state=state, reserved_id=row["reserved_id"])
            return Claimed(
                state="done",
                reserved_id=row["reserved_id"],
                status_code=row["status_code"],
                response=loads(row["response"]),
            )

        return await self._call(write)  # type: ignore[no-any-return]

    async def release_idempotency(self, api_key: str, key: str) -> None:
        """Let a retry with ``key`` go ahead at once (its answer was not kept), with the same reserved id."""
        idem = t.idempotency

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(
                    sa.update(idem)
                    .where(idem.c.api_key == api_key, idem.c.key == key, idem.c.status_code.is_(None))
                    .values(created_at=0.0)  # as if its attempt had died long ago
                )

        await self._call(write)

    async def finish_idempotency(self, finish: Finish, status_code: int, response: Any) -> None:
        """Keep the response of a request made with ``finish.key``, to replay it."""
        params = finish.params(status_code, response)

        def write(engine: sa.Engine) -> None:
            with engine.begin() as conn:
                conn.execute(IDEM_FINISH, params)

        await self._call(write)


_UNSET: Any = object()


def _until_moved(step: Callable[[sa.Connection, float], str | None]) -> Callable[[sa.Engine], str]:
    """A write that runs ``step`` in a transaction until it returns a status.

    Each change is a compare-and-set on the status read; ``step`` returns None when the status
    moved meanwhile, and it is read again.
    """

    def write(engine: sa.Engine) -> str:
        while True:
            now = time.time()
            with engine.begin() as conn:
                status = step(conn, now)
            if status is not None:
                return status

    return write


def _unfinished(conn: sa.Connection, run_id: str, then: str) -> tuple[str, str | None]:
    """An execution's status and owner, read for a transition; a finished one is refused (``then`` says why)."""
    e = t.executions
    row = conn.execute(sa.select(e.c.status, e.c.owner).where(e.c.id == run_id)).first()
    if row is None:
        raise not_found(run_id)
    status, owner = row
    if status in ("succeeded", "failed"):
        raise RunConflictError(f"Execution {run_id!r} has finished ({status}); {then}", run_id=run_id)
    return str(status), owner


def _move(
    conn: sa.Connection, run_id: str, expected: str, *, owner: Any = _UNSET, owner_to: Any = _UNSET, **values: Any
) -> bool:
    """Compare-and-set: change an execution's row if its status is still ``expected``; True if changed.

    With ``owner``, its holder must be that one too; ``owner_to`` sets the holder (and drops its lease).
    """
    e = t.executions
    where = [e.c.id == run_id, e.c.status == expected]
    if owner is not _UNSET:
        where.append(e.c.owner.is_(None) if owner is None else e.c.owner == owner)
    if owner_to is not _UNSET:
        values |= {"owner": owner_to, "lease_until": None}
    return bool(conn.execute(sa.update(e).where(*where).values(**values)).rowcount == 1)


def _append_event(conn: sa.Connection, run_id: str, kind: str, payload: Mapping[str, Any], now: float) -> None:
    ev = t.events
    seq = conn.execute(sa.select(sa.func.max(ev.c.seq)).where(ev.c.execution_id == run_id)).scalar() or 0
    conn.execute(
        sa.insert(ev).values(
            execution_id=run_id, seq=seq + 1, type=kind, step_id=None, payload=dumps(dict(payload)), at=now
        )
    )
