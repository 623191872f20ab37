"""A team's business hours: when its SLA clocks run (docs/architecture.md, "Business hours").

A `Calendar` is a weekly plan of open intervals in the team's own wall-clock time, a set of
holidays (whole local days closed) and the team's time zone. Its two questions are the ones an
SLA asks: `due(start, seconds)` — the instant at which `seconds` of business time have passed
since `start` (a target's due time), and `elapsed(start, end)` — how much business time lies
between two instants (how much of a target is used up; a pause is two calls around it).

Every interval is turned into real instants day by day through the zone, so a day on which the
clocks change is as long as it really is: an "open all day" Sunday of a spring-forward weekend
has 23 hours, and 09:00-17:00 stays eight real hours on either side of the change. A wall-clock
time that does not exist on a change day (02:30 when 02:00 jumps to 03:00) is read as the zone
reads it (`fold=0`: the offset before the change), and an interval never ends before it starts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from desk.core.errors import ValidationProblem

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # datetime.weekday() order
MINUTES_A_DAY = 24 * 60
# The furthest a due time is looked for: a target of a year of business time in a calendar
# open one hour a week still ends inside it; beyond it the calendar is nonsense, not slow.
HORIZON_DAYS = 366 * 60
_SPAN = re.compile(r"^(\d{2}):(\d{2})-(\d{2}):(\d{2})$")

Span = tuple[int, int]  # minutes after local midnight: [open, close), close up to 24:00


@dataclass(frozen=True)
class Calendar:
    zone: ZoneInfo
    week: tuple[tuple[Span, ...], ...]  # seven days, Monday first; each day's spans in order
    holidays: frozenset[date] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if len(self.week) != 7:
            raise ValidationProblem("hours", "give the open hours of all seven days")
        if not any(close > open_ for day in self.week for open_, close in day):
            raise ValidationProblem("hours", "open at least one hour a week")

    def intervals(self, since: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The open intervals as UTC instants, in order, from the local day of `since` on
        (intervals already over at `since` included for that first day)."""
        day = since.astimezone(self.zone).date() - timedelta(days=1)
        for _ in range(HORIZON_DAYS):
            if day not in self.holidays:
                for open_, close in self.week[day.weekday()]:
                    a, b = self._instant(day, open_), self._instant(day, close)
                    if b > a:
                        yield a, b
            day += timedelta(days=1)

    def _instant(self, day: date, minutes: int) -> datetime:
        local = datetime(day.year, day.month, day.day) + timedelta(minutes=minutes)
        return local.replace(tzinfo=self.zone).astimezone(UTC)

    def due(self, start: datetime, seconds: float) -> datetime:
        """The instant at which `seconds` of business time have passed since `start`. With
        nothing left to count, `start` itself, even outside the hours (a target of zero is
        already due)."""
        left = timedelta(seconds=seconds)
        if left <= timedelta(0):
            return start
        for a, b in self.intervals(start):
            if b <= start:
                continue
            begin = max(a, start)
            if b - begin >= left:
                return begin + left
            left -= b - begin
        raise ValidationProblem("hours", f"no due time within {HORIZON_DAYS // 366} years")

    def elapsed(self, start: datetime, end: datetime) -> float:
        """Seconds of business time in [start, end); 0 when end is not after start."""
        total = timedelta(0)
        if end <= start:
            return 0.0
        for a, b in self.intervals(start):
            if a >= end:
                break
            lo, hi = max(a, start), min(b, end)
            if hi > lo:
                total += hi - lo
        return total.total_seconds()


def always(zone: str = "UTC") -> Calendar:
    """Open every minute of every day (a target in calendar time)."""
    return Calendar(_zone(zone), tuple(((0, MINUTES_A_DAY),) for _ in DAYS))


def calendar(
    zone: str, hours: Mapping[str, Sequence[str]], holidays: Sequence[str] = ()
) -> Calendar:
    """A calendar from what a team admin writes: `{"mon": ["09:00-12:00", "13:00-17:30"], …}`
    (a day left out or empty is closed; "00:00-24:00" is the whole day) and ISO dates closed.
    Refuses, naming the part to fix: an unknown zone or day, a malformed or backwards span,
    overlapping spans, a malformed date."""
    unknown = sorted(set(hours) - set(DAYS))
    if unknown:
        raise ValidationProblem("hours", f"unknown day {unknown[0]!r}; use {', '.join(DAYS)}")
    week = tuple(_spans(day, hours.get(day, ())) for day in DAYS)
    return Calendar(_zone(zone), week, frozenset(_holiday(h) for h in holidays))


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationProblem(
            "zone", f"{name!r} is not a time zone (e.g. Europe/Berlin)"
        ) from None


def _spans(day: str, texts: Sequence[str]) -> tuple[Span, ...]:
    spans = sorted(_span(day, text) for text in texts)
    for (_a, b), (c, _d) in itertools.pairwise(spans):
        if c < b:
            raise ValidationProblem("hours", f"{day}: the hours overlap; write them once")
    return tuple(spans)


def _span(day: str, text: str) -> Span:
    found = _SPAN.match(text.strip())
    if not found:
        raise ValidationProblem("hours", f"{day}: {text!r} is not like 09:00-17:00")
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    if h1 > 23 or m1 > 59 or m2 > 59 or h2 > 24 or (h2 == 24 and m2):
        raise ValidationProblem("hours", f"{day}: {text!r} is not a time of day")
    open_, close = h1 * 60 + m1, h2 * 60 + m2
    if close <= open_:
        raise ValidationProblem("hours", f"{day}: {text!r} ends before it starts")
    return open_, close


def _holiday(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValidationProblem("holidays", f"{text!r} is not a date like 2026-12-25") from None
