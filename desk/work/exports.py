"""What an export contains: the ticket query for a task's filters and the CSV it is written as.

The CSV is produced by PostgreSQL itself: formula cells are neutralised, times formatted and
cells quoted in SQL. The worker copies the export's rows once into their own table
(desk/work/export_rows.py), then stores the CSV chunk by chunk from it with `chunk_sql`
(`INSERT … SELECT`, the bytes never leave the server); `copy_sql` is the same CSV through `COPY … TO STDOUT CSV`, the
reference it must equal byte for byte (tests, and the benchmark's baseline). `build_slot` is
the database-wide budget of chunk builds running at once (EXPORT_BUILD_SLOTS).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import locks
from desk.core.db import end_backend
from desk.core.messages import Message, message
from desk.core.models import BackgroundTask
from desk.helpdesk.filters import filter_sql, parse_filter
from desk.work import export_rows

BOM = b"\xef\xbb\xbf"
COLUMNS = (
    "id",
    "title",
    "status",
    "priority",
    "assignee_email",
    "creator_email",
    "created_at",
    "updated_at",
    "message_count",
    "first_response_at",
    "last_public_reply_at",
    "sla_due_at",
    "sla_breached_at",
)
HEADER = BOM + (",".join(COLUMNS) + "\n").encode()
# The conversation's columns are the ticket's own figures (desk/helpdesk/thread.py keeps them
# with every message, in its transaction), so they cost the export no read of ticket_message.
# All three count public messages only, for everyone: an internal note changes none of them, so
# no export (a customer's least) tells anything about notes. `message_count`: the public messages,
# the opening one included; `first_response_at`: the first public message by staff other than
# the ticket's creator; `last_public_reply_at`: the latest public message after the opening
# one, NULL (an empty cell) while there is none. The opening message sets the ticket's
# `last_public_reply_at` to its `created_at`; a ticket without one (imported, or made before
# migration 0018) has no count for it, and a first reply sets the time.
# Then `sla_due_at` (the soonest running SLA due instant) and `sla_breached_at` (the first
# breach), ISO-8601 UTC, empty when none: staff's exports only, a customer's are empty cells.
LAST_PUBLIC_REPLY = (
    "(CASE WHEN t.message_count > 1 OR t.last_public_reply_at <> t.created_at "
    "THEN t.last_public_reply_at END)"
)


def _safe(expr: str) -> str:
    """Spreadsheet formula injection: a cell starting with = + - @ tab or CR gets a leading '.
    A cell already starting with ' gets one too, so that desk.imports.service can undo the guard exactly:
    '=x reads back as =x, and ''=x as the title '=x it was."""
    return f"CASE WHEN left({expr}, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r', '''') THEN '''' || {expr} ELSE {expr} END"


def _iso(expr: str) -> str:
    return f"""to_char({expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"""


def _pyformat(sql: str) -> str:
    """`:name` placeholders (SQLAlchemy) → `%(name)s` (psycopg, for COPY)."""
    return re.sub(r"(?<![:\w]):([a-z_]+)", r"%(\1)s", sql)


def export_where(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    """The tickets the task's filters select. A customer's task (`scope_creator_id` set, also
    for an owner demoted since asking) covers their own tickets, and its `q` reads no note.
    Its SLA filter is read at the moment the export was asked (a resumed run selects the same)."""
    f = parse_filter(task.filters)
    creator = task.scope_creator_id
    return filter_sql(
        f, team_id=task.team_id, me=task.owner_id, creator_id=creator, staff=creator is None,
        now=task.created_at,
    )  # fmt: skip


def count_sql(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    where, params = export_where(task)
    return f"SELECT count(*) FROM ticket t WHERE {where}", params


def copy_sql(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    """A psycopg COPY statement (pyformat placeholders) writing the CSV body, no header."""
    where, params = export_where(task)
    due, breached = export_rows.sla_columns(task)
    select = (
        f"SELECT t.id, {_safe('t.title')}, t.status, t.priority, "
        f"{_safe('coalesce(a.email, %(empty)s)')}, {_safe('c.email')}, "
        f"{_iso('t.created_at')}, {_iso('t.updated_at')}, "
        f"t.message_count, {_iso('t.first_response_at')}, {_iso(LAST_PUBLIC_REPLY)}, "
        f"{_iso(due)}, {_iso(breached)} "
        "FROM ticket t JOIN app_user c ON c.id = t.creator_id LEFT JOIN app_user a ON a.id = t.assignee_id "
        f"WHERE {_pyformat(where)} ORDER BY t.id"
    )
    return f"COPY ({select}) TO STDOUT (FORMAT csv)", params | {"empty": ""}


def _cell(expr: str) -> str:
    """One text cell behind the formula guard, as COPY's CSV writes it (CopyAttributeOutCSV):
    quoted, with doubled quotes, when it holds a delimiter, a quote, CR or LF, or is empty (NULL
    is the unquoted empty cell)."""
    safe = _safe(expr)
    quoted = f"'\"' || replace({safe}, '\"', '\"\"') || '\"'"
    # The guard only prefixes a ' to a non-empty value, so the test can look at the raw value.
    return f"coalesce(CASE WHEN {expr} = '' OR {expr} ~ '[\",\\r\\n]' THEN {quoted} ELSE {safe} END, '')"


def _line() -> str:
    """One CSV line (with its LF) per row of the export's table (desk/work/export_rows.py),
    equal to a row of `copy_sql`'s output."""
    cells = [
        "r.id::text",
        _cell("r.title"),
        # NOT NULL, and the table's checks allow only the enum names: never quoted.
        "r.status",
        "r.priority",
        _cell("r.assignee_email"),
        _cell("r.creator_email"),
        # Fixed digits and punctuation: never quoted.
        f"coalesce({_iso('r.created_at')}, '')",
        f"coalesce({_iso('r.updated_at')}, '')",
        "r.message_count::text",
        f"coalesce({_iso('r.first_response_at')}, '')",
        f"coalesce({_iso('r.last_public_reply_at')}, '')",
        f"coalesce({_iso('r.sla_due_at')}, '')",
        f"coalesce({_iso('r.sla_breached_at')}, '')",
    ]
    return " || ',' || ".join(cells) + " || E'\\n'"


def chunk_sql(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    """Store the CSV lines of the rows `:x_lo < rn <= :x_hi` of the export's table (the task's
    current execution's, desk/work/export_rows.py) as chunk `:x_seq` of task `:x_task`'s
    execution `:x_exec`, after the bytes `:x_head`; returns (rows, bytes stored)."""
    # string_agg takes the rows in the order the subquery sorted them (a plain aggregate over one
    # sorted subquery, read through the table's index on rn); `string_agg(… ORDER BY rn)` would
    # sort every chunk a second time. tests/desk/work/test_export_bytes.py checks the order against COPY's.
    lines = (
        f"SELECT {_line()} AS line FROM {export_rows.table(task)} r "
        "WHERE r.rn > :x_lo AND r.rn <= :x_hi ORDER BY r.rn"
    )
    return (
        f"WITH b AS (SELECT count(*) AS n, coalesce(string_agg(line, ''), '') AS body FROM ({lines}) l), "
        "ins AS (INSERT INTO task_result_chunk (task_id, execution_id, seq, data) "
        "SELECT :x_task, :x_exec, :x_seq, CAST(:x_head AS bytea) || convert_to(body, 'UTF8') FROM b "
        "RETURNING octet_length(data) AS size) "
        "SELECT b.n, ins.size FROM b, ins"
    ), {}


# Build slots: advisory locks (SLOT_LOCK, slot number), one per chunk build, so every worker
# process on every host sees the same budget of CSV builds at once (the CPU they use is the
# database's). Session locks, taken and given back inside the chunk's transaction (a
# transaction pooler keeps the session that long). Writers that
# must wait queue on one more lock (QUEUE_LOCK, 0): PostgreSQL grants it in turn, and the first
# in line takes whichever slot frees first (a wait on one chosen slot could sit behind a build
# that holds it for long while the others free).
SLOT_LOCK = locks.EXPORT_SLOT
QUEUE_LOCK = locks.EXPORT_QUEUE
# How often the first waiter looks for a freed slot: soon at first, then less often.
_POLL_FIRST = 0.005
_POLL_MAX = 0.1


def _try_slots(slots: int) -> sa.TextClause:
    """The first free slot, taken; NULL if none is, or if a writer is queued for one (so that a
    writer that frees a slot and asks again cannot starve the queue). The queue check takes and
    gives back a shared hold on the queue lock, which fails while anyone waits for or holds it
    exclusively. CASE evaluates its branches in order and stops at the first true one, so at
    most one slot is taken."""
    return sa.text(
        f"SELECT CASE WHEN NOT pg_try_advisory_lock_shared({QUEUE_LOCK}, 0) THEN NULL "
        f"WHEN NOT pg_advisory_unlock_shared({QUEUE_LOCK}, 0) THEN NULL {_tries(slots)} END"
    )


def _take_slot(slots: int) -> sa.TextClause:
    """The first free slot, taken, by the writer first in the queue; NULL if none is free."""
    return sa.text(f"SELECT CASE {_tries(slots)} END")


def _tries(slots: int) -> str:
    return " ".join(f"WHEN pg_try_advisory_lock({SLOT_LOCK}, {i}) THEN {i}" for i in range(slots))


_JOIN_QUEUE = sa.text(f"SELECT pg_advisory_lock({QUEUE_LOCK}, 0)")
_LEAVE_QUEUE = sa.text(f"SELECT pg_advisory_unlock({QUEUE_LOCK}, 0)")
_FREE_SLOT = sa.text(f"SELECT pg_advisory_unlock({SLOT_LOCK}, :s)")


@contextlib.asynccontextmanager
async def build_slot(conn: AsyncConnection, slots: int, *, wait: bool) -> AsyncIterator[bool]:
    """Hold one of `slots` build slots on `conn` for the block (yields True), or yield False at
    once when none is free and not `wait`. A waiter takes the first slot that frees, in its turn
    in the queue."""
    try:
        got = (await conn.execute(_try_slots(slots))).scalar_one()
        if got is None and not wait:
            yield False
            return
        if got is None:
            got = await _wait_for_slot(conn, slots)
        yield True
        await conn.execute(_FREE_SLOT, {"s": got})
    except BaseException:
        # Whatever failed (the build, a cancel while waiting), the transaction may be aborted, so
        # no unlock can run in it, and a session lock outlives a rollback: ending the
        # connection's backend frees any slot or queue place it holds.
        await end_backend(conn)
        raise


async def _wait_for_slot(conn: AsyncConnection, slots: int) -> int:
    """Queue for a slot, then, first in line, take the first one that frees. Advisory locks
    cannot wait for "any of these", so the first waiter looks again and again; everyone behind
    it waits inside PostgreSQL."""
    await conn.execute(_JOIN_QUEUE)
    take = _take_slot(slots)
    pause = _POLL_FIRST
    while (got := (await conn.execute(take)).scalar_one()) is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)
    await conn.execute(_LEAVE_QUEUE)
    return int(got)


def summary(rows: int) -> Message:
    """ "17 rows exported." — with its key and figures, for the reader's language."""
    return message("export.done", rows=rows)
