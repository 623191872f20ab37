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

import psycopg
import sqlalchemy as sa

from desk.core.db import retrying
from desk.core.errors import NotAllowed, NotFound, TooLarge, ValidationProblem
from desk.core.inputs import size_text
from desk.core.models import BackgroundTask, Ticket, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, posting, thread, tickets
from desk.helpdesk.attachments import Attachment, Readable
from desk.ledger import accept as ledger
from desk.ledger import mail as ledger_mail
from desk.ledger.delivery import send_reserved
from desk.ledger.sends import Due
from desk.people import access, audit
from desk.reads.conversation import visible_message
from desk.work import mail, sla_timers
from desk.work.tasks import kick

REOPENS = (TicketStatus.RESOLVED.value, TicketStatus.PENDING.value)
STAFF_SETS = tuple(s.value for s in TicketStatus)
EMAIL_BODY = 19_000  # characters of a message its e-mail carries; the link has the rest


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
    sends: list[Due] = field(default_factory=list)  # the e-mails' reserved sends, for after commit


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
        raise attachments.too_many(rt.settings.message_max_files)
    text = thread.clean_body(body, allow_empty=bool(files or attachment_ids))
    status = None
    if set_status is not None:
        status = tickets.clean_changes(status=set_status)["status"]

    async def once() -> Posted:
        for f in files:  # a second try reads each file again from its start
            seek = getattr(f.source, "seek", None)
            if seek is not None:
                await seek(0)
        async with rt.pg.transaction() as conn:
            sent = await _post(conn, rt, user_id, ticket_id, text, internal, files,
                               list(attachment_ids), status)  # fmt: skip
        return await sent.posted()  # the writes' answers came back with the commit

    posted = await retrying(once)
    for due in posted.sends:  # reserved with the commit: the worker may have it at once
        await send_reserved(rt, due)
    return posted


async def _post(
    conn: psycopg.AsyncConnection[Any],
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    text: str,
    internal: bool,
    files: Sequence[IncomingFile],
    staged: list[int],
    status: str | None,
) -> _Sent:
    ctx = await posting.read(conn, user_id, ticket_id, internal=internal)
    member = ctx.member if ctx is not None else None
    if ctx is None or member is None or not access.can_see_ticket(member, ctx.ticket.creator_id):
        raise NotFound("Ticket not found.")
    if (internal or status is not None) and not member.is_staff:
        raise NotAllowed("Only staff and admins can do this.")
    if not member.is_staff and ctx.ticket.status == TicketStatus.CLOSED.value:
        raise ValidationProblem("ticket", "this ticket is closed; open a new ticket instead")
    now = rt.clock()
    change = _status_change(ctx.ticket, member, internal, status)
    # Pipelined (rt.pg.transaction): the writes are sent one after the other, the commit after
    # them, and their answers read once it is done: a reply without files is the read's round
    # trip and the commit's.
    written = await posting.write(conn, ctx, body=text, internal=internal, status=change, now=now)
    planned = None
    if ctx.sla and (not internal or change is not None):  # the revision moved: plan its clocks
        planned = await sla_timers.replan(conn, ticket_id, now)
    found = await _files(conn, rt, member, written.message, files, staged)
    if found:
        await thread.set_attachment_count(conn, written.message.id, len(found))
    mailed = None
    if ctx.recipients:
        mailed = await _mail(conn, rt, ctx, written.message, len(found), now=now)
    return _Sent(written, found, mailed, planned)


# The post inside the caller's own pipelined transaction (`rt.pg.transaction()`), for a write
# that must commit with it — a fetched mail's reply and the claim of its row (desk/work/mail_parse.py).
# Its answers are read with `.posted()` after the commit; its `sends` are the caller's to send.
post_in_transaction = _post


@dataclass(frozen=True)
class _Sent:
    """A post's writes, sent in its transaction; their answers are read after the commit."""

    written: posting.Written
    attachments: list[Attachment]
    mailed: Any  # the e-mails' statement (`ledger_mail.accept_message_emails`), or None
    planned: sla_timers.Plan | None = None  # the ticket's SLA plan after the post

    async def posted(self) -> Posted:
        ticket, changes = await self.written.result()
        if self.planned is not None:
            ticket.sla_due_at = self.planned.due_at
            ticket.sla_breached_at = ticket.sla_breached_at or self.planned.breached_at
        posted = Posted(self.written.message, ticket, self.attachments, changes)
        if self.mailed is not None:
            accepted = await ledger_mail.accepted(self.mailed)
            posted.email_task_ids = [a.task_id for a in accepted]
            posted.sends = [a.send for a in accepted if a.send is not None]
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
    conn: psycopg.AsyncConnection[Any],
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
    conn: psycopg.AsyncConnection[Any],
    rt: Runtime,
    ctx: posting.Context,
    message: thread.Message,
    files: int,
    *,
    now: Any,
) -> Any:
    """An EMAIL task per person on the other side, in the message's transaction, each with its
    send reserved (unless the lane or the team's e-mail window holds it back); sent, its rows
    read by `ledger_mail.accepted`."""
    ticket = ctx.ticket
    tid = ticket.id or 0
    ids = {"message": token(tid, message.id)}
    if ctx.parent is not None and ctx.root is not None:
        ids |= {"parent": token(tid, ctx.parent), "root": token(tid, ctx.root)}
    body = message.body if len(message.body) <= EMAIL_BODY else message.body[:EMAIL_BODY] + "\n[…]"
    params: dict[str, object] = {
        "ticket_id": tid, "ticket_title": ticket.title, "team_name": ctx.team_name,
        "author_name": ctx.author_name, "body": body, "files": files,
        "reply": "1" if ctx.parent is not None else "", "link": f"/tickets/{tid}",
    }  # fmt: skip
    emails = [
        (p.id, mail.new_scope(),
         mail.email_filters(p.email, "ticket_message", params, p.locale, p.timezone, ids))
        for p in ctx.recipients
    ]  # fmt: skip
    return await ledger_mail.accept_message_emails(
        conn, message_id=message.id, team_id=ticket.team_id, ticket_id=tid, emails=emails,
        max_attempts=mail.MAX_ATTEMPTS, mail_max=rt.settings.team_mail_max_queued, now=now,
    )  # fmt: skip


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
