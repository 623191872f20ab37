"""A short-lane delivery brings the lane's other ready rows (plain NOOPs already sent, reminders
due) as one batch: each row keeps its own fence, the batch's other jobs leave the queue so arq
never starts them, and a batch survives redelivery and a killed worker exactly as single tasks
do (issue 11, pipeline row)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa
from arq.constants import in_progress_key_prefix, job_key_prefix

from desk.core.clock import utcnow
from desk.core.queue import job_id
from desk.ledger import lanes
from desk.ledger import upkeep as ledger_upkeep
from desk.work import reminders, tasks
from jobs import rescuer
from jobs.execution import claim_batch
from jobs.processors import noop, registry
from jobs.worker import Lane
from tests.helpers import WorkerProcess, wait_for
from tests.jobs.stall_helpers import (
    all_status,
    assert_effects_once,
    kill_mid_work,
    open_tickets,
    rows,
)


async def _noops(rt, world, n: int, script: dict | None = None) -> list:
    return [await tasks.submit_noop(rt, world.staff, world.team, script) for _ in range(n)]


async def _queued(rt) -> list[str]:
    return [b.decode() for b in await rt.redis.zrange(rt.queue.lane_queue(lanes.SHORT), 0, -1)]


def _jid(rt, task) -> str:
    return job_id(rt.settings.queue_prefix, task.id, task.run, task.sends)


async def test_a_noop_delivery_claims_the_ready_plain_noops_each_with_its_own_fence(
    rt, world, clock
):
    plain = await _noops(rt, world, 4)
    (scripted,) = await _noops(rt, world, 1, {"steps": 1})
    (unsent,) = await _noops(rt, world, 1)
    (cancelled,) = await _noops(rt, world, 1)
    async with rt.engine.begin() as conn:  # its send is not out yet: the send will deliver it
        await conn.execute(
            sa.text("UPDATE background_task SET dispatched_at = NULL WHERE id = :i"),
            {"i": unsent.id},
        )
    await tasks.cancel_task(rt, world.staff, cancelled.id)
    claimed = await claim_batch(rt, plain[1].id, plain[1].run, limit=100)
    assert claimed[0][0].id == plain[1].id, "the delivered task comes first"
    assert {t.id for t, _ in claimed} == {t.id for t in plain}
    assert len({eid for _, eid in claimed}) == 4, "each row has an execution id of its own"
    assert all(t.status == "RUNNING" and t.attempts == 1 for t, _ in claimed)
    assert await claim_batch(rt, plain[0].id, plain[0].run, limit=100) == [], "stale"
    assert await noop.complete_many(rt, claimed) == {t.id for t in plain}
    assert await noop.complete_many(rt, claimed) == set(), "the same batch again writes nothing"
    done = {r.id: r for r in await rows(rt, [t.id for t in plain])}
    assert all(r.status == "COMPLETED" and r.attempts == 1 for r in done.values())
    assert {r.execution_id for r in done.values()} == {eid for _, eid in claimed}
    assert all(r.result_summary == "Done." and r.summary_key == "noop.done" for r in done.values())
    left = {r.id: r.status for r in await rows(rt, [scripted.id, unsent.id, cancelled.id])}
    assert left == {scripted.id: "WAITING", unsent.id: "WAITING", cancelled.id: "CANCELLED"}
    alone = await claim_batch(rt, scripted.id, scripted.run, limit=100)
    assert [t.id for t, _ in alone] == [scripted.id], "a scripted NOOP brings nobody"


async def test_a_paused_short_lane_lends_none_of_its_rows(rt, world, clock):
    first, second, third = await _noops(rt, world, 3)
    await lanes.pause(rt, lanes.SHORT, None)
    claimed = await claim_batch(rt, first.id, first.run, limit=100)
    assert [t.id for t, _ in claimed] == [first.id], "only the message sent before the pause"
    await lanes.resume(rt, lanes.SHORT)
    claimed = await claim_batch(rt, second.id, second.run, limit=100)
    assert {t.id for t, _ in claimed} == {second.id, third.id}


async def test_a_row_whose_fence_is_gone_is_not_completed(rt, world, clock):
    batch = await _noops(rt, world, 3)
    lost = await claim_batch(rt, batch[0].id, batch[0].run, limit=100)  # then the worker dies
    clock.advance(rt.settings.lease_seconds + 1)
    assert await rescuer.run_once(rt) == 3
    assert await noop.complete_many(rt, lost) == set(), "the dead execution commits nothing"
    again = await rows(rt, [t.id for t in batch])
    assert {(r.status, r.run) for r in again} == {("WAITING", 2)}
    claimed = await claim_batch(rt, batch[0].id, 2, limit=100)
    assert len(claimed) == 3 and {t.attempts for t, _ in claimed} == {2}
    endings = [ledger_upkeep.Ending(t.id, eid, "x", False, "x") for t, eid in lost + claimed]
    done = await ledger_upkeep.complete_many(rt.pg, endings, now=clock())
    assert {t.execution_id for t in done} == {eid for _, eid in claimed}, "only the live fences"


async def test_the_lane_takes_the_batch_claimed_jobs_out_of_the_queue(rt, world, clock):
    batch = await _noops(rt, world, 5)
    assert sorted(await _queued(rt)) == sorted(_jid(rt, t) for t in batch)
    # arq already started one of them (its in-progress marker): that one is left to arq.
    await rt.redis.set(in_progress_key_prefix + _jid(rt, batch[4]), b"1", px=60_000)
    lane = Lane(rt, lanes.SHORT, registry())
    assert await lane.take(batch[0].id, batch[0].run) == "started"
    assert await asyncio.gather(*lane.works()) == ["done"]
    # The delivered job is arq's own (it finishes it); the others never reach arq.
    assert sorted(await _queued(rt)) == sorted([_jid(rt, batch[0]), _jid(rt, batch[4])])
    lease_ms = rt.settings.lease_seconds * 1000
    for t in batch[1:4]:  # kept a moment for an arq that read the id already, then gone
        assert 0 < await rt.redis.pttl(job_key_prefix + _jid(rt, t)) <= lease_ms
    assert await rt.redis.pttl(job_key_prefix + _jid(rt, batch[4])) > lease_ms, "arq's own"
    done = await rows(rt, [t.id for t in batch])
    assert all(r.status == "COMPLETED" and r.attempts == 1 for r in done)
    # A late delivery of a batch-claimed task: stale, here (remembered) and on another worker.
    assert await lane.take(batch[4].id, batch[4].run) == "stale"
    assert await Lane(rt, lanes.SHORT, registry()).take(batch[4].id, batch[4].run) == "stale"
    assert await rows(rt, [t.id for t in batch]) == done, "nothing changed"


@pytest.mark.slow
async def test_a_batch_on_a_real_worker_completes_each_task_once(rt, world, settings, tmp_path):
    rt.clock = utcnow
    batch = await _noops(rt, world, 40)  # queued before any worker runs
    worker = WorkerProcess(settings, tmp_path / "w.log")
    try:
        done = await wait_for(all_status(rt, [t.id for t in batch]), timeout=60, what="done")
        claims = {r.execution_id.split(".")[0] for r in done}
        assert len(claims) < len(batch) / 4, f"{len(claims)} claims for {len(batch)} tasks"
        assert len({r.execution_id for r in done}) == len(batch)
        assert {r.attempts for r in done} == {1}
        await wait_for(lambda: _empty(rt), timeout=30, what="the queue emptied")
        # A stale delivery of a batch-claimed task (a new send of the same round) is harmless.
        first = done[0]
        assert await rt.queue.enqueue(first.id, first.run, first.sends + 1, lanes.SHORT)
        await wait_for(lambda: _empty(rt), timeout=30, what="the stale message consumed")
        assert await rows(rt, [t.id for t in batch]) == done, "nothing changed"
    finally:
        worker.stop()
    assert "Traceback" not in worker.log()


async def _empty(rt) -> bool:
    return not await _queued(rt)


@pytest.mark.slow
async def test_kill_9_mid_batch_every_row_is_rescued_and_runs_once(
    rt, world, settings, tmp_path, engine
):
    """A batch of reminders and NOOPs due together; the reminders' transaction waits on a lock
    the test holds on `notification`, the worker is killed there, and another worker rescues
    the rows when their lease runs out: each reminder notifies once, no NOOP runs twice."""
    rt.clock = utcnow
    env = {"lease_seconds": 2, "heartbeat_ttl_seconds": 3}
    ids = await open_tickets(rt, world.team, world.customer, world.staff, 20)
    due = utcnow() + timedelta(seconds=3)
    burst = [(await reminders.schedule_reminder(rt, world.staff, t, at=due)).id for t in ids]
    noops = [
        (await tasks.submit_noop(rt, world.staff, world.team, run_at=due)).id for _ in range(20)
    ]
    async with engine.connect() as blocker:
        trans = await blocker.begin()
        await blocker.execute(sa.text("LOCK TABLE notification IN SHARE MODE"))
        first = WorkerProcess(settings, tmp_path / "first.log", **env)
        try:
            await wait_for(all_status(rt, burst, ("RUNNING",)), timeout=60, what="claimed")
            await wait_for(all_status(rt, noops), timeout=60, what="the NOOPs completed")
            assert set(burst) <= set(await kill_mid_work(rt, first))
        finally:
            first.stop()
            await trans.rollback()
    assert {r.status for r in await rows(rt, burst)} == {"RUNNING"}, "leased until rescued"
    second = WorkerProcess(settings, tmp_path / "second.log", **env)
    try:
        done = await wait_for(all_status(rt, burst), timeout=60, what="rescued and fired")
    finally:
        second.stop()
    assert {(r.attempts, r.run) for r in done} == {(2, 2)}
    await assert_effects_once(rt, burst, [])
    assert {(r.status, r.attempts) for r in await rows(rt, noops)} == {("COMPLETED", 1)}
