"""A planner's requests in the store: the question and every version of its plan (a repair linked to its parent)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .._errors import PlanIssue, PlanNotFoundError, RunConflictError
from .._json import dumps, loads
from ..plan import Plan
from ..store import Store
from ..store import _internal as t
from ..store._internal import decode, encode, plan_hash

__all__ = ("PlanVersion", "RequestInfo", "get_request", "save_request")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanVersion:
    """One version of a planner's plan: the first draft, or the repair of its ``parent_id``.

    ``plan`` is None when the model's text did not parse; ``text`` is what the model wrote.
    """

    plan_id: str
    parent_id: str | None
    plan: Plan | None
    text: str
    issues: tuple[PlanIssue, ...]
    valid: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    """A stored planning request: the question and every version of its plan, oldest first."""

    request_id: str
    query: str
    plan_id: str | None  # the final version
    created_at: float
    versions: tuple[PlanVersion, ...]


async def save_request(
    store: Store,
    request_id: str,
    query: str,
    versions: Sequence[PlanVersion],
    *,
    usage: Mapping[str, Any] | None = None,
) -> None:
    """Store a planning request and every version of its plan (a repair linked to its parent), in one transaction.

    Raises:
        RunConflictError: ``request_id`` is stored already.
    """
    now = time.time()

    def write(engine: sa.Engine, _raw: Any) -> None:
        with engine.begin() as conn:
            if conn.execute(sa.select(t.requests.c.id).where(t.requests.c.id == request_id)).first():
                raise RunConflictError(f"Request {request_id!r} is stored already.", run_id=request_id)
            final = versions[-1].plan_id if versions else None
            usage_text = dumps(dict(usage)) if usage is not None else None
            row = {"id": request_id, "query": query, "plan_id": final, "usage": usage_text, "created_at": now}
            conn.execute(sa.insert(t.requests).values(**row))
            for n, v in enumerate(versions, start=1):
                body = encode(v.plan) if v.plan is not None else "null"
                conn.execute(
                    sa.insert(t.plans).values(
                        id=v.plan_id,
                        version=n,
                        parent_id=v.parent_id,
                        hash=plan_hash(body),
                        dialect=v.plan.dialect if v.plan is not None else "native",
                        body=body,
                        created_at=now,
                        request_id=request_id,
                        text=v.text,
                        issues=dumps([i.to_dict(severity=True) for i in v.issues]),
                        valid=int(v.valid),
                    )
                )

    await store.db.call(write)


async def get_request(store: Store, request_id: str) -> RequestInfo:
    """A planning request stored in ``store``, with every version of its plan.

    Raises:
        PlanNotFoundError: no request has that id.
    """

    def read(engine: sa.Engine) -> RequestInfo:
        p, r = t.plans, t.requests
        with engine.connect() as conn:
            row = conn.execute(sa.select(r).where(r.c.id == request_id)).mappings().first()
            if row is None:
                raise PlanNotFoundError(f"No planning request {request_id!r} is stored here.", plan_id=request_id)
            rows = conn.execute(sa.select(p).where(p.c.request_id == request_id).order_by(p.c.version)).mappings()
            versions = tuple(_version(v) for v in rows)
        return RequestInfo(
            request_id=request_id,
            query=row["query"],
            plan_id=row["plan_id"],
            created_at=row["created_at"],
            versions=versions,
        )

    return await store.db.read(read)  # type: ignore[no-any-return]


def _version(row: Mapping[Any, Any]) -> PlanVersion:
    issues = loads(row["issues"]) if row["issues"] else []
    return PlanVersion(
        plan_id=row["id"],
        parent_id=row["parent_id"],
        plan=decode(row["body"]) if row["body"] and row["body"] != "null" else None,
        text=row["text"] or "",
        issues=tuple(PlanIssue.from_dict(i) for i in issues),
        valid=bool(row["valid"]),
    )
