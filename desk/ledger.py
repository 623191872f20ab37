"""Every SQL statement that changes the task ledger, in one place.

Each state change is one conditional `UPDATE … WHERE … RETURNING` (or an insert) run on a
connection whose transaction the caller owns, so a side effect (a notification, a stored CSV)
commits together with it. Writes by a running execution are fenced by `execution_id`: when the
fence no longer matches, nothing changes and the caller learns it lost the right to commit.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.models import BackgroundTask

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
    idempotency_key: str | None = None  # the client's key, unique per owner (see desk.tasks)
    request_fingerprint: str | None = None  # what the key asked for, to refuse its reuse


async def insert(
    conn: AsyncConnection, new: NewTask, *, now: datetime, dispatched: bool
) -> BackgroundTask | None:
    """Insert a WAITING task; None when an active task already holds the scope (unique index)."""
    return await _one(
        conn,
        "INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, "
        " scope_creator_id, reminder_revision, note, run_at, max_attempts, dispatched_at, created_at, updated_at, "
        " idempotency_key, request_fingerprint) "
        "VALUES (:kind, :team_id, :owner_id, :ticket_id, :scope_key, CAST(:filters AS jsonb), "
        " :scope_creator_id, :reminder_revision, :note, :run_at, :max_attempts, :dispatched, :now, :now, "
        " :idem, :fingerprint) "
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
            "dispatched": now if dispatched else None,
            "now": now,
            "idem": new.idempotency_key,
            "fingerprint": new.request_fingerprint,
        },
    )


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


# --- delivery -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Due:
    task_id: int
    run: int
    run_at: datetime


async def claim_due(
    conn: AsyncConnection, *, now: datetime, lookahead: timedelta, redelivery: timedelta, limit: int
) -> list[Due]:
    """Mark due WAITING rows as sent: never sent yet, or sent and not started within the window."""
    rows = await conn.execute(
        sa.text(
            "WITH due AS (SELECT id FROM background_task "
            "  WHERE status = 'WAITING' AND run_at <= :horizon "
            "    AND (dispatched_at IS NULL OR greatest(dispatched_at, run_at) < :stale) "
            "  ORDER BY run_at LIMIT :lim FOR UPDATE SKIP LOCKED) "
            "UPDATE background_task b SET dispatched_at = :now FROM due WHERE b.id = due.id "
            "RETURNING b.id, b.run, b.run_at"
        ),
        {"now": now, "horizon": now + lookahead, "stale": now - redelivery, "lim": limit},
    )
    return [Due(r.id, r.run, r.run_at) for r in rows]


async def unsend(conn: AsyncConnection, due: list[Due]) -> None:
    """Messages Redis did not take: let the next sweep try again at once."""
    await conn.execute(
        sa.text(
            "UPDATE background_task SET dispatched_at = NULL WHERE id = ANY(:ids) AND run = ANY(:runs) AND status = 'WAITING'"
        ),
        {"ids": [d.task_id for d in due], "runs": [d.run for d in due]},
    )


async def mark_sent(conn: AsyncConnection, task_id: int, run: int, now: datetime) -> None:
    await conn.execute(
        sa.text(
            "UPDATE background_task SET dispatched_at = :now WHERE id = :id AND run = :run AND status = 'WAITING'"
        ),
        {"id": task_id, "run": run, "now": now},
    )


# --- execution ------------------------------------------------------------------------------


async def claim(
    conn: AsyncConnection,
    task_id: int,
    run: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
) -> BackgroundTask | None:
    """Take a delivered task: only a WAITING row of the same round; anything else is stale."""
    return await _one(
        conn,
        "UPDATE background_task SET status = 'RUNNING', execution_id = :eid, attempts = attempts + 1, "
        " lease_until = :lease, started_at = :now, updated_at = :now "
        "WHERE id = :id AND run = :run AND status = 'WAITING' AND NOT cancel_requested RETURNING *",
        {"id": task_id, "run": run, "eid": execution_id, "now": now, "lease": now + lease},
    )


@dataclass(frozen=True)
class Pulse:
    alive: bool  # False: this execution lost its right to write
    cancel_requested: bool = False


async def progress(
    conn: AsyncConnection,
    task_id: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
    current: int | None = None,
    total: int | None = None,
    message: str | None = None,
    stats: dict[str, int] | None = None,
) -> Pulse:
    """Report progress and extend the lease; also the keep-alive when nothing else changed."""
    row = (
        await conn.execute(
            sa.text(
                "UPDATE background_task SET lease_until = :lease, updated_at = :now, "
                " progress_current = coalesce(:cur, progress_current), "
                " progress_total = coalesce(:tot, progress_total), "
                " progress_message = coalesce(:msg, progress_message), "
                " stats = coalesce(CAST(:stats AS jsonb), stats), "
                " progress = CASE WHEN coalesce(:tot, progress_total) > 0 THEN "
                "   least(1.0, coalesce(:cur, progress_current)::float / coalesce(:tot, progress_total)) "
                "   ELSE progress END "
                "WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' RETURNING cancel_requested"
            ),
            {
                "id": task_id,
                "eid": execution_id,
                "now": now,
                "lease": now + lease,
                "cur": current,
                "tot": total,
                "msg": message,
                "stats": json.dumps(stats) if stats is not None else None,
            },
        )
    ).first()
    return Pulse(False) if row is None else Pulse(True, bool(row.cancel_requested))


async def finish(
    conn: AsyncConnection,
    task_id: int,
    execution_id: str,
    *,
    now: datetime,
    summary: str,
    summary_key: str | None = None,
    summary_params: dict[str, Any] | None = None,
    skipped: bool = False,
    expires_at: datetime | None = None,
    result_bytes: int | None = None,
    current: int | None = None,
    message: str | None = None,
    stats: dict[str, int] | None = None,
) -> BackgroundTask | None:
    """COMPLETED, if this execution still holds the fence; None means: discard quietly."""
    return await _one(
        conn,
        "UPDATE background_task SET status = 'COMPLETED', progress = 1, result_summary = :summary, "
        " summary_key = :skey, summary_params = CAST(:sparams AS jsonb), "
        " progress_current = coalesce(:cur, progress_current), "
        " progress_message = coalesce(:msg, progress_message), "
        " stats = coalesce(CAST(:stats AS jsonb), stats), "
        " result_skipped = :skipped, expires_at = :expires, result_bytes = :bytes, finished_at = :now, "
        " lease_until = NULL, updated_at = :now "
        "WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' RETURNING *",
        {
            "id": task_id,
            "eid": execution_id,
            "now": now,
            "summary": summary,
            "skey": summary_key,
            "sparams": json.dumps(summary_params or {}),
            "skipped": skipped,
            "expires": expires_at,
            "bytes": result_bytes,
            "cur": current,
            "msg": message,
            "stats": json.dumps(stats) if stats is not None else None,
        },
    )


def backoff(attempts: int, base: float, cap: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with full jitter in [50 %, 100 %] of base·2^(attempts-1), capped."""
    raw = min(cap, base * 2 ** max(0, attempts - 1))
    return timedelta(seconds=raw * (0.5 + 0.5 * (rng or random).random()))


async def fail(
    conn: AsyncConnection,
    task_id: int,
    execution_id: str,
    *,
    now: datetime,
    error: str,
    retry_at: datetime | None,
) -> BackgroundTask | None:
    """Re-arm for another round at `retry_at` while attempts remain, else FAILED.

    `retry_at=None` means the error cannot succeed on retry: FAILED at once."""
    retry = "(CAST(:retry_at AS timestamptz) IS NOT NULL AND attempts < max_attempts)"
    return await _one(
        conn,
        f"UPDATE background_task SET "
        f" status = CASE WHEN {retry} THEN 'WAITING' ELSE 'FAILED' END, "
        f" run = CASE WHEN {retry} THEN run + 1 ELSE run END, "
        f" run_at = CASE WHEN {retry} THEN CAST(:retry_at AS timestamptz) ELSE run_at END, "
        f" finished_at = CASE WHEN {retry} THEN NULL ELSE :now END, "
        " dispatched_at = NULL, lease_until = NULL, last_error = :error, updated_at = :now "
        "WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' RETURNING *",
        {
            "id": task_id,
            "eid": execution_id,
            "now": now,
            "error": error[:2000],
            "retry_at": retry_at,
        },
    )


async def release(
    conn: AsyncConnection, task_id: int, execution_id: str, *, now: datetime
) -> BackgroundTask | None:
    """A worker shutting down hands its task back without spending an attempt."""
    return await _one(
        conn,
        "UPDATE background_task SET status = 'WAITING', run = run + 1, run_at = :now, "
        " attempts = greatest(attempts - 1, 0), dispatched_at = NULL, lease_until = NULL, updated_at = :now "
        "WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' AND NOT cancel_requested RETURNING *",
        {"id": task_id, "eid": execution_id, "now": now},
    )


async def ack_cancel(
    conn: AsyncConnection, task_id: int, execution_id: str, *, now: datetime
) -> BackgroundTask | None:
    return await _one(
        conn,
        "UPDATE background_task SET status = 'CANCELLED', finished_at = :now, lease_until = NULL, "
        " updated_at = :now WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' RETURNING *",
        {"id": task_id, "eid": execution_id, "now": now},
    )


async def rescue(conn: AsyncConnection, *, now: datetime, limit: int) -> list[BackgroundTask]:
    """RUNNING rows whose lease expired (the worker died): re-arm, or fail when out of attempts."""
    rows = await conn.execute(
        sa.text(
            "WITH lost AS (SELECT id FROM background_task WHERE status = 'RUNNING' AND lease_until < :now "
            "  ORDER BY lease_until LIMIT :lim FOR UPDATE SKIP LOCKED) "
            "UPDATE background_task b SET "
            " status = CASE WHEN b.cancel_requested THEN 'CANCELLED' "
            "   WHEN b.attempts < b.max_attempts THEN 'WAITING' ELSE 'FAILED' END, "
            " run = CASE WHEN NOT b.cancel_requested AND b.attempts < b.max_attempts THEN b.run + 1 ELSE b.run END, "
            " run_at = CASE WHEN NOT b.cancel_requested AND b.attempts < b.max_attempts THEN :now ELSE b.run_at END, "
            " finished_at = CASE WHEN b.cancel_requested OR b.attempts >= b.max_attempts THEN :now END, "
            " last_error = CASE WHEN b.cancel_requested THEN b.last_error ELSE "
            "   'The worker running this task stopped responding (attempt ' || b.attempts || ' of ' "
            "   || b.max_attempts || ').' END, "
            " dispatched_at = NULL, lease_until = NULL, updated_at = :now "
            "FROM lost WHERE b.id = lost.id RETURNING b.*"
        ),
        {"now": now, "lim": limit},
    )
    return [_task(r) for r in rows]


# --- people's actions -----------------------------------------------------------------------


async def cancel(conn: AsyncConnection, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """WAITING → CANCELLED at once; RUNNING → asked to stop at its next progress write."""
    return await _one(
        conn,
        "UPDATE background_task SET cancel_requested = true, updated_at = :now, "
        " status = CASE WHEN status = 'WAITING' THEN 'CANCELLED' ELSE status END, "
        " finished_at = CASE WHEN status = 'WAITING' THEN :now ELSE finished_at END "
        f"WHERE id = :id AND {_ACTIVE} RETURNING *",
        {"id": task_id, "now": now},
    )


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
    return await _one(
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


async def retry(conn: AsyncConnection, task_id: int, *, now: datetime) -> BackgroundTask | None:
    """FAILED → a fresh round with a full set of attempts."""
    return await _one(
        conn,
        "UPDATE background_task SET status = 'WAITING', run = run + 1, attempts = 0, run_at = :now, "
        " dispatched_at = :now, finished_at = NULL, cancel_requested = false, progress = 0, "
        " progress_current = 0, progress_message = '', updated_at = :now "
        "WHERE id = :id AND status = 'FAILED' RETURNING *",
        {"id": task_id, "now": now},
    )


# --- results and housekeeping ---------------------------------------------------------------


async def store_chunk(
    conn: AsyncConnection, task_id: int, execution_id: str, seq: int, data: bytes
) -> None:
    await conn.execute(
        sa.text(
            "INSERT INTO task_result_chunk (task_id, execution_id, seq, data) VALUES (:t, :e, :s, :d)"
        ),
        {"t": task_id, "e": execution_id, "s": seq, "d": data},
    )


async def drop_other_chunks(conn: AsyncConnection, task_id: int, execution_id: str) -> None:
    """Keep only the committing execution's output (earlier, lost executions may have left some)."""
    await conn.execute(
        sa.text("DELETE FROM task_result_chunk WHERE task_id = :t AND execution_id <> :e"),
        {"t": task_id, "e": execution_id},
    )


async def drop_chunks(conn: AsyncConnection, task_id: int, execution_id: str) -> None:
    await conn.execute(
        sa.text("DELETE FROM task_result_chunk WHERE task_id = :t AND execution_id = :e"),
        {"t": task_id, "e": execution_id},
    )


@dataclass(frozen=True)
class Pruned:
    results: int
    orphans: int
    tasks: int


async def prune(
    conn: AsyncConnection, *, now: datetime, retention: timedelta, limit: int
) -> Pruned:
    """Delete expired export results (rows stay), orphaned output, and old finished rows."""
    results = await conn.execute(
        sa.text(
            "WITH expired AS (UPDATE background_task SET result_bytes = NULL, updated_at = :now "
            "  WHERE id IN (SELECT id FROM background_task WHERE expires_at < :now "
            "    AND result_bytes IS NOT NULL LIMIT :lim) RETURNING id) "
            "DELETE FROM task_result_chunk c USING expired WHERE c.task_id = expired.id"
        ),
        {"now": now, "lim": limit},
    )
    orphans = await conn.execute(
        sa.text(
            "DELETE FROM task_result_chunk c USING background_task b WHERE c.task_id = b.id "
            " AND b.status IN ('COMPLETED', 'FAILED', 'CANCELLED') "
            " AND (b.status <> 'COMPLETED' OR c.execution_id <> b.execution_id)"
        ),
    )
    # Uploads are needed until their import ends; keep them a day for a user's retry.
    await conn.execute(
        sa.text(
            "DELETE FROM upload u WHERE u.created_at < :upload_cutoff AND NOT EXISTS ("
            " SELECT 1 FROM background_task b WHERE b.kind = 'IMPORT' AND b.status IN ('WAITING', 'RUNNING', 'FAILED') "
            " AND b.team_id = u.team_id AND b.filters ->> 'upload_id' = u.id::text)"
        ),
        {"upload_cutoff": now - timedelta(days=1)},
    )
    tasks = await conn.execute(
        sa.text(
            "DELETE FROM background_task WHERE id IN (SELECT id FROM background_task "
            " WHERE finished_at < :cutoff ORDER BY finished_at LIMIT :lim)"
        ),
        {"cutoff": now - retention, "lim": limit},
    )
    return Pruned(results.rowcount, orphans.rowcount, tasks.rowcount)
