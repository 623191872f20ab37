"""Delivery that cannot stall (issue 10, observations 4-5), on private servers a test may stop
or flush: FLUSHALL with deferred reminders, and PostgreSQL stopped and started while tasks run.
Each ends with exactly-once effects."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from desk.console import health
from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from desk.work import reminders, tasks
from taskdesk import migrate
from taskdesk.embedded import PostgresServer
from tests.factories import bulk_tickets, make_world
from tests.helpers import running_workers, wait_for, wait_until
from tests.jobs.stall_helpers import all_status, assert_effects_once, open_tickets, rows

pytestmark = pytest.mark.slow  # starts real worker or server processes


async def live_workers(rt: Runtime) -> list[object]:
    return (await health.check(rt)).workers


async def test_flushall_with_deferred_reminders_fires_them_on_time(
    rt, world, settings, private_redis, tmp_path
):
    s = settings.model_copy(update={"redis_url": private_redis.url})
    own = await Runtime.open(s)
    try:
        tickets = await open_tickets(own, world.team, world.staff, world.staff, 20)
        with running_workers(s, tmp_path):
            await wait_for(lambda: live_workers(own), timeout=60, what="worker registered")
            due = utcnow() + timedelta(seconds=5)
            ids = [
                (await reminders.schedule_reminder(own, world.staff, t, at=due)).id for t in tickets
            ]
            depth = await own.queue.depth()
            assert depth is not None and depth >= len(ids), "handed to Redis ahead, deferred"
            await own.redis.flushall()
            fired = await wait_for(all_status(own, ids), timeout=60, what="reminders fired")
        late = max((r.finished_at - r.run_at).total_seconds() for r in fired)
        assert late <= 2.0, f"a reminder due during the flush fired {late:.1f} s late"
        await assert_effects_once(own, ids, [])
    finally:
        await own.close()


@pytest.fixture
def private_pg(tmp_path: Path) -> Iterator[PostgresServer]:
    pg = PostgresServer(tmp_path / "pg", fast=True)
    pg.start()
    migrate.upgrade(pg.url)
    yield pg
    pg.stop()
    if pg.root.parent == Path("/var/tmp"):  # where the launcher puts clusters when run as root
        shutil.rmtree(pg.root, ignore_errors=True)


@pytest.fixture
async def pg_rt(private_pg: PostgresServer, settings: Settings) -> AsyncIterator[Runtime]:
    s = load_settings(
        taskdesk_env="test",
        database_url=private_pg.url,
        redis_url=settings.redis_url,
        queue_prefix=settings.queue_prefix,
        secret_key=settings.secret_key,
    )
    runtime = await Runtime.open(s)
    yield runtime
    await runtime.close()


async def test_postgres_restart_while_tasks_run_costs_no_attempt(pg_rt, private_pg, tmp_path):
    rt = pg_rt
    world = await make_world(rt)
    await bulk_tickets(rt, world.team, world.customer, 50_000)
    tickets = await open_tickets(rt, world.team, world.staff, world.staff, 2)
    script = {"steps": 60, "step_seconds": 0.1}
    with running_workers(rt.settings, tmp_path, lease_seconds=15) as [worker]:
        noops = [
            (await tasks.submit_noop(rt, world.staff, world.team, script)).id for _ in range(3)
        ]
        export = (await tasks.create_export(rt, world.staff, world.team, {})).id
        due = utcnow() + timedelta(seconds=8)
        reminder_ids = [
            (await reminders.schedule_reminder(rt, world.staff, t, at=due)).id for t in tickets
        ]
        await wait_for(
            lambda: _progressing(rt, noops), timeout=60, interval=0.02, what="tasks running"
        )
        private_pg.stop()
        # An outage of a few seconds: until the worker's dispatcher has failed six passes.
        wait_until(
            lambda: worker.log().count("dispatcher pass failed") >= 6, 60, "a few failed passes"
        )
        private_pg.start()
        ids = [*noops, export, *reminder_ids]
        done = await wait_for(all_status(rt, ids), timeout=90, what="every task completed")
    assert [(r.attempts, r.last_error) for r in done] == [(1, None)] * len(ids), (
        "the outage cost no attempt"
    )
    await assert_effects_once(rt, reminder_ids, [export])


async def _progressing(rt: Runtime, ids: list[int]) -> bool:
    found = await rows(rt, ids)
    return all(r.status == "RUNNING" and r.progress_current >= 2 for r in found)


async def test_an_outage_longer_than_the_lease_is_named_in_last_error(pg_rt, private_pg, tmp_path):
    rt = pg_rt
    world = await make_world(rt)
    script = {"steps": 100, "step_seconds": 0.1}
    env = {"lease_seconds": 2, "retry_base_seconds": 0.5}
    with running_workers(rt.settings, tmp_path, **env) as [worker]:
        task = (await tasks.submit_noop(rt, world.staff, world.team, script)).id
        await wait_for(lambda: _progressing(rt, [task]), timeout=60, what="task running")
        private_pg.stop()
        # Well past the 2 s lease: the dispatcher (every 0.5 s) fails a dozen passes.
        wait_until(lambda: worker.log().count("dispatcher pass failed") >= 12, 60, "a long outage")
        private_pg.start()
        [done] = await wait_for(all_status(rt, [task]), timeout=90, what="task completed")
    assert done.attempts == 2, "the attempt cut off by the outage counts"
    assert done.last_error.startswith("Database unreachable"), done.last_error
