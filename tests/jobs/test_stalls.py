"""Delivery that cannot stall (issue 10, observations 1-3), with real worker processes: repeated
kill -9 while jobs are in flight, a hundred orphaned in-progress jobs in Redis, and a reminder
beside a long export. Each ends with exactly-once effects."""

from datetime import timedelta

import pytest

from desk.console import health
from desk.core.clock import utcnow
from desk.work import reminders, tasks
from tests.factories import bulk_tickets
from tests.helpers import WorkerProcess, running_workers, wait_for
from tests.jobs.stall_helpers import (
    all_status,
    assert_effects_once,
    kill_mid_work,
    open_tickets,
    plant_orphans,
    rows,
)

pytestmark = pytest.mark.slow  # starts real worker or server processes


async def test_repeated_kill_9_while_jobs_are_in_flight(rt, world, settings, tmp_path):
    rt.clock = utcnow
    await bulk_tickets(rt, world.team, world.customer, 60_000)
    tickets = await open_tickets(rt, world.team, world.staff, world.staff, 30)
    env = {"lease_seconds": 2, "heartbeat_ttl_seconds": 3, "redelivery_seconds": 2}
    script = {"steps": 4, "step_seconds": 0.1}
    noops = [(await tasks.submit_noop(rt, world.staff, world.team, script)).id for _ in range(40)]
    exports = [
        (await tasks.create_export(rt, world.staff, world.team, {"q": q})).id
        for q in ("Bulk", "number", "ticket")
    ]
    start = utcnow() + timedelta(seconds=2)
    due = [
        (await reminders.schedule_reminder(rt, world.staff, t, at=start + i * timedelta(seconds=0.2))).id
        for i, t in enumerate(tickets)
    ]  # fmt: skip
    # Three tasks were being claimed by a worker killed earlier: their jobs stay marked in
    # progress (arq: for its job timeout + 10 s).
    await plant_orphans(rt, noops[:3])
    ids = noops + exports + due
    workers = [WorkerProcess(settings, tmp_path / f"w{i}.log", **env) for i in range(2)]
    try:
        for kill in range(5):
            victim = kill % 2
            held = await kill_mid_work(rt, workers[victim])
            assert set(held) <= set(ids)
            workers[victim].stop()
            workers[victim] = WorkerProcess(settings, tmp_path / f"w{victim}-{kill}.log", **env)
        await wait_for(
            all_status(rt, ids), timeout=120, what="every task completed after five kill -9"
        )
    finally:
        for w in workers:
            w.stop()
    await assert_effects_once(rt, due, exports)


async def test_a_hundred_orphaned_jobs_do_not_keep_workers_from_new_work(
    rt, world, settings, tmp_path
):
    rt.clock = utcnow
    old = [(await tasks.submit_noop(rt, world.staff, world.team)).id for _ in range(150)]
    for task_id in old:  # the ledger moved past them (another worker finished them)
        claimed = await tasks.cancel_task(rt, world.staff, task_id)
        assert claimed.status == "CANCELLED"
    await plant_orphans(rt, old)
    with running_workers(settings, tmp_path):
        await wait_for(lambda: live_workers(rt), timeout=60, what="worker registered")
        new = [(await tasks.submit_noop(rt, world.staff, world.team)).id for _ in range(5)]
        new.append((await tasks.create_export(rt, world.staff, world.team, {})).id)
        await wait_for(
            all_status(rt, new),
            timeout=15,
            what="new work done within a few seconds beside 150 orphaned in-progress jobs",
        )


async def live_workers(rt):
    return (await health.check(rt)).workers


async def test_a_reminder_is_never_behind_a_long_task(rt, world, settings, tmp_path):
    rt.clock = utcnow
    await bulk_tickets(rt, world.team, world.customer, 500_000)
    [ticket] = await open_tickets(rt, world.team, world.staff, world.staff, 1)
    # One slot per lane: the export fills every long slot of the only worker.
    with running_workers(settings, tmp_path, worker_max_jobs=1, worker_long_slots=1):
        export = await tasks.create_export(rt, world.staff, world.team, {})
        await wait_for(
            lambda: _running_with_progress(rt, export.id),
            timeout=60,
            interval=0.01,
            what="the export running",
        )
        due = utcnow() + timedelta(seconds=0.3)  # well within the export's run
        reminder = await reminders.schedule_reminder(rt, world.staff, ticket, at=due)
        [fired] = await wait_for(
            all_status(rt, [reminder.id]), timeout=30, what="the reminder fired"
        )
        [long] = await rows(rt, [export.id])
    assert long.status == "RUNNING" or long.finished_at > fired.run_at, "the export ran when due"
    assert long.status == "RUNNING" or long.finished_at > fired.finished_at, (
        "the reminder fired while the export still ran"
    )
    assert fired.finished_at - fired.run_at < timedelta(seconds=1), "and on time"
    await assert_effects_once(rt, [reminder.id], [])


async def _running_with_progress(rt, task_id):
    [row] = await rows(rt, [task_id])
    return row.status == "RUNNING" and row.progress_current > 0
