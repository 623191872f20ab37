"""Where a ticket's SLA stands, read off its two columns (docs/architecture.md, "SLA on the
ticket"): `ticket.sla_due_at` (the soonest running due instant, NULL while no clock runs) and
`ticket.sla_breached_at` (the first breach, kept). The same rule in Python for the faces
(`state_of`) and in SQL for the filter (`sla_sql`), both at a `now` the caller gives.

A due instant already past counts as breached at once, before the breach timer has written
`sla_breached_at`: the list never says "due in -2 min". Only staff and admins see any of it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

# "Due soon": the soonest running target falls due within this.
DUE_SOON = timedelta(hours=1)


class SlaState(StrEnum):
    NONE = "NONE"  # no clock runs and none was breached (or the team has no policy)
    RUNNING = "RUNNING"  # a clock runs, its due instant more than DUE_SOON away
    DUE_SOON = "DUE_SOON"
    BREACHED = "BREACHED"  # a target was missed (kept after the ticket is answered or resolved)


FILTERABLE = (SlaState.BREACHED, SlaState.DUE_SOON, SlaState.RUNNING)


def state_of(due_at: datetime | None, breached_at: datetime | None, now: datetime) -> SlaState:
    if breached_at is not None or (due_at is not None and due_at <= now):
        return SlaState.BREACHED
    if due_at is None:
        return SlaState.NONE
    return SlaState.DUE_SOON if due_at <= now + DUE_SOON else SlaState.RUNNING


def breached_since(due_at: datetime | None, breached_at: datetime | None) -> datetime | None:
    """When the ticket breached: the recorded breach, else a due instant already past."""
    return breached_at or due_at


def sla_sql(state: str, alias: str, now: datetime) -> tuple[str, dict[str, Any]]:
    """The WHERE part (SQLAlchemy `:name` placeholders) matching tickets in `state` at `now`,
    as `state_of` decides; DUE_SOON and RUNNING read the (team, sla_due_at) index."""
    a = alias
    params: dict[str, Any] = {"sla_now": now, "sla_soon": now + DUE_SOON}
    if state == SlaState.BREACHED:
        sql = f"({a}.sla_breached_at IS NOT NULL OR {a}.sla_due_at <= :sla_now)"
    elif state == SlaState.DUE_SOON:
        sql = (
            f"({a}.sla_breached_at IS NULL AND {a}.sla_due_at > :sla_now "
            f"AND {a}.sla_due_at <= :sla_soon)"
        )
    elif state == SlaState.RUNNING:
        sql = f"({a}.sla_breached_at IS NULL AND {a}.sla_due_at > :sla_soon)"
    else:
        raise ValueError(f"not a filterable SLA state: {state!r}")
    return sql, params
