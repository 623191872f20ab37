"""A ticket's SLA clocks: when each target is due, when it warns, and where it stands
(docs/architecture.md, "Business hours").

A team's `Policy` gives, per priority, the business time allowed for the first response, for
each next response and for the resolution, and the share of it at which to warn. `clocks()`
turns a ticket's facts into one `Clock` per target that applies: due and warning instants in
the team's `Calendar`, with the time the ticket spent pending (waiting on the customer) left
out — a clock paused now has no due time, only what is left of it. Pure and given `now`: the
worker that fires the warnings and breaches asks it again after every change (a reply, a
status or priority change), which is what makes a timer set before the change "superseded".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from desk.core.errors import ValidationProblem
from desk.helpdesk.business_hours import Calendar

TARGETS = ("first_response", "next_response", "resolution")
Target = Literal["first_response", "next_response", "resolution"]
State = Literal["running", "paused", "met", "breached"]
Span = tuple[datetime, datetime | None]  # a pending stretch; None: still pending


@dataclass(frozen=True)
class Policy:
    targets: Mapping[Target, Mapping[str, int]]  # target → priority → seconds of business time
    warn_share: float = 0.75

    def __post_init__(self) -> None:
        if not 0 < self.warn_share < 1:
            raise ValidationProblem("warn_share", "warn at a share between 0 and 1, e.g. 0.75")
        for target, by_priority in self.targets.items():
            if target not in TARGETS:
                raise ValidationProblem("targets", f"unknown target {target!r}")
            for priority, seconds in by_priority.items():
                if seconds <= 0:
                    raise ValidationProblem(target, f"{priority}: give a time above zero")


@dataclass(frozen=True)
class Facts:
    """What the clocks read of a ticket."""

    priority: str
    created_at: datetime
    first_response_at: datetime | None = None  # staff's first public reply
    waiting_since: datetime | None = None  # the customer's oldest message not answered yet
    resolved_at: datetime | None = None
    pending: Sequence[Span] = field(default_factory=tuple)  # in order, not overlapping


@dataclass(frozen=True)
class Clock:
    target: Target
    started_at: datetime
    state: State
    due_at: datetime | None  # None while paused
    warn_at: datetime | None
    left: float  # seconds of business time left at `now` (negative once breached)


def clocks(policy: Policy, calendar: Calendar, t: Facts, now: datetime) -> list[Clock]:
    """The ticket's clocks at `now`, one per target the policy sets for its priority."""
    out = []
    for target, start, met in _runs(t):
        seconds = policy.targets.get(target, {}).get(t.priority)
        if seconds is None or start is None:
            continue
        out.append(_clock(target, start, met, seconds, policy.warn_share, calendar, t, now))
    return out


def _runs(t: Facts) -> list[tuple[Target, datetime | None, datetime | None]]:
    """Each target's start and the moment it was met (None: not yet)."""
    next_start = t.waiting_since if t.first_response_at is not None else None
    return [
        ("first_response", t.created_at, t.first_response_at),
        ("next_response", next_start, None),
        ("resolution", t.created_at, t.resolved_at),
    ]


def _clock(
    target: Target,
    start: datetime,
    met: datetime | None,
    seconds: int,
    share: float,
    cal: Calendar,
    t: Facts,
    now: datetime,
) -> Clock:
    until = met or now
    used = _used(cal, start, until, t.pending)
    left = seconds - used
    paused = met is None and _pending_at(t.pending, now)
    due = None if paused else _due(cal, start, seconds, t.pending)
    warn = None if paused else _due(cal, start, seconds * share, t.pending)
    if met is not None:
        state: State = "met" if due is None or met <= due else "breached"
    elif paused:
        state = "paused" if left > 0 else "breached"
    else:
        state = "running" if due is None or now < due else "breached"
    return Clock(target, start, state, due, warn, left)


def _running(start: datetime, pending: Sequence[Span]) -> list[tuple[datetime, datetime | None]]:
    """The stretches from `start` on when the clock runs: between the pending ones."""
    out: list[tuple[datetime, datetime | None]] = []
    cursor: datetime | None = start
    for a, b in pending:
        if cursor is None:
            break
        if b is not None and b <= cursor:
            continue
        if a > cursor:
            out.append((cursor, a))
        cursor = b if b is None else max(b, cursor)
    if cursor is not None:
        out.append((cursor, None))
    return out


def _used(cal: Calendar, start: datetime, until: datetime, pending: Sequence[Span]) -> float:
    total = 0.0
    for a, b in _running(start, pending):
        end = until if b is None else min(b, until)
        if end > a:
            total += cal.elapsed(a, end)
    return total


def _due(
    cal: Calendar, start: datetime, seconds: float, pending: Sequence[Span]
) -> datetime | None:
    """When `seconds` of running time have passed; None when a pending stretch that has not
    ended comes first (the clock stopped short of it)."""
    left = seconds
    for a, b in _running(start, pending):
        if b is None:
            return cal.due(a, left)
        stretch = cal.elapsed(a, b)
        if stretch >= left:
            return cal.due(a, left)
        left -= stretch
    return None


def _pending_at(pending: Sequence[Span], now: datetime) -> bool:
    return any(a <= now and (b is None or now < b) for a, b in pending)
