"""`ResultCache`: results of ``read_only`` tools kept across runs for a time to live (opt-in).

A run given a cache (``execute_plan(..., cache=ResultCache(ttl=60))``, ``Agent(cache=...)``, or
``RunLimits(cache=...)``) looks each call of a ``read_only`` tool up by its tool and canonical
arguments before calling it. A hit stands in for the call: the step's record says ``cached``, a
`CacheHit` event is emitted, nothing is charged to the budget. A call that succeeds is kept for the
tool's time to live. Failures are never kept.

Entries live in this process (bounded, oldest dropped first) or, given a ``store``
(`toolplan.store.open_store`), in its database, where other processes see them too.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._errors import ToolplanError, UncacheableToolError, UserError
from .._json import compact_encoder
from .._numbers import finite_number
from ..plan._internal import _show
from ..tools._internal import owned

if TYPE_CHECKING:
    from ..tools import ToolAnnotations, ToolRegistry

__all__ = ("CacheStore", "ResultCache", "call_key")

_MAX_KEY_CHARS = 100_000  # arguments longer than this as JSON text are not shared or cached


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


# Canonical JSON, made once (`json.dumps` with options builds an encoder per call).
_CANONICAL = compact_encoder(_refuse, ensure_ascii=False, sort_keys=True)


def call_key(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """``tool`` and the canonical JSON of ``arguments`` (sorted keys, no whitespace); None if not JSON data."""
    try:
        text = "".join(_CANONICAL(arguments, 0))
    except (TypeError, ValueError, RecursionError):  # not JSON data, NaN, too deep, a key that is not a string
        return None
    if len(text) > _MAX_KEY_CHARS:
        return None
    return f"{tool}\x00{text}"


@runtime_checkable
class CacheStore(Protocol):
    """Where a `ResultCache` keeps its entries when not in memory (`toolplan.store.Store` is one)."""

    async def cache_get(self, key: str, now: float) -> tuple[str, float] | None:
        """The JSON text kept under ``key`` and when it was kept (epoch seconds), unless expired at ``now``."""
        ...

    async def cache_put(self, key: str, tool: str, value: str, stored_at: float, expires_at: float) -> None:
        """Keep ``value`` (JSON text) under ``key`` until ``expires_at`` (epoch seconds)."""
        ...


class ResultCache:
    """Results of ``read_only`` tools kept across runs, each for its tool's time to live.

    Args:
        ttl: Seconds a result is kept, for every ``read_only`` tool the ``tools`` mapping does not
            name; 0 caches only the tools named there.
        tools: Per-tool time to live in seconds (0 turns caching off for that tool). Naming a tool
            that is not ``read_only`` is refused when a run starts (`UncacheableToolError`).
        store: Keep entries in a store's database (`toolplan.store.Store`, or any `CacheStore`)
            instead of this process's memory: other processes and later sessions see them.
        max_entries: Most entries kept in memory (the oldest go first); not used with a store.

    Tools not marked ``read_only`` are never cached. A store that fails to read or write is a miss
    (the tool is called), said in the step's warnings.
    """

    __slots__ = ("_memory", "hits", "max_entries", "misses", "store", "tools", "ttl")

    def __init__(
        self,
        ttl: float = 60.0,
        *,
        tools: Mapping[str, float] | None = None,
        store: CacheStore | None = None,
        max_entries: int = 10_000,
    ) -> None:
        _check_ttl("ttl", ttl)
        named = dict(tools or {})
        for name, seconds in named.items():
            _check_ttl(f"tools[{_show(name)}]", seconds)
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise UserError(f"max_entries must be a whole number >= 1, got {_show(max_entries)}.")
        if store is not None and not isinstance(store, CacheStore):
            raise UserError(f"store must be a toolplan store (toolplan.store.open_store), got {type(store).__name__}.")
        self.ttl = float(ttl)
        self.tools = named
        self.store = store
        self.max_entries = max_entries
        self._memory: OrderedDict[str, tuple[float, float, Any]] = OrderedDict()  # key -> (expires, kept, value)
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        where = "store" if self.store is not None else "memory"
        return f"ResultCache(ttl={self.ttl:g}, tools={self.tools!r}, in {where})"

    def ttl_for(self, tool: str, annotations: ToolAnnotations) -> float:
        """Seconds a result of ``tool`` is kept: 0 for a tool that is not ``read_only`` (never cached)."""
        if not annotations.read_only:
            return 0.0
        return self.tools.get(tool, self.ttl)

    def check(self, registry: ToolRegistry) -> None:
        """Refuse a time to live for a tool of ``registry`` that is not ``read_only``.

        Raises:
            UncacheableToolError: ``tools`` names such a tool (with a time to live above 0).
        """
        for name, seconds in self.tools.items():
            if seconds > 0 and name in registry and not registry.definition(name).annotations.read_only:
                raise UncacheableToolError(name)

    async def get(self, key: str) -> tuple[Any, float] | None:
        """A copy of the value kept under ``key`` and its age in seconds, or None (absent or expired).

        Raises:
            ToolplanError: the store failed (the caller treats it as a miss).
        """
        if self.store is None:
            entry = self._memory.get(key)
            if entry is None:
                self.misses += 1
                return None
            now = time.monotonic()
            if entry[0] <= now:
                del self._memory[key]
                self.misses += 1
                return None
            self.hits += 1
            return owned(entry[2]), now - entry[1]
        now = time.time()
        found = await self.store.cache_get(_digest(key), now)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(found[0]), max(now - found[1], 0.0)

    async def put(self, key: str, tool: str, value: Any, ttl: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl`` seconds.

        Raises:
            ToolplanError: the store failed.
        """
        if self.store is None:
            now = time.monotonic()
            memory = self._memory
            memory[key] = (now + ttl, now, owned(value))
            memory.move_to_end(key)
            while len(memory) > self.max_entries:
                memory.popitem(last=False)
            return
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ToolplanError(f"the result is not JSON data ({type(exc).__name__})") from None
        now = time.time()
        await self.store.cache_put(_digest(key), tool, text, now, now + ttl)

    def clear(self) -> None:
        """Forget every entry kept in memory (a store's entries expire on their own)."""
        self._memory.clear()


def _digest(key: str) -> str:
    import hashlib  # only a cache kept in a store needs it: `import toolplan` stays as light as it was

    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _check_ttl(name: str, value: Any) -> None:
    if not finite_number(value) or value < 0:
        raise UserError(f"{name} must be a finite number of seconds >= 0, got {_show(value)}.")
