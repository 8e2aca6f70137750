"""API keys: ``X-API-Key`` on every API route, checked against hashed keys in constant time.

The keys are the store's (``toolplan keys create``) and those of ``--api-key-file``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from fastapi import Request

from ._approvals import may_approve
from ._errors import ApiError
from ._store import ServiceStore

__all__ = ("KeyCheck",)

HEADER = "X-API-Key"


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


class KeyCheck:
    """Who is calling: the id of a valid key, or a 401 that says how to get one."""

    def __init__(self, data: ServiceStore, file_keys: Iterable[str] = ()) -> None:
        self.data = data
        # Keys from --api-key-file are known by their hash only, and named by their place in the file.
        self.file_keys = [(f"file{n}", _digest(k)) for n, k in enumerate(file_keys, start=1)]

    async def __call__(self, request: Request) -> str:
        secret = request.headers.get(HEADER)
        if not secret:
            raise ApiError(
                401,
                "unauthorized",
                f"Send an API key in the {HEADER} header. Make one with `toolplan keys create --db URL NAME`.",
            )
        digest = _digest(secret)
        found: str | None = None
        for key_id, stored in self.file_keys:  # every one compared, in constant time
            if hmac.compare_digest(digest, stored):
                found = key_id
        if found is None:
            found = await self.data.check_key(secret)
        if found is None:
            raise ApiError(
                401,
                "unauthorized",
                f"The {HEADER} header holds no valid key (unknown or revoked). `toolplan keys list` shows the keys.",
            )
        request.state.api_key = found
        return found

    async def require(self, key_id: str, permission: str) -> None:
        """Refuse the caller's key (403) unless it has ``permission`` (``approve``: answer approvals).

        Keys of ``--api-key-file`` have every permission; a store key made with
        ``toolplan keys create --no-approve`` may run executions but not approve them.
        """
        if any(key_id == k for k, _ in self.file_keys) or await may_approve(self.data.store, key_id):
            return
        raise ApiError(
            403,
            "forbidden",
            f"API key {key_id} lacks the {permission!r} permission: ask for a key that has it "
            "(`toolplan keys create NAME` makes one; --no-approve keys may run executions but not approve them).",
        )
