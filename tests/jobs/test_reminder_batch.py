"""Reminders due together fire as one batch (issue 10, reminder-burst): one claim takes every
due reminder, one transaction finishes them and writes their notifications — still exactly
once per fired reminder, with the same skip reasons, through redelivery and a killed worker."""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.helpdesk import tickets
from desk.work import reminders, tasks
from jobs import rescuer
from jobs.execution import claim_batch
from jobs.processors.reminder import fire_many
from tests.helpers import WorkerProcess, wait_for
from tests.jobs.stall_helpers import all_status, assert_effects_once, open_tickets, rows


async def _notes(rt) -> list[tuple[int, int]]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT task_id, user_id FROM notification ORDER BY task_id, user_id")
        return [tuple(r) for r in (await conn.execute(q)).all()]


async def _mixed(rt, world, clock):
    """Four reminders due at one instant: one fires for the assignee, one for the team's staff
    (unassigned), one is skipped (ticket resolved), one is skipped (superseded revision)."""
    due = clock() + timedelta(minutes=5)
    fire = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], at=due)
    staff = await reminders.schedule_reminder(rt, world.staff, world.tickets["printer"], at=due)
    (extra,) = await open_tickets(rt, world.team, world.customer, world.staff, 1)
    resolved = await reminders.schedule_reminder(rt, world.staff, extra, at=due)
    await tickets.update_ticket(rt, world.staff, extra, status="RESOLVED")
    (stale_ticket,) = await open_tickets(rt, world.team, world.customer, world.staff, 1)
    stale = await reminders.schedule_reminder(rt, world.staff, stale_ticket, at=due)
    async with rt.engine.begin() as conn:  # rescheduled elsewhere: the revision moved on
        await conn.execute(
            sa.text("UPDATE ticket SET reminder_revision = reminder_revision + 1 WHERE id = :t"),
            {"t": stale_ticket},
        )
    clock.advance(301)
    return fire, staff, resolved, stale


async def test_one_claim_takes_every_due_reminder_and_fires_them_once(rt, world, clock):
    fire, staff, resolved, stale = await _mixed(rt, world, clock)
    claimed = await claim_batch(rt, staff.id, staff.run, limit=100)
    assert claimed[0][0].id == staff.id, "the delivered task comes first"
    assert {t.id for t, _ in claimed} == {fire.id, staff.id, resolved.id, stale.id}
    assert len({eid for _, eid in claimed}) == 4, "each row has an execution id of its own"
    assert await claim_batch(rt, fire.id, fire.run, limit=100) == [], "redelivery is stale"
    assert await fire_many(rt, claimed) == {fire.id, staff.id, resolved.id, stale.id}
    assert await fire_many(rt, claimed) == set(), "the same batch again writes nothing"
    assert await _notes(rt) == sorted(
        [(fire.id, world.staff), (staff.id, world.admin), (staff.id, world.staff)]
    )
    done = {r.id: r for r in await rows(rt, [fire.id, staff.id, resolved.id, stale.id])}
    assert done[fire.id].result_summary == "Reminded the assignee."
    assert done[staff.id].result_summary == "Reminded 2 team staff (unassigned ticket)."
    assert done[resolved.id].result_skipped
    assert "resolved before the reminder was due" in done[resolved.id].result_summary
    assert done[stale.id].result_summary == "Skipped: the reminder was rescheduled or cancelled."
    assert all(r.status == "COMPLETED" and r.attempts == 1 for r in done.values())


async def test_batch_takes_only_due_reminders_up_to_its_limit(rt, world, clock):
    ids = await open_tickets(rt, world.team, world.customer, world.staff, 5)
    due = clock() + timedelta(minutes=1)
    now = [await reminders.schedule_reminder(rt, world.staff, t, at=due) for t in ids[:4]]
    later = await reminders.schedule_reminder(rt, world.staff, ids[4], in_minutes=30)
    clock.advance(60)
    first = await claim_batch(rt, now[0].id, now[0].run, limit=3)
    assert len(first) == 3 and later.id not in {t.id for t, _ in first}
    rest = await claim_batch(rt, now[3].id, now[3].run, limit=3)
    assert [t.id for t, _ in rest] == [now[3].id]


async def test_a_worker_killed_mid_batch_is_rescued_without_duplicates(rt, world, clock):
    fire, staff, resolved, stale = await _mixed(rt, world, clock)
    lost = await claim_batch(rt, fire.id, fire.run, limit=100)  # then the worker dies
    assert len(lost) == 4
    clock.advance(rt.settings.lease_seconds + 1)
    assert await rescuer.run_once(rt) == 4
    again = await claim_batch(rt, fire.id, fire.run + 1, limit=100)
    assert {t.run for t, _ in again} == {2} and len(again) == 4
    assert await fire_many(rt, lost) == set(), "the dead execution's late commit is refused"
    assert len(await fire_many(rt, again)) == 4
    assert await fire_many(rt, lost) == set()
    assert await _notes(rt) == sorted(
        [(fire.id, world.staff), (staff.id, world.admin), (staff.id, world.staff)]
    )
    assert {r.status for r in await rows(rt, [fire.id, staff.id, resolved.id, stale.id])} == {
        "COMPLETED"
    }


async def test_a_reminder_cancelled_once_claimed_ends_cancelled_and_reminds_nobody(
    rt, world, clock
):
    fire, staff, _resolved, _stale = await _mixed(rt, world, clock)
    claimed = await claim_batch(rt, fire.id, fire.run, limit=100)
    asked = await tasks.cancel_task(rt, world.staff, fire.id)  # RUNNING: asked to stop
    assert asked.status == "RUNNING" and asked.cancel_requested
    assert {fire.id, staff.id} <= await fire_many(rt, claimed)
    [row] = await rows(rt, [fire.id])
    assert (row.status, row.summary_key) == ("CANCELLED", "reminder.cancelled_at_finish")
    assert row.result_summary == "Cancelled while finishing; nobody was reminded."
    assert await _notes(rt) == sorted([(staff.id, world.admin), (staff.id, world.staff)])


@pytest.mark.slow
async def test_a_burst_fires_in_batches_on_a_real_worker(rt, world, settings, tmp_path):
    rt.clock = utcnow
    ids = await open_tickets(rt, world.team, world.customer, world.staff, 60)
    due = utcnow() + timedelta(seconds=4)
    burst = [(await reminders.schedule_reminder(rt, world.staff, t, at=due)).id for t in ids]
    worker = WorkerProcess(settings, tmp_path / "w.log")
    try:
        done = await wait_for(all_status(rt, burst), timeout=60, what="the burst fired")
    finally:
        worker.stop()
    # A batch's rows share the execution id of its claim (`{claim}.{task id}`).
    claims = {r.execution_id.split(".")[0] for r in done}
    assert len(claims) < len(burst) / 4, f"{len(claims)} claims for {len(burst)} reminders"
    await assert_effects_once(rt, burst, [])
    assert len(await _notes(rt)) == len(burst)
