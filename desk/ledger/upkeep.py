"""Worker-side ledger SQL beyond a single execution: a batch's endings (reminders, plain NOOPs),
the rescue of rows whose lease ran out, an export's stored chunks, and pruning. Each runs on the
caller's connection, inside the transaction that commits its side effects (a batch of plain
NOOPs, which has none, completes on `rt.pg`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import metrics, tracing
from desk.core.models import BackgroundTask
from desk.ledger.finish import CANCEL_SAYS, finish_columns
from desk.ledger.run import COLUMNS, Row
from desk.ledger.sql import Db, execute, one, rows


@dataclass(frozen=True)
class Ending:
    """One row of `complete_many`: the execution that may commit it and its result."""

    task_id: int
    execution_id: str
    summary: str
    skipped: bool
    summary_key: str | None = None  # the summary as a message key and its parameters
    summary_params: dict[str, Any] | None = None


# Only rows whose fence still holds change; each ends as `desk.ledger.run.complete` would:
# CANCELLED, with its kind's CANCELLED_AT_FINISH, when a cancel was recorded before it. A repeat
# after a lost reply matches nothing: its rows have already ended.
_COMPLETE_MANY = (
    "UPDATE background_task b SET "
    + finish_columns(
        {
            "result_summary": "u.summary",
            "summary_key": "u.skey",
            "summary_params": "CAST(u.sparams AS jsonb)",
            "result_skipped": "u.skipped",
            "expires_at": "CAST(NULL AS timestamptz)",
            "result_bytes": "CAST(NULL AS bigint)",
        },
        "CAST(%(cancel_says)s AS jsonb)",
    )
    + ", finished_at = %(now)s, lease_until = NULL, updated_at = %(now)s "
    "FROM unnest(CAST(%(ids)s AS bigint[]), CAST(%(eids)s AS text[]), CAST(%(sums)s AS text[]), "
    " CAST(%(skips)s AS boolean[]), CAST(%(skeys)s AS text[]), CAST(%(sparams)s AS text[])) "
    " AS u(id, eid, summary, skipped, skey, sparams) "
    "WHERE b.id = u.id AND b.execution_id = u.eid AND b.status = 'RUNNING' "
    "RETURNING " + ", ".join(f"b.{c.strip()}" for c in COLUMNS.split(","))
)


@tracing.traced("taskdesk.finish")
async def complete_many(db: Db, endings: list[Ending], *, now: datetime) -> list[Row]:
    """`desk.ledger.run.complete` for many rows in one statement: one autocommit statement on
    `rt.pg` (a batch of plain NOOPs), or in the caller's transaction, which writes side effects
    for the returned COMPLETED rows alone (a batch of reminders' notifications)."""
    params = {
        "ids": [e.task_id for e in endings],
        "eids": [e.execution_id for e in endings],
        "sums": [e.summary for e in endings],
        "skips": [e.skipped for e in endings],
        "skeys": [e.summary_key for e in endings],
        "sparams": [json.dumps(e.summary_params or {}) for e in endings],
        "cancel_says": CANCEL_SAYS,
        "now": now,
    }
    return [metrics.ended(Row(**r)) for r in await rows(db, _COMPLETE_MANY, params)]


RESCUE = (
    "WITH lost AS (SELECT id FROM background_task WHERE status = 'RUNNING' "
    "  AND lease_until < %(now)s ORDER BY lease_until LIMIT %(lim)s FOR UPDATE SKIP LOCKED) "
    "UPDATE background_task b SET "
    " status = CASE WHEN b.cancel_requested THEN 'CANCELLED' "
    "   WHEN b.attempts < b.max_attempts THEN 'WAITING' ELSE 'FAILED' END, "
    " run = CASE WHEN NOT b.cancel_requested AND b.attempts < b.max_attempts "
    "   THEN b.run + 1 ELSE b.run END, "
    " run_at = CASE WHEN NOT b.cancel_requested AND b.attempts < b.max_attempts "
    "   THEN %(now)s ELSE b.run_at END, "
    " finished_at = CASE WHEN b.cancel_requested OR b.attempts >= b.max_attempts THEN %(now)s END, "
    " last_error = CASE WHEN b.cancel_requested THEN b.last_error "
    "   WHEN b.id = ANY(CAST(%(unreachable)s AS bigint[])) THEN 'Database unreachable: the worker "
    "running this task could not renew its lease (attempt ' || b.attempts || ' of ' "
    "   || b.max_attempts || ').' "
    "   ELSE 'The worker running this task stopped responding (attempt ' || b.attempts || ' of ' "
    "   || b.max_attempts || ').' END, "
    " error_key = CASE WHEN b.cancel_requested THEN b.error_key END, "
    " error_params = CASE WHEN b.cancel_requested THEN b.error_params ELSE '{}'::jsonb END, "
    " dispatched_at = NULL, lease_until = NULL, updated_at = %(now)s "
    "FROM lost WHERE b.id = lost.id RETURNING b.*"
)


async def rescue(
    conn: AsyncConnection, *, now: datetime, limit: int, unreachable: tuple[int, ...] = ()
) -> list[BackgroundTask]:
    """RUNNING rows whose lease expired (the worker died): re-arm, or fail when out of attempts.

    `unreachable`: tasks a live worker still runs (its registration lists them) — it could not
    renew the lease because it could not reach the database, and `last_error` says so."""
    found = await rows(conn, RESCUE, {"now": now, "lim": limit, "unreachable": list(unreachable)})
    return metrics.rescued([BackgroundTask(**r) for r in found])


async def next_chunk(
    db: Db, task_id: int, execution_id: str, after_seq: int
) -> tuple[int, bytes] | None:
    """The stored chunk of this execution after `after_seq` (seq, data), or None at the end:
    one row per read, so a download never holds a large result in memory."""
    found = await rows(db, _NEXT_CHUNK, {"t": task_id, "e": execution_id, "s": after_seq})
    return (found[0]["seq"], bytes(found[0]["data"])) if found else None


_NEXT_CHUNK = (
    "SELECT seq, data FROM task_result_chunk WHERE task_id = %(t)s AND execution_id = %(e)s "
    "AND seq > %(s)s ORDER BY seq LIMIT 1"
)


DROP_OTHER_CHUNKS = "DELETE FROM task_result_chunk WHERE task_id = %(t)s AND execution_id <> %(e)s"
DROP_CHUNKS = "DELETE FROM task_result_chunk WHERE task_id = %(t)s AND execution_id = %(e)s"


async def drop_other_chunks(conn: AsyncConnection, task_id: int, execution_id: str) -> None:
    """Keep only the committing execution's output (earlier, lost executions may have left some)."""
    await execute(conn, DROP_OTHER_CHUNKS, {"t": task_id, "e": execution_id})


async def drop_chunks(conn: AsyncConnection, task_id: int, execution_id: str) -> None:
    await execute(conn, DROP_CHUNKS, {"t": task_id, "e": execution_id})


@dataclass(frozen=True)
class Pruned:
    results: int
    orphans: int
    tasks: int


def _counted(statement: str) -> str:
    """`statement` (a DELETE or UPDATE … RETURNING) as one row: how many rows it changed."""
    return f"WITH changed AS ({statement}) SELECT count(*) AS n FROM changed"


PRUNE_RESULTS = (
    "WITH expired AS (UPDATE background_task SET result_bytes = NULL, updated_at = %(now)s "
    "  WHERE id IN (SELECT id FROM background_task WHERE expires_at < %(now)s "
    "    AND result_bytes IS NOT NULL LIMIT %(lim)s) RETURNING id), "
    " changed AS (DELETE FROM task_result_chunk c USING expired WHERE c.task_id = expired.id "
    "  RETURNING 1) "
    "SELECT count(*) AS n FROM changed"
)
PRUNE_ORPHANS = _counted(
    "DELETE FROM task_result_chunk c USING background_task b WHERE c.task_id = b.id "
    " AND b.status IN ('COMPLETED', 'FAILED', 'CANCELLED') "
    " AND (b.status <> 'COMPLETED' OR c.execution_id <> b.execution_id) RETURNING 1"
)
# Uploads are needed until their import ends; kept a day for a user's retry.
PRUNE_UPLOADS = (
    "DELETE FROM upload u WHERE u.created_at < %(upload_cutoff)s AND NOT EXISTS ("
    " SELECT 1 FROM background_task b WHERE b.kind = 'IMPORT' "
    " AND b.status IN ('WAITING', 'RUNNING', 'FAILED') "
    " AND b.team_id = u.team_id AND b.filters ->> 'upload_id' = u.id::text)"
)
PRUNE_TASKS = _counted(
    "DELETE FROM background_task WHERE id IN (SELECT id FROM background_task "
    " WHERE finished_at < %(cutoff)s ORDER BY finished_at LIMIT %(lim)s) RETURNING 1"
)


async def prune(
    conn: AsyncConnection, *, now: datetime, retention: timedelta, limit: int
) -> Pruned:
    """Delete expired export results (rows stay), orphaned output, and old finished rows."""
    results = await one(conn, PRUNE_RESULTS, {"now": now, "lim": limit})
    orphans = await one(conn, PRUNE_ORPHANS, {})
    await execute(conn, PRUNE_UPLOADS, {"upload_cutoff": now - timedelta(days=1)})
    tasks = await one(conn, PRUNE_TASKS, {"cutoff": now - retention, "lim": limit})
    return Pruned(_n(results), _n(orphans), _n(tasks))


def _n(found: dict[str, Any] | None) -> int:
    return int(found["n"]) if found else 0
