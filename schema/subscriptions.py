"""GraphQL subscriptions (docs/graphql.md, "Subscriptions"): `taskUpdated`, `teamTasks` and
`notificationAdded`, pushed as the change feed (desk/core/feed.py) announces commits.

Each follows one pattern: subscribe to the feed FIRST, then read the current state, then on every
notice that may concern it read again and send what moved. A notice is a hint (ids and versions);
what is sent is always read from the ledger, through the same desk reads as the queries
(`task(id)`, `tasks(teamId)`, `notifications`), with the subscriber's id, when it is sent. So
visibility is checked again for every event (docs/architecture.md, "Visibility"): a task the
subscriber may not see answers exactly as a missing one, and a person removed from a team stops
receiving at once (membership is read with every task; a membership notice ends `teamTasks`).
`Resync` (the listener reconnected, or this subscriber fell behind) means: re-read all of it.
A notice that a session of the subscriber ended, or any `Resync`, asks the connection's
credential again (`schema.live.Credential`): signed out, the stream ends with UNAUTHENTICATED.

Transports, guards and limits are the caller's (`schema.streams`); every resolver here runs with a
`schema.live.StreamContext`, and refreshes it before each event (`fresh`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import aclosing
from datetime import datetime

import strawberry
from graphql import GraphQLError
from strawberry import ID

from desk.core.errors import NotFound, Unauthenticated
from desk.core.feed import Event, Feed, Resync, TaskNote, TeamNote, UserNote
from desk.core.models import Notification as NotificationRow
from desk.core.models import TaskStatus
from desk.core.rows import TaskRow
from desk.helpdesk import notifications
from desk.ledger import rules as task_rules
from desk.reads import lookups
from desk.reads import tasks as reads
from schema.context import ctx_of
from schema.errors import SERVICE_UNAVAILABLE, fail
from schema.live import StreamContext
from schema.notifications import Notification
from schema.types import Task

ENDED = frozenset(s.value for s in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED))
SEEN_TASKS = 1000  # the rows `teamTasks` remembers having sent, to send only what moved
TURN_MIN_WAIT = 0.5  # seconds: a label's turn by time is looked at no sooner (see `_turn_in`)
TURN_MAX_WAIT = 3600.0  # ... and no later: a far turn is checked again on the way


def _stream_ctx(info: strawberry.Info) -> StreamContext:
    ctx = ctx_of(info)
    if not isinstance(ctx, StreamContext) or ctx.live is None:  # pragma: no cover - the runner
        raise GraphQLError(  # refuses subscriptions before any resolver; kept as a guard
            "Subscriptions are served over WebSocket and event streams only.",
            extensions={"code": "BAD_REQUEST"},
        )
    return ctx


def _feed(ctx: StreamContext) -> Feed:
    if ctx.rt.feed is None:  # only outside a web process, whose lifespan starts the feed
        raise GraphQLError(
            "Subscriptions are not served here right now; try again later.",
            extensions={"code": SERVICE_UNAVAILABLE},
        )
    return ctx.rt.feed


async def _signed_in(ctx: StreamContext) -> None:
    """Fail with UNAUTHENTICATED when the connection's credential no longer signs its person in."""
    credential = ctx.live.credential if ctx.live else None
    if credential is None:
        return
    async with ctx.slot():
        user_id = await credential.user_id(ctx.rt)
    if user_id != ctx.user_id:
        fail(Unauthenticated("Your session ended or your API token was revoked: sign in again."))


async def _about_me(ctx: StreamContext, event: Event) -> bool:
    """Check the credential when `event` says it may have ended; True for a `Resync` and a
    membership notice, after which whatever is shown must be read again."""
    if isinstance(event, Resync):
        await _signed_in(ctx)
        return True
    if isinstance(event, UserNote):
        if event.what in ("session", "person"):
            await _signed_in(ctx)
        return event.what == "membership"
    return False


async def _task(ctx: StreamContext, user_id: int, task_id: int) -> TaskRow | None:
    """The task as `task(id)` reads it: None when missing or not the reader's to see."""
    async with ctx.slot():
        return (await reads.task(ctx.rt.pg, user_id, task_id)).task


def _shown(ctx: StreamContext, row: TaskRow | None, user_id: int) -> Task | None:
    ctx.fresh()
    return Task.from_model(row, ctx.now(), user_id) if row is not None else None


async def follow_task(ctx: StreamContext, task_id: int | None) -> AsyncGenerator[Task | None, None]:
    """The task now, then each change, until it has ended; `null` (then the end) when it is
    missing or not the subscriber's to see, from the start or from then on."""
    user_id = ctx.user_id
    if task_id is None:  # an id that cannot exist: missing, as `task(id)` answers it
        yield None
        return
    async with _feed(ctx).subscribe(tasks={task_id}, users={user_id}) as feed:
        row = await _task(ctx, user_id, task_id)
        sent = _shown(ctx, row, user_id)
        yield sent
        if row is None or row.status in ENDED:
            return
        while True:
            event = await _next(feed, _turn_in(ctx, row))
            if event is None:  # the label may have turned by time alone (no commit says so)
                shown = _shown(ctx, row, user_id)
                if (
                    shown is not None
                    and sent is not None
                    and shown.status_label != sent.status_label
                ):
                    sent = shown
                    yield sent
                continue
            mine = isinstance(event, TaskNote) and event.id == task_id
            if not mine and not await _about_me(ctx, event):
                continue
            now = await _task(ctx, user_id, task_id)
            if now == row:
                continue
            row = now
            sent = _shown(ctx, row, user_id)
            yield sent
            if row is None or row.status in ENDED:
                return


def _turn_in(ctx: StreamContext, row: TaskRow) -> float | None:
    """Seconds until the row's label turns by time alone (Scheduled → Queued, Running → Worker
    lost: `rules.label_turns_at`); None when no such turn is ahead. At least TURN_MIN_WAIT, so a
    turn the clock has not reached yet is looked at again calmly, never in a spin."""
    now = ctx.now()
    turns = task_rules.label_turns_at(row, now)
    if turns is None:
        return None
    return min(TURN_MAX_WAIT, max(TURN_MIN_WAIT, (turns - now).total_seconds()))


async def _next(feed: AsyncIterator[Event], within: float | None) -> Event | None:
    """The feed's next event; None when `within` seconds pass first."""
    if within is None:
        return await anext(feed)
    try:
        return await asyncio.wait_for(anext(feed), within)
    except TimeoutError:
        return None


async def _team_rows(ctx: StreamContext, user_id: int, team_id: int) -> list[TaskRow] | None:
    """The team's newest tasks the reader may see (as `tasks(teamId)` lists them), oldest first;
    None when they are not a member (or there is no such team)."""
    try:
        async with ctx.slot():
            page = await reads.list_tasks(ctx.rt.pg, user_id, team_id, first=reads.MAX_PAGE)
    except NotFound:
        return None
    return page.items[::-1]


class _Sent:
    """The team's rows a `teamTasks` stream sent last (at most SEEN_TASKS), and since when it
    runs: after a `Resync` the rows changed since then are the news it may have missed. (The
    rows' times are their writers' clocks; a re-read is rare and a row at the edge is at most
    sent once more or left to its next change.)"""

    def __init__(self, since: datetime) -> None:
        self.since = since
        self.rows: OrderedDict[int, TaskRow] = OrderedDict()

    def moved(self, rows: Iterable[TaskRow], relisted: bool = False) -> list[TaskRow]:
        """The rows that differ from what was sent of them (remembered as sent now)."""
        out = []
        for row in rows:
            if relisted and row.updated_at < self.since:
                continue
            if self.rows.get(row.id) != row:
                self.rows[row.id] = row
                out.append(row)
            self.rows.move_to_end(row.id)
        while len(self.rows) > SEEN_TASKS:
            self.rows.popitem(last=False)
        return out


async def _team_event(
    ctx: StreamContext, event: Event, user_id: int, team_id: int, sent: _Sent
) -> list[TaskRow] | None:
    """What to send for one notice of the team's (or the subscriber's); None: the subscriber is
    no longer a member (or the team is gone), which ends the stream."""
    if isinstance(event, TaskNote):
        if event.gone or event.team_id != team_id:
            return []
        row = await _task(ctx, user_id, event.id)  # reads the membership with the task
        return sent.moved([row] if row is not None else [])
    if isinstance(event, UserNote) and event.team_id not in (None, team_id):
        return []
    if isinstance(event, TeamNote) or await _about_me(ctx, event):
        rows = await _team_rows(ctx, user_id, team_id)
        return None if rows is None else sent.moved(rows, relisted=True)
    return []


async def follow_team(ctx: StreamContext, team_id: int | None) -> AsyncGenerator[Task | None, None]:
    """Each task of the team the subscriber may see, as it is created or changes. Like
    `tasks(teamId)`, a team that is not theirs answers as a missing one: nothing, and the end."""
    user_id = ctx.user_id
    if team_id is None:
        return
    sent = _Sent(ctx.now())
    async with _feed(ctx).subscribe(teams={team_id}, users={user_id}) as feed:
        if await _team_rows(ctx, user_id, team_id) is None:
            return
        async for event in feed:
            rows = await _team_event(ctx, event, user_id, team_id, sent)
            if rows is None:
                return
            for row in rows:
                yield _shown(ctx, row, user_id)


async def _newest_notification(ctx: StreamContext, user_id: int) -> int:
    async with ctx.slot():
        page = await notifications.list_notifications(ctx.rt, user_id, first=1)
    return (page.items[0].id or 0) if page.items else 0


async def _notifications_after(
    ctx: StreamContext, user_id: int, last: int
) -> list[NotificationRow]:
    """The subscriber's notifications newer than id `last`, oldest first."""
    found: list[NotificationRow] = []
    cursor: str | None = None
    while True:
        async with ctx.slot():
            page = await notifications.list_notifications(
                ctx.rt, user_id, first=notifications.MAX_PAGE, after=cursor
            )
        newer = [n for n in page.items if (n.id or 0) > last]
        found += newer
        if len(newer) < len(page.items) or not page.has_next:
            return found[::-1]
        cursor = page.end_cursor


async def follow_notifications(ctx: StreamContext) -> AsyncGenerator[Notification | None, None]:
    """Each new notification of the subscriber's, as it is written. The newest one is read
    before the feed is asked, and what came while it was asked is read once it listens: a
    notification that no notice will name is not lost between the two."""
    user_id = ctx.user_id
    last = await _newest_notification(ctx, user_id)
    async with _feed(ctx).subscribe(users={user_id}) as feed:
        event: Event = Resync("subscribed")
        while True:
            news = isinstance(event, UserNote) and event.what == "notification"
            if not news:  # a session that ended ends the stream; a Resync asks for a re-read
                news = await _about_me(ctx, event) and isinstance(event, Resync)
            if news:
                for row in await _notifications_after(ctx, user_id, last):
                    last = row.id or last
                    ctx.fresh()
                    yield Notification.from_model(row)
            event = await anext(feed)


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Task `id` now, then each change, until it has ended (COMPLETED, FAILED or "
        "CANCELLED); `null` and the end when it is missing or not yours to see, as `task(id)`."
    )
    async def task_updated(
        self, info: strawberry.Info, id: ID
    ) -> AsyncGenerator[Task | None, None]:
        # aclosing: a subscriber's `complete` must leave the feed now, not when collected.
        async with aclosing(follow_task(_stream_ctx(info), lookups.parse_id(id))) as events:
            async for task in events:
                yield task

    @strawberry.subscription(
        description="Each task of the team you may see, as it is created or changes; nothing "
        "for a team that is not yours, as `tasks(teamId)`. Ends when you leave the team."
    )
    async def team_tasks(
        self, info: strawberry.Info, team_id: ID
    ) -> AsyncGenerator[Task | None, None]:
        async with aclosing(follow_team(_stream_ctx(info), lookups.parse_id(team_id))) as events:
            async for task in events:
                yield task

    @strawberry.subscription(description="Each new notification of yours, as it arrives.")
    async def notification_added(
        self, info: strawberry.Info
    ) -> AsyncGenerator[Notification | None, None]:
        async with aclosing(follow_notifications(_stream_ctx(info))) as events:
            async for notification in events:
                yield notification
