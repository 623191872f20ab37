"""Time: one injectable clock so tests can move time instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def arrived_at(request: object | None, clock: Clock) -> datetime:
    """When a web request arrived (`request.state.arrived_at`, stamped by web/overload.py from
    the runtime's clock), else now: a mutation is judged by the time it was asked, not by how
    long the server took to get to it."""
    state = getattr(request, "state", None)
    value = getattr(state, "arrived_at", None)
    return value if isinstance(value, datetime) else clock()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """µs since the epoch: how versions count time (ui.watch.polling, the change feed's notices)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (at - _EPOCH) // _US
