"""Reminders: fire once when due, skip when resolved or superseded, notify the right people."""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import NotAllowed, NotFound, TaskConflict, ValidationProblem
from desk.helpdesk import tickets
from desk.reads import tasks as reads
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry


async def _notifications(rt):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT user_id, text, link, task_id FROM notification ORDER BY id")
            )
        ).all()


async def _fire(rt, task):
    return await execute(rt, registry(), task.id, task.run)


async def test_fires_once_for_the_assignee(rt, world, clock):
    t = await reminders.schedule_reminder(
        rt, world.admin, world.tickets["login"], in_minutes=10, note="call back"
    )
    assert t.run_at == clock() + timedelta(minutes=10) and t.status == "WAITING"
    assert await _fire(rt, t) == "done"
    assert await _fire(rt, t) == "stale", "a duplicate delivery must not notify twice"
    notes = await _notifications(rt)
    assert [(n.user_id, n.link) for n in notes] == [
        (world.staff, f"/tickets/{world.tickets['login']}")
    ]
    assert "call back" in notes[0].text
    done = await tasks.get_task(rt, world.admin, t.id)
    assert (
        done.status == "COMPLETED"
        and not done.result_skipped
        and done.result_summary == "Reminded the assignee."
    )


async def test_unassigned_ticket_notifies_team_staff(rt, world):
    t = await reminders.schedule_reminder(rt, world.staff, world.tickets["printer"], in_minutes=1)
    await _fire(rt, t)
    assert sorted(n.user_id for n in await _notifications(rt)) == sorted([world.admin, world.staff])


async def test_skipped_when_ticket_resolved_before_due(rt, world):
    t = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=1)
    await tickets.update_ticket(rt, world.staff, world.tickets["login"], status="RESOLVED")
    await _fire(rt, t)
    done = await tasks.get_task(rt, world.staff, t.id)
    assert done.status == "COMPLETED" and done.result_skipped and "resolved" in done.result_summary
    assert tasks.status_label(done, rt.clock()) == "Skipped"
    assert await _notifications(rt) == []


async def test_reschedule_supersedes_and_only_the_new_one_fires(rt, world, clock):
    ticket = world.tickets["login"]
    first = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=30)
    second = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=60)
    old = await tasks.get_task(rt, world.staff, first.id)
    assert old.status == "COMPLETED" and old.result_skipped and "Superseded" in old.result_summary
    assert await _fire(rt, first) == "stale"
    await _fire(rt, second)
    assert len(await _notifications(rt)) == 1


async def test_stale_revision_skips_even_if_delivered(rt, world):
    t = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=5)
    async with rt.engine.begin() as conn:  # another path bumped the revision
        await conn.execute(sa.text("UPDATE ticket SET reminder_revision = reminder_revision + 1"))
    await _fire(rt, t)
    done = await tasks.get_task(rt, world.staff, t.id)
    assert done.result_skipped and "rescheduled or cancelled" in done.result_summary
    assert await _notifications(rt) == []


async def test_same_minute_again_is_a_conflict_with_the_first(rt, world, clock):
    # The start of a minute, so `at + 1 s` is surely the same minute (the clock starts at the
    # wall clock's time, and at hh:mm:59 it was the next minute: CI saw that once).
    at = (clock() + timedelta(minutes=5)).replace(second=0, microsecond=0)
    first = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], at=at)
    with pytest.raises(TaskConflict) as err:
        await reminders.schedule_reminder(
            rt, world.admin, world.tickets["login"], at=at + timedelta(seconds=1)
        )
    assert err.value.existing.id == first.id


async def test_cancel_reminder(rt, world):
    t = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=5)
    cancelled = await reminders.cancel_reminder(rt, world.staff, world.tickets["login"])
    assert cancelled.id == t.id and cancelled.status == "CANCELLED"
    assert await _fire(rt, t) == "stale"
    assert await reminders.pending_reminder(rt, world.staff, world.tickets["login"]) is None


async def test_who_may_schedule(rt, world, clock):
    with pytest.raises(NotAllowed):
        await reminders.schedule_reminder(rt, world.customer, world.tickets["login"], in_minutes=5)
    with pytest.raises(NotFound):  # another customer's ticket: does not exist for them
        await reminders.schedule_reminder(rt, world.customer2, world.tickets["login"], in_minutes=5)
    with pytest.raises(NotFound):
        await reminders.schedule_reminder(rt, world.outsider, world.tickets["login"], in_minutes=5)
    with pytest.raises(ValidationProblem):
        await reminders.schedule_reminder(rt, world.staff, world.tickets["resolved"], in_minutes=5)
    with pytest.raises(ValidationProblem):
        await reminders.schedule_reminder(
            rt, world.staff, world.tickets["login"], at=clock() - timedelta(minutes=1)
        )
    with pytest.raises(ValidationProblem):
        await reminders.schedule_reminder(
            rt, world.staff, world.tickets["login"], at=clock().replace(tzinfo=None)
        )
    with pytest.raises(ValidationProblem):
        await reminders.schedule_reminder(rt, world.staff, world.tickets["login"])
    assert await reminders.pending_reminder(rt, world.customer, world.tickets["login"]) is None


async def test_cancelling_the_task_also_bumps_the_revision(rt, world):
    t = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=5)
    before = (await tickets.get_ticket(rt, world.staff, world.tickets["login"])).reminder_revision
    await tasks.cancel_task(rt, world.staff, t.id)
    after = (await tickets.get_ticket(rt, world.staff, world.tickets["login"])).reminder_revision
    assert after == before + 1
    history = await reads.list_tasks(
        rt.pg, world.staff, world.team, ticket_id=world.tickets["login"]
    )
    assert [x.id for x in history.items] == [t.id]
    other = await reads.list_tasks(
        rt.pg, world.staff, world.team, ticket_id=world.tickets["printer"]
    )
    assert other.items == []
