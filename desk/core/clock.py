"""Time: one injectable clock so tests can move time instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

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
