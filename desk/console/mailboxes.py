"""Mailboxes in the operators' console and on /metrics (docs/architecture.md, "Mail in"): every
mailbox of the teams in scope with its last good fetch, its lag (now - last fetch, or - its
creation before the first) and last error; the errors grouped as the failures page groups the
tasks' (desk/console/failures.py `NORMALISED`); and which are stale — enabled and not fetched
for MAILBOX_STALE_MINUTES.

A switched-off mailbox has no lag and is never stale; the dev mail page's mailbox
(`mailbox_admin.DEV_HOST`) is stored switched off. The scrape reads its gauges in one statement
over the enabled mailboxes only (`LAG_SQL`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.console.failures import NORMALISED
from desk.core.runtime import Runtime
from desk.people.operators import Scope
from desk.work.mailbox_admin import DEV_HOST

_NORMAL = NORMALISED.replace("b.last_error", "m.last_error")
_LAG = "extract(epoch FROM :now - coalesce(m.last_fetch_at, m.created_at))"
LIST_SQL = (
    "SELECT m.id, m.team_id, t.name AS team_name, m.host, m.username, m.folder, m.enabled, "
    " m.last_fetch_at, m.last_error, m.created_at, "
    f" CASE WHEN m.enabled THEN greatest(0, {_LAG}) END AS lag_seconds, "
    f" CASE WHEN m.last_error IS NOT NULL THEN md5({_NORMAL}) END AS error_key, "
    f" CASE WHEN m.last_error IS NOT NULL THEN {_NORMAL} END AS error "
    "FROM mailbox m JOIN team t ON t.id = m.team_id WHERE {where} "
    "ORDER BY m.enabled DESC, {lag} DESC NULLS LAST, m.id LIMIT :lim"
)
# The scrape's read: one row per enabled mailbox (ids only, to keep label values few).
LAG_SQL = (
    f"SELECT m.id, m.team_id, greatest(0, {_LAG}) AS lag_seconds FROM mailbox m WHERE m.enabled"
)


@dataclass(frozen=True)
class Row:
    id: int
    team_id: int
    team_name: str
    host: str
    username: str
    folder: str
    enabled: bool
    last_fetch_at: datetime | None
    last_error: str | None
    created_at: datetime
    lag_seconds: float | None
    error_key: str | None
    error: str | None  # normalised
    stale: bool

    @property
    def is_dev(self) -> bool:
        return self.host == DEV_HOST


@dataclass(frozen=True)
class ErrorGroup:
    key: str
    error: str  # normalised
    mailboxes: list[Row]
    sample: str  # the newest error as written


@dataclass(frozen=True)
class View:
    rows: list[Row]
    groups: list[ErrorGroup]
    stale_minutes: int

    @property
    def stale(self) -> list[Row]:
        return [r for r in self.rows if r.stale]


def is_stale(lag_seconds: float | None, stale_minutes: int) -> bool:
    return lag_seconds is not None and lag_seconds > stale_minutes * 60


def group_errors(rows: list[Row]) -> list[ErrorGroup]:
    """The mailboxes with an error, by normalised error: the largest group first."""
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        if r.error_key is not None:
            by_key.setdefault(r.error_key, []).append(r)
    groups = [
        ErrorGroup(key, members[0].error or "", members, members[0].last_error or "")
        for key, members in by_key.items()
    ]
    return sorted(groups, key=lambda g: (-len(g.mailboxes), g.error))


async def in_scope(rt: Runtime, scope: Scope, *, limit: int = 1000) -> View:
    """The scope's mailboxes (an operator: every team's), most lagging first."""
    now = rt.clock()
    minutes = rt.settings.mailbox_stale_minutes
    where, params = scope.sql("m.team_id")
    sql = LIST_SQL.format(where=where, lag=_LAG)
    async with rt.engine.connect() as conn:
        found = await conn.execute(sa.text(sql), {**params, "now": now, "lim": limit})
        rows = [Row(**r._mapping, stale=is_stale(r.lag_seconds, minutes)) for r in found]
    return View(rows, group_errors(rows), minutes)


@dataclass(frozen=True)
class Lag:
    mailbox_id: int
    team_id: int
    seconds: float


async def lags(conn: AsyncConnection, now: datetime) -> list[Lag]:
    """Every enabled mailbox's fetch lag, for the scrape."""
    found = await conn.execute(sa.text(LAG_SQL), {"now": now})
    return [Lag(r.id, r.team_id, float(r.lag_seconds)) for r in found]


def stale_count(found: list[Lag], stale_minutes: int) -> int:
    return sum(1 for lag in found if is_stale(lag.seconds, stale_minutes))
