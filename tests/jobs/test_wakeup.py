"""A freed slot starts the next queued task at once, not at the next poll tick (jobs/wakeup.py),
and a worker with no free slot still picks nothing."""

import sqlalchemy as sa

from desk import tasks
from desk.clock import utcnow
from tests.helpers import running_workers, wait_for

POLL = 10.0  # the longest poll_delay the settings allow: a tick would take seconds to come


async def _status(rt, task_id):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT status FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).scalar_one()


async def test_a_freed_slot_starts_the_next_task_without_a_poll_tick(rt, world, settings, tmp_path):
    rt.clock = utcnow  # the worker process runs on the real clock
    # One short slot: the second task can start only when the first frees it.
    with running_workers(settings, tmp_path, worker_max_jobs=1, worker_poll_delay=POLL):
        first = await tasks.submit_noop(
            rt, world.staff, world.team, {"steps": 1, "step_seconds": 1}
        )
        second = await tasks.submit_noop(rt, world.staff, world.team)

        async def first_running():
            return await _status(rt, first.id) == "RUNNING"

        # The worker's first poll may come one tick after the submissions.
        await wait_for(first_running, timeout=3 * POLL, what="the first task running")
        assert await _status(rt, second.id) == "WAITING"  # no slot for it: not picked

        async def first_done():
            return await _status(rt, first.id) == "COMPLETED"

        await wait_for(first_done, timeout=POLL, interval=0.02, what="the first task completed")

        async def second_done():
            return await _status(rt, second.id) == "COMPLETED"

        # Well under the poll delay (the next tick is ~9 s away), generous for a busy CI box.
        await wait_for(second_done, timeout=POLL / 3, interval=0.02, what="the second task")
