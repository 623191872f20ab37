"""Wake-ups (jobs/wake.py, docs/architecture.md "Wake-ups"): an idle lane polls as soon as the
send script publishes, a deferred job starts when due, and a lost wake-up costs only the idle
poll. The polls are set far apart here (seconds), so only a wake-up explains a quick start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from arq.connections import RedisSettings, create_pool
from arq.worker import func
from redis.asyncio import Redis

from desk.core.clock import utcnow
from desk.core.queue import PROCESS_FUNCTION, Queue, dumps, job_id, loads, wake_channel
from desk.core.settings import ConfigError, load_settings
from desk.work import tasks
from jobs.wake import LaneWorker, Listener
from tests.helpers import running_workers, wait_for

BUSY_POLL, IDLE_POLL = 5.0, 10.0  # far above what a woken start takes


@dataclass
class Lane:
    queue: Queue
    listener: Listener
    started: dict[int, float]  # task id -> time.time() its job started


@pytest.fixture
async def lane(settings) -> AsyncIterator[Lane]:
    """A short lane's arq consumer and a listener in this process, on the real Redis."""
    queue = await Queue.open(settings)
    name = queue.lane_queue("short")
    listener = Listener(settings.redis_url, {"short": wake_channel(name)}, "taskdesk-wake-test")
    started: dict[int, float] = {}

    async def record(ctx: dict[str, Any], msg: dict[str, int]) -> None:
        started[msg["task_id"]] = time.time()

    worker = LaneWorker(
        functions=[func(record, name=PROCESS_FUNCTION)],
        queue_name=name,
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        keep_result=0,
        handle_signals=False,
        job_serializer=dumps,
        job_deserializer=loads,
        listener=listener,
        lane="short",
        busy=lambda: False,
        busy_poll=BUSY_POLL,
        idle_poll=IDLE_POLL,
    )
    running = [asyncio.create_task(listener.run()), asyncio.create_task(worker.async_run())]
    await wait_for(lambda: _true(listener.subscribed), timeout=10, what="the listener subscribed")
    yield Lane(queue, listener, started)
    for t in running:
        t.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    await worker.close()
    await queue.close()


async def _true(value: bool) -> bool:
    return value


async def _started(lane: Lane, task_id: int) -> float:
    async def probe() -> float | None:
        return lane.started.get(task_id)

    return await wait_for(probe, timeout=IDLE_POLL * 2, what=f"job of task {task_id} started")


async def test_a_send_wakes_the_idle_lane(lane):
    for task_id in (1, 2, 3):
        sent = time.time()
        assert await lane.queue.enqueue(task_id, 1, 1, "short")
        assert await _started(lane, task_id) - sent < 1.0


async def test_a_deferred_send_starts_when_due(lane):
    due = datetime.now(UTC) + timedelta(seconds=1.5)
    assert await lane.queue.enqueue(7, 1, 1, "short", due)
    at = await _started(lane, 7)
    assert due.timestamp() <= at < due.timestamp() + 1.0  # not at the idle poll, 10 s on


async def test_a_lost_wakeup_costs_only_the_idle_poll(lane, settings):
    """A job queued without its wake-up (arq's own enqueue publishes nothing) starts at the
    lane's next idle poll: late, never lost."""
    arq = await create_pool(
        RedisSettings.from_dsn(settings.redis_url), job_serializer=dumps, job_deserializer=loads
    )
    try:
        sent = time.time()
        jid = job_id(settings.queue_prefix, 9, 1, 1)
        assert await arq.enqueue_job(
            PROCESS_FUNCTION,
            {"task_id": 9, "run": 1},
            _job_id=jid,
            _queue_name=lane.queue.lane_queue("short"),
        )
        assert await _started(lane, 9) - sent <= IDLE_POLL + 1.0
    finally:
        await arq.aclose()


async def test_the_listener_comes_back_after_its_connection_is_killed(lane, settings):
    admin = Redis.from_url(settings.redis_url)
    try:
        clients = await admin.client_list()
        ids = [c["id"] for c in clients if c["name"] == "taskdesk-wake-test"]
        assert ids, "the listener names its connection"
        for cid in ids:
            await admin.client_kill_filter(_id=cid)
        await wait_for(lambda: _true(not lane.listener.subscribed), timeout=10, what="the drop")
        await wait_for(lambda: _true(lane.listener.subscribed), timeout=10, what="resubscribed")
        sent = time.time()
        assert await lane.queue.enqueue(11, 1, 1, "short")
        assert await _started(lane, 11) - sent < 1.0
    finally:
        await admin.aclose()


def test_the_idle_poll_is_not_shorter_than_the_poll(settings):
    with pytest.raises(ConfigError, match="WORKER_IDLE_POLL_SECONDS"):
        load_settings(
            database_url=settings.database_url,
            worker_poll_delay=0.5,
            worker_idle_poll_seconds=0.1,
        )


@pytest.mark.slow  # starts a real worker process
async def test_a_real_worker_starts_accepted_tasks_at_once(rt, world, tmp_path, settings):
    """Polls 2 s apart when busy and 10 s apart when idle: each NOOP still starts within a
    second of its accept, woken by its kick."""
    rt.clock = utcnow
    overrides = {"worker_poll_delay": 2.0, "worker_idle_poll_seconds": 10.0}
    with running_workers(settings, tmp_path, **overrides):
        channel = wake_channel(rt.queue.lane_queue("short"))

        async def listening() -> bool:
            return dict(await rt.redis.pubsub_numsub(channel)).get(channel.encode(), 0) > 0

        await wait_for(listening, timeout=30, what="the worker listening for wake-ups")
        for _ in range(3):
            task = await tasks.submit_noop(rt, world.staff, world.team)

            async def done(task_id: int = task.id or 0) -> Any:
                t = await tasks.get_task(rt, world.staff, task_id)
                return t if t.status == "COMPLETED" else None

            t = await wait_for(done, timeout=30, what=f"task {task.id} completed")
            assert (t.started_at - t.created_at).total_seconds() < 1.0
