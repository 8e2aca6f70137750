"""``Idempotency-Key`` on POST routes: the same key and body give the same response, once."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from .._errors import ToolplanError
from ..planner import new_id
from ._errors import ApiError, coded, error_body
from ._keep import Finish
from ._store import ServiceStore

log = logging.getLogger("toolplan.service")

__all__ = ("Action", "Outcome", "idempotent")

HEADER = "Idempotency-Key"
Outcome = tuple[int, dict[str, Any]]
#: ``action(id, finish)``: ``finish`` (None without an Idempotency-Key) lets the action's write keep its response.
Action = Callable[[str, Finish | None], Awaitable[Outcome]]


async def _outcome(action: Action, reserved: str, finish: Finish | None = None) -> Outcome:
    try:
        return await action(reserved, finish)
    except (ApiError, ToolplanError) as exc:
        parts = coded(exc)
        assert parts is not None
        status, code, message, details = parts
        return status, error_body(code, message, details)


def _worth_keeping(outcome: Outcome) -> bool:
    """Errors the client can fix (4xx other than 429) are kept; errors worth retrying (429, 5xx) are not."""
    status = outcome[0]
    return status < 500 and status != 429


async def idempotent(
    request: Request,
    data: ServiceStore,
    prefix: str,
    action: Action,
    *,
    keep: Callable[[Outcome], bool] = _worth_keeping,
    optimistic: bool = False,
) -> JSONResponse:
    """Run ``action(id)`` (``id`` a new ``{prefix}_...`` id) once per Idempotency-Key and body.

    A response is kept once it is known, and replayed for a repeat, when ``keep`` says so: by
    default errors the client can fix (4xx other than 429) are kept too, errors worth retrying
    (429, 5xx) are not: a retry does the request again, at once. A repeat that arrives while the
    first is in progress gets 409. When an earlier attempt died before its response was
    kept, the repeat does the work again with the id that attempt reserved: the action finds what
    that attempt stored under it instead of making a second one.

    An action whose write makes its response may keep it in that write's transaction (``finish``,
    passed to `ServiceStore.save_plan` or `ServiceStore.enqueue`): then it is not written again.
    ``optimistic`` (for such an action, whose only effect is that write): the action runs first with
    a new id, and its write records the key with the response, or stores nothing if the key is known;
    anything but a response kept that way is done again as above (the key claimed first).
    """
    key = request.headers.get(HEADER)
    if key is None:
        status, body = await _outcome(action, new_id(prefix))
        return JSONResponse(body, status_code=status)
    if not 1 <= len(key) <= 255 or not key.isprintable():
        raise ApiError(400, "invalid_idempotency_key", f"{HEADER} must be 1 to 255 printable characters.")
    api_key: str = request.state.api_key
    fingerprint = hashlib.sha256(
        request.method.encode() + b" " + request.url.path.encode() + b"?" + request.url.query.encode() + b"\n"
        + await request.body()
    ).hexdigest()  # fmt: skip
    if optimistic:  # the usual case, a new key: one transaction records it with the response and the work
        reserved = new_id(prefix)
        first = Finish(api_key, key, fingerprint=fingerprint, reserved_id=reserved)
        try:
            await action(reserved, first)
        except (ApiError, ToolplanError):
            pass  # a refusal (the key is known, or the request is wrong): the usual way below answers it
        except Exception:  # not expected: said in the log, and the usual way below does the work (or fails) again
            log.warning(
                "The one-transaction write for %s %s failed; doing it the usual way.", prefix, key, exc_info=True
            )
        if first.kept is not None:
            return JSONResponse(first.kept[1], status_code=first.kept[0])
    claimed = await data.claim_idempotency(api_key, key, fingerprint, new_id(prefix))
    if claimed.state == "mismatch":
        raise ApiError(
            409,
            "idempotency_key_reused",
            f"This {HEADER} was used with another request (route or body): use a new key for a new request.",
        )
    if claimed.state == "busy":
        raise ApiError(
            409, "idempotency_key_in_use", f"A request with this {HEADER} is in progress: retry once it has answered."
        )
    if claimed.state == "done":
        assert claimed.status_code is not None
        return JSONResponse(claimed.response, status_code=claimed.status_code, headers={"Idempotent-Replayed": "true"})
    finish = Finish(api_key, key)
    status, body = await _outcome(action, claimed.reserved_id, finish)
    if finish.kept is not None:
        pass  # kept by the action's own write
    elif keep((status, body)):
        await data.finish_idempotency(finish, status, body)
    else:  # a retry may try again at once, with the same reserved id
        await data.release_idempotency(api_key, key)
    return JSONResponse(body, status_code=status)
