"""What the pages say of a ticket's SLA: "due in 42 min", "breached 3 h ago" (the words are the
templates', `_sla.html`). Worked out when the page is rendered, at the request's clock, from the
ticket's columns (desk/helpdesk/sla_state.py); the exact instant rides along in the `<time>`'s
`datetime` and title, so a page left open says when, even after its relative words have aged.
The ticket list and page are not row-cached (ui/rowcache.py is the task rows'), so no cached
markup carries a relative time. Staff only: a customer's page gets no cell at all."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from desk.helpdesk.sla_state import SlaState, breached_since, state_of

HOUR, DAY = 3600, 86400


@dataclass(frozen=True)
class SlaCell:
    state: str  # RUNNING, DUE_SOON or BREACHED
    at: datetime  # the due instant, or when it breached
    amount: int  # 0 for a breach under a minute ago ("just now")
    unit: str  # min, h or d

    @property
    def iso(self) -> str:
        return self.at.isoformat()


def _amount(seconds: float, *, up: bool) -> tuple[int, str]:
    """Whole minutes under an hour (a due time rounded up: "in 1 min" until it is due), whole
    hours under two days, else days."""
    if seconds < HOUR:
        minutes = math.ceil(seconds / 60) if up else math.floor(seconds / 60)
        return minutes, "min"
    if seconds < 2 * DAY:
        return int(seconds // HOUR), "h"
    return int(seconds // DAY), "d"


def sla_cell(ticket: Any, now: datetime) -> SlaCell | None:
    """The cell of a ticket (anything with `sla_due_at` and `sla_breached_at`); None: no SLA."""
    due, breached = ticket.sla_due_at, ticket.sla_breached_at
    state = state_of(due, breached, now)
    if state is SlaState.NONE:
        return None
    if state is SlaState.BREACHED:
        since = breached_since(due, breached)
        assert since is not None
        amount, unit = _amount(max((now - since).total_seconds(), 0.0), up=False)
        return SlaCell(state.value, since, amount, unit)
    assert due is not None
    amount, unit = _amount((due - now).total_seconds(), up=True)
    return SlaCell(state.value, due, amount, unit)


def cells(items: list[Any], now: datetime, *, staff: bool) -> dict[int, SlaCell]:
    """The cells of a page of tickets, by id: none for a customer."""
    if not staff:
        return {}
    found = {t.id: sla_cell(t, now) for t in items}
    return {tid: c for tid, c in found.items() if c is not None}
