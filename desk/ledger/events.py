"""The task event log (table `task_event`, written by a trigger on background_task): a task's
story, which worker claimed what, and the workers that vanished with work in hand.

A worker's database connections carry its id in their `application_name`
(`worker_application_name`), so the trigger knows who claimed a task without any ledger
statement changing; a transaction pooler hands the name on to whichever server connection runs
the transaction (a session setting would not survive it). Migration 0013 reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa

from desk.core.db import APPLICATION_NAME_MAX
from desk.core.runtime import Runtime

# A worker's connections are named this + its id; the trigger (migration 0013) takes the rest.
WORKER_APP_PREFIX = "taskdesk-worker "
WORKER_ID_MAX = APPLICATION_NAME_MAX - len(WORKER_APP_PREFIX)


def worker_application_name(worker_id: str) -> str:
    """The `application_name` of a worker's connections (ids longer than PostgreSQL keeps are
    refused, rather than recorded cut short)."""
    if len(worker_id.encode()) > WORKER_ID_MAX:
        raise ValueError(f"worker id longer than {WORKER_ID_MAX} bytes: {worker_id!r}")
    return WORKER_APP_PREFIX + worker_id


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    event: str
    run: int
    attempt: int
    execution_id: str | None
    worker_id: str | None
    detail: str


async def story(rt: Runtime, task_id: int) -> list[Event]:
    """Oldest first. The caller has already checked the viewer may see the task."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT id, at, event, run, attempt, execution_id, worker_id, detail "
                "FROM task_event WHERE task_id = :t ORDER BY id"
            ),
            {"t": task_id},
        )
        return [Event(**r._mapping) for r in rows]


@dataclass
class Vanished:
    worker_id: str
    last_seen: datetime
    claims: int
    rescued: list[int] = field(default_factory=list)  # task ids taken back from it
    failed: list[int] = field(default_factory=list)  # rescued out of attempts: failed


async def vanished(
    rt: Runtime, live: set[str], scope_sql: str, params: dict[str, object], *, hours: float = 1
) -> list[Vanished]:
    """Workers seen claiming work in the last `hours` that no longer hold a registration, with
    what the rescuer took back from them (within the viewer's scope)."""
    since = rt.clock() - timedelta(hours=hours)
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT e.worker_id, max(e.at) AS last_seen, "
                " count(*) FILTER (WHERE e.event = 'claimed') AS claims, "
                " coalesce(array_agg(DISTINCT e.task_id) FILTER (WHERE e.event = 'rescued'), '{}') "
                "   AS rescued, "
                " coalesce(array_agg(DISTINCT e.task_id) FILTER (WHERE e.event = 'failed' "
                "   AND e.detail LIKE 'The worker running this task stopped responding%'), '{}') "
                "   AS failed "
                "FROM task_event e JOIN background_task b ON b.id = e.task_id "
                f"WHERE e.at >= :since AND e.worker_id IS NOT NULL AND {scope_sql} "
                "GROUP BY e.worker_id ORDER BY max(e.at) DESC LIMIT 50"
            ),
            {"since": since, **params},
        )
        found = [
            Vanished(r.worker_id, r.last_seen, r.claims, list(r.rescued), list(r.failed))
            for r in rows
            if r.worker_id not in live
        ]
    return [v for v in found if v.claims or v.rescued or v.failed]
