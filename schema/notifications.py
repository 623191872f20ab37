"""Notifications over GraphQL: the caller's own list, unread count, and marking them read."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import strawberry
from strawberry import ID
from strawberry.scalars import JSON

from desk.core.errors import ValidationProblem
from desk.core.models import Notification as NotificationRow
from desk.helpdesk import notifications
from desk.reads import lookups
from schema import problems as e
from schema.basics import Edge, PageInfo
from schema.context import Context, ctx_of
from schema.errors import fail
from schema.problems import attempt


@strawberry.type
class Notification:
    id: ID
    kind: str
    text: str = strawberry.field(description="In English; translate by `textKey`.")
    text_key: str | None = strawberry.field(
        description="`text` as a stable key (e.g. reminder.notification), with `textParams`."
    )
    text_params: dict[str, Any] = strawberry.field(graphql_type=JSON)
    link: str
    read_at: datetime | None
    created_at: datetime

    @classmethod
    def from_model(cls, n: NotificationRow) -> Notification:
        return cls(
            id=ID(str(n.id)),
            kind=n.kind,
            text=n.text,
            text_key=n.text_key,
            text_params=n.text_params or {},
            link=n.link,
            read_at=n.read_at,
            created_at=n.created_at,
        )


@strawberry.type
class NotificationConnection:
    edges: list[Edge[Notification]]
    page_info: PageInfo

    @strawberry.field
    def nodes(self) -> list[Notification]:
        return [edge.node for edge in self.edges]


@strawberry.type
class NotificationsMarked:
    count: int = strawberry.field(description="How many became read now.")
    unread_count: int


MarkReadResult = Annotated[
    NotificationsMarked | e.ValidationProblem, strawberry.union("MarkNotificationsReadResult")
]


@strawberry.type
class NotificationQuery:
    @strawberry.field(description="Your notifications, newest first.")
    async def notifications(
        self,
        info: strawberry.Info,
        unread_only: bool = False,
        first: int = 20,
        after: str | None = None,
    ) -> NotificationConnection:
        ctx = ctx_of(info)
        try:
            async with ctx.slot():
                page = await notifications.list_notifications(
                    ctx.rt, ctx.user_id, unread_only=unread_only, first=first, after=after
                )
        except ValidationProblem as exc:
            fail(exc)
        edges = [Edge(cursor=str(n.id), node=Notification.from_model(n)) for n in page.items]
        return NotificationConnection(
            edges=edges, page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor)
        )

    @strawberry.field
    async def unread_notification_count(self, info: strawberry.Info) -> int:
        ctx = ctx_of(info)
        async with ctx.slot():
            return await notifications.unread_count(ctx.rt, ctx.user_id)


@strawberry.type
class NotificationMutation:
    @strawberry.mutation(description="Mark the given notifications of yours read, or `all: true`.")
    async def mark_notifications_read(
        self, info: strawberry.Info, ids: list[ID] | None = None, all: bool = False
    ) -> MarkReadResult | None:
        async def run(ctx: Context, user_id: int) -> NotificationsMarked:
            if all == (ids is not None):
                raise ValidationProblem("ids", "give either ids or all: true")
            # Ids that cannot exist match nothing, like ids of somebody else's notifications.
            wanted = None if all else [i for i in map(lookups.parse_id, ids or []) if i]
            count = await notifications.mark_read(ctx.rt, user_id, wanted)
            unread = await notifications.unread_count(ctx.rt, user_id)
            return NotificationsMarked(count=count, unread_count=unread)

        return await attempt(info, run, (e.ValidationProblem,))  # type: ignore[return-value]
