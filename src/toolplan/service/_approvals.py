"""Approval in the service: the rule an execution is started with, the answers, and who may give them.

An execution started with an approval rule keeps it as its ``approval_rule`` event. When it waits
(status ``pending_approval``), ``POST /v1/executions/{id}/approvals`` checks the answers against
the stored request, keeps them as an ``approval_answered`` event and queues the execution again
(one transaction); the runner resumes it with the rule and every answer given for a step that
still waits, so no step that ran runs again.

An execution whose waiting step passes its deadline (the rule's ``timeout``) is queued again by
the runner's timer (`expire_due`), with an ``approval_expired`` event: resumed, the step ends
``rejected`` ("approval timed out"), its dependents are skipped and the rest of the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .._errors import ApprovalError, RunConflictError, UserError
from .._json import loads, too_deep
from ..execute import Approval, ApprovalRule
from ..execute._internal import check_answers
from ..store import Store
from ..store import _internal as t
from ..tools import ToolRegistry
from ._errors import ApiError
from ._read import Readers
from ._read import read as read_here
from ._store import ServiceStore, _append_event, _move, _unfinished

__all__ = (
    "AnswerIn",
    "ApprovalIn",
    "answer",
    "answers_json",
    "expire_due",
    "may_approve",
    "parse_answers",
    "rule_and_answers",
    "rule_json",
    "rule_of",
)

MAX_ANSWERS = 1000
WAITING = "pending_approval"
EXPIRED = "approval_expired"
TIMED_OUT = "approval timed out"
_UNENDED = frozenset({WAITING, "pending"})  # a step answered ahead of time is "pending" till it is ready


class ApprovalIn(BaseModel):
    """Which steps of an execution need a person's approval (`toolplan.ApprovalRule`, without a function)."""

    model_config = ConfigDict(extra="forbid")
    every: bool = False
    destructive: bool = Field(False, description="Steps whose tool is marked destructive.")
    not_read_only: bool = Field(False, description="Steps whose tool is not marked read_only.")
    tools: list[str] = Field(default_factory=list, max_length=1000, description="Steps that call these tools.")
    cost_above: float | None = Field(None, ge=0, description="Steps whose call costs more than this.")
    timeout: float | None = Field(None, gt=0, description="Seconds a step may wait; then it ends rejected.")


class AnswerIn(BaseModel):
    """One waiting step's answer: ``{"approve": true}``, with ``"arguments"`` to edit, or ``{"reject": "reason"}``."""

    model_config = ConfigDict(extra="forbid")
    approve: bool | None = None
    arguments: dict[str, Any] | None = None
    reject: str | None = Field(None, max_length=2000)


_ANSWERS: TypeAdapter[dict[str, AnswerIn]] = TypeAdapter(dict[str, AnswerIn])


def rule_of(body: ApprovalIn | None) -> dict[str, Any] | None:
    """The rule's JSON data (`ApprovalRule.to_dict`), or None without one.

    Raises:
        ApiError: 400 ``invalid_approval`` when the rule marks no step.
    """
    if body is None:
        return None
    try:
        rule = ApprovalRule.from_dict(body.model_dump())
    except UserError as exc:
        raise ApiError(400, "invalid_approval", exc.message) from None
    return rule.to_dict()


def rule_json(data: object) -> dict[str, Any] | None:
    """`rule_of` JSON data (GraphQL's ``approval``); a value that is no rule is 400 ``invalid_approval``."""
    if data is None:
        return None
    try:
        body = ApprovalIn.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, "invalid_approval", f"approval is not a rule: {_first(exc)}.") from None
    return rule_of(body)


def answers_json(data: object) -> dict[str, Approval]:
    """`parse_answers` of JSON data (GraphQL's ``answers``); bad data is 400 ``invalid_approval``."""
    try:
        raw = _ANSWERS.validate_python(data)
    except ValidationError as exc:
        raise ApiError(400, "invalid_approval", f"answers cannot be read: {_first(exc)}.") from None
    return parse_answers(raw)


def _first(exc: ValidationError) -> str:
    e = exc.errors(include_url=False)[0]
    return f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}"


def parse_answers(raw: Mapping[str, AnswerIn]) -> dict[str, Approval]:
    """The answers by step id.

    Raises:
        ApiError: 400 ``invalid_approval`` for an answer that neither approves nor rejects, or does both.
    """
    if not raw:
        raise ApiError(400, "invalid_approval", 'answers is empty: give {"step id": {"approve": true}} or a reject.')
    if len(raw) > MAX_ANSWERS:
        raise ApiError(400, "invalid_approval", f"answers holds {len(raw)} steps, over {MAX_ANSWERS}.")
    out: dict[str, Approval] = {}
    for sid, a in raw.items():
        if a.reject is not None and (a.approve or a.arguments is not None):
            raise ApiError(400, "invalid_approval", f"The answer for step {sid!r} both approves and rejects: give one.")
        if a.reject is not None:
            out[sid] = Approval.reject(a.reject or "rejected by the approver")
        elif a.approve:
            if a.arguments is not None and too_deep(a.arguments):
                raise ApiError(400, "invalid_approval", f"The edited arguments of step {sid!r} are nested too deeply.")
            out[sid] = Approval.approve(a.arguments)
        else:
            raise ApiError(
                400,
                "invalid_approval",
                f'The answer for step {sid!r} neither approves nor rejects: send {{"approve": true}} '
                '(with "arguments" to edit them) or {"reject": "reason"}.',
            )
    return out


async def answer(store: Store, tools: ToolRegistry, run_id: str, answers: Mapping[str, Approval]) -> str:
    """Check ``answers`` against what execution ``run_id`` waits for; keep them and queue it again.

    Returns the status now (``queued``).

    Raises:
        RunNotFoundError: no such execution.
        RunConflictError: it does not wait for approval (answered already, or it never waited).
        ApiError: 400 ``invalid_approval``: an answer names a step that does not wait, or its edit does
            not fit the tool's schema; nothing changed.
    """
    info = await store.get_run(run_id)
    request = info.result.approval
    if info.summary.status != WAITING or request is None:
        raise RunConflictError(
            f"Execution {run_id!r} does not wait for approval (its status is {info.summary.status}): "
            "GET /v1/executions/{id} shows what it does.",
            run_id=run_id,
        )
    try:
        check_answers(request, answers, tools)
    except ApprovalError as exc:
        raise ApiError(400, "invalid_approval", exc.message, dict(exc.problems)) from None
    payload = {"answers": {sid: a.to_dict() for sid, a in answers.items()}}

    def write(engine: sa.Engine) -> str:
        now = time.time()
        with engine.begin() as conn:
            status, _owner = _unfinished(conn, run_id, "it cannot be answered.")
            if status != WAITING or not _move(conn, run_id, WAITING, status="queued", updated_at=now):
                raise RunConflictError(
                    f"Execution {run_id!r} was answered meanwhile (its status is {status}): GET it to see.",
                    run_id=run_id,
                )
            _append_event(conn, run_id, "approval_answered", payload, now)
            _append_event(conn, run_id, "run_queued", {"status": "queued"}, now)
        return "queued"

    return await ServiceStore(store)._call(write)  # type: ignore[no-any-return]


# Built once: every execution the runner takes up reads them.
_RULE_AND_ANSWERS = (
    sa.select(t.events.c.type, t.events.c.payload)
    .where(
        t.events.c.execution_id == sa.bindparam("run_id"),
        t.events.c.type.in_(("approval_rule", "approval_answered", EXPIRED)),
    )
    .order_by(t.events.c.seq)
)


async def rule_and_answers(
    store: Store, run_id: str, readers: Readers | None = None
) -> tuple[ApprovalRule | None, dict[str, Approval]]:
    """The execution's approval rule (None: it has none) and the answers given, later ones first.

    A step whose wait the timer ended (an ``approval_expired`` event) is answered with a rejection,
    "approval timed out".

    The answers are for the steps that have not ended only (a step answered before has run since):
    those that wait now, and those answered ahead of time that are not ready yet.
    """

    def read(engine: sa.Engine) -> list[tuple[str, str]]:
        with engine.connect() as conn:
            rows = conn.execute(_RULE_AND_ANSWERS, {"run_id": run_id}).all()
        return [(str(r[0]), str(r[1])) for r in rows]

    rows = await read_here(store, read, readers)
    rule: ApprovalRule | None = None
    answers: dict[str, Approval] = {}
    for kind, payload in rows:
        data = loads(payload)
        if kind == "approval_rule" and rule is None:
            rule = ApprovalRule.from_dict(data)
        elif kind == "approval_answered":
            answers |= {sid: Approval.from_dict(a) for sid, a in data.get("answers", {}).items()}
        elif kind == EXPIRED:  # the timer's answer: the step ends rejected, as a person's rejection would
            answers |= {str(sid): Approval.reject(TIMED_OUT) for sid in data.get("steps", ())}
    if answers:
        steps = (await store.get_run(run_id)).result.steps  # (claimed now: its request is in its step rows)
        answers = {sid: a for sid, a in answers.items() if sid in steps and steps[sid].status in _UNENDED}
    return rule, answers


async def expire_due(store: Store, now: float | None = None) -> float | None:
    """Queue again the waiting executions one of whose steps has passed its deadline; the next deadline.

    Each is moved from ``pending_approval`` to ``queued`` with an ``approval_expired`` event naming
    the steps (compare-and-set: one answered meanwhile is left alone); the runner that takes it up
    ends those steps ``rejected``. Returns the earliest deadline still ahead (epoch seconds), or None.
    """
    e = t.executions

    def read(engine: sa.Engine) -> list[tuple[str, str | None]]:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(e.c.id, e.c.result).where(e.c.status == WAITING)).all()
        return [(str(r[0]), r[1]) for r in rows]

    at = time.time() if now is None else now
    due: dict[str, list[str]] = {}
    ahead: float | None = None
    for run_id, facts in await store.db.read(read):
        request = (loads(facts) if facts else {}).get("approval") or {}
        for step in request.get("steps") or ():
            expires = step.get("expires_at") if step.get("ready", True) else None
            if not isinstance(expires, int | float):
                continue
            if expires <= at:
                due.setdefault(run_id, []).append(str(step.get("step_id")))
            elif ahead is None or expires < ahead:
                ahead = float(expires)
    if not due:
        return ahead

    def write(engine: sa.Engine) -> None:
        now = time.time()
        for run_id, steps in due.items():
            with engine.begin() as conn:
                if _move(conn, run_id, WAITING, status="queued", updated_at=now):
                    _append_event(conn, run_id, EXPIRED, {"steps": steps, "reason": TIMED_OUT}, now)
                    _append_event(conn, run_id, "run_queued", {"status": "queued"}, now)

    await ServiceStore(store)._call(write)
    return ahead


async def may_approve(store: Store, key_id: str) -> bool:
    """Whether store key ``key_id`` may answer approvals (a key it does not hold: False)."""
    k = t.api_keys

    def read(engine: sa.Engine) -> bool:
        with engine.connect() as conn:
            found = conn.execute(sa.select(k.c.can_approve).where(k.c.id == key_id)).scalar()
        return bool(found)

    return await store.db.read(read)  # type: ignore[no-any-return]
