"""A send is real (issue 10): every hand-off has a job id never used before, a send Redis refuses
is not recorded as sent, a resend reaches a worker whatever an earlier send left in Redis, a
sweep is one Redis round trip, and a Redis that lost its data is noticed at the next sweep, which
sends again what it lost and nothing else (a new Redis, a deploy)."""

import logging
from datetime import timedelta

import pytest
import sqlalchemy as sa
from arq.constants import in_progress_key_prefix, job_key_prefix

from desk.core.queue import epoch_key, job_id
from desk.core.runtime import Runtime
from desk.work import tasks
from jobs import dispatcher


async def _row(rt, task_id):
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE id = :i")
        return (await conn.execute(q, {"i": task_id})).one()


async def _queued(rt, lane="short"):
    return [b.decode() for b in await rt.redis.zrange(rt.queue.lane_queue(lane), 0, -1)]


async def test_every_send_has_a_new_job_id_and_replaces_the_last(rt, world, clock):
    await dispatcher.run_once(rt)  # the first sweep writes Redis's epoch
    task = await tasks.submit_noop(rt, world.staff, world.team)
    first = job_id(rt.settings.queue_prefix, task.id, 1, 1)
    assert await _queued(rt) == [first]
    clock.advance(rt.settings.redelivery_seconds + 1)
    assert await dispatcher.run_once(rt) == 1, "sent, not claimed within the window: sent again"
    second = job_id(rt.settings.queue_prefix, task.id, 1, 2)
    assert await _queued(rt) == [second], "the resend replaces the earlier send's entry"
    assert not await rt.redis.exists(job_key_prefix + first)
    assert (await _row(rt, task.id)).sends == 2


async def test_a_send_redis_refuses_is_not_a_send(rt, world, clock):
    await dispatcher.run_once(rt)
    task = await tasks.submit_noop(rt, world.staff, world.team)
    # A worker killed mid-claim leaves the next id marked (as if that id were known to arq).
    blocked = job_id(rt.settings.queue_prefix, task.id, 1, 2)
    await rt.redis.set(in_progress_key_prefix + blocked, b"1", ex=3600)
    clock.advance(rt.settings.redelivery_seconds + 1)
    assert await dispatcher.run_once(rt) == 0, "refused: not counted"
    row = await _row(rt, task.id)
    assert row.dispatched_at is None, "refused: the ledger does not record it as sent"
    assert await dispatcher.run_once(rt) == 1, "the next sweep sends again at once, with a new id"
    assert await _queued(rt) == [job_id(rt.settings.queue_prefix, task.id, 1, 3)]


async def test_a_resend_reaches_a_worker_whatever_redis_still_holds(rt, world, clock):
    await dispatcher.run_once(rt)
    task = await tasks.submit_noop(rt, world.staff, world.team)
    stuck = job_id(rt.settings.queue_prefix, task.id, 1, 1)
    # A killed worker's in-progress marker (arq keeps it for its job timeout + 10 s).
    await rt.redis.set(in_progress_key_prefix + stuck, b"1", ex=12 * 3600)
    clock.advance(rt.settings.redelivery_seconds + 1)
    assert await dispatcher.run_once(rt) == 1
    fresh = job_id(rt.settings.queue_prefix, task.id, 1, 2)
    assert await _queued(rt) == [fresh]
    assert not await rt.redis.exists(in_progress_key_prefix + stuck)
    assert not await rt.redis.exists(in_progress_key_prefix + fresh)


async def test_a_sweep_is_one_redis_round_trip(rt, world, settings):
    await dispatcher.run_once(rt)  # writes the epoch and loads the script into Redis
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(50)]
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE background_task SET dispatched_at = NULL"))
    calls = 0
    real = rt.redis.execute_command

    async def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return await real(*args, **kwargs)

    rt.redis.execute_command = counting  # counts commands sent; the server stays real
    try:
        assert await dispatcher.run_once(rt) == len(made)
        assert calls == 2, f"{calls} Redis commands: one for 50 messages, one epoch check"
        calls = 0
        assert await dispatcher.run_once(rt) == 0
        assert calls == 1, "a sweep with nothing due checks the epoch only"
    finally:
        del rt.redis.execute_command


async def test_a_flush_is_noticed_at_the_next_sweep_deferred_tasks_included(rt, world, clock):
    await dispatcher.run_once(rt)
    later = await tasks.submit_noop(rt, world.staff, world.team)
    async with rt.engine.begin() as conn:  # a task due in ten minutes, handed to arq deferred
        await conn.execute(
            sa.text("UPDATE background_task SET run_at = :t, dispatched_at = NULL WHERE id = :i"),
            {"t": clock() + timedelta(minutes=10), "i": later.id},
        )
    now = await tasks.submit_noop(rt, world.staff, world.team)
    assert await dispatcher.run_once(rt) == 1
    await rt.redis.flushdb()
    assert await dispatcher.run_once(rt) == 2, "both sent again at once, not a window later"
    rows = [await _row(rt, t.id) for t in (later, now)]
    expected = [job_id(rt.settings.queue_prefix, r.id, r.run, r.sends) for r in rows]
    assert sorted(await _queued(rt)) == sorted(expected)
    assert await rt.redis.exists(epoch_key(rt.settings.queue_prefix))


async def test_only_the_sends_redis_lost_are_sent_again(rt, world):
    await dispatcher.run_once(rt)
    kept = await tasks.submit_noop(rt, world.staff, world.team)
    gone = await tasks.submit_noop(rt, world.staff, world.team)
    prefix = rt.settings.queue_prefix
    # A failover to a replica that missed the latest writes: one message and the epoch lost.
    await rt.queue.purge([job_id(prefix, gone.id, 1, 1)])
    await rt.redis.delete(epoch_key(prefix))
    assert await dispatcher.run_once(rt) == 1, "the lost send alone goes again"
    assert [(await _row(rt, t.id)).sends for t in (kept, gone)] == [1, 2]
    assert sorted(await _queued(rt)) == sorted(
        [job_id(prefix, kept.id, 1, 1), job_id(prefix, gone.id, 1, 2)]
    )


async def test_a_new_redis_holding_the_webs_sends_resends_nothing(rt, world, clock, caplog):
    """Only the dispatcher writes the epoch, so a Redis it has not used yet has none, while the
    web's sends (and a deferred one) are in it: they are not lost, and nothing is a warning."""
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(3)]
    later = clock() + timedelta(minutes=10)
    made.append(await tasks.submit_noop(rt, world.staff, world.team, run_at=later))
    before = sorted(await _queued(rt))
    with caplog.at_level(logging.INFO, logger="jobs.dispatcher"):
        assert await dispatcher.run_once(rt) == 0
    assert sorted(await _queued(rt)) == before
    assert [(await _row(rt, t.id)).sends for t in made] == [1, 1, 1, 1]
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert await rt.redis.exists(epoch_key(rt.settings.queue_prefix))


async def test_a_fresh_redis_with_nothing_to_resend_is_not_a_warning(rt, caplog):
    with caplog.at_level(logging.INFO, logger="jobs.dispatcher"):
        assert await dispatcher.run_once(rt) == 0
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (logging.INFO, "Redis has no epoch key (new or emptied); no waiting task to resend")
    ]


async def test_a_deploy_resends_no_waiting_task(rt, world, settings, clock):
    await dispatcher.run_once(rt)  # the running version's dispatcher wrote the epoch
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(3)]
    later = clock() + timedelta(minutes=10)
    made.append(await tasks.submit_noop(rt, world.staff, world.team, run_at=later))
    deployed = await Runtime.open(settings, clock=clock)  # the new version's worker
    try:
        assert await dispatcher.run_once(deployed) == 0
    finally:
        await deployed.close()
    assert [(await _row(rt, t.id)).sends for t in made] == [1, 1, 1, 1]


async def test_tasks_show_says_what_redis_holds(rt, world, clock):
    await dispatcher.run_once(rt)
    task = await tasks.submit_noop(rt, world.staff, world.team)
    row = await _row(rt, task.id)
    assert (await rt.queue.describe(task.id, 1, row.sends, "short")).startswith("queued")
    await rt.redis.set(in_progress_key_prefix + job_id(rt.settings.queue_prefix, task.id, 1, 1), 1)
    assert (await rt.queue.describe(task.id, 1, 1, "short")).startswith("in progress")
    await rt.redis.flushdb()
    assert (await rt.queue.describe(task.id, 1, 1, "short")).startswith("nothing")
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET run_at = :t, dispatched_at = NULL WHERE id = :i"),
            {"t": clock() + timedelta(minutes=10), "i": task.id},
        )
    await dispatcher.run_once(rt)
    row = await _row(rt, task.id)
    assert (await rt.queue.describe(task.id, 1, row.sends, "short")).startswith("deferred until")


def test_arq_s_own_error_results_serialize_as_text_and_nothing_else_slips_through():
    """arq serializes `JobExecutionFailed("job expired")` with our serializer when a batch or
    the janitor took a job it had already listed: text, not a traceback in the worker log."""
    from arq.worker import JobExecutionFailed

    from desk.core.queue import dumps, loads

    assert loads(dumps({"r": JobExecutionFailed("job expired")})) == {
        "r": "JobExecutionFailed: job expired"
    }
    with pytest.raises(TypeError):
        dumps({"r": object()})


async def test_a_pass_of_several_batches_sends_each_due_row_once(rt, world, monkeypatch):
    """Each batch's send overlaps the next batch's claim: every due row is still sent once."""
    await dispatcher.run_once(rt)  # writes the epoch
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(7)]
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE background_task SET dispatched_at = NULL"))
    before = [(await _row(rt, t.id)).sends for t in made]
    monkeypatch.setattr(dispatcher, "BATCH", 3)  # batches of 3, 3 and 1
    assert await dispatcher.run_once(rt) == len(made)
    rows = [await _row(rt, t.id) for t in made]
    assert [r.sends for r in rows] == [n + 1 for n in before], "one send each"
    queued = await _queued(rt)
    assert sorted(queued) == sorted(job_id(rt.queue.prefix, r.id, r.run, r.sends) for r in rows)
    assert await dispatcher.run_once(rt) == 0, "nothing left to send"
