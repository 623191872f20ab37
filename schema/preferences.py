"""Notification preferences over GraphQL: the caller's own, read and set (desk/people/preferences.py)."""

from __future__ import annotations

from typing import Annotated

import strawberry

from desk.people import preferences
from schema import problems as e
from schema.context import Context, ctx_of
from schema.problems import attempt


@strawberry.type(description="What you want by e-mail beside the in-app notification.")
class NotificationPreferences:
    export_ready_email: bool = strawberry.field(description='"Export #N is ready" by e-mail too.')
    reminder_email: bool = strawberry.field(description="Reminders by e-mail too.")
    ticket_reply_email: bool = strawberry.field(
        description="Staff: customers' replies to your tickets (assigned to you, or unassigned) "
        "by e-mail; on unless turned off. Customers always get the replies to their tickets."
    )
    sla_email: bool = strawberry.field(
        description="Staff: SLA warnings and breaches of your tickets (or, unassigned, your "
        "team's) by e-mail too."
    )

    @classmethod
    def of(cls, p: preferences.Preferences) -> NotificationPreferences:
        return cls(
            export_ready_email=p.export_ready_email,
            reminder_email=p.reminder_email,
            ticket_reply_email=p.ticket_reply_email,
            sla_email=p.sla_email,
        )


SetPreferencesResult = Annotated[
    NotificationPreferences | e.ValidationProblem,
    strawberry.union("SetNotificationPreferencesResult"),
]


@strawberry.type
class PreferencesQuery:
    @strawberry.field(description="Your notification preferences.")
    async def notification_preferences(self, info: strawberry.Info) -> NotificationPreferences:
        ctx = ctx_of(info)
        user_id = ctx.user_id
        async with ctx.slot():
            return NotificationPreferences.of(await preferences.get(ctx.rt, user_id))


@strawberry.type
class PreferencesMutation:
    @strawberry.mutation(
        description="Change your notification preferences; an omitted choice stays as it is."
    )
    async def set_notification_preferences(
        self,
        info: strawberry.Info,
        export_ready_email: bool | None = None,
        reminder_email: bool | None = None,
        ticket_reply_email: bool | None = None,
        sla_email: bool | None = None,
    ) -> SetPreferencesResult | None:
        async def run(ctx: Context, user_id: int) -> NotificationPreferences:
            got = await preferences.set_mine(
                ctx.rt,
                user_id,
                export_ready_email=export_ready_email,
                reminder_email=reminder_email,
                ticket_reply_email=ticket_reply_email,
                sla_email=sla_email,
            )
            return NotificationPreferences.of(got)

        return await attempt(info, run, (e.ValidationProblem,))  # type: ignore[return-value]
