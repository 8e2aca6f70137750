"""When a schedule fires: parse ``when`` (cron, every, in, a time) and find its next times.

The grammar, one string:

- ``"*/15 * * * *"``: a cron expression (5 fields; 6 with seconds), read in the schedule's time zone;
- ``"every 30m"``: an interval (``s``, ``m``, ``h``, ``d``; at least 1 s, at most 366 d), first due one
  interval from now;
- ``"in 90s"``: once, after a delay;
- ``"2026-12-01T09:00"``: once, at a time (ISO 8601; without an offset it is read in the time zone).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .._errors import ToolError
from .._optional import import_optional

__all__ = ("When", "next_after", "parse_when", "zone")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_WHEN = 200
_MAX_INTERVAL = 366 * 86400
# Due times counted when catching up a cron schedule: one croniter call each, so a schedule that
# missed a year of minutes costs ~100 calls, not half a million. A firing standing for more says this many.
CATCH_UP_COUNT = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class When:
    """A parsed ``when``: its kind, its normal form and its first due time (Unix seconds)."""

    kind: str  # cron, every, once
    spec: str
    first: float


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; raises a `ToolError` naming the fix."""
    if not isinstance(name, str) or len(name) > 64:
        raise ToolError("timezone must be an IANA time zone name such as 'UTC' or 'Europe/Paris'.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"Unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Paris'.") from exc


def _croniter() -> Any:
    return import_optional("croniter", "Cron schedules", "schedules", package="croniter").croniter


def _seconds(text: str) -> float | None:
    match = _DURATION.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _UNIT[match.group(2)[0]]


def parse_when(when: str, timezone: str, now: float) -> When:
    """Parse ``when`` (see the module docstring) at time ``now``.

    Raises:
        ToolError: it is none of the forms, is out of bounds, or is a cron expression that never fires.
    """
    if not isinstance(when, str) or not when.strip() or len(when) > _MAX_WHEN:
        raise ToolError(
            f"when must be a non-empty string of at most {_MAX_WHEN} characters: a cron expression "
            "('0 9 * * 1-5'), 'every 30m', 'in 90s' or a time ('2026-12-01T09:00')."
        )
    tz = zone(timezone)
    text = when.strip()
    lowered = text.lower()
    for word, kind in (("every ", "every"), ("in ", "once")):
        if lowered.startswith(word):
            seconds = _seconds(lowered[len(word) :])
            if seconds is None or not 1 <= seconds <= _MAX_INTERVAL:
                raise ToolError(
                    f"{text!r}: write '{word}N' with a unit s, m, h or d, from 1 second to 366 days (e.g. '{word}30m')."
                )
            if kind == "every":
                return When(kind="every", spec=repr(seconds), first=now + seconds)
            at = datetime.fromtimestamp(now + seconds, tz)
            return When(kind="once", spec=at.isoformat(), first=now + seconds)
    if text[:4].isdigit() and "-" in text[:8]:
        try:
            at = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ToolError(f"{text!r} is not an ISO 8601 time: write it like '2026-12-01T09:00'.") from exc
        if at.tzinfo is None:
            at = at.replace(tzinfo=tz)
        return When(kind="once", spec=at.isoformat(), first=at.timestamp())
    first = next_after("cron", text, timezone, now)
    if first is None:
        raise ToolError(
            f"The cron expression {text!r} never fires (a date that does not exist, such as 30 February): "
            "fix its day and month fields."
        )
    return When(kind="cron", spec=text, first=first)


def next_after(kind: str, spec: str, timezone: str, after: float) -> float | None:
    """The first due time of a schedule strictly after ``after``, or None (a one-shot, a cron with none).

    For ``every`` this is counted from ``after`` itself; the scheduler counts from the due time.
    """
    if kind == "once":
        return None
    if kind == "every":
        return after + float(spec)
    croniter = _croniter()
    if not croniter.is_valid(spec):
        raise ToolError(
            f"{spec!r} is not a cron expression, interval or time: write 5 cron fields "
            "('minute hour day month weekday', e.g. '0 9 * * 1-5'), 'every 30m', 'in 90s' or '2026-12-01T09:00'."
        )
    try:
        nxt: datetime = croniter(spec, datetime.fromtimestamp(after, zone(timezone))).get_next(datetime)
    except ValueError as exc:  # croniter's CroniterBadDateError: no date matches within its search
        if type(exc).__name__ == "CroniterBadDateError":
            return None
        raise ToolError(f"The cron expression {spec!r} cannot be used: {exc}.") from exc
    return nxt.timestamp()


def catch_up(kind: str, spec: str, timezone: str, due: float, now: float) -> tuple[float | None, int]:
    """The next due time after ``now`` of a schedule due at ``due``, and how many due times it skips.

    A schedule found due long ago (no scheduler ran) fires once for all its missed times: the
    count is what that one firing stands for beyond its own, counted up to `CATCH_UP_COUNT` for a
    cron schedule (its next time is then found from ``now``, not by walking every missed time).
    """
    if kind == "once":
        return None, 0
    if kind == "every":
        interval = float(spec)
        passed = math.floor((now - due) / interval)
        return due + (passed + 1) * interval, max(passed, 0)
    missed = 0
    nxt = next_after(kind, spec, timezone, due)
    while nxt is not None and nxt <= now and missed < CATCH_UP_COUNT:
        missed += 1
        nxt = next_after(kind, spec, timezone, nxt)
    if nxt is not None and nxt <= now:  # more than the count: jump to now
        nxt = next_after(kind, spec, timezone, now)
    return nxt, missed
