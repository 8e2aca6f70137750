"""Idempotency-Key records: what a claim finds (`Claimed`), and a response kept in a write's transaction (`Finish`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from .._json import dumps
from ..store import _internal as t

__all__ = ("IDEM_FINISH", "IDEM_INSERT", "IDEM_READ", "Claimed", "Finish", "Keep")

# Built once (on SQLite building a statement and its cache key costs more than running it).
_IDEM_KEY = (t.idempotency.c.api_key == sa.bindparam("k_api_key")) & (t.idempotency.c.key == sa.bindparam("k_key"))
IDEM_READ = sa.select(t.idempotency).where(_IDEM_KEY)
IDEM_FINISH = sa.update(t.idempotency).where(_IDEM_KEY)
IDEM_INSERT = sa.insert(t.idempotency)


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """An idempotency record: ``state`` new (go on), done (replay ``response``), busy or mismatch."""

    state: Literal["new", "done", "busy", "mismatch"]
    reserved_id: str
    status_code: int | None = None
    response: Any = None


@dataclass(slots=True)
class Finish:
    """The Idempotency-Key of a request, whose response a write may keep in its own transaction.

    `save_plan` and `enqueue` take it with the response they make (``keep``): the response is kept
    as that write commits, and ``kept`` holds it then (status and body). With ``fingerprint`` and
    ``reserved_id`` the key was not claimed first: the write records it, done, in the same
    transaction (one transaction where there were three), and fails, storing nothing, if the key is
    known already.
    """

    api_key: str
    key: str
    fingerprint: str | None = None  # with reserved_id: not claimed yet (the write records the key)
    reserved_id: str | None = None
    kept: tuple[int, Any] | None = None  # the response, once its write has committed

    def params(self, status_code: int, response: Any) -> dict[str, Any]:
        return {"k_api_key": self.api_key, "k_key": self.key, "status_code": status_code, "response": dumps(response)}

    def write(self, conn: sa.Connection, status_code: int, response: Any) -> None:
        """Keep the response in ``conn``'s transaction (IntegrityError: an unclaimed key is known already)."""
        if self.reserved_id is None:
            conn.execute(IDEM_FINISH, self.params(status_code, response))
            return
        row: dict[str, Any] = {"api_key": self.api_key, "key": self.key, "fingerprint": self.fingerprint}
        row |= {"reserved_id": self.reserved_id, "created_at": time.time()}
        conn.execute(IDEM_INSERT, row | {"status_code": status_code, "response": dumps(response)})


Keep = tuple[Finish, int, Any]  # an Idempotency-Key's record, and the status and body of the response to keep
