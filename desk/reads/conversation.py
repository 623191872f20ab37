"""Reading a ticket's conversation as its reader may (docs/architecture.md, "Conversation"): a
window of messages with their files, their e-mails' delivery (staff), the history between them,
and the names of the people in it — a fixed number of statements whatever the window's size.
A note, and a note's file, is to a customer exactly like something missing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotFound
from desk.core.models import TaskStatus, Ticket
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, thread, tickets
from desk.helpdesk.attachments import Attachment
from desk.people import access

HISTORY_WINDOW = 200


@dataclass(frozen=True, slots=True)
class Delivery:
    """One e-mail of a message, as its EMAIL task stands: sending, delivered, retrying (with the
    server's reply), failed (with it) or cancelled."""

    task_id: int
    recipient_id: int | None
    recipient_name: str
    state: str
    reply: str | None
    attempts: int


@dataclass
class ThreadView:
    ticket: Ticket
    member: access.Member
    messages: thread.Page[thread.Message]
    files: dict[int, list[Attachment]] = field(default_factory=dict)
    deliveries: dict[int, list[Delivery]] = field(default_factory=dict)
    history: list[thread.Change] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)

    @property
    def version(self) -> str:
        """What the thread shows, as a token: its newest message and history entry."""
        last = self.messages.items[-1].id if self.messages.items else 0
        changed = self.history[-1].id if self.history else 0
        return f"{last}.{changed}"


def delivery_state(status: str, attempts: int) -> str:
    if status == TaskStatus.COMPLETED:
        return "delivered"
    if status == TaskStatus.FAILED:
        return "failed"
    if status == TaskStatus.CANCELLED:
        return "cancelled"
    if status == TaskStatus.WAITING and attempts > 0:
        return "retrying"
    return "sending"


async def deliveries(conn: AsyncConnection, message_ids: list[int]) -> dict[int, list[Delivery]]:
    out: dict[int, list[Delivery]] = {m: [] for m in message_ids}
    if not message_ids:
        return out
    rows = await conn.execute(
        sa.text(
            "SELECT e.message_id, t.id, e.recipient_id, coalesce(u.display_name, '') AS name, "
            " t.status, t.attempts, t.last_error FROM message_email e "
            "JOIN background_task t ON t.id = e.task_id "
            "LEFT JOIN app_user u ON u.id = e.recipient_id "
            "WHERE e.message_id = ANY(:ids) ORDER BY e.message_id, t.id"
        ),
        {"ids": message_ids},
    )
    for r in rows:
        state = delivery_state(r.status, r.attempts)
        reply = r.last_error if state in ("retrying", "failed") else None
        out[r.message_id].append(Delivery(r.id, r.recipient_id, r.name, state, reply, r.attempts))
    return out


async def names_of(conn: AsyncConnection, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = await conn.execute(
        sa.text("SELECT id, display_name FROM app_user WHERE id = ANY(:ids)"), {"ids": list(ids)}
    )
    return {r.id: r.display_name for r in rows}


async def read_thread(
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    *,
    first: int = 50,
    after: int | None = None,
    before: int | None = None,
    latest: bool = True,
) -> ThreadView:
    """The window of the thread (the newest `first` messages unless `after`/`before` say
    otherwise), with what it shows beside them; NotFound when the ticket is not the reader's."""
    async with rt.engine.connect() as conn:
        ticket, member = await tickets.visible_ticket(conn, user_id, ticket_id)
        page = await thread.messages(
            conn, ticket_id, staff=member.is_staff, first=first, after=after, before=before,
            latest=latest and after is None,
        )  # fmt: skip
        view = ThreadView(ticket, member, page)
        ids = [m.id for m in page.items]
        view.files = await attachments.of_messages(conn, ids)
        if member.is_staff:
            view.deliveries = await deliveries(conn, ids)
        view.history = await _history_between(conn, ticket_id, page, staff=member.is_staff)
        people = {m.author_id for m in page.items} | {c.actor_id for c in view.history}
        people |= {int(c.new_value) for c in view.history if c.field == "assignee" and c.new_value}
        people |= {int(c.old_value) for c in view.history if c.field == "assignee" and c.old_value}
        view.names = await names_of(conn, {p for p in people if p is not None})
    return view


async def _history_between(
    conn: AsyncConnection, ticket_id: int, page: thread.Page[thread.Message], *, staff: bool
) -> list[thread.Change]:
    """The changes shown among the window's messages: from its first message on (all of them
    when the window starts the thread), up to the next message after the window — where the
    next window's begin, so windows read one after another show every change once."""
    since: datetime | None = None
    if page.has_previous and page.items:
        since = page.items[0].created_at
    found = await thread.changes(conn, ticket_id, first=HISTORY_WINDOW, since=since)
    if page.has_next and page.items:
        following = await thread.messages(
            conn, ticket_id, staff=staff, first=1, after=page.items[-1].id
        )
        if following.items:
            end = following.items[0].created_at
            return [c for c in found.items if c.at < end]
    return found.items


async def history(
    rt: Runtime, user_id: int, ticket_id: int, *, first: int = 50, after: int | None = None
) -> thread.Page[thread.Change]:
    async with rt.engine.connect() as conn:
        await tickets.visible_ticket(conn, user_id, ticket_id)
        return await thread.changes(conn, ticket_id, first=first, after=after)


async def visible_message(
    conn: AsyncConnection, user_id: int, message_id: int
) -> tuple[thread.Message, Ticket, access.Member]:
    """A message its reader may see: a note only to staff; otherwise NotFound, as if missing."""
    message = await thread.message_of(conn, message_id)
    if message is None:
        raise NotFound("Message not found.")
    try:
        ticket, member = await tickets.visible_ticket(conn, user_id, message.ticket_id)
    except NotFound:
        raise NotFound("Message not found.") from None
    if message.internal and not member.is_staff:
        raise NotFound("Message not found.")
    return message, ticket, member


@dataclass
class OpenFile:
    attachment: Attachment
    chunks: AsyncIterator[bytes]


async def open_attachment(rt: Runtime, user_id: int, attachment_id: int) -> OpenFile:
    """A file for whoever may read its message (or, staged, its uploader); else NotFound."""
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(f"SELECT {attachments.COLUMNS} FROM message_attachment a WHERE a.id = :a"),
                {"a": attachment_id},
            )
        ).first()
        if row is None:
            raise NotFound("File not found.")
        found = Attachment(**row._mapping)
        if found.message_id is None:
            if found.uploader_id != user_id:
                raise NotFound("File not found.")
        else:
            try:
                await visible_message(conn, user_id, found.message_id)
            except NotFound:
                raise NotFound("File not found.") from None
    return OpenFile(found, _chunks(rt, found.id))


async def _chunks(rt: Runtime, attachment_id: int) -> AsyncIterator[bytes]:
    async with rt.engine.connect() as conn:
        async for data in attachments.chunks(conn, attachment_id):
            yield data
