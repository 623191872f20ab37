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

from desk import telemetry, tracing
from desk.lanes import LANES, LONG, lane_of, lane_sql
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
    return telemetry.accepted(task)


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
    """A send reserved in the ledger: hand `{task_id, run}` to Redis as send number `send`."""

    task_id: int
    run: int
    run_at: datetime
    send: int
    kind: str

    @property
    def lane(self) -> str:
        return lane_of(self.kind)


_LONG_KINDS = ", ".join(f"'{k}'" for k in LANES[LONG])
# Teams that already run as many long tasks as one team may (`long_team_max_running`).
_FULL_TEAMS = (
    "SELECT team_id FROM background_task WHERE status = 'RUNNING' "
    f" AND kind IN ({_LONG_KINDS}) GROUP BY team_id HAVING count(*) >= :team_max"
)
_SENDABLE = (
    f"{lane_sql()} NOT IN (SELECT name FROM task_lane WHERE paused) "
    f"AND NOT (kind IN ({_LONG_KINDS}) AND team_id IN (SELECT team_id FROM full_teams))"
)
_RETURNING = "RETURNING b.id, b.run, b.run_at, b.sends, b.kind"


def _dues(rows: Any) -> list[Due]:
    return [Due(r.id, r.run, r.run_at, r.sends, r.kind) for r in rows]


async def claim_due(
    conn: AsyncConnection,
    *,
    now: datetime,
    lookahead: timedelta,
    redelivery: timedelta,
    limit: int,
    team_max: int,
) -> list[Due]:
    """Reserve a send for due WAITING rows: never sent, or sent and not claimed within the
    redelivery window. Paused lanes are skipped, and long tasks of a team that already runs
    `team_max` of them wait for one to end."""
    rows = await conn.execute(
        sa.text(
            f"WITH full_teams AS ({_FULL_TEAMS}), due AS (SELECT id FROM background_task "
            "  WHERE status = 'WAITING' AND run_at <= :horizon "
            "    AND (dispatched_at IS NULL OR greatest(dispatched_at, run_at) < :stale) "
            f"   AND {_SENDABLE} "
            "  ORDER BY run_at LIMIT :lim FOR UPDATE SKIP LOCKED) "
            "UPDATE background_task b SET dispatched_at = :now, sends = b.sends + 1 "
            f"FROM due WHERE b.id = due.id {_RETURNING}"
        ),
        {
            "now": now,
            "horizon": now + lookahead,
            "stale": now - redelivery,
            "lim": limit,
            "team_max": team_max,
        },
    )
    found = _dues(rows)
    telemetry.sent(found)
    return found


async def reserve_send(
    conn: AsyncConnection, task_id: int, run: int, *, now: datetime, team_max: int
) -> Due | None:
    """Reserve the next send of one unsent WAITING task (a kick right after a state change);
    None when a dispatcher got there first, its lane is paused or its team's long slots are full."""
    rows = await conn.execute(
        sa.text(
            f"WITH full_teams AS ({_FULL_TEAMS}) "
            "UPDATE background_task b SET dispatched_at = :now, sends = b.sends + 1 "
            "WHERE b.id = :id AND b.run = :run AND b.status = 'WAITING' AND b.dispatched_at IS NULL "
            f" AND {_SENDABLE.replace('kind', 'b.kind').replace('team_id IN', 'b.team_id IN')} "
            f"{_RETURNING}"
        ),
        {"id": task_id, "run": run, "now": now, "team_max": team_max},
    )
    found = _dues(rows)
    return found[0] if found else None


async def unsend(conn: AsyncConnection, due: list[Due]) -> None:
    """Sends Redis did not take: let the next sweep try again at once (unless a later send or
    a state change happened meanwhile)."""
    await conn.execute(
        sa.text(
            "UPDATE background_task b SET dispatched_at = NULL FROM "
            " unnest(CAST(:ids AS bigint[]), CAST(:sends AS int[])) AS u(id, send) "
            "WHERE b.id = u.id AND b.sends = u.send AND b.status = 'WAITING'"
        ),
        {"ids": [d.task_id for d in due], "sends": [d.send for d in due]},
    )


async def forget_sends(conn: AsyncConnection, keep: list[int]) -> int:
    """Redis lost its data: every WAITING task (but `keep`, just sent into the new Redis) counts
    as never sent, so the sweep resends them all."""
    result = await conn.execute(
        sa.text(
            "UPDATE background_task SET dispatched_at = NULL "
            "WHERE status = 'WAITING' AND dispatched_at IS NOT NULL AND id <> ALL(:keep)"
        ),
        {"keep": keep},
    )
    return int(result.rowcount)


async def sends_of(conn: AsyncConnection, task_ids: list[int]) -> dict[int, tuple[str, int, int]]:
    """(status, run, sends) per task id: which queue entries are of a send the ledger moved past."""
    rows = await conn.execute(
        sa.text("SELECT id, status, run, sends FROM background_task WHERE id = ANY(:ids)"),
        {"ids": task_ids},
    )
    return {r.id: (r.status, r.run, r.sends) for r in rows}


# --- execution ------------------------------------------------------------------------------


async def claim(
    conn: AsyncConnection,
    task_id: int,
    run: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
    team_max: int | None = None,
) -> BackgroundTask | None:
    """Take a delivered task: only a WAITING row of the same round; anything else is stale.

    `team_max` (the long lane): run the caller's transaction; the team's lock makes the count of
    its running long tasks exact. A team at its cap gets its task back unsent (`dispatched_at`
    NULL), and the dispatcher sends it again once one of the team's long tasks ends."""
    params = {"id": task_id, "run": run, "eid": execution_id, "now": now, "lease": now + lease}
    if team_max is not None:
        await conn.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock(7342, team_id) FROM background_task WHERE id = :id"
            ),
            {"id": task_id},
        )
        full = await conn.execute(
            sa.text(
                f"UPDATE background_task SET dispatched_at = NULL WHERE id = :id AND run = :run "
                f" AND status = 'WAITING' AND team_id IN ({_FULL_TEAMS}) RETURNING id"
            ),
            {"id": task_id, "run": run, "team_max": team_max},
        )
        if full.first() is not None:
            return None
    task = await _one(
        conn,
        "UPDATE background_task SET status = 'RUNNING', execution_id = :eid, attempts = attempts + 1, "
        " lease_until = :lease, started_at = :now, updated_at = :now "
        "WHERE id = :id AND run = :run AND status = 'WAITING' AND NOT cancel_requested RETURNING *",
        params,
    )
    return telemetry.claimed(task)


async def claim_reminders(
    conn: AsyncConnection,
    task_id: int,
    run: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> list[BackgroundTask]:
    """`claim` for a short-lane message, in one statement: when the delivered task is a REMINDER,
    every other reminder due by `now` (up to `limit`, rows others hold are skipped) is taken with
    it, so a burst fires in a few batches instead of one job each. Each row is fenced as by
    `claim`: its own execution id (the delivered one `execution_id`, the others
    `{execution_id}.{id}`), attempts+1, the lease. A paused
    short lane lends none of its rows to a message sent before the pause."""
    rows = await conn.execute(
        sa.text(
            "WITH first AS (SELECT id, kind FROM background_task WHERE id = :id AND run = :run "
            "  AND status = 'WAITING' AND NOT cancel_requested FOR UPDATE), "
            "more AS (SELECT id FROM background_task WHERE status = 'WAITING' AND kind = 'REMINDER' "
            "  AND run_at <= :now AND NOT cancel_requested AND id <> :id "
            "  AND EXISTS (SELECT 1 FROM first WHERE kind = 'REMINDER') "
            "  AND NOT EXISTS (SELECT 1 FROM task_lane WHERE name = :lane AND paused) "
            "  ORDER BY run_at LIMIT :lim FOR UPDATE SKIP LOCKED) "
            "UPDATE background_task b SET status = 'RUNNING', "
            " execution_id = CASE WHEN b.id = :id THEN :eid ELSE :eid || '.' || b.id END, "
            " attempts = b.attempts + 1, lease_until = :lease, started_at = :now, updated_at = :now "
            "FROM (SELECT id FROM first UNION ALL SELECT id FROM more) t "
            "WHERE b.id = t.id AND b.status = 'WAITING' RETURNING b.*"
        ),
        {
            "id": task_id,
            "run": run,
            "eid": execution_id,
            "now": now,
            "lease": now + lease,
            "lim": max(0, limit - 1),
            "lane": lane_of("REMINDER"),
        },
    )
    return [telemetry.claimed(_task(r)) for r in rows]


@dataclass(frozen=True)
class Ending:
    """One row of `finish_many`: the execution that may commit it and its result."""

    task_id: int
    execution_id: str
    summary: str
    skipped: bool
    summary_key: str | None = None  # the summary as a message key and its parameters
    summary_params: dict[str, Any] | None = None


@tracing.traced("taskdesk.finish")
async def finish_many(
    conn: AsyncConnection, endings: list[Ending], *, now: datetime
) -> list[BackgroundTask]:
    """`finish` for many rows in one statement; only rows whose fence still holds are returned
    (the caller writes side effects for those alone, in the same transaction)."""
    rows = await conn.execute(
        sa.text(
            "UPDATE background_task b SET status = 'COMPLETED', progress = 1, "
            " result_summary = u.summary, result_skipped = u.skipped, finished_at = :now, "
            " summary_key = u.skey, summary_params = CAST(u.sparams AS jsonb), "
            " lease_until = NULL, updated_at = :now "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:eids AS text[]), CAST(:sums AS text[]), "
            " CAST(:skips AS boolean[]), CAST(:skeys AS text[]), CAST(:sparams AS text[])) "
            " AS u(id, eid, summary, skipped, skey, sparams) "
            "WHERE b.id = u.id AND b.execution_id = u.eid AND b.status = 'RUNNING' RETURNING b.*"
        ),
        {
            "ids": [e.task_id for e in endings],
            "eids": [e.execution_id for e in endings],
            "sums": [e.summary for e in endings],
            "skips": [e.skipped for e in endings],
            "skeys": [e.summary_key for e in endings],
            "sparams": [json.dumps(e.summary_params or {}) for e in endings],
            "now": now,
        },
    )
    return [telemetry.ended(_task(r)) for r in rows]


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


@tracing.traced("taskdesk.finish")
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
    task = await _one(
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
    return telemetry.ended(task)


def backoff(attempts: int, base: float, cap: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with full jitter in [50 %, 100 %] of base·2^(attempts-1), capped."""
    raw = min(cap, base * 2 ** max(0, attempts - 1))
    return timedelta(seconds=raw * (0.5 + 0.5 * (rng or random).random()))


@tracing.traced("taskdesk.finish")
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
    task = await _one(
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
    return telemetry.ended(task)


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
    task = await _one(
        conn,
        "UPDATE background_task SET status = 'CANCELLED', finished_at = :now, lease_until = NULL, "
        " updated_at = :now WHERE id = :id AND execution_id = :eid AND status = 'RUNNING' RETURNING *",
        {"id": task_id, "eid": execution_id, "now": now},
    )
    return telemetry.ended(task)


async def rescue(
    conn: AsyncConnection, *, now: datetime, limit: int, unreachable: tuple[int, ...] = ()
) -> list[BackgroundTask]:
    """RUNNING rows whose lease expired (the worker died): re-arm, or fail when out of attempts.

    `unreachable`: tasks a live worker still runs (its registration lists them) — it could not
    renew the lease because it could not reach the database, and `last_error` says so."""
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
            " last_error = CASE WHEN b.cancel_requested THEN b.last_error "
            "   WHEN b.id = ANY(:unreachable) THEN 'Database unreachable: the worker running this "
            "task could not renew its lease (attempt ' || b.attempts || ' of ' || b.max_attempts || ').' "
            "   ELSE 'The worker running this task stopped responding (attempt ' || b.attempts || ' of ' "
            "   || b.max_attempts || ').' END, "
            " dispatched_at = NULL, lease_until = NULL, updated_at = :now "
            "FROM lost WHERE b.id = lost.id RETURNING b.*"
        ),
        {"now": now, "lim": limit, "unreachable": list(unreachable)},
    )
    return telemetry.rescued([_task(r) for r in rows])


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
    return telemetry.ended(task)


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
    return telemetry.ended(task)


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
