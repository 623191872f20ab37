"""desk.console.task_admin (the `taskdesk tasks` commands): cancel and retry take the same ledger
paths as the pages and GraphQL, with a clear refusal instead of a database error; the diagnosis of
a waiting task says what holds it (a paused lane, its team's long cap, a send not made yet)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.console import task_admin
from desk.console.health import Health
from desk.core.errors import ValidationProblem
from desk.ledger import lanes
from desk.ledger import run as ledger_run
from desk.work import reminders, tasks

LEASE = timedelta(seconds=30)
LIVE = Health(redis_ok=True, workers=[{"id": "w1"}])  # Redis answers, a worker is alive


async def _revision(rt, ticket_id: int) -> int:
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            sa.text("SELECT reminder_revision FROM ticket WHERE id = :t"), {"t": ticket_id}
        )
        return int(found.scalar_one())


async def _failed_export(rt, world, clock):
    task = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})
    claimed = await ledger_run.claim(rt.pg, task.id, task.run, "e1", now=clock(), lease=LEASE)
    assert claimed is not None
    failed = await ledger_run.fail(rt.pg, task.id, "e1", now=clock(), error="x", retry_at=None)
    assert failed is not None and failed.status == "FAILED"
    return task


async def test_cancelling_a_reminder_bumps_its_tickets_revision(rt, world):
    ticket = world.tickets["login"]
    reminder = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=9)
    before = await _revision(rt, ticket)
    cancelled = await task_admin.cancel(rt, reminder.id)
    assert cancelled.status == "CANCELLED"
    assert await _revision(rt, ticket) == before + 1, "no copy of the reminder can fire"
    again = await task_admin.cancel(rt, reminder.id)  # already ended: shown as it is
    assert again.status == "CANCELLED"
    assert await _revision(rt, ticket) == before + 1


async def test_retry_refuses_clearly_while_an_identical_task_is_active(rt, world, clock):
    failed = await _failed_export(rt, world, clock)
    twin = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})
    assert twin.id != failed.id and twin.status == "WAITING"
    with pytest.raises(ValidationProblem, match="identical task is already queued or running"):
        await task_admin.retry(rt, failed.id)
    await task_admin.cancel(rt, twin.id)
    retried = await task_admin.retry(rt, failed.id)
    assert (retried.status, retried.run, retried.attempts) == ("WAITING", 2, 0)


async def test_retry_refuses_a_task_that_has_not_failed(rt, world):
    waiting = await tasks.create_export(rt, world.staff, world.team, {"q": "waiting"})
    with pytest.raises(ValidationProblem, match="only a failed task can be retried"):
        await task_admin.retry(rt, waiting.id)


async def _said(rt, task_id: int) -> str:
    return await task_admin.diagnosis(rt, await task_admin.get(rt, task_id), LIVE)


async def _set_dispatched(rt, task_id: int, at) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET dispatched_at = :at WHERE id = :i"),
            {"at": at, "i": task_id},
        )


async def test_a_task_of_a_paused_lane_is_said_to_wait_for_the_lane(rt, world):
    await lanes.pause(rt, "long", None)
    task = await tasks.create_export(rt, world.staff, world.team, {})
    assert (await task_admin.get(rt, task.id)).dispatched_at is None, "paused: not sent"
    assert await _said(rt, task.id) == (
        "Waiting: its lane (long) is paused by an operator; it is sent when the lane is resumed."
    )
    await lanes.resume(rt, "long")
    assert "paused" not in await _said(rt, task.id)


async def test_only_a_sent_task_is_said_to_be_handed_to_the_queue(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team)
    assert await _said(rt, task.id) == (
        "Waiting: handed to the queue; a worker should start it within moments."
    )
    await _set_dispatched(rt, task.id, None)  # a send Redis refused is handed back
    assert await _said(rt, task.id) == (
        "Waiting: not handed to the queue yet; the dispatcher sends it on its next pass."
    )


async def test_a_long_task_held_by_its_teams_cap_is_said_to_wait_for_it(rt, world, clock):
    for q in ("a", "b"):  # LONG_TEAM_MAX_RUNNING (2) of the team's exports run
        running = await tasks.create_export(rt, world.staff, world.team, {"q": q})
        eid = f"e{running.id}"
        assert await ledger_run.claim(rt.pg, running.id, 1, eid, now=clock(), lease=LEASE)
    held = await tasks.create_export(rt, world.admin, world.team, {})
    await _set_dispatched(rt, held.id, None)  # the long claim found the team full: handed back
    assert await _said(rt, held.id) == (
        "Waiting: its team already runs as many long tasks as one team may "
        "(LONG_TEAM_MAX_RUNNING); it is sent when one of them ends."
    )
