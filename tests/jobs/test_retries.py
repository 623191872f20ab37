"""Retries and cancellation: the ledger's policy, not arq's."""

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.helpers import running_workers, wait_for


async def _row(rt, task_id):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT * FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).one()


async def test_fails_twice_then_succeeds_with_backoff(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team, {"fail_times": 2})
    waits = []
    for run in (1, 2):
        assert await execute(rt, registry(), task.id, run) == "retry"
        row = await _row(rt, task.id)
        assert (
            row.status == "WAITING" and row.run == run + 1 and "scripted failure" in row.last_error
        )
        waits.append((row.run_at - clock()).total_seconds())
        clock.now = row.run_at
    assert 1.0 <= waits[0] <= 2.0 and 2.0 <= waits[1] <= 4.0, waits
    assert await execute(rt, registry(), task.id, 3) == "done"
    row = await _row(rt, task.id)
    assert row.status == "COMPLETED" and row.attempts == 3


async def test_failing_always_ends_failed_with_the_error(rt, world):
    task = await tasks.submit_noop(
        rt, world.staff, world.team, {"fail_times": 99, "max_attempts": 3}
    )
    for run in (1, 2, 3):
        await execute(rt, registry(), task.id, run)
    row = await _row(rt, task.id)
    assert (row.status, row.attempts) == ("FAILED", 3)
    assert row.last_error == "ScriptedFailure: scripted failure on attempt 3"
    again = await tasks.retry_task(rt, world.staff, task.id)
    assert (again.status, again.run, again.attempts) == ("WAITING", 4, 0)


async def test_non_retryable_error_fails_at_once(rt, world):
    task = await tasks.submit_noop(rt, world.staff, world.team, {"permanent": True})
    assert await execute(rt, registry(), task.id, 1) == "failed"
    row = await _row(rt, task.id)
    assert (row.status, row.attempts, row.last_error) == (
        "FAILED",
        1,
        "Scripted permanent failure.",
    )


async def test_cancel_running_stops_at_next_progress_write(rt, world):
    task = await tasks.submit_noop(
        rt, world.staff, world.team, {"steps": 200, "step_seconds": 0.02}
    )
    running = asyncio.create_task(execute(rt, registry(), task.id, 1))

    async def has_progress():
        row = await _row(rt, task.id)
        return row.progress_current > 0

    await wait_for(has_progress, timeout=10, what="progress")
    asked = await tasks.cancel_task(rt, world.staff, task.id)
    assert asked.status == "RUNNING" and asked.cancel_requested
    assert await asyncio.wait_for(running, 10) == "cancelled"
    row = await _row(rt, task.id)
    assert row.status == "CANCELLED" and row.progress_current < 200


@pytest.mark.slow
async def test_retries_through_a_real_worker(rt, world, settings, tmp_path):
    rt.clock = utcnow
    task = await tasks.submit_noop(rt, world.staff, world.team, {"fail_times": 2})
    with running_workers(settings, tmp_path, retry_base_seconds=0.2):

        async def done():
            row = await _row(rt, task.id)
            return row if row.status == "COMPLETED" else None

        row = await wait_for(done, timeout=30, what="completed after two retries")
    assert row.attempts == 3 and row.run == 3
    assert row.finished_at - row.created_at >= timedelta(
        seconds=0.3
    )  # two backoffs of ≥0.1 s and ≥0.2 s
