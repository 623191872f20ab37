"""Real worker processes: kill -9 mid-export, SIGTERM mid-task, and health following both."""

import pytest
import sqlalchemy as sa

from desk.console import health
from desk.core.clock import utcnow
from desk.work import tasks
from tests.factories import bulk_tickets
from tests.helpers import WorkerProcess, running_workers, wait_for
from tests.jobs.stall_helpers import kill_mid_work

pytestmark = pytest.mark.slow  # starts real worker or server processes


async def _row(rt, task_id):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT * FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).one()


def _when(rt, task_id, predicate):
    async def probe():
        row = await _row(rt, task_id)
        return row if predicate(row) else None

    return probe


async def test_kill_9_mid_export_is_rescued_by_another_worker(rt, world, settings, tmp_path):
    rt.clock = utcnow
    await bulk_tickets(rt, world.team, world.customer, 300_000)
    env = {"lease_seconds": 2, "heartbeat_ttl_seconds": 3}
    first = WorkerProcess(settings, tmp_path / "first.log", **env)
    try:
        task = await tasks.create_export(rt, world.staff, world.team, {})
        await wait_for(
            _when(rt, task.id, lambda r: r.status == "RUNNING" and r.progress_current > 0),
            timeout=60,
            interval=0.01,
            what="export running with progress",
        )
        assert task.id in await kill_mid_work(rt, first)
    finally:
        first.stop()
    row = await _row(rt, task.id)
    assert row.status == "RUNNING", (
        "killed mid-way, the row still says RUNNING until its lease expires"
    )
    with running_workers(settings, tmp_path, **env):
        done = await wait_for(
            _when(rt, task.id, lambda r: r.status == "COMPLETED"), timeout=60, what="rescued export"
        )
    assert done.attempts == 2 and done.run == 2
    async with rt.engine.connect() as conn:
        execs = (
            (
                await conn.execute(
                    sa.text(
                        "SELECT DISTINCT execution_id FROM task_result_chunk WHERE task_id = :t"
                    ),
                    {"t": task.id},
                )
            )
            .scalars()
            .all()
        )
    assert execs == [done.execution_id], "exactly one stored CSV: the committing execution's"
    f = await tasks.open_export_result(rt, world.staff, task.id)
    data = b"".join([c async for c in f.chunks])
    assert data.count(b"\n") == 300_004 + 1  # header + every ticket


async def test_sigterm_unregisters_at_once_and_hands_the_task_to_another_worker(
    rt, world, settings, tmp_path
):
    rt.clock = utcnow
    env = {"lease_seconds": 30, "worker_grace_seconds": 0.3, "heartbeat_ttl_seconds": 20}
    first = WorkerProcess(settings, tmp_path / "first.log", **env)
    try:
        await wait_for(lambda: live_workers(rt), timeout=30, what="worker registered")
        task = await tasks.submit_noop(
            rt, world.staff, world.team, {"steps": 40, "step_seconds": 0.1}
        )
        await wait_for(
            _when(rt, task.id, lambda r: r.status == "RUNNING"), timeout=30, what="running"
        )
        first.terminate()
        await wait_for(_no_workers(rt), timeout=5, what="registration removed on SIGTERM")
        assert first.wait(30) == 0
    finally:
        first.stop()
    row = await _row(rt, task.id)
    assert row.status == "WAITING" and row.run == 2, "handed back, not left to the lease"
    with running_workers(settings, tmp_path, **env):
        done = await wait_for(
            _when(rt, task.id, lambda r: r.status == "COMPLETED"),
            timeout=30,
            what="finished elsewhere",
        )
    assert done.attempts == 1


async def test_sigterm_lets_a_short_task_finish_within_the_grace_period(
    rt, world, settings, tmp_path
):
    rt.clock = utcnow
    w = WorkerProcess(settings, tmp_path / "w.log", worker_grace_seconds=20)
    try:
        task = await tasks.submit_noop(
            rt, world.staff, world.team, {"steps": 10, "step_seconds": 0.1}
        )
        await wait_for(
            _when(rt, task.id, lambda r: r.status == "RUNNING"), timeout=30, what="running"
        )
        w.terminate()
        assert w.wait(30) == 0
    finally:
        w.stop()
    row = await _row(rt, task.id)
    assert row.status == "COMPLETED" and row.run == 1


async def live_workers(rt):
    return (await health.check(rt)).workers


def _no_workers(rt):
    async def probe():
        return not (await health.check(rt)).workers

    return probe


async def test_health_follows_workers_starting_stopping_and_dying(rt, world, settings, tmp_path):
    rt.clock = utcnow
    before = await health.check(rt)
    assert before.redis_ok and before.workers == [] and not before.ok
    with running_workers(settings, tmp_path, count=2, heartbeat_ttl_seconds=2) as (a, b):
        report = await wait_for(lambda: _two(rt), timeout=30, what="two workers registered")
        assert report.last_sweep is not None and report.queue_depth == 0 and report.ok
        a.terminate()
        assert a.wait(30) == 0
        assert len((await health.check(rt)).workers) == 1, (
            "SIGTERM removes the registration at once"
        )
        # b, the only worker left, takes a long task and dies holding it.
        slow = await tasks.submit_noop(
            rt, world.staff, world.team, {"steps": 100, "step_seconds": 0.1}
        )
        assert await kill_mid_work(rt, b) == [slow.id]
        await wait_for(_no_workers(rt), timeout=10, what="a killed worker's registration expires")


async def _two(rt):
    report = await health.check(rt)
    return report if len(report.workers) == 2 else None
