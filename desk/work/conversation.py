"""What people do in a ticket's conversation (docs/architecture.md, "Conversation"): post a
public reply or an internal note with files, in ONE transaction with everything it causes — the
files' bytes, the status it sets (a customer's reply reopens a resolved ticket; staff may reply
and mark it pending or resolved), the history of that change, and an EMAIL task per person who
should hear of it — so a rolled-back or interrupted post leaves nothing, and a committed one is
mailed however workers crash. Also: redact (admins, audited), retry a failed delivery (staff),
stage an upload for a later message, and open an attachment for its readers only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.db import retrying
from desk.core.errors import NotAllowed, TooLarge, ValidationProblem
from desk.core.inputs import size_text
from desk.core.models import BackgroundTask, Ticket, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, thread, tickets
from desk.helpdesk.attachments import Attachment, Readable
from desk.ledger import accept as ledger
from desk.people import access, audit
from desk.reads.conversation import visible_message
from desk.work import mail
from desk.work.tasks import kick

REOPENS = (TicketStatus.RESOLVED.value, TicketStatus.PENDING.value)
STAFF_SETS = tuple(s.value for s in TicketStatus)
EMAIL_BODY = 19_000  # characters of a message its e-mail carries; the link has the rest

_RECIPIENTS = sa.text(
    "SELECT u.id, u.email, u.locale, u.timezone FROM membership m "
    "JOIN app_user u ON u.id = m.user_id "
    "LEFT JOIN notification_preference p ON p.user_id = u.id "
    "WHERE m.team_id = :team AND u.id <> :author AND ("
    " (:to_customer AND u.id = :creator "
    "  AND (m.role = 'CUSTOMER' OR coalesce(p.ticket_reply_email, true))) "
    " OR (NOT :to_customer AND m.role <> 'CUSTOMER' AND coalesce(p.ticket_reply_email, true) "
    "  AND (u.id = :assignee OR CAST(:assignee AS int) IS NULL))) ORDER BY u.id"
)
_THREAD = sa.text(
    "SELECT min(m.id) AS root, max(m.id) FILTER (WHERE m.id < :m) AS parent, "
    " (SELECT display_name FROM app_user WHERE id = :author) AS author_name, "
    " (SELECT name FROM team WHERE id = :team) AS team_name "
    "FROM ticket_message m WHERE m.ticket_id = :t AND NOT m.internal"
)


@dataclass(frozen=True)
class IncomingFile:
    """A file sent with a message: its name as the sender gave it, and its bytes to read."""

    filename: str
    source: Readable


@dataclass
class Posted:
    message: thread.Message
    ticket: Ticket
    attachments: list[Attachment] = field(default_factory=list)
    changes: list[thread.Change] = field(default_factory=list)
    email_task_ids: list[int] = field(default_factory=list)


def token(ticket_id: int, message_id: int) -> str:
    """The message's threading token (its Message-ID is `<taskdesk-TOKEN@host>`)."""
    return f"ticket-{ticket_id}-{message_id}"


async def post_message(
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    body: object,
    *,
    internal: bool = False,
    files: Sequence[IncomingFile] = (),
    attachment_ids: Sequence[int] = (),
    set_status: str | None = None,
) -> Posted:
    """A reply (or, with `internal`, a staff note) on a ticket the user may see. Bad input raises
    ValidationProblem or TooLarge before anything commits; a ticket the user may not see is
    NotFound, as if missing."""
    if len(files) + len(set(attachment_ids)) > rt.settings.message_max_files:
        raise TooLarge("files", f"at most {rt.settings.message_max_files} files per message")
    text = thread.clean_body(body, allow_empty=bool(files or attachment_ids))
    status = None
    if set_status is not None:
        status = tickets.clean_changes(status=set_status)["status"]

    async def once() -> Posted:
        for f in files:  # a second try reads each file again from its start
            seek = getattr(f.source, "seek", None)
            if seek is not None:
                await seek(0)
        async with rt.engine.begin() as conn:
            return await _post(conn, rt, user_id, ticket_id, text, internal, files,
                               list(attachment_ids), status)  # fmt: skip

    posted = await retrying(once)
    for task_id in posted.email_task_ids:
        task = await ledger.get(rt.pg, task_id)
        if task is not None:
            await kick(rt, task)
    return posted


async def _post(
    conn: AsyncConnection,
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    text: str,
    internal: bool,
    files: Sequence[IncomingFile],
    staged: list[int],
    status: str | None,
) -> Posted:
    ticket, member = await tickets.visible_ticket(conn, user_id, ticket_id, lock=True)
    if (internal or status is not None) and not member.is_staff:
        raise NotAllowed("Only staff and admins can do this.")
    if not member.is_staff and ticket.status == TicketStatus.CLOSED.value:
        raise ValidationProblem("ticket", "this ticket is closed; open a new ticket instead")
    now = rt.clock()
    message = await thread.insert_message(
        conn, ticket, author_id=user_id, body=text, internal=internal, staff=member.is_staff,
        now=now,
    )  # fmt: skip
    posted = Posted(message, ticket)
    posted.attachments = await _files(conn, rt, member, message, files, staged)
    if posted.attachments:
        await thread.set_attachment_count(conn, message.id, len(posted.attachments))
    change = _status_change(ticket, member, internal, status)
    if change is not None:
        posted.ticket, posted.changes = await tickets.apply_changes(
            conn, ticket, {"status": change}, actor_id=user_id, now=now
        )
    if not internal:
        posted.email_task_ids = await _mail(conn, rt, posted, member, now=now)
    return posted


def _status_change(
    ticket: Ticket, member: access.Member, internal: bool, status: str | None
) -> str | None:
    if status is not None:
        return status if status != ticket.status else None
    if not internal and not member.is_staff and ticket.status in REOPENS:
        return TicketStatus.OPEN.value  # the customer wrote back: it needs an answer again
    return None


async def _files(
    conn: AsyncConnection,
    rt: Runtime,
    member: access.Member,
    message: thread.Message,
    files: Sequence[IncomingFile],
    staged: list[int],
) -> list[Attachment]:
    s = rt.settings
    out = await attachments.bind_staged(
        conn, staged, uploader_id=member.user_id, team_id=member.team_id, message_id=message.id
    )
    for f in files:
        out.append(
            await attachments.store(
                conn, f.source, filename=f.filename, team_id=member.team_id,
                uploader_id=member.user_id, message_id=message.id,
                max_bytes=s.attachment_max_bytes, now=message.created_at,
            )
        )  # fmt: skip
    if sum(a.size for a in out) > s.message_max_bytes:
        total = size_text(s.message_max_bytes)
        raise TooLarge("files", f"a message's files can be at most {total} in all")
    return out


async def _mail(
    conn: AsyncConnection, rt: Runtime, posted: Posted, member: access.Member, *, now: Any
) -> list[int]:
    """An EMAIL task per person on the other side, in the message's transaction."""
    ticket, message = posted.ticket, posted.message
    found = await conn.execute(
        _RECIPIENTS,
        {"team": ticket.team_id, "author": member.user_id, "to_customer": member.is_staff,
         "creator": ticket.creator_id, "assignee": ticket.assignee_id},
    )  # fmt: skip
    people = found.all()
    if not people:
        return []
    about = (
        await conn.execute(
            _THREAD,
            {"m": message.id, "t": ticket.id, "author": member.user_id, "team": ticket.team_id},
        )
    ).one()
    ids = {"message": token(ticket.id or 0, message.id)}
    if about.parent is not None:
        ids |= {"parent": token(ticket.id or 0, about.parent),
                "root": token(ticket.id or 0, about.root)}  # fmt: skip
    body = message.body if len(message.body) <= EMAIL_BODY else message.body[:EMAIL_BODY] + "\n[…]"
    params: dict[str, object] = {
        "ticket_id": ticket.id or 0, "ticket_title": ticket.title, "team_name": about.team_name,
        "author_name": about.author_name, "body": body, "files": len(posted.attachments),
        "reply": "1" if about.parent is not None else "", "link": f"/tickets/{ticket.id}",
    }  # fmt: skip
    task_ids = []
    for p in people:
        task_id = await mail.queue_email(
            conn, to=p.email, template="ticket_message", params=params, locale=p.locale,
            timezone=p.timezone, team_id=ticket.team_id, user_id=p.id, now=now, thread=ids,
            ticket_id=ticket.id,
        )  # fmt: skip
        task_ids.append(task_id)
    await conn.execute(
        sa.text(
            "INSERT INTO message_email (message_id, task_id, recipient_id) "
            "SELECT :m, t, r FROM unnest(CAST(:ts AS int[]), CAST(:rs AS int[])) AS x(t, r)"
        ),
        {"m": message.id, "ts": task_ids, "rs": [p.id for p in people]},
    )
    return task_ids


async def redact_message(rt: Runtime, user_id: int, message_id: int) -> thread.Message:
    """An admin of the ticket's team empties a message and drops its files; the audit trail
    keeps who, when and which message (never the text)."""

    async def once() -> thread.Message:
        async with rt.engine.begin() as conn:
            message, _ticket, member = await visible_message(conn, user_id, message_id)
            access.require_admin(member)
            if message.redacted_at is not None:
                return message
            now = rt.clock()
            done = await thread.redact(conn, message_id, by=user_id, now=now)
            await audit.record(
                conn, at=now, actor_id=user_id, actor=await audit.actor_of(conn, user_id),
                action="message_redact", team_id=message.team_id,
                detail=f"message {message_id} of ticket {message.ticket_id}",
            )  # fmt: skip
            return done

    return await retrying(once)


async def retry_delivery(rt: Runtime, user_id: int, message_id: int) -> list[BackgroundTask]:
    """Staff send a message's failed e-mails again (each a fresh round of its EMAIL task)."""
    async with rt.engine.begin() as conn:
        _message, _ticket, member = await visible_message(conn, user_id, message_id)
        access.require_staff(member)
        failed = await conn.execute(
            sa.text(
                "SELECT t.id FROM message_email e JOIN background_task t ON t.id = e.task_id "
                "WHERE e.message_id = :m AND t.status = 'FAILED' ORDER BY t.id FOR UPDATE OF t"
            ),
            {"m": message_id},
        )
        ids = [r.id for r in failed]
        if not ids:
            raise ValidationProblem("message", "none of its e-mails failed; nothing to retry")
        retried = [t for i in ids if (t := await ledger.retry(conn, i, now=rt.clock()))]
    for task in retried:
        await kick(rt, task)
    return retried


async def stage_upload(rt: Runtime, user_id: int, team_id: int, upload: IncomingFile) -> Attachment:
    """A file kept for the uploader's next message in the team (two-step upload: GraphQL sends
    its id with `replyToTicket`); only its uploader can attach or read it."""
    async with rt.engine.begin() as conn:
        member = await access.require_member(conn, user_id, team_id)
        return await attachments.store(
            conn, upload.source, filename=upload.filename, team_id=member.team_id,
            uploader_id=user_id, message_id=None, max_bytes=rt.settings.attachment_max_bytes,
            now=rt.clock(),
        )  # fmt: skip
