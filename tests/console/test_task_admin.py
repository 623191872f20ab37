"""desk.console.task_admin (the `taskdesk tasks` commands): cancel and retry take the same ledger
paths as the pages and GraphQL, with a clear refusal instead of a database error."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.console import task_admin
from desk.core.errors import ValidationProblem
from desk.ledger import run as ledger_run
from desk.work import reminders, tasks

LEASE = timedelta(seconds=30)


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
