"""`ticketUpdated(id)`: a ticket's conversation pushed as it grows (docs/graphql.md,
"Conversation"), in the pattern of `schema.subscriptions`: subscribe to the change feed first
(the ticket's `ThreadNote`s, the subscriber's own notices and, for staff, the EMAIL tasks of
the messages it follows), then read, then on every notice that may concern it read again —
through desk.reads.conversation, with the subscriber's id, so visibility is checked on every
event (docs/architecture.md, "Visibility"; "Conversation"). A ticket the subscriber may not see
answers exactly as a missing one: one `null`, and the end; a note is read only for staff, so a
customer's stream is never woken by one (it reads nothing new and sends nothing).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import strawberry
from strawberry import ID

from desk.core.errors import NotFound
from desk.core.feed import Event, Feed, TaskNote, ThreadNote
from desk.core.feed import Subscription as FeedSubscription
from desk.core.models import Ticket as TicketRow
from desk.helpdesk import thread
from desk.reads import conversation, lookups
from desk.reads.threads import MessageView
from schema.live import StreamContext
from schema.subscriptions import _about_me, _feed, _stream_ctx
from schema.types import Ticket, TicketHistoryEntry, TicketMessage, parse_cursor

TRACKED = 50  # the newest messages whose changes (a delivery, a redaction) a stream sends


@strawberry.type(description="A ticket as it is now, and what its conversation gained since.")
class TicketUpdate:
    ticket: Ticket
    messages: list[TicketMessage] = strawberry.field(
        description="New messages since the previous event (the first event: those after "
        "`after`), oldest first, and any of the newest 50 whose delivery or redaction changed "
        "(match them by id). Internal notes only for staff."
    )
    history: list[TicketHistoryEntry] = strawberry.field(
        description="History entries recorded since the previous event (none in the first)."
    )


@dataclass
class _Read:
    """The thread as one read found it: the ticket, and messages in thread order (and whether
    older ones came before them)."""

    ticket: TicketRow
    messages: list[MessageView]
    has_previous: bool = False


@dataclass
class _Seen:
    """What the stream sent: the ticket's fields, the newest TRACKED messages as sent (the
    floor of the next read), the newest message and history entry."""

    ticket: tuple[Any, ...] = ()
    messages: OrderedDict[int, MessageView] = field(default_factory=OrderedDict)
    last_message: int = 0
    last_change: int = 0

    @property
    def floor(self) -> int:
        """Read after this message id: from the oldest tracked one on (or after the newest)."""
        return (next(iter(self.messages)) - 1) if self.messages else self.last_message

    def tasks(self) -> set[int]:
        return {d.task_id for v in self.messages.values() for d in v.deliveries}


def _fields(t: TicketRow) -> tuple[Any, ...]:
    return (t.status, t.priority, t.title, t.body, t.assignee_id, t.updated_at)


class _Listening:
    """The stream's feed subscription. Following more EMAIL tasks is a new subscription, entered
    before the old one is left, so no notice falls between them; what the old one held unread
    is dropped, so the caller reads again after `widen` says True."""

    def __init__(self, feed: Feed, ticket_id: int, user_id: int) -> None:
        self.feed, self.ticket_id, self.user_id = feed, ticket_id, user_id
        self.tasks: frozenset[int] = frozenset()
        self.sub = self._open()

    def _open(self) -> FeedSubscription:
        return self.feed.subscribe(tickets={self.ticket_id}, users={self.user_id}, tasks=self.tasks)

    async def __aenter__(self) -> _Listening:
        await self.sub.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sub.__aexit__(*exc)

    async def widen(self, tasks: Iterable[int]) -> bool:
        wanted = self.tasks | frozenset(tasks)
        if wanted == self.tasks:
            return False
        self.tasks = wanted
        wider = self._open()
        await wider.__aenter__()
        await self.sub.__aexit__(None, None, None)
        self.sub = wider
        return True

    def concerns(self, event: Event) -> bool:
        if isinstance(event, ThreadNote):
            return event.ticket_id == self.ticket_id
        return isinstance(event, TaskNote) and event.id in self.tasks

    async def next(self) -> Event:
        return await anext(self.sub)


async def _thread(ctx: StreamContext, user_id: int, ticket_id: int, after: int | None) -> _Read:
    """The newest TRACKED messages (`after` None), or every message after `after`, a page at a
    time; NotFound when the ticket is not the reader's to see (now)."""
    size = TRACKED if after is None else thread.MAX_PAGE
    found: list[MessageView] = []
    while True:
        async with ctx.slot():
            view = await conversation.read_thread(
                ctx.rt, user_id, ticket_id, first=size, after=after, latest=after is None
            )
        page = view.messages.items
        found += [
            MessageView(m, view.files.get(m.id, []), view.deliveries.get(m.id, [])) for m in page
        ]
        if after is None or not view.messages.has_next or not page:
            return _Read(view.ticket, found, view.messages.has_previous)
        after = page[-1].id


async def _changes(
    ctx: StreamContext, user_id: int, ticket_id: int, after: int
) -> list[thread.Change]:
    """History entries after id `after`, every page; NotFound as `_thread`."""
    out: list[thread.Change] = []
    cursor = after or None
    while True:
        async with ctx.slot():
            page = await conversation.history(
                ctx.rt, user_id, ticket_id, first=thread.MAX_PAGE, after=cursor
            )
        out += page.items
        if not page.has_next or not page.items:
            return out
        cursor = page.items[-1].id


def _event(
    ctx: StreamContext, read: _Read, messages: list[MessageView], changes: list[thread.Change]
) -> TicketUpdate:
    ctx.fresh()
    ctx.spend(sum(len(v.message.body) for v in messages))
    return TicketUpdate(
        ticket=Ticket.from_model(read.ticket),
        messages=[TicketMessage.from_view(v) for v in messages],
        history=[TicketHistoryEntry.from_model(c) for c in changes],
    )


def _remember(seen: _Seen, read: _Read, views: Iterable[MessageView]) -> None:
    seen.ticket = _fields(read.ticket)
    for v in views:
        seen.messages[v.message.id] = v
        seen.messages.move_to_end(v.message.id)
        seen.last_message = max(seen.last_message, v.message.id)
    while len(seen.messages) > TRACKED:
        seen.messages.popitem(last=False)


async def _first(
    ctx: StreamContext, user_id: int, ticket_id: int, after: int | None, seen: _Seen
) -> TicketUpdate:
    """The first event: the ticket, and the messages after `after` (none without it)."""
    read = await _thread(ctx, user_id, ticket_id, None)
    newest = read.messages
    covered = not read.has_previous or bool(newest and newest[0].message.id <= (after or 0))
    sent: list[MessageView] = []
    if after is not None:
        sent = newest if covered else (await _thread(ctx, user_id, ticket_id, after)).messages
        sent = [v for v in sent if v.message.id > after]
    changes = await _changes(ctx, user_id, ticket_id, 0)
    seen.last_change = changes[-1].id if changes else 0
    _remember(seen, read, newest)
    seen.last_message = max(seen.last_message, after or 0)
    return _event(ctx, read, sent, [])


async def _moved(
    ctx: StreamContext, user_id: int, ticket_id: int, seen: _Seen
) -> TicketUpdate | None:
    """What moved since the last event (None: nothing); NotFound once it is not theirs."""
    read = await _thread(ctx, user_id, ticket_id, seen.floor)
    fresh = [
        v
        for v in read.messages
        if v.message.id > seen.last_message or seen.messages.get(v.message.id, v) != v
    ]
    changes = await _changes(ctx, user_id, ticket_id, seen.last_change)
    if not fresh and not changes and _fields(read.ticket) == seen.ticket:
        return None
    if changes:
        seen.last_change = changes[-1].id
    _remember(seen, read, fresh)
    return _event(ctx, read, fresh, changes)


async def follow_ticket(
    ctx: StreamContext, ticket_id: int | None, after: int | None
) -> AsyncGenerator[TicketUpdate | None, None]:
    """The ticket now, then an event whenever its conversation, history or fields move, as the
    subscriber may see them; `null` (then the end) for a ticket missing or not theirs to see,
    from the start or from then on."""
    user_id = ctx.user_id
    if ticket_id is None:  # an id that cannot exist: missing, as `ticket(id)` answers it
        yield None
        return
    seen = _Seen()
    async with _Listening(_feed(ctx), ticket_id, user_id) as feed:
        try:
            yield await _first(ctx, user_id, ticket_id, after, seen)
            again = await feed.widen(seen.tasks())
            while True:
                if not again:
                    event = await feed.next()
                    if not feed.concerns(event) and not await _about_me(ctx, event):
                        continue
                update = await _moved(ctx, user_id, ticket_id, seen)
                again = await feed.widen(seen.tasks())
                if update is not None:
                    yield update
        except NotFound:
            ctx.fresh()
            yield None


@strawberry.type
class TicketSubscription:
    @strawberry.subscription(
        description="Ticket `id` now, then each change of its conversation, history or fields "
        "as you may see them (notes only for staff); pass the `endCursor` of the messages you "
        "have as `after` to get those that came since in the first event. `null` and the end "
        "when it is missing or not yours to see, as `ticket(id)`."
    )
    async def ticket_updated(
        self, info: strawberry.Info, id: ID, after: str | None = None
    ) -> AsyncGenerator[TicketUpdate | None, None]:
        ctx = _stream_ctx(info)
        since = parse_cursor("m", after, "after")
        # aclosing: a subscriber's `complete` must leave the feed now, not when collected.
        async with aclosing(follow_ticket(ctx, lookups.parse_id(id), since)) as events:
            async for update in events:
                yield update
