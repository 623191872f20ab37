"""Every SQL statement on `export_schedule` and `schedule_run`, on the caller's connection (its
transaction is the caller's). The rules are in desk/work/schedules.py (people's actions) and
desk/work/schedule_runs.py (the scheduler's pass); see docs/architecture.md, "Scheduled exports".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.models import BackgroundTask
from desk.ledger.accept import as_task

ACTIVE = "ACTIVE"
PAUSED = "PAUSED"
STOPPED = "STOPPED"


@dataclass(frozen=True)
class Schedule:
    id: int
    team_id: int
    owner_id: int
    name: str
    filters: dict[str, Any]
    days: tuple[int, ...]
    local_time: str
    timezone: str
    next_run_at: datetime
    paused_at: datetime | None
    stopped_at: datetime | None
    stopped_reason: str | None
    last_run_at: datetime | None
    last_task_id: int | None
    last_skip_reason: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def state(self) -> str:
        """STOPPED (its owner lost access; says why) wins over PAUSED (a person paused it)."""
        if self.stopped_at is not None:
            return STOPPED
        return PAUSED if self.paused_at is not None else ACTIVE


def _schedule(row: sa.Row[Any] | None) -> Schedule | None:
    if row is None:
        return None
    m = dict(row._mapping)
    m["days"] = tuple(int(d) for d in m["days"])
    return Schedule(**m)


def _many(result: sa.CursorResult[Any]) -> list[Schedule]:
    return [s for s in (_schedule(r) for r in result) if s is not None]


INSERT = sa.text(
    "INSERT INTO export_schedule (team_id, owner_id, name, filters, days, local_time, timezone, "
    " next_run_at, created_at, updated_at) "
    "VALUES (:team, :owner, :name, CAST(:filters AS jsonb), CAST(:days AS smallint[]), :time, "
    " :tz, :next, :now, :now) RETURNING *"
)
GET = sa.text("SELECT * FROM export_schedule WHERE id = :id")
GET_LOCKED = sa.text("SELECT * FROM export_schedule WHERE id = :id FOR UPDATE")
OF_TEAM = sa.text(
    "SELECT * FROM export_schedule WHERE team_id = :team "
    " AND (CAST(:owner AS int) IS NULL OR owner_id = :owner) ORDER BY id LIMIT :limit"
)
IN_TEAMS = sa.text(
    "SELECT * FROM export_schedule WHERE (CAST(:all AS boolean) OR team_id = ANY(:teams)) "
    " ORDER BY team_id, id LIMIT :limit"
)
COUNT_OWNED = sa.text(
    "SELECT count(*) FROM export_schedule WHERE team_id = :team AND owner_id = :owner"
)
OWNER_ZONE = sa.text("SELECT timezone FROM app_user WHERE id = :id")
PAUSE = sa.text(
    "UPDATE export_schedule SET paused_at = :now, updated_at = :now "
    "WHERE id = :id AND paused_at IS NULL RETURNING *"
)
RESUME = sa.text(
    "UPDATE export_schedule SET paused_at = NULL, stopped_at = NULL, stopped_reason = NULL, "
    " next_run_at = :next, updated_at = :now WHERE id = :id RETURNING *"
)
DELETE = sa.text("DELETE FROM export_schedule WHERE id = :id")
# The scheduler's claim: one due schedule, locked until the caller's transaction ends; a row
# another pass holds is skipped, never waited for.
CLAIM_DUE = sa.text(
    "SELECT * FROM export_schedule WHERE next_run_at <= :now AND paused_at IS NULL "
    " AND stopped_at IS NULL AND id <> ALL(CAST(:skip AS int[])) "
    "ORDER BY next_run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)
ADVANCE = sa.text(
    "UPDATE export_schedule SET next_run_at = :next, last_run_at = :occurrence, "
    " last_task_id = coalesce(CAST(:task AS int), last_task_id), last_skip_reason = :skip, "
    " updated_at = :now WHERE id = :id RETURNING *"
)
STOP = sa.text(
    "UPDATE export_schedule SET stopped_at = :now, stopped_reason = :reason, "
    " last_run_at = :occurrence, updated_at = :now WHERE id = :id RETURNING *"
)
# The occurrence's record; its primary key (schedule, occurrence) makes a second one an error.
RECORD_RUN = sa.text(
    "INSERT INTO schedule_run (schedule_id, occurrence_at, ran_at, task_id, outcome) "
    "VALUES (:id, :occurrence, :now, :task, :outcome)"
)
PRUNE_RUNS = sa.text(
    "DELETE FROM schedule_run WHERE ctid = ANY(ARRAY(SELECT ctid FROM schedule_run "
    " WHERE ran_at < :before LIMIT :limit))"
)
TASKS = sa.text("SELECT * FROM background_task WHERE id = ANY(:ids)")
RUNS = sa.text(
    "SELECT occurrence_at, ran_at, task_id, outcome FROM schedule_run "
    "WHERE schedule_id = :id ORDER BY occurrence_at DESC LIMIT :limit"
)


async def insert(
    conn: AsyncConnection,
    *,
    team_id: int,
    owner_id: int,
    name: str,
    filters: dict[str, Any],
    days: tuple[int, ...],
    local_time: str,
    timezone: str,
    next_run_at: datetime,
    now: datetime,
) -> Schedule:
    params = {
        "team": team_id, "owner": owner_id, "name": name, "filters": json.dumps(filters),
        "days": list(days), "time": local_time, "tz": timezone, "next": next_run_at, "now": now,
    }  # fmt: skip
    got = _schedule((await conn.execute(INSERT, params)).one())
    assert got is not None
    return got


async def get(conn: AsyncConnection, schedule_id: int, *, lock: bool = False) -> Schedule | None:
    return _schedule((await conn.execute(GET_LOCKED if lock else GET, {"id": schedule_id})).first())


async def of_team(
    conn: AsyncConnection, team_id: int, *, owner_id: int | None = None, limit: int = 500
) -> list[Schedule]:
    """The team's schedules (only `owner_id`'s when given), oldest first."""
    params = {"team": team_id, "owner": owner_id, "limit": limit}
    return _many(await conn.execute(OF_TEAM, params))


async def in_teams(
    conn: AsyncConnection, team_ids: list[int] | None, *, limit: int = 500
) -> list[Schedule]:
    """The schedules of `team_ids` (None: of every team), by team."""
    params = {"all": team_ids is None, "teams": team_ids or [], "limit": limit}
    return _many(await conn.execute(IN_TEAMS, params))


async def count_owned(conn: AsyncConnection, team_id: int, owner_id: int) -> int:
    return int((await conn.execute(COUNT_OWNED, {"team": team_id, "owner": owner_id})).scalar_one())


async def owner_zone(conn: AsyncConnection, user_id: int) -> str:
    return str((await conn.execute(OWNER_ZONE, {"id": user_id})).scalar_one_or_none() or "UTC")


async def pause(conn: AsyncConnection, schedule_id: int, *, now: datetime) -> Schedule | None:
    """None: it was paused already."""
    return _schedule((await conn.execute(PAUSE, {"id": schedule_id, "now": now})).first())


async def resume(
    conn: AsyncConnection, schedule_id: int, *, next_run_at: datetime, now: datetime
) -> Schedule:
    params = {"id": schedule_id, "next": next_run_at, "now": now}
    got = _schedule((await conn.execute(RESUME, params)).one())
    assert got is not None
    return got


async def delete(conn: AsyncConnection, schedule_id: int) -> None:
    await conn.execute(DELETE, {"id": schedule_id})


async def claim_due(
    conn: AsyncConnection, now: datetime, *, skip: list[int] | None = None
) -> Schedule | None:
    """One due schedule (none of `skip`), locked until the caller's transaction ends."""
    return _schedule((await conn.execute(CLAIM_DUE, {"now": now, "skip": skip or []})).first())


async def advance(
    conn: AsyncConnection,
    schedule: Schedule,
    *,
    next_run_at: datetime,
    task_id: int | None,
    skip_reason: str | None,
    now: datetime,
) -> None:
    params = {
        "id": schedule.id, "next": next_run_at, "occurrence": schedule.next_run_at,
        "task": task_id, "skip": skip_reason, "now": now,
    }  # fmt: skip
    await conn.execute(ADVANCE, params)


async def stop(conn: AsyncConnection, schedule: Schedule, *, reason: str, now: datetime) -> None:
    params = {"id": schedule.id, "reason": reason, "occurrence": schedule.next_run_at, "now": now}
    await conn.execute(STOP, params)


async def record_run(
    conn: AsyncConnection, schedule: Schedule, *, task_id: int | None, outcome: str, now: datetime
) -> None:
    params = {
        "id": schedule.id, "occurrence": schedule.next_run_at, "now": now, "task": task_id,
        "outcome": outcome,
    }  # fmt: skip
    await conn.execute(RECORD_RUN, params)


@dataclass(frozen=True)
class Run:
    occurrence_at: datetime
    ran_at: datetime
    task_id: int | None
    outcome: str


async def runs(conn: AsyncConnection, schedule_id: int, *, limit: int = 20) -> list[Run]:
    """The schedule's latest occurrences, newest first."""
    result = await conn.execute(RUNS, {"id": schedule_id, "limit": limit})
    return [Run(**dict(r._mapping)) for r in result]


async def tasks(conn: AsyncConnection, task_ids: list[int]) -> list[BackgroundTask]:
    """The tasks of these ids that still exist (read only: the ledger's writes are desk.ledger's)."""
    result = await conn.execute(TASKS, {"ids": task_ids})
    return [as_task(dict(r._mapping)) for r in result]


async def prune_runs(conn: AsyncConnection, *, before: datetime, limit: int) -> int:
    """Forget occurrences recorded before `before` (at most `limit`); returns how many. The
    schedule's own `next_run_at` is what keeps an occurrence from running twice, not this."""
    result = await conn.execute(PRUNE_RUNS, {"before": before, "limit": limit})
    return int(result.rowcount or 0)
