"""Applying an import batch (the worker), inside the caller's fenced transaction: a batch, its
rejections and the task's progress commit together (docs/architecture.md, "Import batches").

The batch comes prepared by desk.imports.batch (in the parse thread). Here: the people it names
are resolved (one small query: the team's members among its e-mails), the external ids the team
already has are found (one index probe per row), the rejections are inserted (the reader's and
the unknown or non-staff assignees', one report), the existing rows are updated set-wise when
their fields changed (upsert) or counted unchanged, and the new rows go into `ticket` with one
COPY, in file order. A batch of an import that has met no existing ticket skips the check. A
ticket that exists after all, or that someone else gave the same external id between the check
and the COPY, fails the COPY's unique index: the batch is rolled back to its savepoint and done
again with the check, and then sees that ticket as existing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from psycopg import AsyncCursor, errors
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import Message, message
from desk.core.models import BackgroundTask
from desk.imports.batch import NULL, Prepared, storable
from desk.imports.reader import Rejection, Row


@dataclass
class Counts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0

    @classmethod
    def of(cls, stats: dict[str, Any]) -> Counts:
        return cls(*(int(stats.get(k, 0)) for k in ("created", "updated", "unchanged", "rejected")))

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
        }

    def summary(self) -> Message:
        return message("import.done", **self.as_dict())


async def load_upload(conn: AsyncConnection, upload_id: int) -> bytes | None:
    row = (
        await conn.execute(sa.text("SELECT data FROM upload WHERE id = :id"), {"id": upload_id})
    ).first()
    return bytes(row.data) if row else None


# --- writing ---------------------------------------------------------------------------------

# Staff and admins may be assigned; any member may be the creator (an unknown creator is the
# person importing). Only the batch's own e-mails are looked up (app_user's lower(email) index).
_PEOPLE = (
    "SELECT lower(u.email), u.id, m.role IN ('ADMIN', 'STAFF') FROM app_user u "
    "JOIN membership m ON m.user_id = u.id AND m.team_id = %s WHERE lower(u.email) = ANY(%s::text[])"
)
# One index probe per row, whatever the team's size: with `external_id = ANY(array)` or a join,
# the planner chose a seq scan of the team's tickets (50 ms per 10,000 ids at 300,000 tickets and
# growing with them; 22 ms flat this way). LIMIT keeps the subquery from being flattened.
_EXISTING = (
    "SELECT v.ext FROM unnest(%s::text[]) AS v(ext), LATERAL (SELECT FROM ticket t "
    "WHERE t.team_id = %s AND t.external_id = v.ext LIMIT 1) AS hit"
)
# ON CONFLICT: a batch applied again after its commit keeps the report it wrote the first time.
_REJECT = (
    "INSERT INTO import_rejection (task_id, row_number, column_name, reason) "
    "SELECT %s, * FROM unnest(%s::int[], %s::text[], %s::text[]) ON CONFLICT DO NOTHING"
)
# Only a changed row is written, so updated_at moves only for those.
_UPDATE = """
UPDATE ticket t SET title = v.title, status = v.status, priority = v.priority,
                    assignee_id = v.aid, updated_at = %s
FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::int[]) AS v(ext, title, status,
                                                                           priority, aid)
WHERE t.team_id = %s AND t.external_id = v.ext
  AND (t.title, t.status, t.priority, t.assignee_id)
      IS DISTINCT FROM (v.title, v.status, v.priority, v.aid)
"""
_COPY = (
    "COPY ticket (team_id, external_id, title, status, priority, assignee_id, creator_id, "
    "created_at, updated_at) FROM STDIN"
)
_RETRIES = 2  # a batch that meets a concurrent writer's ticket is done again, at most this often


@dataclass
class _Plan:
    lines: list[str] = field(default_factory=list)  # the new tickets' COPY text
    old: list[tuple[Row, int | None]] = field(default_factory=list)  # existing, with assignee
    rejected: list[Rejection] = field(default_factory=list)  # unknown or non-staff assignees


def _plan(
    batch: Prepared, people: list[tuple[str, int, bool]], existing: set[str], owner: int, now: str
) -> _Plan:
    """Each valid row: rejected (its assignee), existing, or a COPY line (the loop's only
    per-row work: batch.prepare built the rest in the parse thread)."""
    staff = {email: uid for email, uid, is_staff in people if is_staff}
    ids = {email: str(uid) for email, uid, _ in people}
    own, stamps, plan = str(owner), f"{now}\t{now}\n", _Plan()
    for row, head, created in zip(batch.rows, batch.heads, batch.created, strict=True):
        aid = staff.get(row.assignee_email) if row.assignee_email else None
        if aid is None and row.assignee_email:
            reason = f"unknown assignee {row.assignee_email}"[:500]
            plan.rejected.append(Rejection(row.number, "assignee_email", reason))
        elif row.external_id in existing:
            plan.old.append((row, aid))
        else:
            cid = ids.get(row.creator_email, own)
            tail = stamps if created is None else f"{created}\t{now}\n"
            plan.lines.append(f"{head}{NULL if aid is None else aid}\t{cid}\t{tail}")
    return plan


async def _reject(cur: AsyncCursor[Any], task_id: int, rejections: list[Rejection]) -> None:
    if rejections:
        numbers = [r.number for r in rejections]
        columns = [storable(r.column)[:100] for r in rejections]
        reasons = [storable(r.reason)[:500] for r in rejections]
        await cur.execute(_REJECT, (task_id, numbers, columns, reasons))


async def _update(
    cur: AsyncCursor[Any], team_id: int, old: list[tuple[Row, int | None]], now: datetime
) -> int:
    if not old:
        return 0
    rows = [r for r, _ in old]
    columns = ([r.external_id for r in rows], [r.title for r in rows], [r.status for r in rows])
    await cur.execute(
        _UPDATE, (now, *columns, [r.priority for r in rows], [a for _, a in old], team_id)
    )
    return cur.rowcount


async def _existing(cur: AsyncCursor[Any], team_id: int, external_ids: list[str]) -> set[str]:
    await cur.execute(_EXISTING, (external_ids, team_id))
    return {ext for (ext,) in await cur.fetchall()}


async def _write(
    cur: AsyncCursor[Any],
    task: BackgroundTask,
    batch: Prepared,
    now: datetime,
    *,
    check: bool,
    sent: Callable[[], object],
) -> Counts:
    people: list[tuple[str, int, bool]] = []
    if batch.emails:
        await cur.execute(_PEOPLE, (task.team_id, batch.emails))
        people = await cur.fetchall()
    existing = (
        await _existing(cur, task.team_id, batch.external_ids) if check and batch.rows else set()
    )
    plan = _plan(batch, people, existing, task.owner_id, now.isoformat())
    rejected = sorted(batch.rejections + plan.rejected, key=lambda r: r.number)
    await _reject(cur, task.id or 0, rejected)
    upsert = task.filters.get("mode") == "upsert"
    updated = await _update(cur, task.team_id, plan.old, now) if upsert else 0
    if plan.lines:
        async with cur.copy(_COPY) as copy:
            await copy.write("".join(plan.lines).encode())
            sent()  # the server has the rows: its work from here on needs nothing of ours
    else:
        sent()
    return Counts(len(plan.lines), updated, len(plan.old) - updated, len(rejected))


def _raced(exc: errors.UniqueViolation) -> bool:
    return exc.diag.constraint_name == "ticket_team_external_id"


async def apply_batch(
    conn: AsyncConnection,
    task: BackgroundTask,
    batch: Prepared,
    *,
    now: datetime,
    fresh: bool = False,
    sent: Callable[[], object] = lambda: None,
) -> Counts:
    """Write one prepared batch inside the caller's fenced transaction.

    `fresh`: the import has met no existing ticket so far, so the batch goes in without the
    existence check (its index probes were 5-8 % of a fresh 100k import); a row that exists after
    all fails the COPY, and the batch is done again with the check. `sent` is called (maybe more than once) when
    the server has the batch's rows: the worker parses the next batch from then on."""
    if not len(batch):
        return Counts()
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection  # psycopg's connection, in SQLAlchemy's transaction
    async with driver.cursor() as cur:
        # A batch commits with its progress, so losing the last commits to a server crash only
        # means the rescued run writes those batches again: no need to wait for the WAL flush.
        # (One round trip: no parameters, so psycopg sends both statements as one query.)
        await cur.execute("SET LOCAL synchronous_commit = off; SAVEPOINT import_batch")
        check, retries = not fresh, 0
        while True:
            try:
                counts = await _write(cur, task, batch, now, check=check, sent=sent)
            except errors.UniqueViolation as exc:
                if not _raced(exc) or retries == _RETRIES:
                    raise
                retries += check  # an unchecked try that meets an existing ticket is no race
                check = True
                await cur.execute("ROLLBACK TO SAVEPOINT import_batch")  # (which stays set)
                continue
            await cur.execute("RELEASE SAVEPOINT import_batch")
            return counts
