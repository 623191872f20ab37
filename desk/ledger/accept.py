"""People's side of the task ledger: what a new task is (`NewTask`), the reads and locks around
acceptance, and people's actions (cancel, skip, retry). The accept statement itself is in
`desk.ledger.intake` (every kind accepts through it); the worker's statements are in
`desk.ledger.run` (one execution), `desk.ledger.upkeep` (batches, rescue, results, pruning) and
`desk.ledger.sends` (the dispatcher's sends).

Each statement is written once, as a named SQL string run by desk/ledger/sql.py on the caller's
connection, whose transaction the caller owns, so a side effect (a notification, a stored CSV)
commits together with it. Each state change is one conditional `UPDATE … WHERE … RETURNING`
(see docs/architecture.md, "States").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import configure_mappers
from sqlalchemy.orm.instrumentation import manager_of_class

from desk.core import locks, metrics
from desk.core.models import BackgroundTask, TaskKind, TaskStatus
from desk.ledger.sql import Db, execute, one

ACTIVE = "status IN ('WAITING', 'RUNNING')"

LOCK_TEAM = f"SELECT pg_advisory_xact_lock({locks.TEAM_TASKS}, %(t)s)"
GET = "SELECT * FROM background_task WHERE id = %(id)s"
ACTIVE_IN_SCOPE = (
    "SELECT * FROM background_task WHERE kind = %(k)s AND team_id = %(t)s AND scope_key = %(s)s "
    f" AND {ACTIVE}"
)
BUMP_REVISION = (
    "UPDATE ticket SET reminder_revision = reminder_revision + 1 WHERE id = %(id)s "
    "RETURNING reminder_revision"
)
CANCEL = (
    "UPDATE background_task SET cancel_requested = true, updated_at = %(now)s, "
    " status = CASE WHEN status = 'WAITING' THEN 'CANCELLED' ELSE status END, "
    " finished_at = CASE WHEN status = 'WAITING' THEN %(now)s ELSE finished_at END "
    f"WHERE id = %(id)s AND {ACTIVE} RETURNING *"
)
SKIP = (
    "UPDATE background_task SET status = 'COMPLETED', result_skipped = true, "
    " result_summary = %(reason)s, summary_key = %(key)s, "
    " summary_params = CAST(%(params)s AS jsonb), progress = 1, finished_at = %(now)s, "
    " updated_at = %(now)s "
    "WHERE id = %(id)s AND status = 'WAITING' RETURNING *"
)
RETRY = (
    "UPDATE background_task SET status = 'WAITING', run = run + 1, attempts = 0, "
    " run_at = %(now)s, dispatched_at = NULL, finished_at = NULL, cancel_requested = false, "
    " progress = 0, progress_current = 0, progress_message = '', updated_at = %(now)s "
    "WHERE id = %(id)s AND status = 'FAILED' RETURNING *"
)


def as_task(row: dict[str, Any]) -> BackgroundTask:
    """The row as the `BackgroundTask` callers know, without the model's __init__: the values
    come typed from the database, and __init__ cost ~0.7 ms a row (10x this), profiled."""
    configure_mappers()  # what __init__ would do on first use (a flag check after that)
    task = BackgroundTask.model_construct(**row)
    # The ORM's per-object state, which __init__ would also make (~35 us): without it,
    # setting an attribute on the returned task raises (callers and tests may).
    manager_of_class(BackgroundTask).setup_instance(task)
    return task


async def _task(db: Db, sql: str, params: dict[str, Any]) -> BackgroundTask | None:
    row = await one(db, sql, params)
    return as_task(row) if row else None


async def lock_team(db: Db, team_id: int) -> None:
    """Serialise acceptance per team (an import's one active task, read then inserted)."""
    await execute(db, LOCK_TEAM, {"t": team_id})


async def get(db: Db, task_id: int, *, lock: bool = False) -> BackgroundTask | None:
    """The row; with `lock`, held against other changes of it until the caller commits.

    NO KEY UPDATE, not UPDATE: a running export's chunk transaction holds a key-share lock on
    its task row (the chunks' foreign key) until every chunk is stored, and FOR UPDATE would wait
    for it — a cancel during an export would be recorded only once the whole file was built."""
    return await _task(db, GET + (" FOR NO KEY UPDATE" if lock else ""), {"id": task_id})


async def active_in_scope(db: Db, kind: str, team_id: int, scope_key: str) -> BackgroundTask | None:
    return await _task(db, ACTIVE_IN_SCOPE, {"k": kind, "t": team_id, "s": scope_key})


async def bump_reminder_revision(db: Db, ticket_id: int) -> int:
    """Reminders carry the revision they were made for; bumping it makes every older one skip."""
    row = await one(db, BUMP_REVISION, {"id": ticket_id})
    assert row is not None, "the caller holds the ticket"
    return int(row["reminder_revision"])


@dataclass(frozen=True)
class NewTask:
    kind: str
    team_id: int
    owner_id: int
    scope_key: str
    run_at: datetime
    max_attempts: int
    ticket_id: int | None = None
    filters: dict[str, Any] | None = None
    reminder_revision: int | None = None
    note: str = ""
    idempotency_key: str | None = None  # the client's key, unique per owner (see desk.work.tasks)
    request_fingerprint: str | None = None  # what the key asked for, to refuse its reuse


# --- people's actions -----------------------------------------------------------------------


async def cancel(db: Db, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """WAITING → CANCELLED at once; RUNNING → asked to stop at its next progress write."""
    return metrics.ended(await _task(db, CANCEL, {"id": task_id, "now": now}))


async def cancel_task(db: Db, task: BackgroundTask, *, now: datetime) -> BackgroundTask | None:
    """`cancel` as a person asks it (the task's row already read, under lock): a reminder's
    ticket gets a new revision first, so no copy of the reminder can ever fire. None, and
    nothing changed, when the task has already ended."""
    if task.status not in (TaskStatus.WAITING, TaskStatus.RUNNING):
        return None
    if task.kind == TaskKind.REMINDER and task.ticket_id is not None:
        await bump_reminder_revision(db, task.ticket_id)
    return await cancel(db, task.id or 0, now=now)


async def cancel_id(db: Db, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """`cancel_task` for a task known by its id alone (the console's and the CLI's): its row
    read under lock first. None when it is missing or has already ended."""
    task = await get(db, task_id, lock=True)
    return await cancel_task(db, task, now=now) if task is not None else None


async def skip(
    db: Db,
    task_id: int,
    *,
    now: datetime,
    reason: str,
    reason_key: str | None = None,
    reason_params: dict[str, Any] | None = None,
) -> BackgroundTask | None:
    """A WAITING task that no longer needs to run (a superseded reminder) completes as skipped."""
    params = {
        "id": task_id, "now": now, "reason": reason, "key": reason_key,
        "params": json.dumps(reason_params or {}),
    }  # fmt: skip
    return metrics.ended(await _task(db, SKIP, params))


class ScopeHeld(Exception):
    """An identical task (same kind, team and scope) is queued or running: a retry would be its
    twin, and the scope's unique index refused it."""


async def retry(conn: AsyncConnection, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """FAILED → a fresh round with a full set of attempts (None: the task is not FAILED).
    Raises ScopeHeld, and leaves the caller's transaction usable (a savepoint), when an identical
    task is active."""
    try:
        async with conn.begin_nested():
            return await _task(conn, RETRY, {"id": task_id, "now": now})
    except IntegrityError:
        raise ScopeHeld() from None
