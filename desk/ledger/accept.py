"""Every SQL statement that changes the task ledger lives in desk/ledger*.py; here acceptance
and people's actions (cancel, skip, retry). The worker's statements are in `ledger_run` (one
execution), `ledger_upkeep` (reminder batches, rescue, results, pruning) and `ledger_sends`
(the dispatcher's sends).

Each state change is one conditional `UPDATE … WHERE … RETURNING` (or an insert) run on a
connection whose transaction the caller owns, so a side effect (a notification, a stored CSV)
commits together with it. Writes by a running execution are fenced by `execution_id`: when the
fence no longer matches, nothing changes and the caller learns it lost the right to commit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import metrics
from desk.core.models import BackgroundTask
from desk.ledger.lanes import lane_of

_ACTIVE = "status IN ('WAITING', 'RUNNING')"


def _task(row: Any) -> BackgroundTask:
    return BackgroundTask(**row._mapping)


async def _one(conn: AsyncConnection, sql: str, params: dict[str, Any]) -> BackgroundTask | None:
    row = (await conn.execute(sa.text(sql), params)).first()
    return _task(row) if row else None


async def lock_team(conn: AsyncConnection, team_id: int) -> None:
    """Serialise acceptance per team (quotas and idempotency read, then insert)."""
    await conn.execute(sa.text("SELECT pg_advisory_xact_lock(7341, :t)"), {"t": team_id})


async def get(conn: AsyncConnection, task_id: int, *, lock: bool = False) -> BackgroundTask | None:
    suffix = " FOR UPDATE" if lock else ""
    return await _one(
        conn, f"SELECT * FROM background_task WHERE id = :id{suffix}", {"id": task_id}
    )


async def active_in_scope(
    conn: AsyncConnection, kind: str, team_id: int, scope_key: str
) -> BackgroundTask | None:
    return await _one(
        conn,
        f"SELECT * FROM background_task WHERE kind = :k AND team_id = :t AND scope_key = :s AND {_ACTIVE}",
        {"k": kind, "t": team_id, "s": scope_key},
    )


async def bump_reminder_revision(conn: AsyncConnection, ticket_id: int) -> int:
    """Reminders carry the revision they were made for; bumping it makes every older one skip."""
    return int(
        (
            await conn.execute(
                sa.text(
                    "UPDATE ticket SET reminder_revision = reminder_revision + 1 WHERE id = :id "
                    "RETURNING reminder_revision"
                ),
                {"id": ticket_id},
            )
        ).scalar_one()
    )


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
    scope_creator_id: int | None = None
    reminder_revision: int | None = None
    note: str = ""
    idempotency_key: str | None = None  # the client's key, unique per owner (see desk.work.tasks)
    request_fingerprint: str | None = None  # what the key asked for, to refuse its reuse


async def insert(
    conn: AsyncConnection, new: NewTask, *, now: datetime, dispatched: bool
) -> BackgroundTask | None:
    """Insert a WAITING task; None when an active task already holds the scope (unique index).

    `dispatched`: the caller sends it right after commit, as send 1 (`sends = 1`), unless its
    lane is paused (then it waits unsent, `dispatched_at` NULL)."""
    send = "(:dispatched AND NOT EXISTS (SELECT 1 FROM task_lane WHERE name = :lane AND paused))"
    task = await _one(
        conn,
        "INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, "
        " scope_creator_id, reminder_revision, note, run_at, max_attempts, dispatched_at, sends, "
        " created_at, updated_at, idempotency_key, request_fingerprint) "
        "VALUES (:kind, :team_id, :owner_id, :ticket_id, :scope_key, CAST(:filters AS jsonb), "
        f" :scope_creator_id, :reminder_revision, :note, :run_at, :max_attempts, "
        f" CASE WHEN {send} THEN CAST(:now AS timestamptz) END, CASE WHEN {send} THEN 1 ELSE 0 END, "
        " :now, :now, :idem, :fingerprint) "
        "ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING "
        "RETURNING *",
        {
            "kind": new.kind,
            "team_id": new.team_id,
            "owner_id": new.owner_id,
            "ticket_id": new.ticket_id,
            "scope_key": new.scope_key,
            "filters": json.dumps(new.filters or {}),
            "scope_creator_id": new.scope_creator_id,
            "reminder_revision": new.reminder_revision,
            "note": new.note,
            "run_at": new.run_at,
            "max_attempts": new.max_attempts,
            "dispatched": dispatched,
            "lane": lane_of(new.kind),
            "now": now,
            "idem": new.idempotency_key,
            "fingerprint": new.request_fingerprint,
        },
    )
    return metrics.accepted(task)


async def lock_idempotency_key(conn: AsyncConnection, owner_id: int, key: str) -> None:
    """Serialise two requests carrying one key (they may name different teams)."""
    await conn.execute(
        sa.text("SELECT pg_advisory_xact_lock(7342, hashtext(:k))"), {"k": f"{owner_id}:{key}"}
    )


async def by_idempotency_key(
    conn: AsyncConnection, owner_id: int, key: str
) -> BackgroundTask | None:
    return await _one(
        conn,
        "SELECT * FROM background_task WHERE owner_id = :o AND idempotency_key = :k",
        {"o": owner_id, "k": key},
    )


async def forget_idempotency_key(
    conn: AsyncConnection, task_id: int, key: str
) -> BackgroundTask | None:
    """A key older than the window is free again: its old task lets go of it."""
    return await _one(
        conn,
        "UPDATE background_task SET idempotency_key = NULL WHERE id = :id AND idempotency_key = :k "
        "RETURNING *",
        {"id": task_id, "k": key},
    )


async def count_active_and_recent(
    conn: AsyncConnection, kind: str, team_id: int, owner_id: int, since: datetime
) -> tuple[int, int, datetime | None]:
    """(active count, created since `since`, oldest creation since `since`) for quotas."""
    row = (
        await conn.execute(
            sa.text(
                f"SELECT count(*) FILTER (WHERE {_ACTIVE}) AS active, "
                " count(*) FILTER (WHERE created_at >= :since) AS recent, "
                " min(created_at) FILTER (WHERE created_at >= :since) AS oldest "
                "FROM background_task WHERE kind = :k AND team_id = :t AND owner_id = :o "
                f" AND ({_ACTIVE} OR created_at >= :since)"
            ),
            {"k": kind, "t": team_id, "o": owner_id, "since": since},
        )
    ).one()
    return int(row.active), int(row.recent), row.oldest


# --- people's actions -----------------------------------------------------------------------


async def cancel(conn: AsyncConnection, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """WAITING → CANCELLED at once; RUNNING → asked to stop at its next progress write."""
    task = await _one(
        conn,
        "UPDATE background_task SET cancel_requested = true, updated_at = :now, "
        " status = CASE WHEN status = 'WAITING' THEN 'CANCELLED' ELSE status END, "
        " finished_at = CASE WHEN status = 'WAITING' THEN :now ELSE finished_at END "
        f"WHERE id = :id AND {_ACTIVE} RETURNING *",
        {"id": task_id, "now": now},
    )
    return metrics.ended(task)


async def skip(
    conn: AsyncConnection,
    task_id: int,
    *,
    now: datetime,
    reason: str,
    reason_key: str | None = None,
    reason_params: dict[str, Any] | None = None,
) -> BackgroundTask | None:
    """A WAITING task that no longer needs to run (a superseded reminder) completes as skipped."""
    task = await _one(
        conn,
        "UPDATE background_task SET status = 'COMPLETED', result_skipped = true, result_summary = :reason, "
        " summary_key = :key, summary_params = CAST(:params AS jsonb), "
        " progress = 1, finished_at = :now, updated_at = :now "
        "WHERE id = :id AND status = 'WAITING' RETURNING *",
        {
            "id": task_id,
            "now": now,
            "reason": reason,
            "key": reason_key,
            "params": json.dumps(reason_params or {}),
        },
    )
    return metrics.ended(task)


async def retry(conn: AsyncConnection, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """FAILED → a fresh round with a full set of attempts."""
    return await _one(
        conn,
        "UPDATE background_task SET status = 'WAITING', run = run + 1, attempts = 0, run_at = :now, "
        " dispatched_at = NULL, finished_at = NULL, cancel_requested = false, progress = 0, "
        " progress_current = 0, progress_message = '', updated_at = :now "
        "WHERE id = :id AND status = 'FAILED' RETURNING *",
        {"id": task_id, "now": now},
    )
