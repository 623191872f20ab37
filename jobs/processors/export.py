"""EXPORT: PostgreSQL writes the CSV straight into stored chunks while the worker reports progress.

The matching tickets are split into id ranges of `ROWS_PER_CHUNK` rows; each range becomes one
chunk by one `INSERT … SELECT` (desk.work.exports.chunk_sql), so the CSV bytes never travel to the
worker and back, and no Python runs per row. Up to `WRITERS` connections store ranges at the same
time, all in one REPEATABLE READ snapshot (exported by the first), so the file shows the
tickets as they were at one instant, exactly as one `COPY` would. Each chunk is built holding
one of EXPORT_BUILD_SLOTS slots shared by every worker through the database
(desk.work.exports.build_slot): an export alone gets two writers, exports together take turns.
Chunks are keyed by execution id; only the execution that wins the fenced finish keeps them.
The worker holds no CSV in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import message
from desk.core.models import TaskStatus
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.people import access
from desk.work import exports, news
from jobs.execution import Execution
from jobs.outcomes import Permanent

ROWS_PER_CHUNK = 8000  # ~1.1 MB of CSV with typical titles
WRITERS = 2  # at most: a second writer only while a second build slot is free


PROGRESS_SECONDS = 0.5

_REPEATABLE_READ = sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
# The chunk transactions do not wait for the WAL flush. That is safe: the fenced finish commits
# synchronously after them, which flushes the WAL up to it; a crash before that loses only
# chunks of an unfinished execution, which are discarded anyway. Set after SET TRANSACTION
# SNAPSHOT, which must come before any query.
_ASYNC_COMMIT = sa.text("SELECT set_config('synchronous_commit', 'off', true)")
_SNAPSHOT_ID = re.compile(r"[0-9A-Fa-f-]+")


@dataclass
class _Run:
    """What the writers share: the ranges left, the totals so far, when to report next."""

    ex: Execution
    total: int
    ranges: Iterator[tuple[int, tuple[int, int]]]
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


async def _plan(ex: Execution, conn: AsyncConnection) -> tuple[int, list[tuple[int, int]]]:
    """In the snapshot just begun: the row total (within the limit) and the chunks' id ranges."""
    sql, params = exports.count_sql(ex.task)
    total = int((await conn.execute(sa.text(sql), params)).scalar_one())
    if total > ex.rt.settings.export_max_rows:
        limit = ex.rt.settings.export_max_rows
        raise Permanent(message("export.too_many_rows", rows=total, limit=limit))
    ends: list[int] = []
    if total > ROWS_PER_CHUNK:  # else one chunk: no boundary, and no second scan to learn so
        sql, params = exports.bounds_sql(ex.task)
        params |= {"x_rows": ROWS_PER_CHUNK, "x_total": total}
        ends = list((await conn.execute(sa.text(sql), params)).scalars())
    # Ids are positive; the last range is open-ended (no row lies beyond the total anyway).
    return total, list(zip([0, *ends], [*ends, 2**63 - 1], strict=True))


async def _store(run: _Run, conn: AsyncConnection, *, lead: bool = True) -> None:
    """Store ranges until none is left (several of these share `run.ranges`). Each chunk is
    built holding one of the database-wide build slots: the lead writer waits its turn for the
    first one that frees, a helper stops as soon as none is free or another writer is already
    waiting for one (the lead then stores the rest)."""
    ex = run.ex
    sql, params = exports.chunk_sql(ex.task)
    params |= {"x_task": ex.task_id, "x_exec": ex.execution_id}
    slots = ex.rt.settings.export_build_slots
    while True:
        ex.raise_if_stopped()
        # The slot first, then the range: a helper that steps back has taken no range.
        async with exports.build_slot(conn, slots, wait=lead) as held:
            item = next(run.ranges, None) if held else None
            if item is None:
                return  # all stored, or (a helper) every slot is taken by other builds
            seq, (lo, hi) = item
            head = exports.HEADER if seq == 0 else b""
            got = params | {"x_seq": seq, "x_lo": lo, "x_hi": hi, "x_head": head}
            n, size = (await conn.execute(sa.text(sql), got)).one()
        run.rows += n
        run.size += size
        if time.monotonic() >= run.next_report:
            run.next_report = time.monotonic() + PROGRESS_SECONDS
            await ex.progress(run.rows, run.total, f"{run.rows:,} / {run.total:,} rows")


async def _helper(run: _Run, conn: AsyncConnection, snapshot: str) -> None:
    """A second writer in the first one's snapshot."""
    if not _SNAPSHOT_ID.fullmatch(snapshot):  # inlined below: SET takes no bind parameters
        raise RuntimeError(f"unexpected snapshot id {snapshot!r}")
    await conn.execute(_REPEATABLE_READ)
    await conn.execute(sa.text(f"SET TRANSACTION SNAPSHOT '{snapshot}'"))
    await conn.execute(_ASYNC_COMMIT)
    await _store(run, conn, lead=False)


async def _export(ex: Execution) -> tuple[int, int]:
    """Store the whole CSV; returns (rows, bytes)."""
    engine = ex.rt.engine
    async with engine.connect() as lead:
        await lead.execute(_REPEATABLE_READ)
        total, ranges = await _plan(ex, lead)
        ex.allow_rows(total)  # the run-time limit of this size (jobs/limits.py)
        if len(ranges) > 1:
            # One chunk is the whole work in one statement: nothing to tell between its start and
            # its end, and every page watching the row would render the write once more.
            await ex.progress(0, total, f"0 / {total:,} rows")
        run = _Run(ex, total, enumerate(ranges), next_report=time.monotonic() + PROGRESS_SECONDS)
        helpers = min(WRITERS, ex.rt.settings.export_build_slots, len(ranges)) - 1
        snapshot = ""
        if helpers:
            snapshot = (await lead.execute(sa.text("SELECT pg_export_snapshot()"))).scalar_one()
        await lead.execute(_ASYNC_COMMIT)
        async with contextlib.AsyncExitStack() as stack:
            # Closed (rolled back unless committed) on the way out. The snapshot stays importable
            # while `lead`'s transaction is open.
            others = [await stack.enter_async_context(engine.connect()) for _ in range(helpers)]
            work = [_store(run, lead), *(_helper(run, c, snapshot) for c in others)]
            await _all_or_none(work)
            if run.rows != total:  # cannot happen in one snapshot
                raise RuntimeError(f"stored {run.rows:,} of {total:,} rows")
            # Only once every range is stored: a failed export leaves no chunk behind.
            for conn in (*others, lead):
                await conn.commit()
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
