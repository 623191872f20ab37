"""Applying an import batch (the worker): the batch's rows go into a temporary staging table with
one COPY, and one statement writes both the tickets (create or upsert) and the rejected rows,
resolving assignee and creator e-mails with joins and rejecting unknown assignees in SQL.

Rows that the CSV reader already rejected (desk.imports.reader) travel in the same COPY with their
column and reason, so the report keeps one place and one order. Everything runs inside the
caller's fenced transaction: a batch, its rejections and the task's progress commit together.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import Message, message
from desk.core.models import BackgroundTask
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


# --- staging ---------------------------------------------------------------------------------

# Per connection, created once and kept: ON COMMIT DELETE ROWS empties it with every commit
# (and a rollback takes the batch's rows with it), so a batch never sees another's rows and
# no catalog rows are made per batch.
_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS import_stage (n int, ext text, title text, status text, "
    "priority text, assignee text, creator text, created timestamptz, bad_column text, "
    "reason text) ON COMMIT DELETE ROWS"
)
# COPY's text format: backslash, tab, LF and CR are the only characters that need escaping.
_ESCAPE = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NULL = "\\N"


def _line(item: Row | Rejection) -> str:
    if isinstance(item, Rejection):
        cells = [_NULL] * 7 + [item.column.translate(_ESCAPE), item.reason[:500].translate(_ESCAPE)]
        return f"{item.number}\t" + "\t".join(cells) + "\n"
    created = item.created_at.isoformat() if item.created_at is not None else _NULL
    return (
        f"{item.number}\t{item.external_id.translate(_ESCAPE)}\t{item.title.translate(_ESCAPE)}\t"
        f"{item.status}\t{item.priority}\t{item.assignee_email.translate(_ESCAPE)}\t"
        f"{item.creator_email.translate(_ESCAPE)}\t{created}\t{_NULL}\t{_NULL}\n"
    )


def staged(items: Iterable[Row | Rejection]) -> bytes:
    """A batch as COPY text for `import_stage` (pure Python: the worker builds it in a thread)."""
    # "replace" only matters for a header name that was not UTF-8 (a rejection's column)
    return "".join(map(_line, items)).encode(errors="replace")


# A staged row is rejected when the reader rejected it, or when it names an assignee who is not
# staff of the team (staff and admins may be assigned; any member may be the creator, and an
# unknown creator is the person importing). Tickets are written in file order.
_APPLY = """
WITH people AS (
  SELECT lower(u.email) AS email, u.id, m.role IN ('ADMIN', 'STAFF') AS staff
  FROM membership m JOIN app_user u ON u.id = m.user_id WHERE m.team_id = %(team)s),
s AS (
  SELECT st.*, a.id AS aid, c.id AS cid,
         st.reason IS NULL AND (st.assignee = '' OR a.id IS NOT NULL) AS ok
  FROM import_stage st
  LEFT JOIN people a ON a.email = st.assignee AND a.staff
  LEFT JOIN people c ON c.email = st.creator),
bad AS (
  SELECT n, coalesce(left(bad_column, 100), 'assignee_email') AS col,
         left(coalesce(reason, 'unknown assignee ' || assignee), 500) AS reason
  FROM s WHERE NOT ok),
rejected AS (
  INSERT INTO import_rejection (task_id, row_number, column_name, reason)
  SELECT %(task)s, n, col, reason FROM bad ON CONFLICT DO NOTHING),
written AS (
  INSERT INTO ticket (team_id, external_id, title, status, priority, assignee_id, creator_id,
                      created_at, updated_at)
  SELECT %(team)s, ext, title, status, priority, aid, coalesce(cid, %(owner)s),
         coalesce(created, %(now)s), %(now)s
  FROM s WHERE ok ORDER BY n
  ON CONFLICT (team_id, external_id) {conflict})
SELECT (SELECT count(*) FROM bad) AS rejected, (SELECT count(*) FROM s WHERE ok) AS valid,
       (SELECT count(*) FROM written WHERE inserted) AS created,
       (SELECT count(*) FROM written WHERE NOT inserted) AS updated
"""
_CREATE_ONLY = _APPLY.format(conflict="DO NOTHING RETURNING true AS inserted")
_CREATE_OR_UPDATE = _APPLY.format(
    conflict="DO UPDATE SET title = excluded.title, status = excluded.status, "
    "priority = excluded.priority, assignee_id = excluded.assignee_id, "
    "updated_at = excluded.updated_at "
    "WHERE (ticket.title, ticket.status, ticket.priority, ticket.assignee_id) IS DISTINCT FROM "
    "(excluded.title, excluded.status, excluded.priority, excluded.assignee_id) "
    "RETURNING (xmax = 0) AS inserted"
)


async def apply_batch(
    conn: AsyncConnection, task: BackgroundTask, payload: bytes, *, now: datetime
) -> Counts:
    """Stage one batch (`staged`) and write it, inside the caller's fenced transaction."""
    if not payload:
        return Counts()
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection  # psycopg's connection, in SQLAlchemy's transaction
    async with driver.cursor() as cur:
        # A batch commits with its progress, so losing the last commits to a server crash only
        # means the rescued run writes those batches again: no need to wait for the WAL flush.
        await cur.execute("SET LOCAL synchronous_commit = off")
        await cur.execute(_STAGE)
        async with cur.copy("COPY import_stage FROM STDIN") as copy:
            await copy.write(payload)
        sql = _CREATE_OR_UPDATE if task.filters.get("mode") == "upsert" else _CREATE_ONLY
        params = {"team": task.team_id, "task": task.id, "owner": task.owner_id, "now": now}
        await cur.execute(sql, params)
        rejected, valid, created, updated = await cur.fetchone()
    return Counts(created, updated, valid - created - updated, rejected)
