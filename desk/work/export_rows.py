"""An export's rows, copied once into its own UNLOGGED table (docs/architecture.md, "Export
snapshot"), so the long work of writing the CSV holds no snapshot of the ledger.

One statement (`INSERT … SELECT`, READ COMMITTED: one statement, one snapshot) copies the
tickets the task selects, numbered in id order (`rn`), into `export_rows_<task>_<execution>`;
its transaction commits at once. The chunks are then built from that table in short
transactions (desk.work.exports.chunk_sql), each reading rows `rn` of one range.

A row `rn = 0` (the seal) says the table is whole: its `id` is the row total and its `title`
the export's fingerprint (filters, scope, chunk size). An unlogged table is emptied when
PostgreSQL restarts after a crash: a table without its seal is rebuilt, from a new snapshot.
A worker that dies mid-export leaves its table and chunks; the next execution of the task
adopts both (`adopt`: one transaction renames the table to its own name and re-keys the
chunks) and builds only the chunks still missing. Tables of tasks no execution will resume
are dropped by the pruner (`drop_leftovers`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.models import BackgroundTask

PREFIX = "export_rows_"
_EXECUTION = re.compile(r"[0-9a-f]{1,32}")
# What the table holds: the cells of the CSV before formatting, as they were at the copy.
_COLUMNS = (
    "t.id, t.title, t.status, t.priority, coalesce(a.email, '') AS assignee_email, "
    "c.email AS creator_email, t.created_at, t.updated_at, t.message_count, "
    "t.first_response_at, {last} AS last_public_reply_at, "
    "{due} AS sla_due_at, {breached} AS sla_breached_at"
)
# A customer's export carries the SLA columns empty: SLA is staff's (docs/architecture.md,
# "Business hours"). Inlined, never a parameter: the CSV's shape is the task's own.
_NO_SLA = "NULL::timestamptz"


def sla_columns(task: BackgroundTask) -> tuple[str, str]:
    """The SQL of the task's (sla_due_at, sla_breached_at) cells: staff's exports only."""
    if task.scope_creator_id is None:
        return "t.sla_due_at", "t.sla_breached_at"
    return _NO_SLA, _NO_SLA


def columns(task: BackgroundTask, last: str) -> str:
    """What the task's table holds: the ticket's cells as they are at the copy."""
    due, breached = sla_columns(task)
    return _COLUMNS.format(last=last, due=due, breached=breached)


_FROM = (
    "FROM ticket t JOIN app_user c ON c.id = t.creator_id "
    "LEFT JOIN app_user a ON a.id = t.assignee_id"
)
_LEFTOVER = re.compile(rf"{PREFIX}(\d+)_[0-9a-f]+")


def table(task: BackgroundTask) -> str:
    """The table of the task's current execution (inlined in SQL: checked to be digits and
    hex; at most 12 + 19 + 1 + 32 = 64 characters, one over PostgreSQL's 63 only for ids of 19
    digits)."""
    eid = task.execution_id or ""
    if not _EXECUTION.fullmatch(eid) or not task.id or task.id <= 0:
        raise RuntimeError(f"unexpected execution id {eid!r}")
    return f"{PREFIX}{task.id}_{eid}"


def fingerprint(
    task: BackgroundTask, where: tuple[str, dict[str, Any]], rows_per_chunk: int
) -> str:
    """What the rows and the chunk ranges depend on: a table copied for another task (ids
    reused by a restored database), other filters, another scope (the person demoted since)
    or another chunk size is not reused."""
    sql, params = where
    # The columns too: a table copied by an older release (fewer of them) is not reused.
    said = repr((task.id, task.created_at, sql, sorted(params.items()), rows_per_chunk, _COLUMNS))
    return hashlib.sha256(said.encode()).hexdigest()


@dataclass
class Rows:
    """The export's table: its row total and the chunks already stored from it (seq → bytes)."""

    name: str
    total: int
    stored: dict[int, int] = field(default_factory=dict)


async def _names(conn: AsyncConnection, task_id: int) -> list[str]:
    found = await conn.execute(
        sa.text(
            "SELECT relname FROM pg_class WHERE relkind = 'r' "
            "AND relnamespace = current_schema()::regnamespace AND relname LIKE :p"
        ),
        {"p": f"{PREFIX}{task_id}\\_%"},
    )
    return [n for n in found.scalars() if _LEFTOVER.fullmatch(n)]


async def adopt(conn: AsyncConnection, task: BackgroundTask, print_: str) -> Rows | None:
    """In the caller's transaction: this execution's table, taken over from a killed one if
    need be, with the chunks stored from it; None (and no table left) when there is none whole.
    Commit before building: the rename and re-keying must land together."""
    mine = table(task)
    tid = int(task.id or 0)
    names = await _names(conn, tid)
    source = mine if mine in names else (names[0] if names else None)
    for other in names:
        if other != source:
            await conn.execute(sa.text(f"DROP TABLE IF EXISTS {other}"))
    if source is None:
        return None
    if source != mine:
        # IF EXISTS: the pruner may have dropped it since. The rename waits for a chunk
        # transaction of the killed execution still running, then stops any later one of it.
        await conn.execute(sa.text(f"ALTER TABLE IF EXISTS {source} RENAME TO {mine}"))
        if mine not in await _names(conn, tid):
            return None
        await conn.execute(
            sa.text(
                "UPDATE task_result_chunk SET execution_id = :me "
                "WHERE task_id = :t AND execution_id = :old"
            ),
            {"me": task.execution_id, "t": task.id, "old": source.rsplit("_", 1)[1]},
        )
    seal = (await conn.execute(sa.text(f"SELECT id, title FROM {mine} WHERE rn = 0"))).one_or_none()
    if seal is None or seal.title != print_:
        # Emptied by a crash, or copied for something else: its chunks are of another moment.
        await drop(conn, task, chunks=True)
        return None
    stored = await conn.execute(
        sa.text(
            "SELECT seq, octet_length(data) FROM task_result_chunk "
            "WHERE task_id = :t AND execution_id = :e"
        ),
        {"t": task.id, "e": task.execution_id},
    )
    return Rows(mine, int(seal.id), {int(s): int(n) for s, n in stored.all()})


async def copy(
    conn: AsyncConnection,
    task: BackgroundTask,
    where: tuple[str, dict[str, Any]],
    *,
    last: str,
    limit: int,
    print_: str,
) -> Rows:
    """In the caller's transaction: the table made and filled by one statement (at most
    `limit` rows; more, and the caller refuses the export), sealed and indexed."""
    name = table(task)
    cols = columns(task, last)
    sql, params = where
    await conn.execute(
        sa.text(
            f"CREATE UNLOGGED TABLE {name} AS SELECT 0::bigint AS rn, {cols} {_FROM} WITH NO DATA"
        )
    )
    got = await conn.execute(
        sa.text(
            f"INSERT INTO {name} SELECT row_number() OVER (ORDER BY t.id), {cols} {_FROM} "
            f"WHERE {sql} ORDER BY t.id LIMIT :x_limit"
        ),
        params | {"x_limit": limit},
    )
    total = int(got.rowcount)
    await conn.execute(
        sa.text(f"INSERT INTO {name} (rn, id, title) VALUES (0, :n, :p)"), {"n": total, "p": print_}
    )
    await conn.execute(sa.text(f"CREATE INDEX ON {name} (rn)"))
    return Rows(name, total)


async def drop(conn: AsyncConnection, task: BackgroundTask, *, chunks: bool) -> None:
    """This execution's table gone (and, with `chunks`, what it stored from it)."""
    await conn.execute(sa.text(f"DROP TABLE IF EXISTS {table(task)}"))
    if chunks:
        await conn.execute(
            sa.text("DELETE FROM task_result_chunk WHERE task_id = :t AND execution_id = :e"),
            {"t": task.id, "e": task.execution_id},
        )


_LEFTOVERS = sa.text(
    "SELECT relname FROM pg_class WHERE relkind = 'r' "
    "AND relnamespace = current_schema()::regnamespace AND relname LIKE :p "
    "AND NOT EXISTS (SELECT 1 FROM background_task b WHERE b.status IN ('WAITING', 'RUNNING') "
    " AND b.id = substring(relname FROM :id)::bigint) "
    "ORDER BY relname LIMIT :lim"
)


async def drop_leftovers(conn: AsyncConnection, *, limit: int) -> int:
    """Drop the tables of tasks no execution will resume (ended, or deleted): a killed
    worker's, or one stopped past its time limit. Returns how many."""
    pattern = {"p": f"{PREFIX}%", "id": f"^{PREFIX}(\\d+)_", "lim": limit}
    names = [
        n for n in (await conn.execute(_LEFTOVERS, pattern)).scalars() if _LEFTOVER.fullmatch(n)
    ]
    for name in names:
        await conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
    return len(names)
