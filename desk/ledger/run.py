"""The ledger's SQL for one execution of a task: claim, progress, finish, fail, release, cancel.

Every transition is one conditional `UPDATE … WHERE <fence> RETURNING <the columns the worker
needs>`. The claim's fence is the round (`run`) and status WAITING; every later write's fence is
the execution id with status RUNNING: when it no longer holds, nothing changes and the caller
learns it lost the right to commit.

The worker's own transitions run on `rt.pg` (desk/core/pg.py) as single autocommit statements and
answer with a `Row` (no ORM objects on the hot path). `pulse`, `complete` and `reread` also take
the caller's connection (desk/ledger/sql.py runs the same statement there), for processors whose
side effects (an import's rows, an export's chunks) must commit in the same transaction.

Repeating a statement whose reply was lost (the connection broke after the commit) is safe only
because of the fences: a claim or a finish repeated by the same execution answers with the row
it already wrote and changes nothing; any other repeat matches no row.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from desk.core import locks, metrics, tracing
from desk.core.pg import Pg
from desk.core.rows import TaskRow, columns_of
from desk.ledger.finish import CANCEL_SAYS, finish_columns
from desk.ledger.lanes import lane_of
from desk.ledger.sends import FULL_TEAMS
from desk.ledger.sql import Db, rows


@dataclass(frozen=True, slots=True)
class Row(TaskRow):
    """What an execution reads of its task row: the row people see (`TaskRow`) and the columns
    of the execution (its round, fence, sends and the scope it was accepted in)."""

    run: int
    scope_creator_id: int | None
    execution_id: str | None
    sends: int


# The columns every statement here returns, as `Row` names them (checked against the table).
FIELDS = columns_of(Row)
COLUMNS = ", ".join(FIELDS)


def _row(found: list[dict[str, Any]]) -> Row | None:
    return Row(**found[0]) if found else None


# A repeat by the same execution (its first reply lost) finds its own claim: attempts and
# started_at are not counted twice.
_CLAIM = (
    "UPDATE background_task SET status = 'RUNNING', execution_id = %(eid)s, "
    " attempts = attempts + (status = 'WAITING')::int, lease_until = %(lease)s, "
    " started_at = CASE WHEN status = 'WAITING' THEN %(now)s ELSE started_at END, "
    " updated_at = %(now)s "
    "WHERE id = %(id)s AND run = %(run)s AND ((status = 'WAITING' AND NOT cancel_requested) "
    " OR (status = 'RUNNING' AND execution_id = %(eid)s)) "
    f"RETURNING {COLUMNS}"
)


@tracing.traced("taskdesk.claim")
async def claim(
    pg: Pg, task_id: int, run: int, execution_id: str, *, now: datetime, lease: timedelta
) -> Row | None:
    """Take a delivered task: only a WAITING row of the same round; anything else is stale."""
    params = {"id": task_id, "run": run, "eid": execution_id, "now": now, "lease": now + lease}
    return metrics.claimed(_row(await pg.write(_CLAIM, params)))


@tracing.traced("taskdesk.claim")
async def claim_long(
    pg: Pg,
    task_id: int,
    run: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
    team_max: int,
) -> Row | None:
    """`claim` for the long lane, in one transaction: the team's lock makes the count of its
    running long tasks exact. A team at its cap gets its task back unsent (`dispatched_at`
    NULL), and the dispatcher sends it again once one of the team's long tasks ends."""
    params = {"id": task_id, "run": run, "eid": execution_id, "now": now, "lease": now + lease}
    async with pg.connection() as conn, conn.transaction():
        await conn.execute(
            f"SELECT pg_advisory_xact_lock({locks.LONG_LANE_TEAM}, team_id) "
            "FROM background_task WHERE id = %(id)s",
            params,
        )
        full = await conn.execute(
            "UPDATE background_task SET dispatched_at = NULL WHERE id = %(id)s AND run = %(run)s "
            f" AND status = 'WAITING' AND team_id IN ({FULL_TEAMS}) RETURNING id",
            {**params, "team_max": team_max},
        )
        if await full.fetchone() is not None:
            return None
        cursor = await conn.execute(_CLAIM, params)
        assert cursor.description is not None
        names = [c.name for c in cursor.description]
        found = [dict(zip(names, r, strict=True)) for r in await cursor.fetchall()]
    return metrics.claimed(_row(found))


# A row a short-lane batch may take besides the delivered one: a reminder due now, or a plain
# NOOP (no script) whose send is out. Scripted NOOPs (tests' failures, steps) run one per job.
_BATCHABLE = "(kind = 'REMINDER' OR (kind = 'NOOP' AND filters = '{}'::jsonb))"


@tracing.traced("taskdesk.claim")
async def claim_short(
    pg: Pg,
    task_id: int,
    run: int,
    execution_id: str,
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
) -> list[Row]:
    """`claim` for a short-lane message, in one statement: when the delivered task is a reminder
    or a plain NOOP, the lane's other ready rows come with it (reminders due by `now`, plain NOOPs
    already sent; up to `limit` in all, rows others hold are skipped), so a burst runs in a few
    batches instead of one job each. Each row is fenced as by `claim`: its own execution id (the
    delivered one `execution_id`, the others `{execution_id}.{id}`), attempts+1, the lease.
    Cancelled rows are never taken, and a paused short lane lends none of its rows to a message
    sent before the pause."""
    b_columns = ", ".join(f"b.{c.strip()}" for c in COLUMNS.split(","))
    found = await pg.write(
        "WITH first AS (SELECT id, kind, filters FROM background_task WHERE id = %(id)s "
        "  AND run = %(run)s AND status = 'WAITING' AND NOT cancel_requested FOR UPDATE), "
        "more AS (SELECT id FROM background_task WHERE status = 'WAITING' "
        "  AND run_at <= %(now)s AND NOT cancel_requested AND id <> %(id)s "
        f"  AND {_BATCHABLE} AND (kind = 'REMINDER' OR dispatched_at IS NOT NULL) "
        f"  AND EXISTS (SELECT 1 FROM first WHERE {_BATCHABLE}) "
        "  AND NOT EXISTS (SELECT 1 FROM task_lane WHERE name = %(lane)s AND paused) "
        "  ORDER BY run_at LIMIT %(lim)s FOR UPDATE SKIP LOCKED) "
        "UPDATE background_task b SET status = 'RUNNING', "
        " execution_id = CASE WHEN b.id = %(id)s THEN %(eid)s ELSE %(eid)s || '.' || b.id END, "
        " attempts = b.attempts + 1, lease_until = %(lease)s, started_at = %(now)s, "
        " updated_at = %(now)s "
        "FROM (SELECT id FROM first UNION ALL SELECT id FROM more) t "
        f"WHERE b.id = t.id AND b.status = 'WAITING' RETURNING {b_columns}",
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
    return [metrics.claimed(Row(**r)) for r in found]


def batchable(row: Row) -> bool:
    """Whether a claimed row runs in a short-lane batch (see `_BATCHABLE`)."""
    return row.kind == "REMINDER" or (row.kind == "NOOP" and not row.filters)


@dataclass(frozen=True)
class Pulse:
    alive: bool  # False: this execution lost its right to write
    cancel_requested: bool = False


_PROGRESS = (
    "UPDATE background_task SET lease_until = %(lease)s, updated_at = %(now)s, "
    " progress_current = coalesce(%(cur)s, progress_current), "
    " progress_total = coalesce(%(tot)s, progress_total), "
    " progress_message = coalesce(%(msg)s, progress_message), "
    " stats = coalesce(CAST(%(stats)s AS jsonb), stats), "
    " progress = CASE WHEN coalesce(%(tot)s, progress_total) > 0 THEN least(1.0, "
    "   coalesce(%(cur)s, progress_current)::float / coalesce(%(tot)s, progress_total)) "
    "   ELSE progress END "
    "WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'RUNNING' "
    "RETURNING cancel_requested"
)


def _progress_params(
    task_id: int,
    execution_id: str,
    now: datetime,
    lease: timedelta,
    current: int | None = None,
    total: int | None = None,
    message: str | None = None,
    stats: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "id": task_id,
        "eid": execution_id,
        "now": now,
        "lease": now + lease,
        "cur": current,
        "tot": total,
        "msg": message,
        "stats": json.dumps(stats) if stats is not None else None,
    }


def _pulse(found: list[dict[str, Any]]) -> Pulse:
    return Pulse(True, bool(found[0]["cancel_requested"])) if found else Pulse(False)


async def pulse(
    db: Db, task_id: int, execution_id: str, *, now: datetime, lease: timedelta, **fields: Any
) -> Pulse:
    """Report progress and extend the lease (also the keep-alive): one autocommit statement on
    `rt.pg`, or inside the caller's transaction (an import's batch commits with its progress).
    Fields: current, total, message, stats. A repeat after a lost reply writes the same values."""
    params = _progress_params(task_id, execution_id, now, lease, **fields)
    return _pulse(await rows(db, _PROGRESS, params))


# One statement decides and keeps the fence: a finish that turns CANCELLED also deletes the
# task's stored output (an export's chunks), so nothing of it can be downloaded. A repeat by the
# same execution after its commit (the reply lost) matches no RUNNING row; the second branch then
# answers with the row it completed (same snapshot: never both). A repeat of a finish that turned
# CANCELLED answers nothing: the caller discards its work, as the cancel asks.
_FINISH = (
    "WITH done AS (UPDATE background_task SET "
    + finish_columns(
        {
            "result_summary": "%(summary)s",
            "summary_key": "%(skey)s",
            "summary_params": "CAST(%(sparams)s AS jsonb)",
            "result_skipped": "CAST(%(skipped)s AS boolean)",
            "expires_at": "CAST(%(expires)s AS timestamptz)",
            "result_bytes": "CAST(%(bytes)s AS bigint)",
        },
        "CAST(%(cancel_says)s AS jsonb)",
    )
    + ", progress_current = coalesce(%(cur)s, progress_current), "
    " progress_total = coalesce(CAST(%(tot)s AS bigint), progress_total), "
    " progress_message = coalesce(%(msg)s, progress_message), "
    " stats = coalesce(CAST(%(stats)s AS jsonb), stats), "
    " finished_at = %(now)s, lease_until = NULL, updated_at = %(now)s "
    " WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'RUNNING' "
    f" RETURNING {COLUMNS}), "
    "dropped AS (DELETE FROM task_result_chunk c USING done "
    " WHERE c.task_id = done.id AND done.status = 'CANCELLED') "
    "SELECT * FROM done UNION ALL "
    f"SELECT {COLUMNS} FROM background_task "
    "WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'COMPLETED'"
)


def _finish_params(
    task_id: int,
    execution_id: str,
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
    total: int | None = None,
) -> dict[str, Any]:
    return {
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
        "tot": total,
        "msg": message,
        "stats": json.dumps(stats) if stats is not None else None,
        "cancel_says": CANCEL_SAYS,
    }


@tracing.traced("taskdesk.finish")
async def complete(
    db: Db, task_id: int, execution_id: str, *, now: datetime, **fields: Any
) -> Row | None:
    """COMPLETED if this execution still holds the fence, or CANCELLED (its stored output
    deleted, `CANCELLED_AT_FINISH` as its summary) when a cancel was recorded before it; None
    means: discard quietly. One autocommit statement on `rt.pg`, or inside the caller's
    transaction with the side effects it commits, which it writes only for a COMPLETED row.
    Fields as `_finish_params`."""
    params = _finish_params(task_id, execution_id, now, **fields)
    return metrics.ended(_row(await rows(db, _FINISH, params)))


def backoff(attempts: int, base: float, cap: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with full jitter in [50 %, 100 %] of base·2^(attempts-1), capped."""
    raw = min(cap, base * 2 ** max(0, attempts - 1))
    return timedelta(seconds=raw * (0.5 + 0.5 * (rng or random).random()))


# A cancel recorded before the failure is honoured as the rescuer honours it: CANCELLED, no
# further round (a re-armed row would wait for ever: no claim takes a cancelled row).
_RETRY = (
    "(CAST(%(retry_at)s AS timestamptz) IS NOT NULL AND attempts < max_attempts "
    " AND NOT cancel_requested)"
)


@tracing.traced("taskdesk.finish")
async def fail(
    pg: Pg,
    task_id: int,
    execution_id: str,
    *,
    now: datetime,
    error: str,
    retry_at: datetime | None,
    error_key: str | None = None,
    error_params: dict[str, Any] | None = None,
) -> Row | None:
    """Re-arm for another round at `retry_at` while attempts remain, else FAILED; CANCELLED when
    a cancel was recorded meanwhile (the error is still kept).

    `retry_at=None` means the error cannot succeed on retry: FAILED at once. `error` is the
    English; `error_key`/`error_params` the same as a desk.core.messages key, when it has one
    (else none is kept: an earlier attempt's key never labels this error). A repeat after a
    lost reply matches nothing (the row left RUNNING); the dispatcher sends a re-armed row."""
    found = await pg.write(
        "UPDATE background_task SET "
        " status = CASE WHEN cancel_requested THEN 'CANCELLED' "
        f"  WHEN {_RETRY} THEN 'WAITING' ELSE 'FAILED' END, "
        f" run = CASE WHEN {_RETRY} THEN run + 1 ELSE run END, "
        f" run_at = CASE WHEN {_RETRY} THEN CAST(%(retry_at)s AS timestamptz) ELSE run_at END, "
        f" finished_at = CASE WHEN {_RETRY} THEN NULL ELSE %(now)s END, "
        " dispatched_at = NULL, lease_until = NULL, last_error = %(error)s, "
        " error_key = %(ekey)s, error_params = CAST(%(eparams)s AS jsonb), updated_at = %(now)s "
        "WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'RUNNING' "
        f"RETURNING {COLUMNS}",
        {
            "id": task_id,
            "eid": execution_id,
            "now": now,
            "error": error[:2000],
            "ekey": error_key,
            "eparams": json.dumps(error_params or {}),
            "retry_at": retry_at,
        },
    )
    return metrics.ended(_row(found))


async def release(pg: Pg, task_id: int, execution_id: str, *, now: datetime) -> Row | None:
    """A worker shutting down hands its task back without spending an attempt."""
    found = await pg.write(
        "UPDATE background_task SET status = 'WAITING', run = run + 1, run_at = %(now)s, "
        " attempts = greatest(attempts - 1, 0), dispatched_at = NULL, lease_until = NULL, "
        " updated_at = %(now)s "
        "WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'RUNNING' "
        f" AND NOT cancel_requested RETURNING {COLUMNS}",
        {"id": task_id, "eid": execution_id, "now": now},
    )
    return _row(found)


async def ack_cancel(pg: Pg, task_id: int, execution_id: str, *, now: datetime) -> Row | None:
    """CANCELLED as asked, dropping whatever output this execution stored, in one statement."""
    found = await pg.write(
        "WITH dropped AS (DELETE FROM task_result_chunk "
        "  WHERE task_id = %(id)s AND execution_id = %(eid)s) "
        "UPDATE background_task SET status = 'CANCELLED', finished_at = %(now)s, "
        " lease_until = NULL, updated_at = %(now)s "
        "WHERE id = %(id)s AND execution_id = %(eid)s AND status = 'RUNNING' "
        f"RETURNING {COLUMNS}",
        {"id": task_id, "eid": execution_id, "now": now},
    )
    return metrics.ended(_row(found))


async def reread(db: Db, task_id: int) -> Row | None:
    """The row again, in the caller's transaction (an execution after a database error)."""
    return _row(
        await rows(db, f"SELECT {COLUMNS} FROM background_task WHERE id = %(id)s", {"id": task_id})
    )
