"""Delivery: duplicates and stale messages are dropped, two dispatchers never send a row twice,
and losing Redis (flushed or stopped) loses no task."""

import asyncio

import pytest
import sqlalchemy as sa

from desk.core.queue import epoch_key
from desk.core.runtime import Runtime
from desk.work import tasks
from jobs import dispatcher
from jobs.execution import execute
from jobs.processors import registry
from tests.helpers import running_workers, wait_for


async def _status(rt, task_id):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT status FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).scalar_one()


async def _all_completed(rt, ids):
    async with rt.engine.connect() as conn:
        n = (
            await conn.execute(
                sa.text(
                    "SELECT count(*) FROM background_task WHERE id = ANY(:ids) AND status = 'COMPLETED'"
                ),
                {"ids": ids},
            )
        ).scalar_one()
    return n == len(ids)


async def test_same_message_twice_gives_one_csv(rt, world):
    task = await tasks.create_export(rt, world.staff, world.team, {})
    outcomes = await asyncio.gather(*(execute(rt, registry(), task.id, task.run) for _ in range(3)))
    assert sorted(outcomes) == ["done", "stale", "stale"]
    async with rt.engine.connect() as conn:
        execs = (
            await conn.execute(sa.text("SELECT DISTINCT execution_id FROM task_result_chunk"))
        ).all()
    assert len(execs) == 1


async def test_stale_run_is_dropped(rt, world):
    task = await tasks.submit_noop(rt, world.staff, world.team)
    assert await execute(rt, registry(), task.id, task.run + 1) == "stale"
    assert await _status(rt, task.id) == "WAITING"


async def test_two_dispatchers_send_each_due_row_once(rt, world, settings):
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(300)]
    async with rt.engine.begin() as conn:  # as if the web never got to enqueue them
        await conn.execute(sa.text("UPDATE background_task SET dispatched_at = NULL"))
    async for key in rt.redis.scan_iter(match=f"*{rt.settings.queue_prefix}*"):
        await rt.redis.delete(key)  # the messages the web sent are gone too
    await rt.redis.set(epoch_key(rt.settings.queue_prefix), "kept")  # but Redis was not flushed
    other = await Runtime.open(settings, clock=rt.clock)
    try:
        sent = await asyncio.gather(
            dispatcher.run_once(rt), dispatcher.run_once(other), dispatcher.run_once(rt)
        )
    finally:
        await other.close()
    assert sum(sent) == len(made)
    assert await rt.redis.zcard(rt.queue.lane_queue("short")) == len(made)
    assert await dispatcher.run_once(rt) == 0, "nothing is due again within the redelivery window"


async def test_waiting_row_is_redelivered_after_the_window(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team)
    async for key in rt.redis.scan_iter(match=f"*{rt.settings.queue_prefix}*"):
        await rt.redis.delete(key)
    await rt.redis.set(epoch_key(rt.settings.queue_prefix), "kept")  # the message alone is lost
    assert await dispatcher.run_once(rt) == 0
    clock.advance(rt.settings.redelivery_seconds + 1)
    assert await dispatcher.run_once(rt) == 1
    assert await rt.redis.zcard(rt.queue.lane_queue("short")) == 1
    assert task.id


@pytest.fixture
async def rt_private(settings, private_redis):
    s = settings.model_copy(update={"redis_url": private_redis.url, "redelivery_seconds": 1.0})
    runtime = await Runtime.open(s)
    yield runtime
    await runtime.close()


@pytest.mark.slow
async def test_flushed_redis_loses_no_task(rt_private, world, tmp_path):
    rt = rt_private
    ids = [(await tasks.submit_noop(rt, world.staff, world.team)).id for _ in range(20)]
    ids.append((await tasks.create_export(rt, world.staff, world.team, {})).id)
    await rt.redis.flushdb()
    with running_workers(rt.settings, tmp_path, redelivery_seconds=1):
        await wait_for(
            lambda: _all_completed(rt, ids), timeout=40, what="all tasks completed after FLUSHDB"
        )


@pytest.mark.slow
async def test_submit_while_redis_is_down_then_completes(
    rt_private, private_redis, world, tmp_path
):
    rt = rt_private
    private_redis.kill()
    task = await asyncio.wait_for(tasks.create_export(rt, world.staff, world.team, {}), 5)
    assert task.id and task.status == "WAITING"
    private_redis.start()
    with running_workers(rt.settings, tmp_path, redelivery_seconds=1):
        await wait_for(
            lambda: _all_completed(rt, [task.id]),
            timeout=40,
            what="export completed after Redis came back",
        )
