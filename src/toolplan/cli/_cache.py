"""``toolplan run --cache memory|store``: results of ``read_only`` tools kept across runs (`ResultCache`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer

from .._errors import UserError
from ..execute import ResultCache
from ._common import fail

if TYPE_CHECKING:
    from ..execute import CacheStore

__all__ = ("CacheChoice", "CacheOpt", "CacheSpec", "CacheToolOpt", "CacheTtlOpt", "cache_spec")

DEFAULT_TTL = 60.0  # seconds, as `ResultCache`'s own default


class CacheChoice(enum.StrEnum):
    """Where ``--cache`` keeps results."""

    memory = "memory"
    store = "store"


CacheOpt = Annotated[
    CacheChoice | None,
    typer.Option(
        "--cache",
        help="Answer calls of read_only tools from a result cache and keep their results for --cache-ttl: 'memory' "
        "(this command only) or 'store' (the --db database: later runs and other processes see them). A call "
        "answered from it is not made: its step says cached. Tools not marked read_only are never cached.",
    ),
]
CacheTtlOpt = Annotated[
    float | None,
    typer.Option(
        "--cache-ttl",
        metavar="SECONDS",
        help=f"With --cache: seconds a result is kept (default {DEFAULT_TTL:g}; 0: only the tools --cache-tool names).",
    ),
]
CacheToolOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--cache-tool",
        metavar="TOOL=SECONDS",
        help="With --cache: this tool's own time to live (0: never cached); repeat for more tools.",
    ),
]


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """The cache the command line asks for; made once the run's store is open (``--cache store``)."""

    where: CacheChoice
    ttl: float
    tools: dict[str, float] = field(default_factory=dict[str, float])

    def make(self, store: CacheStore | None) -> ResultCache:
        """The run's `ResultCache`: in ``store`` for ``--cache store``, else in memory."""
        return ResultCache(self.ttl, tools=self.tools, store=store if self.where is CacheChoice.store else None)


def cache_spec(
    where: CacheChoice | None, ttl: float | None, tools: list[str] | None, *, db: str | None
) -> CacheSpec | None:
    """The ``--cache`` options checked together (one error line each), or None without ``--cache``."""
    if where is None:
        if ttl is not None or tools:
            fail("--cache-ttl and --cache-tool go with --cache: add --cache memory (or --cache store with --db).")
        return None
    if where is CacheChoice.store and db is None:
        fail(
            "--cache store keeps results in the run's database: add --db URL (a SQLite file such as runs.db, or "
            "PostgreSQL), or use --cache memory."
        )
    per_tool: dict[str, float] = {}
    for item in tools or ():
        name, sep, seconds = item.partition("=")
        try:
            per_tool[name.strip()] = float(seconds)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            fail(f"--cache-tool takes TOOL=SECONDS, e.g. --cache-tool get_weather=300; got {item!r}.")
    spec = CacheSpec(where, DEFAULT_TTL if ttl is None else ttl, per_tool)
    try:
        spec.make(None)  # the values checked now, by `ResultCache`, before anything runs
    except UserError as exc:
        message = exc.message.replace("ttl must", "--cache-ttl must", 1)
        fail(message.replace("tools[", "--cache-tool ", 1).replace("] must", " must", 1))
    return spec
