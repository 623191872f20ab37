"""export-100k and export-1m-memory: exports through a real worker process.

export-100k: accept → the stored CSV complete (ledger `finished_at - created_at`, the stored
bytes checked against `result_bytes`), against `COPY (the export's own SELECT) TO STDOUT CSV`
read into memory by psycopg on an open connection. export-1m-memory: a fresh worker, warmed up
by one small export, exports the big team; growth of VmHWM over its idle VmRSS.
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import sqlalchemy as sa

from bench import procs
from bench.harness import Ctx, alternate, runtime, wait_tasks, workers
from bench.stats import Row, Target
from desk.core.models import BackgroundTask
from desk.core.runtime import Runtime
from desk.ledger import accept as ledger
from desk.work import exports, tasks

FINISHED = "id = :id AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')"


async def run_export(
    rt: Runtime, user: int, team: int, filters: dict[str, object], within: float = 600
) -> BackgroundTask:
    """Accept an export, wait until it finished, check the stored CSV is whole; the final row."""
    task = await tasks.create_export(rt, user, team, filters)
    await wait_tasks(rt, FINISHED, {"id": task.id}, 1, within=within, interval=0.01)
    async with rt.engine.connect() as conn:
        done = await ledger.get(conn, task.id or 0)
        assert done is not None
        stored = (
            await conn.execute(
                sa.text(
                    "SELECT coalesce(sum(octet_length(data)), 0) FROM task_result_chunk "
                    "WHERE task_id = :t AND execution_id = :e"
                ),
                {"t": done.id, "e": done.execution_id},
            )
        ).scalar_one()
    if done.status != "COMPLETED" or stored != done.result_bytes:
        raise RuntimeError(
            f"export {done.id} ended {done.status} ({done.last_error}); "
            f"stored {stored} of {done.result_bytes} bytes"
        )
    return done


def seconds(task: BackgroundTask) -> float:
    assert task.finished_at is not None
    return (task.finished_at - task.created_at).total_seconds()


async def copy_into_memory(url: str, task: BackgroundTask) -> tuple[float, int]:
    """The baseline: the export's SELECT through COPY … TO STDOUT CSV into a bytearray."""
    sql, params = exports.copy_sql(task)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT 1")
        began = time.perf_counter()
        buf = bytearray()
        async with conn.cursor().copy(sql, params) as copy:
            async for data in copy:
                buf += data
        took = time.perf_counter() - began
    return took, len(buf)


async def export_100k(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("export")
    async with runtime(settings) as rt, workers(ctx, rt, "export100k") as (worker,):
        last = await run_export(rt, p.ada, p.small_team, {})  # warm-up (caches, code paths)
        rows = last.progress_current
        base_bytes = 0

        async def ours(_: int) -> float:
            nonlocal last
            last = await run_export(rt, p.ada, p.small_team, {})
            return seconds(last)

        async def base(_: int) -> float:
            nonlocal base_bytes
            took, base_bytes = await copy_into_memory(settings.libpq_url, last)
            return took

        a, b = await alternate(ctx.sizes.runs, ours, base)
        hwm = procs.proc_status(worker.pid)["VmHWM"] / 1024
    return [
        Row(
            "export-100k",
            "s",
            a,
            b,
            Target("ratio<=", 1.3),
            note=f"{rows:,} rows, stored {last.result_bytes:,} B (COPY alone {base_bytes:,} B "
            f"without header); worker peak RSS {hwm:.0f} MB",
            extra={"rows": rows, "worker_peak_rss_mb": hwm},
        )
    ]


async def _one_memory_run(ctx: Ctx, i: int) -> tuple[float, float, int, float]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("memory")
    async with runtime(settings) as rt, workers(ctx, rt, f"memory{i}") as (worker,):
        await run_export(rt, p.ada, p.small_team, {"q": "printer"})  # warm-up: code paths
        await asyncio.sleep(1.0)
        idle = procs.proc_status(worker.pid)["VmRSS"]
        if not procs.reset_peak_rss(worker.pid):
            raise RuntimeError("cannot reset the worker's VmHWM (/proc/PID/clear_refs)")
        done = await run_export(rt, p.zhou, p.big_team, {}, within=900)
        peak = procs.proc_status(worker.pid)["VmHWM"]
    return (peak - idle) / 1024, idle / 1024, done.progress_current, seconds(done)


async def export_1m_memory(ctx: Ctx) -> list[Row]:
    growth: list[float] = []
    idle: list[float] = []
    took: list[float] = []
    rows = 0
    for i in range(ctx.sizes.long_runs):
        g, m, rows, s = await _one_memory_run(ctx, i)
        growth.append(g)
        idle.append(m)
        took.append(s)
    return [
        Row(
            "export-1m-memory",
            "MB",
            growth,
            idle,
            Target("value<=", 16),
            note=f"peak RSS growth exporting {rows:,} rows (fresh worker each run) vs its idle RSS; "
            f"accept → stored in {', '.join(f'{s:.1f}' for s in took)} s",
            extra={"rows": rows, "export_seconds": took},
        )
    ]
