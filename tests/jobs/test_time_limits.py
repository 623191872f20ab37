"""Run-time limits (jobs/limits.py): a task that never returns is stopped at its kind's limit,
the attempt counted with its reason, its late writes refused by the fence and its slot freed at
once; an export's or import's limit grows with its size; a worker whose event loop is blocked is
still caught by its lease."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.ledger import run as ledger_run
from desk.work import tasks
from jobs import limits
from jobs.execution import claim_task, run_claimed
from jobs.processors import registry
from tests.factories import World
from tests.helpers import WorkerProcess, running_workers, wait_for

HANG = {"hang": True}


async def _row(rt: Runtime, task_id: int) -> sa.Row:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE id = :i")
        return (await conn.execute(q, {"i": task_id})).one()


def test_each_kind_has_a_limit_and_big_exports_and_imports_get_more(settings) -> None:
    s = settings.model_copy(
        update={"export_time_limit_seconds": 300, "rows_time_limit_seconds": 120,
                "email_time_limit_seconds": 90}
    )  # fmt: skip
    assert limits.base(s, "EMAIL") == 90
    assert limits.for_rows(s, "EXPORT", 0) == 300
    assert limits.for_rows(s, "EXPORT", 2_000_000) == 300 + 20 * 120
    assert limits.for_rows(s, "IMPORT", 50_000) == s.import_time_limit_seconds + 60


async def test_a_hung_task_is_stopped_at_its_limit_counted_and_fenced(
    rt: Runtime, world: World
) -> None:
    rt.settings = rt.settings.model_copy(update={"noop_time_limit_seconds": 1})
    task = await tasks.submit_noop(rt, world.staff, world.team, HANG)
    claimed = await claim_task(rt, task.id, 1)
    assert claimed is not None
    row, execution_id = claimed
    # A deadline only against a hang of the test itself: the limit is 1 s.
    outcome = await asyncio.wait_for(run_claimed(rt, registry(), row, execution_id), 60)
    assert outcome == "retry"
    after = await _row(rt, task.id)
    assert (after.status, after.attempts, after.error_key) == ("WAITING", 1, "task.ran_past_limit")
    assert after.error_params == {"seconds": 1}
    assert after.last_error == "Ran past its limit of 1 s; stopped."
    # What the stopped attempt might still try to write is refused: its fence is gone.
    late = await ledger_run.pulse(
        rt.pg, task.id, execution_id, now=rt.clock(), lease=timedelta(seconds=30), current=1
    )
    assert not late.alive


async def test_a_task_that_ends_in_time_is_not_touched(rt: Runtime, world: World) -> None:
    rt.settings = rt.settings.model_copy(update={"noop_time_limit_seconds": 30})
    task = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 2, "step_seconds": 0.01})
    claimed = await claim_task(rt, task.id, 1)
    assert claimed is not None
    assert await run_claimed(rt, registry(), *claimed) == "done"
    assert (await _row(rt, task.id)).status == "COMPLETED"


async def test_the_reason_reads_in_the_readers_language(rt: Runtime, world: World) -> None:
    from ui.i18n import catalog
    from ui.texts import say

    rt.settings = rt.settings.model_copy(update={"noop_time_limit_seconds": 1})
    task = await tasks.submit_noop(rt, world.staff, world.team, {**HANG, "max_attempts": 1})
    claimed = await claim_task(rt, task.id, 1)
    assert claimed is not None
    await asyncio.wait_for(run_claimed(rt, registry(), *claimed), 60)
    after = await _row(rt, task.id)
    assert after.status == "FAILED"
    zh = say(catalog("zh_Hans"), "zh-CN", after.error_key, after.error_params, after.last_error)
    assert zh == "运行超过了 1 秒的时限，已停止。"  # noqa: RUF001 - Chinese punctuation


@pytest.mark.slow
async def test_a_hung_task_frees_its_slot_for_the_next(rt, world, settings, tmp_path) -> None:
    """One short slot: the hung task holds it only until its limit, then the next task runs."""
    rt.clock = utcnow
    hung = await tasks.submit_noop(rt, world.staff, world.team, {**HANG, "max_attempts": 1})
    after = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 1, "step_seconds": 0})
    env = {"worker_max_jobs": 1, "noop_time_limit_seconds": 2}
    with running_workers(settings, tmp_path, **env):

        async def both_ended() -> bool:
            return (await _row(rt, hung.id)).status == "FAILED" and (
                await _row(rt, after.id)
            ).status == "COMPLETED"

        await wait_for(both_ended, timeout=90, what="the hung task stopped and the next one run")
    stopped, ran = await _row(rt, hung.id), await _row(rt, after.id)
    assert stopped.error_key == "task.ran_past_limit"
    assert ran.started_at >= stopped.finished_at, "the next task had to wait for the slot"


@pytest.mark.slow
async def test_a_blocked_event_loop_is_caught_by_the_lease(rt, world, settings, tmp_path) -> None:
    """A worker that blocks its event loop cannot enforce a limit or renew its lease: another
    worker's rescuer takes the task when the lease runs out, and what the blocked worker writes
    when it wakes is refused."""
    rt.clock = utcnow
    env = {"lease_seconds": 2, "heartbeat_ttl_seconds": 3, "redelivery_seconds": 2}
    task = await tasks.submit_noop(
        rt, world.staff, world.team, {"block_seconds": 15, "max_attempts": 1}
    )
    blocked = WorkerProcess(settings, tmp_path / "blocked.log", **env)
    try:

        async def running() -> bool:
            return (await _row(rt, task.id)).status == "RUNNING"

        await wait_for(running, timeout=90, what="the blocking task to start")
        rescuer = WorkerProcess(settings, tmp_path / "rescuer.log", **env)
        try:

            async def rescued() -> bool:
                return (await _row(rt, task.id)).status == "FAILED"

            await wait_for(rescued, timeout=90, what="the rescuer to end the lease-less task")

            async def woke() -> bool:
                return "lost its fence" in (tmp_path / "blocked.log").read_text()

            await wait_for(woke, timeout=90, what="the blocked worker to wake and be refused")
        finally:
            rescuer.stop()
    finally:
        blocked.stop()
    assert (await _row(rt, task.id)).status == "FAILED"  # not COMPLETED by the woken worker
