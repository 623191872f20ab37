"""A team's SLA policy as stored in `team_sla_policy` (docs/architecture.md, "Business hours").

One row per team; no row: the team has no SLA and its tickets carry no due times. The two JSON
columns are what a team admin writes, kept as written so every face shows them back unchanged:

    calendar = {"zone": "Europe/Berlin",
                "hours": {"mon": ["09:00-12:00", "13:00-17:30"], "tue": […], …},
                "holidays": ["2026-12-25", "2026-12-26"]}
        `zone` an IANA time zone; `hours` per day (mon … sun; a day left out or empty is
        closed, "00:00-24:00" the whole day); `holidays` whole local days closed (may be
        left out). Read by `desk.helpdesk.business_hours.calendar`.
    targets = {"first_response": {"URGENT": 3600, "HIGH": 14400},
               "next_response": {"URGENT": 7200},
               "resolution": {"URGENT": 86400, "NORMAL": 432000}}
        target → ticket priority (LOW, NORMAL, HIGH, URGENT) → seconds of business time, a
        whole number from 60 to a year; a target or priority left out has no clock.
    warn_share: the share of a target after which its assignee is warned (0 < share < 1).

`parse` checks all three and answers `(Policy, Calendar)`, raising ValidationProblem naming the
field to fix (`zone`, `hours`, `holidays`, `targets`, the target's name, `warn_share`);
`load`/`save`/`delete` read and write the row in the caller's transaction; `get_team_policy`,
`set_team_policy` and `clear_team_policy` are the faces' entry points (staff read it, admins
write it; anyone else is told the team does not exist). Saving or clearing a policy runs the
`CHANGED` hooks in its transaction: desk/work/sla_replans.py registers the team's replan there
(a lower layer cannot import it), so the open tickets' timers follow the new policy.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Priority
from desk.core.runtime import Runtime
from desk.helpdesk import business_hours
from desk.helpdesk.business_hours import Calendar
from desk.helpdesk.sla import TARGETS, Policy
from desk.people import access

# Run with (conn, team id, by, now) in the transaction that saves or clears a team's policy.
Changed = Callable[[AsyncConnection, int, int, datetime], Awaitable[None]]
CHANGED: list[Changed] = []
MIN_SECONDS = 60
MAX_SECONDS = 366 * 24 * 3600
PRIORITIES = tuple(p.value for p in Priority)


@dataclass(frozen=True)
class StoredPolicy:
    """A team's policy row: as written (`calendar_doc`, `targets_doc`) and as parsed."""

    team_id: int
    calendar_doc: dict[str, Any]
    targets_doc: dict[str, dict[str, int]]
    warn_share: float
    policy: Policy
    calendar: Calendar
    updated_by_id: int | None
    updated_at: datetime


def parse(calendar: Any, targets: Any, warn_share: Any = 0.75) -> tuple[Policy, Calendar]:
    """The policy and calendar of the stored (or submitted) JSON; ValidationProblem names what
    to fix. Parsing the same texts again is answered from a small cache (the worker reads one
    team's policy for every timer it fires)."""
    return _parse(_canon("calendar", calendar), _canon("targets", targets), _share(warn_share))


def _canon(field: str, doc: Any) -> str:
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            raise ValidationProblem(field, "is not JSON") from None
    if not isinstance(doc, Mapping):
        raise ValidationProblem(field, "give an object, e.g. " + _EXAMPLE[field])
    return json.dumps(doc, sort_keys=True)


_EXAMPLE = {
    "calendar": '{"zone": "Europe/Berlin", "hours": {"mon": ["09:00-17:00"]}}',
    "targets": '{"first_response": {"URGENT": 3600}}',
}


def _share(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationProblem("warn_share", "give a number between 0 and 1, e.g. 0.75")
    return float(value)


@lru_cache(maxsize=256)
def _parse(calendar_text: str, targets_text: str, warn_share: float) -> tuple[Policy, Calendar]:
    return Policy(_targets(json.loads(targets_text)), warn_share), _calendar(
        json.loads(calendar_text)
    )


def _calendar(doc: dict[str, Any]) -> Calendar:
    unknown = sorted(set(doc) - {"zone", "hours", "holidays"})
    if unknown:
        raise ValidationProblem(
            "calendar", f"unknown part {unknown[0]!r}; use zone, hours, holidays"
        )
    zone, hours, holidays = doc.get("zone"), doc.get("hours"), doc.get("holidays", [])
    if not isinstance(zone, str) or not zone:
        raise ValidationProblem("zone", "give the team's time zone, e.g. Europe/Berlin")
    if not isinstance(hours, Mapping):
        raise ValidationProblem(
            "hours", 'give the open hours by day, e.g. {"mon": ["09:00-17:00"]}'
        )
    for day, spans in hours.items():
        if not isinstance(spans, list) or not all(isinstance(s, str) for s in spans):
            raise ValidationProblem("hours", f'{day}: give a list like ["09:00-17:00"]')
    if not isinstance(holidays, list) or not all(isinstance(h, str) for h in holidays):
        raise ValidationProblem("holidays", 'give a list of dates like ["2026-12-25"]')
    return business_hours.calendar(zone, hours, holidays)


def _targets(doc: dict[str, Any]) -> dict[Any, dict[str, int]]:
    out: dict[Any, dict[str, int]] = {}
    for target, by_priority in doc.items():
        if target not in TARGETS:
            raise ValidationProblem(
                "targets", f"unknown target {target!r}; use {', '.join(TARGETS)}"
            )
        if not isinstance(by_priority, Mapping):
            raise ValidationProblem(target, 'give seconds by priority, e.g. {"URGENT": 3600}')
        out[target] = {}
        for priority, seconds in by_priority.items():
            if priority not in PRIORITIES:
                raise ValidationProblem(
                    target, f"unknown priority {priority!r}; use {', '.join(PRIORITIES)}"
                )
            if isinstance(seconds, bool) or not isinstance(seconds, int):
                raise ValidationProblem(target, f"{priority}: give whole seconds, e.g. 3600")
            if not MIN_SECONDS <= seconds <= MAX_SECONDS:
                raise ValidationProblem(target, f"{priority}: between 60 seconds and 366 days")
            out[target][priority] = seconds
    if not any(out.values()):
        raise ValidationProblem("targets", "set at least one target for one priority")
    return out


_COLUMNS = "team_id, calendar, targets, warn_share, updated_by_id, updated_at"


def _stored(row: Any) -> StoredPolicy:
    policy, calendar = parse(row.calendar, row.targets, row.warn_share)
    return StoredPolicy(
        row.team_id, row.calendar, row.targets, row.warn_share, policy, calendar,
        row.updated_by_id, row.updated_at,
    )  # fmt: skip


async def load(conn: AsyncConnection, team_id: int) -> StoredPolicy | None:
    """The team's policy, or None when it has none."""
    row = (
        await conn.execute(
            sa.text(f"SELECT {_COLUMNS} FROM team_sla_policy WHERE team_id = :t"), {"t": team_id}
        )
    ).first()
    return _stored(row) if row is not None else None


async def save(
    conn: AsyncConnection,
    team_id: int,
    *,
    calendar: Any,
    targets: Any,
    warn_share: Any = 0.75,
    by: int | None,
    now: datetime,
) -> StoredPolicy:
    """Check and write the team's policy (replacing the one it had); ValidationProblem, and
    nothing written, when a part is wrong."""
    parse(calendar, targets, warn_share)
    row = (
        await conn.execute(
            sa.text(
                "INSERT INTO team_sla_policy (team_id, calendar, targets, warn_share, "
                " updated_by_id, updated_at) "
                "VALUES (:t, CAST(:c AS jsonb), CAST(:g AS jsonb), :w, :by, :now) "
                "ON CONFLICT (team_id) DO UPDATE SET calendar = excluded.calendar, "
                " targets = excluded.targets, warn_share = excluded.warn_share, "
                " updated_by_id = excluded.updated_by_id, updated_at = excluded.updated_at "
                f"RETURNING {_COLUMNS}"
            ),
            {
                "t": team_id, "c": _canon("calendar", calendar), "g": _canon("targets", targets),
                "w": _share(warn_share), "by": by, "now": now,
            },
        )
    ).one()  # fmt: skip
    return _stored(row)


async def delete(conn: AsyncConnection, team_id: int) -> bool:
    """Drop the team's policy; whether it had one."""
    gone = await conn.execute(
        sa.text("DELETE FROM team_sla_policy WHERE team_id = :t RETURNING team_id"), {"t": team_id}
    )
    return gone.first() is not None


async def _member(conn: AsyncConnection, user_id: int, team_id: int) -> access.Member:
    """Staff or admin of the team; anyone else is told the team does not exist."""
    member = await access.membership(conn, user_id, team_id)
    if member is None or not member.is_staff:
        raise NotFound("Team not found.")
    return member


async def get_team_policy(rt: Runtime, user_id: int, team_id: int) -> StoredPolicy | None:
    """The team's policy for its staff and admins (None: no SLA)."""
    async with rt.engine.connect() as conn:
        await _member(conn, user_id, team_id)
        return await load(conn, team_id)


async def set_team_policy(
    rt: Runtime, user_id: int, team_id: int, *, calendar: Any, targets: Any, warn_share: Any = 0.75
) -> StoredPolicy:
    """Admins write the team's policy (staff: NotAllowed; others: NotFound)."""
    async with rt.engine.begin() as conn:
        access.require_admin(await _member(conn, user_id, team_id))
        stored = await save(
            conn, team_id, calendar=calendar, targets=targets, warn_share=warn_share,
            by=user_id, now=rt.clock(),
        )  # fmt: skip
        for changed in CHANGED:
            await changed(conn, team_id, user_id, rt.clock())
        return stored


async def clear_team_policy(rt: Runtime, user_id: int, team_id: int) -> bool:
    """Admins drop the team's policy; whether there was one."""
    async with rt.engine.begin() as conn:
        access.require_admin(await _member(conn, user_id, team_id))
        had = await delete(conn, team_id)
        for changed in CHANGED if had else ():
            await changed(conn, team_id, user_id, rt.clock())
        return had


async def check_admin(rt: Runtime, user_id: int, team_id: int) -> None:
    """What `set_team_policy` asks of the caller, asked first: a face that reads its input only
    after the caller may write (REST) refuses staff (NotAllowed) and anyone else (NotFound, as
    a missing team) whatever they sent."""
    async with rt.engine.connect() as conn:
        access.require_admin(await _member(conn, user_id, team_id))
