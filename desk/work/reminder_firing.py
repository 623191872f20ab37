"""What a reminder does at fire time, decided for many reminders with one read.

A reminder is skipped (and says why) when the person who set it is no longer the team's staff,
its ticket is gone, it was rescheduled or cancelled (the ticket's `reminder_revision` moved on)
or the ticket is resolved/closed; otherwise it names who is notified: the assignee when they
are still staff, else the team's staff. One statement reads every fact for a whole batch and
takes a share lock on the tickets, so a reschedule cannot slip in before the batch commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import Message, message
from desk.core.models import CLOSED_TICKET

_STAFF = "m.role IN ('ADMIN', 'STAFF')"
_FACTS = (
    "SELECT b.id, b.note, b.reminder_revision AS wanted, t.id AS ticket_id, t.title, t.status, "
    " t.reminder_revision AS revision, t.assignee_id, "
    " EXISTS (SELECT 1 FROM membership m WHERE m.user_id = b.owner_id AND m.team_id = b.team_id "
    f"  AND {_STAFF}) AS owner_staff, "
    " EXISTS (SELECT 1 FROM membership m WHERE m.user_id = t.assignee_id "
    f"  AND m.team_id = t.team_id AND {_STAFF}) AS assignee_staff, "
    " ARRAY(SELECT m.user_id FROM membership m WHERE m.team_id = t.team_id "
    f"  AND {_STAFF} ORDER BY m.user_id) AS staff "
    "FROM background_task b "
    "LEFT JOIN LATERAL (SELECT * FROM ticket WHERE id = b.ticket_id FOR SHARE) t ON true "
    "WHERE b.id = ANY(:ids)"
)


@dataclass(frozen=True)
class Firing:
    skipped: bool
    summary: Message  # the result summary: English, plus its key for the reader's language
    recipients: tuple[int, ...] = ()
    text: Message | None = None  # the notification
    link: str = ""


def _firing(r: Any) -> Firing:
    if not r.owner_staff:
        return Firing(True, message("reminder.skipped.owner_left"))
    if r.ticket_id is None:
        return Firing(True, message("reminder.skipped.ticket_gone"))
    if r.revision != r.wanted:
        return Firing(True, message("reminder.skipped.stale"))
    status = str(r.status)
    if status in CLOSED_TICKET:
        return Firing(True, message("reminder.skipped.closed", status=status))
    if r.assignee_id is not None and r.assignee_staff:
        recipients: tuple[int, ...] = (r.assignee_id,)
        said = message("reminder.reminded_assignee")
    else:
        recipients = tuple(r.staff or ())
        said = message("reminder.reminded_staff", count=len(recipients))
    about = {"ticket": r.ticket_id, "title": r.title, "status": status}
    text = (
        message("reminder.notification_note", **about, note=r.note)
        if r.note
        else message("reminder.notification", **about)
    )
    return Firing(False, said, recipients, text, f"/tickets/{r.ticket_id}")


async def decide_many(conn: AsyncConnection, task_ids: list[int]) -> dict[int, Firing]:
    """Per task id: skip (and why) or whom to notify. Run it in the transaction that finishes
    the tasks (the share locks on their tickets last until it commits)."""
    rows = await conn.execute(sa.text(_FACTS), {"ids": task_ids})
    return {r.id: _firing(r) for r in rows}
