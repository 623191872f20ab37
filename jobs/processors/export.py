"""EXPORT: stream `COPY … TO STDOUT CSV` into stored 1 MB chunks while reporting progress.

Chunks are keyed by execution id and written on a second connection while the COPY keeps
reading; only the execution that wins the fenced finish keeps its chunks. Memory stays flat:
at most a few chunks are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

import sqlalchemy as sa

from desk import access, exports, ledger_run, ledger_upkeep
from jobs.execution import Execution
from jobs.outcomes import LostFence, Permanent

CHUNK_BYTES = 1 << 20
PROGRESS_SECONDS = 0.5
YIELD_ROWS = 1000


# Each chunk's transaction does not wait for the WAL flush. That is safe: the fenced finish
# commits synchronously after the last chunk, which flushes the WAL up to it; a crash before that
# loses only chunks of an unfinished execution, which are discarded anyway. (TOAST compresses the
# chunks with lz4, the column's setting since migration 0010: far cheaper for the server than
# pglz.)
_ASYNC_COMMIT = sa.text("SELECT set_config('synchronous_commit', 'off', true)")


async def _writer(ex: Execution, queue: asyncio.Queue[bytes | None]) -> int:
    """Store chunks as they come; returns the number stored."""
    seq = 0
    async with ex.rt.engine.connect() as conn:
        while (chunk := await queue.get()) is not None:
            await conn.execute(_ASYNC_COMMIT)
            await ledger_upkeep.store_chunk(conn, ex.task_id, ex.execution_id, seq, chunk)
            await conn.commit()
            seq += 1
    return seq


async def _precheck(ex: Execution) -> int:
    """Re-check what may have changed since acceptance; returns the row total."""
    task = ex.task
    async with ex.rt.engine.connect() as conn:
        member = await access.membership(conn, task.owner_id, task.team_id)
        if member is None:
            raise Permanent(
                "The person who asked for this export is no longer a member of the team."
            )
        if not member.is_staff and task.scope_creator_id is None:
            # Demoted to customer since asking: they get what a customer may see, their own tickets.
            task.scope_creator_id = task.owner_id
        sql, params = exports.count_sql(task)
        total = int((await conn.execute(sa.text(sql), params)).scalar_one())
    if total > ex.rt.settings.export_max_rows:
        raise Permanent(
            f"{total:,} rows is more than the limit of {ex.rt.settings.export_max_rows:,}; narrow the filters."
        )
    return total


async def _stream(ex: Execution, total: int, queue: asyncio.Queue[bytes | None]) -> tuple[int, int]:
    sql, params = exports.copy_sql(ex.task)
    buf = bytearray(exports.HEADER)
    rows = size = 0
    next_report = time.monotonic() + PROGRESS_SECONDS
    async with ex.rt.engine.connect() as conn:
        raw = await conn.get_raw_connection()
        pg = raw.driver_connection
        assert pg is not None
        async with pg.cursor().copy(sql, params) as copy:
            async for row in copy:
                buf += row
                rows += 1
                if not rows % YIELD_ROWS:
                    # While PostgreSQL keeps the socket full, reading never waits: let the
                    # worker's other tasks (reminders due now, arq's polling) run.
                    await asyncio.sleep(0)
                if len(buf) >= CHUNK_BYTES:
                    size += len(buf)
                    await queue.put(bytes(buf))
                    buf.clear()
                    if time.monotonic() >= next_report:
                        await ex.progress(rows, total, f"{rows:,} / {total:,} rows")
                        next_report = time.monotonic() + PROGRESS_SECONDS
    size += len(buf)
    await queue.put(bytes(buf))
    return rows, size


async def process(ex: Execution) -> None:
    total = await _precheck(ex)
    await ex.progress(0, total, f"0 / {total:,} rows")
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=2)
    writer = asyncio.create_task(_writer(ex, queue))
    try:
        rows, size = await _stream(ex, total, queue)
        await queue.put(None)
        await writer
    except BaseException:
        writer.cancel()
        # Wait for it, so no chunk of this execution lands after the caller dropped them.
        with contextlib.suppress(BaseException):
            await writer
        raise
    ex.raise_if_stopped()
    rt = ex.rt
    now = rt.clock()
    said = exports.summary(rows)
    async with rt.engine.begin() as conn:
        done = await ledger_run.finish(
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
            message=f"{rows:,} / {rows:,} rows",
        )
        if done is None:
            raise LostFence()
        await ledger_upkeep.drop_other_chunks(conn, ex.task_id, ex.execution_id)
