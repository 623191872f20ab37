"""Notification preferences: what each person wants by e-mail beside the in-app notification.

A person reads and sets only their own (there is no user argument: the caller is the user), so
GraphQL, the page and anything else cannot differ on who may. No row means the defaults (no
e-mail but staff's customer replies), so a new account needs no set-up; `desk/work/news.py` reads the row when news is due.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from desk.core.errors import ValidationProblem
from desk.core.runtime import Runtime

_GET = sa.text(
    "SELECT coalesce(p.export_ready_email, false) AS export_ready_email, "
    " coalesce(p.reminder_email, false) AS reminder_email, "
    " coalesce(p.ticket_reply_email, true) AS ticket_reply_email, "
    " coalesce(p.sla_email, false) AS sla_email "
    "FROM app_user u LEFT JOIN notification_preference p ON p.user_id = u.id WHERE u.id = :u"
)
_SET = sa.text(
    "INSERT INTO notification_preference AS p (user_id, export_ready_email, reminder_email, "
    " ticket_reply_email, sla_email, updated_at) VALUES (:u, coalesce(:export, false), "
    " coalesce(:reminder, false), coalesce(:replies, true), coalesce(:sla, false), :now) "
    "ON CONFLICT (user_id) DO UPDATE SET "
    " export_ready_email = coalesce(:export, p.export_ready_email), "
    " reminder_email = coalesce(:reminder, p.reminder_email), "
    " ticket_reply_email = coalesce(:replies, p.ticket_reply_email), "
    " sla_email = coalesce(:sla, p.sla_email), updated_at = :now "
    "RETURNING export_ready_email, reminder_email, ticket_reply_email, sla_email"
)


@dataclass(frozen=True)
class Preferences:
    export_ready_email: bool = False  # "Export #N is ready" by e-mail too
    reminder_email: bool = False  # reminders by e-mail too
    # Staff: customers' replies to their tickets (assigned to them, or unassigned) by e-mail.
    ticket_reply_email: bool = True
    sla_email: bool = False  # SLA warnings and breaches of my tickets (or my team's) by e-mail too


async def get(rt: Runtime, user_id: int) -> Preferences:
    async with rt.engine.connect() as conn:
        row = (await conn.execute(_GET, {"u": user_id})).first()
    return Preferences(**row._mapping) if row else Preferences()


async def set_mine(
    rt: Runtime,
    user_id: int,
    *,
    export_ready_email: bool | None = None,
    reminder_email: bool | None = None,
    ticket_reply_email: bool | None = None,
    sla_email: bool | None = None,
) -> Preferences:
    """Change the given choices of `user_id` (the caller); the others stay as they were."""
    given = (export_ready_email, reminder_email, ticket_reply_email, sla_email)
    if all(v is None for v in given):
        raise ValidationProblem("preferences", "give at least one choice to change")
    for name, value in (
        ("exportReadyEmail", export_ready_email),
        ("reminderEmail", reminder_email),
        ("ticketReplyEmail", ticket_reply_email),
        ("slaEmail", sla_email),
    ):
        if value is not None and not isinstance(value, bool):
            raise ValidationProblem(name, "true or false")
    params = {"u": user_id, "export": export_ready_email, "reminder": reminder_email,
              "replies": ticket_reply_email, "sla": sla_email}  # fmt: skip
    async with rt.engine.begin() as conn:
        row = (await conn.execute(_SET, params | {"now": rt.clock()})).one()
    return Preferences(**row._mapping)
