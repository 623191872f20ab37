"""Reminders: "remind the assignee of ticket T at time X if it is still unresolved".

Scheduling again or cancelling bumps the ticket's `reminder_revision`; the task carries the
revision it was made for, so at fire time a stale one completes as skipped, whatever happened
in between. One active reminder per ticket is a database fact (scope `ticket:{id}`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.db import retry_transient
from desk.core.errors import NotFound, TaskConflict, ValidationProblem
from desk.core.messages import message
from desk.core.models import CLOSED_TICKET, BackgroundTask, TaskKind, TaskStatus, Ticket
from desk.core.runtime import Runtime
from desk.ledger import accept as ledger
from desk.people import access
from desk.work.tasks import accept, kick, replay, request_fingerprint

MAX_AHEAD = timedelta(days=366)


def scope_key(ticket_id: int) -> str:
    return f"ticket:{ticket_id}"


def _due(now: datetime, at: datetime | None, in_minutes: int | None) -> datetime:
    if (at is None) == (in_minutes is None):
        raise ValidationProblem("at", "give either a time (at) or a number of minutes (inMinutes)")
    if in_minutes is not None:
        if not 1 <= in_minutes <= 366 * 24 * 60:
            raise ValidationProblem("inMinutes", "between 1 minute and 366 days")
        return now + timedelta(minutes=in_minutes)
    assert at is not None
    if at.tzinfo is None:
        raise ValidationProblem("at", "include a time zone offset (e.g. 2026-12-01T09:00:00+08:00)")
    if at <= now:
        raise ValidationProblem("at", "must be in the future")
    if at > now + MAX_AHEAD:
        raise ValidationProblem("at", "at most a year ahead")
    return at


async def _ticket_for_staff(conn: AsyncConnection, user_id: int, ticket_id: int) -> Ticket:
    """The ticket, locked; customers and outsiders are told it does not exist."""
    row = (
        await conn.execute(
            sa.text("SELECT * FROM ticket WHERE id = :id FOR UPDATE"), {"id": ticket_id}
        )
    ).first()
    if row is None:
        raise NotFound("Ticket not found.")
    ticket = Ticket(**row._mapping)
    member = await access.membership(conn, user_id, ticket.team_id)
    if member is None or not access.can_see_ticket(member, ticket.creator_id):
        raise NotFound("Ticket not found.")
    access.require_staff(member)
    return ticket


@retry_transient
async def schedule_reminder(
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    *,
    at: datetime | None = None,
    in_minutes: int | None = None,
    note: str = "",
    idempotency_key: str | None = None,
    arrived_at: datetime | None = None,
) -> BackgroundTask:
    """Staff/admin only. The same due minute again → TaskConflict (a double click); another
    time reschedules: the earlier reminder completes at once as skipped. A known
    `idempotency_key` gets its first request's task back (the request as sent, not the due
    time it came to, so a retry of "in 30 minutes" a minute later is the same request).
    `arrived_at`: when the request arrived (desk.core.clock.arrived_at); the due time is judged
    against it, so a reminder "in 10 s" is not refused because the server was slow to get to it."""
    now = rt.clock()
    due = _due(arrived_at or now, at, in_minutes)
    note = inputs.line("note", note or "", max_len=500)
    fingerprint = request_fingerprint(
        TaskKind.REMINDER, ticket_id, at.isoformat() if at else None, in_minutes, note
    )
    async with rt.engine.begin() as conn:
        replayed = await replay(rt, conn, user_id, idempotency_key, fingerprint)
        if replayed is not None:
            return replayed
        # The ticket's row lock serialises what must be (its one active reminder, its
        # revision); reminders of other tickets in the team never wait (no team lock).
        ticket = await _ticket_for_staff(conn, user_id, ticket_id)
        if ticket.status in CLOSED_TICKET:
            raise ValidationProblem(
                "ticket", f"the ticket is {ticket.status.lower()}; reopen it first"
            )
        existing = await ledger.active_in_scope(
            conn, TaskKind.REMINDER, ticket.team_id, scope_key(ticket_id)
        )
        if existing is not None:
            same_minute = existing.run_at.replace(second=0, microsecond=0) == due.replace(
                second=0, microsecond=0
            )
            if same_minute or existing.status == TaskStatus.RUNNING:
                raise TaskConflict(
                    existing, "A reminder for that time already exists; following it."
                )
            why = message("reminder.superseded", due_at=due)
            await ledger.skip(
                conn,
                existing.id or 0,
                now=now,
                reason=why.text,
                reason_key=why.key,
                reason_params=why.params,
            )
        revision = await ledger.bump_reminder_revision(conn, ticket_id)
        task = await accept(
            rt,
            conn,
            ledger.NewTask(
                kind=TaskKind.REMINDER,
                team_id=ticket.team_id,
                owner_id=user_id,
                ticket_id=ticket_id,
                scope_key=scope_key(ticket_id),
                run_at=due,
                max_attempts=rt.settings.max_attempts,
                reminder_revision=revision,
                note=note,
                idempotency_key=idempotency_key,
                request_fingerprint=fingerprint,
            ),
        )
    await kick(rt, task)
    return task


@retry_transient
async def cancel_reminder(rt: Runtime, user_id: int, ticket_id: int) -> BackgroundTask | None:
    """Cancel the ticket's pending reminder (if any); bumps the revision so none can fire."""
    async with rt.engine.begin() as conn:
        ticket = await _ticket_for_staff(conn, user_id, ticket_id)
        existing = await ledger.active_in_scope(
            conn, TaskKind.REMINDER, ticket.team_id, scope_key(ticket_id)
        )
        if existing is None:
            await ledger.bump_reminder_revision(conn, ticket_id)  # no copy may fire either
            return None
        return await ledger.cancel_task(conn, existing, now=rt.clock()) or existing


async def pending_reminder(rt: Runtime, user_id: int, ticket_id: int) -> BackgroundTask | None:
    """The ticket's active reminder, for staff (customers: NotFound/NotAllowed as for any reminder)."""
    async with rt.engine.connect() as conn:
        ticket = (
            await conn.execute(sa.text("SELECT * FROM ticket WHERE id = :id"), {"id": ticket_id})
        ).first()
        if ticket is None:
            raise NotFound("Ticket not found.")
        member = await access.membership(conn, user_id, ticket.team_id)
        if member is None or not access.can_see_ticket(member, ticket.creator_id):
            raise NotFound("Ticket not found.")
        if not member.is_staff:
            return None
        return await ledger.active_in_scope(
            conn, TaskKind.REMINDER, ticket.team_id, scope_key(ticket_id)
        )


async def pending_reminders(
    rt: Runtime, user_id: int, ticket_ids: Sequence[int]
) -> dict[int, BackgroundTask]:
    """`pending_reminder` for many tickets in one statement (GraphQL's DataLoader): only tickets
    of teams where `user_id` is staff or admin have an entry, as one by one."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT b.* FROM ticket t "
                "JOIN membership m ON m.team_id = t.team_id AND m.user_id = :u "
                " AND m.role IN ('ADMIN', 'STAFF') "
                "JOIN background_task b ON b.team_id = t.team_id AND b.kind = 'REMINDER' "
                " AND b.scope_key = 'ticket:' || t.id AND b.status IN ('WAITING', 'RUNNING') "
                "WHERE t.id = ANY(:ids)"
            ),
            {"u": user_id, "ids": list(ticket_ids)},
        )
        found = [BackgroundTask(**r._mapping) for r in rows]
    return {task.ticket_id: task for task in found if task.ticket_id is not None}
