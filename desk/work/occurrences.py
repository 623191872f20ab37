"""When a schedule's occurrences fall: chosen ISO weekdays at a local wall-clock time in an IANA
time zone, as UTC instants (docs/architecture.md, "Scheduled exports").

The wall-clock time is kept across daylight-saving changes (a Monday 08:00 in Europe/Berlin is
08:00 local in winter and in summer). On a spring-forward day a time inside the gap does not
exist: that day's occurrence is the first valid instant after it (the end of the gap, e.g.
03:00 for 02:30 in Berlin). On a fall-back day an ambiguous time happens twice: the occurrence
is the first of the two, once. Pure functions: no clock, no database.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from desk.core import inputs
from desk.core.errors import ValidationProblem

ALL_DAYS = (1, 2, 3, 4, 5, 6, 7)
_HH_MM = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
# A week, plus room for a zone that skipped a whole calendar day (Pacific/Apia, 2011-12-30).
_LOOK_DAYS = 15


def parse_days(field: str, raw: object) -> tuple[int, ...]:
    """ISO weekdays (1 = Monday … 7 = Sunday), at least one, each once: sorted."""
    if not isinstance(raw, list | tuple) or not raw:
        raise ValidationProblem(field, "choose at least one weekday (1 = Monday … 7 = Sunday)")
    days: set[int] = set()
    for d in raw:
        if isinstance(d, bool) or not isinstance(d, int) or d not in ALL_DAYS:
            raise ValidationProblem(field, "weekdays are 1 (Monday) to 7 (Sunday)")
        days.add(d)
    return tuple(sorted(days))


def parse_time(field: str, raw: object) -> str:
    """A 24-hour wall-clock time HH:MM (00:00 … 23:59)."""
    text = inputs.text(field, raw, max_len=10).strip()
    if not _HH_MM.match(text):
        raise ValidationProblem(field, "a time of day as HH:MM, from 00:00 to 23:59")
    return text


@cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def parse_zone(field: str, raw: object) -> str:
    """An IANA time zone name known to this system (Europe/Berlin, America/New_York, UTC)."""
    name = inputs.text(field, raw, max_len=64).strip()
    if name not in _zones():
        raise ValidationProblem(field, "an IANA time zone name such as Europe/Berlin or UTC")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationProblem(
            field, "an IANA time zone name such as Europe/Berlin or UTC"
        ) from None
    return name


def _wall(at: datetime, zone: ZoneInfo) -> datetime:
    return at.astimezone(zone).replace(tzinfo=None)


def resolve(day: date, at: time, zone: ZoneInfo) -> datetime:
    """The UTC instant of wall-clock `at` on `day` in `zone`: the first of two when the time is
    ambiguous (fold 0), the end of the gap when it does not exist."""
    wall = datetime.combine(day, at)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if _wall(first, zone) == wall:
        return first
    # In a gap: the two folds map to instants on either side of the transition; the occurrence
    # is the first instant whose wall-clock time is at or past `wall` (seconds are enough:
    # transitions fall on whole seconds).
    other = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(first, other), max(first, other)
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if _wall(mid, zone) >= wall:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def next_after(days: tuple[int, ...], local_time: str, zone_name: str, after: datetime) -> datetime:
    """The first occurrence strictly after `after` (UTC)."""
    zone = ZoneInfo(zone_name)
    hh, mm = (int(x) for x in local_time.split(":"))
    at = time(hh, mm)
    start = after.astimezone(zone).date() - timedelta(days=1)
    for i in range(_LOOK_DAYS):
        day = start + timedelta(days=i)
        if day.isoweekday() in days:
            when = resolve(day, at, zone)
            if when > after:
                return when
    raise ValueError(f"no occurrence within {_LOOK_DAYS} days: {days} {local_time} {zone_name}")
