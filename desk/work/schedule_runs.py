"""The scheduler's pass: each due schedule's occurrence becomes one ordinary EXPORT task
(docs/architecture.md, "Scheduled exports").

One transaction per occurrence: the schedule's row is claimed `FOR UPDATE SKIP LOCKED` (any
number of workers pass at once; each due row is taken by one of them), the export is accepted by
the statement every export uses (desk.work.tasks.accept_export_in: membership, one active task
per scope, the owner's quota), the occurrence is recorded (`schedule_run`, whose primary key is
the occurrence) and `next_run_at` moves to the first occurrence strictly after now. They commit
together or not at all: a worker killed mid-way leaves the row due, and the next pass makes the
task. Occurrences missed while nothing ran collapse into that one run.

An occurrence makes no task when:
- its owner left the team, or is no longer staff or admin: the schedule stops, saying why;
- its saved filters no longer hold (a named assignee is no longer staff): it stops, saying why;
- an export of the same person and filters is still queued or running (the previous
  occurrence's, or one they started by hand): this occurrence is skipped, the reason recorded,
  and the schedule goes on; likewise when the owner's export quota is full.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotFound, QuotaExceeded, TaskConflict, ValidationProblem
from desk.core.models import BackgroundTask
from desk.core.runtime import Runtime
from desk.people import access
from desk.work import occurrences
from desk.work import schedule_store as store
from desk.work.schedule_store import Schedule
from desk.work.tasks import accept_export_in, export_request, kick

log = logging.getLogger(__name__)

OWNER_REMOVED = "schedule.stopped.owner_removed"
OWNER_NOT_STAFF = "schedule.stopped.owner_not_staff"
BAD_FILTERS = "schedule.stopped.filters"
SKIPPED_RUNNING = "schedule.skipped.running"
SKIPPED_QUOTA = "schedule.skipped.quota"
CREATED = "created"
MAX_PER_PASS = 500  # what is left is due on the next pass


@dataclass
class Pass:
    created: list[int] = field(default_factory=list)  # task ids
    skipped: int = 0
    stopped: int = 0


async def run_due(rt: Runtime, now: datetime) -> Pass:
    """Every schedule due at `now`, one occurrence each, one transaction each."""
    done = Pass()
    failed: list[int] = []  # this pass's failures: left due for the next pass, not retried now
    for _ in range(MAX_PER_PASS):
        claimed: int | None = None
        try:
            async with rt.engine.begin() as conn:
                schedule = await store.claim_due(conn, now, skip=failed)
                if schedule is None:
                    break
                claimed = schedule.id
                outcome, task = await _occur(rt, conn, schedule, now)
        except Exception:
            if claimed is None:  # the claim itself failed (the database is away): end the pass
                raise
            # Rolled back, still due: one schedule that cannot run must not hold up the others.
            log.exception("schedule %s: its occurrence failed; the next pass tries again", claimed)
            failed.append(claimed)
            continue
        if task is not None:  # after COMMIT, best effort (the dispatcher is the safety net)
            done.created.append(task.id or 0)
            await kick(rt, task)
        elif outcome.startswith("schedule.stopped."):
            done.stopped += 1
        else:
            done.skipped += 1
    return done


async def _occur(
    rt: Runtime, conn: AsyncConnection, schedule: Schedule, now: datetime
) -> tuple[str, BackgroundTask | None]:
    """This occurrence's task (or why none), recorded, and the schedule moved on or stopped."""
    stop = await _lost_access(conn, schedule)
    task: BackgroundTask | None = None
    outcome = stop or CREATED
    if stop is None:
        try:
            req = export_request(rt, schedule.owner_id, schedule.team_id, schedule.filters, now=now)
            async with conn.begin_nested():
                task = await accept_export_in(rt, conn, req, now=now)
        except TaskConflict:
            outcome = SKIPPED_RUNNING
        except QuotaExceeded:
            outcome = SKIPPED_QUOTA
        except NotFound:
            outcome = stop = OWNER_REMOVED
        except ValidationProblem:
            outcome = stop = BAD_FILTERS
    task_id = task.id if task is not None else None
    await store.record_run(conn, schedule, task_id=task_id, outcome=outcome, now=now)
    if stop is not None:
        log.info("schedule %s stopped: %s", schedule.id, stop)
        await store.stop(conn, schedule, reason=stop, now=now)
        return outcome, None
    nxt = occurrences.next_after(schedule.days, schedule.local_time, schedule.timezone, now)
    skip = None if task is not None else outcome
    await store.advance(conn, schedule, next_run_at=nxt, task_id=task_id, skip_reason=skip, now=now)
    return outcome, task


async def _lost_access(conn: AsyncConnection, schedule: Schedule) -> str | None:
    """Why the owner may no longer export the team's tickets, or None. Read in the pass's
    transaction: a removal committed before it is seen."""
    member = await access.membership(conn, schedule.owner_id, schedule.team_id)
    if member is None:
        return OWNER_REMOVED
    return None if member.is_staff else OWNER_NOT_STAFF
