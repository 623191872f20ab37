"""EXPORT: PostgreSQL writes the CSV straight into stored chunks while the worker reports progress.

One statement copies the matching tickets into the execution's own UNLOGGED table
(desk/work/export_rows.py) and commits: the file is the tickets as they were at that instant,
exactly as one `COPY` would show them, and no snapshot is held beyond that statement (a long
export no longer holds back VACUUM; docs/architecture.md, "Export snapshot"). The table's rows
are split into ranges of `ROWS_PER_CHUNK`; each range becomes one chunk by one `INSERT … SELECT`
(desk.work.exports.chunk_sql) in a transaction of its own, so the CSV bytes never travel to the
worker and back, and no Python runs per row. Up to `WRITERS` connections store ranges at the
same time. Each chunk is built holding one of EXPORT_BUILD_SLOTS slots shared by every worker
through the database (desk.work.exports.build_slot), taken and given back inside its
transaction: an export alone gets two writers, exports together take turns. Chunks are keyed by
execution id; only the execution that wins the fenced finish keeps them, and a failed export
deletes its own. An execution after a killed one adopts its table and chunks and builds the rest.
The worker holds no CSV in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.db import is_transient
from desk.core.messages import message
from desk.core.models import TaskStatus
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.people import access
from desk.work import export_rows, exports, news
from jobs.execution import Execution
from jobs.outcomes import Permanent

ROWS_PER_CHUNK = 8000  # ~1.1 MB of CSV with typical titles
WRITERS = 2  # at most: a second writer only while a second build slot is free


PROGRESS_SECONDS = 0.5

# The chunk transactions do not wait for the WAL flush. That is safe: the fenced finish commits
# synchronously after them, which flushes the WAL up to it; a crash before that loses only
# chunks of an unfinished execution, which the next one builds again (its table is emptied by
# the crash too, so it copies the rows anew, export_rows.adopt).
_ASYNC_COMMIT = sa.text("SELECT set_config('synchronous_commit', 'off', true)")


@dataclass
class _Run:
    """What the writers share: the ranges left, the totals so far, when to report next."""

    ex: Execution
    total: int
    ranges: Iterator[tuple[int, tuple[int, int]]]
    sql: str
    rows: int = 0
    size: int = 0
    next_report: float = 0.0


async def _check_member(ex: Execution) -> None:
    """Re-check what may have changed since acceptance."""
    task = ex.task
    async with ex.rt.engine.connect() as conn:
        member = await access.membership(conn, task.owner_id, task.team_id)
    if member is None:
        raise Permanent("The person who asked for this export is no longer a member of the team.")
    if not member.is_staff and task.scope_creator_id is None:
        # Demoted to customer since asking: they get what a customer may see, their own tickets.
        task.scope_creator_id = task.owner_id


async def _rows(ex: Execution, conn: AsyncConnection) -> export_rows.Rows:
    """The export's table, adopted from a killed execution or copied now (one statement, one
    moment: its transaction commits before any chunk is built)."""
    task = ex.task
    where = exports.export_where(task)
    print_ = export_rows.fingerprint(task, where, ROWS_PER_CHUNK)
    async with conn.begin():
        await conn.execute(_ASYNC_COMMIT)
        found = await export_rows.adopt(conn, task, print_)
        if found is not None:
            return found
        await export_rows.drop(conn, task, chunks=True)
        limit = ex.rt.settings.export_max_rows
        last = exports.LAST_PUBLIC_REPLY
        rows = await export_rows.copy(conn, task, where, last=last, limit=limit + 1, print_=print_)
        if rows.total > limit:  # rolled back: no table is left
            sql, params = exports.count_sql(task)
            total = int((await conn.execute(sa.text(sql), params)).scalar_one())
            raise Permanent(message("export.too_many_rows", rows=total, limit=limit))
    return rows


def _ranges(rows: export_rows.Rows) -> tuple[int, list[tuple[int, tuple[int, int]]]]:
    """(rows already stored, the ranges of row numbers still to store by seq): one chunk per
    ROWS_PER_CHUNK rows, and one (the header's) for no rows."""
    count = max(1, -(-rows.total // ROWS_PER_CHUNK))
    done = sum(min(ROWS_PER_CHUNK, rows.total - s * ROWS_PER_CHUNK) for s in rows.stored)
    todo = [(s, (s * ROWS_PER_CHUNK, (s + 1) * ROWS_PER_CHUNK)) for s in range(count)]
    return done, [r for r in todo if r[0] not in rows.stored]


async def _store(run: _Run, conn: AsyncConnection, *, lead: bool = True) -> None:
    """Store ranges until none is left (several of these share `run.ranges`), each chunk in a
    transaction of its own, built holding one of the database-wide build slots: the lead writer
    waits its turn for the first one that frees, a helper stops as soon as none is free or
    another writer is already waiting for one (the lead then stores the rest)."""
    ex = run.ex
    params = {"x_task": ex.task_id, "x_exec": ex.execution_id}
    slots = ex.rt.settings.export_build_slots
    while True:
        ex.raise_if_stopped()
        await conn.execute(_ASYNC_COMMIT)
        # The slot first, then the range: a helper that steps back has taken no range.
        async with exports.build_slot(conn, slots, wait=lead) as held:
            item = next(run.ranges, None) if held else None
            if item is not None:
                seq, (lo, hi) = item
                head = exports.HEADER if seq == 0 else b""
                got = params | {"x_seq": seq, "x_lo": lo, "x_hi": hi, "x_head": head}
                n, size = (await conn.execute(sa.text(run.sql), got)).one()
        await conn.commit()
        if item is None:
            return  # all stored, or (a helper) every slot is taken by other builds
        run.rows += n
        run.size += size
        if time.monotonic() >= run.next_report:
            run.next_report = time.monotonic() + PROGRESS_SECONDS
            await ex.progress(run.rows, run.total, f"{run.rows:,} / {run.total:,} rows")


async def _export(ex: Execution) -> tuple[int, int]:
    """Store the whole CSV; returns (rows, bytes). A failure other than the database's going
    away deletes what this execution stored, and its table (a worker shutting down or a
    database outage leaves both for the next execution, or the pruner)."""
    engine = ex.rt.engine
    try:
        return await _build(ex)
    except Exception as exc:
        if not is_transient(exc):
            async with engine.begin() as conn:
                await export_rows.drop(conn, ex.task, chunks=True)
        raise


async def _build(ex: Execution) -> tuple[int, int]:
    engine = ex.rt.engine
    async with engine.connect() as lead:
        rows = await _rows(ex, lead)
        total = rows.total
        ex.allow_rows(total)  # the run-time limit of this size (jobs/limits.py)
        done, ranges = _ranges(rows)
        if len(ranges) + len(rows.stored) > 1:
            # One chunk is the whole work in one statement: nothing to tell between its start and
            # its end, and every page watching the row would render the write once more.
            await ex.progress(done, total, f"{done:,} / {total:,} rows")
        sql, _ = exports.chunk_sql(ex.task)
        run = _Run(ex, total, iter(ranges), sql, next_report=time.monotonic() + PROGRESS_SECONDS)
        run.rows, run.size = done, sum(rows.stored.values())
        helpers = max(0, min(WRITERS, ex.rt.settings.export_build_slots, len(ranges)) - 1)
        async with contextlib.AsyncExitStack() as stack:
            others = [await stack.enter_async_context(engine.connect()) for _ in range(helpers)]
            work = [_store(run, lead), *(_store(run, c, lead=False) for c in others)]
            await _all_or_none(work)
        if run.rows != total:  # cannot happen: the ranges cover the table's rows once
            raise RuntimeError(f"stored {run.rows:,} of {total:,} rows")
        async with lead.begin():
            await export_rows.drop(lead, ex.task, chunks=False)
    return run.rows, run.size


async def _all_or_none(work: list[Any]) -> None:
    """Run the writers together; if one fails, stop the others before re-raising (their
    transactions then roll back, so no chunk of this execution lands later)."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def process(ex: Execution) -> None:
    await _check_member(ex)
    rows, size = await _export(ex)
    ex.raise_if_stopped()
    rt = ex.rt
    now = rt.clock()
    said = exports.summary(rows)
    async with rt.engine.begin() as conn:
        done = await ledger_run.complete(
            conn,
            ex.task_id,
            ex.execution_id,
            now=now,
            summary=said.text,
            summary_key=said.key,
            summary_params=said.params,
            expires_at=now + timedelta(hours=rt.settings.export_retention_hours),
            result_bytes=size,
            current=rows,
            total=rows,  # a one-chunk export reported no progress before
            message=f"{rows:,} / {rows:,} rows",
        )
        if done is not None and done.status == TaskStatus.COMPLETED:
            await ledger_upkeep.drop_other_chunks(conn, ex.task_id, ex.execution_id)
            # The owner hears of it in the same transaction (desk/work/news.py).
            await news.export_ready(
                conn, task_id=ex.task_id, team_id=done.team_id, owner_id=done.owner_id,
                rows=rows, expires_at=done.expires_at or now, now=now,
            )  # fmt: skip
    # Turned CANCELLED (a cancel recorded after the last progress write): the same statement
    # deleted the stored CSV.
    ex.finished(done)
