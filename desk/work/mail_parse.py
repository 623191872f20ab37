"""Parsing a mailbox's fetched messages into tickets and replies (docs/architecture.md,
"Mail in"), each exactly once.

Every outcome is written in ONE transaction with its claim — `UPDATE inbound_mail SET
parsed_at … WHERE parsed_at IS NULL RETURNING`, taken before anything else, so a second parser
of the same row waits on it and then finds nothing to do, and a rolled-back parse leaves the row
unparsed to be tried again. A reply (the ticket found by our Message-IDs, then `[#N]` in the
subject, within the mailbox's team) goes through the conversation's own post (its e-mails, its
reopening of a resolved ticket); a new ticket through `tickets.insert_ticket`. The sender is
matched to an account by address, or one is made (no password: they write by mail), and made a
customer of the team if they are not a member (desk/people/senders.py). Automatic mail is
marked and ignored; mail that cannot be read (no sender, not MIME at all, refused by a cap) is
kept raw and marked. Before anything is made, desk/work/mail_gate.py may stop it: a Message-ID
already read (`duplicate`), a flooding sender (`throttled`, the admins told once), a stranger to
a staff-only mailbox (`held`, desk/work/mail_review.py), a reply loop (`automatic`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from desk.core.errors import NotFound, TooLarge, ValidationProblem
from desk.core.mail_models import InboundOutcome
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, inbound, thread, tickets
from desk.ledger.delivery import send_reserved
from desk.ledger.sql import Db, one, rows
from desk.people import senders
from desk.work import conversation, mail_gate
from desk.work.conversation import IncomingFile
from desk.work.mailboxes import Mailbox

log = logging.getLogger(__name__)
TITLE_MAX = 200
UNPARSED = (
    "SELECT id FROM inbound_mail WHERE mailbox_id = %(b)s AND parsed_at IS NULL "
    "ORDER BY id LIMIT %(n)s"
)
# The sender is kept with the claim when the fetch did not store it (the flood gate counts it).
_CLAIM = (
    "UPDATE inbound_mail SET parsed_at = %(now)s, outcome = %(outcome)s, problem = %(problem)s, "
    " sender = coalesce(sender, %(sender)s) WHERE id = %(id)s AND parsed_at IS NULL RETURNING id"
)
_LINK = "UPDATE inbound_mail SET ticket_id = %(t)s, ticket_message_id = %(m)s WHERE id = %(id)s"
_ROW = (
    "SELECT id, mailbox_id, message_id, received_at, sender, raw FROM inbound_mail "
    "WHERE id = %(id)s AND parsed_at IS NULL"
)


async def _one(db: Db, sql: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """`sql.one`, also in a pipelined psycopg transaction (`rt.pg.transaction`), where a
    statement's columns are known only once its rows are read."""
    if isinstance(db, psycopg.AsyncConnection):
        cursor = db.cursor(row_factory=dict_row)
        await cursor.execute(sql, params)
        return await cursor.fetchone()
    return await one(db, sql, params)


@dataclass(frozen=True)
class Parsed:
    outcome: str
    ticket_id: int | None = None


async def parse_pending(rt: Runtime, box: Mailbox, *, limit: int = 100) -> list[Parsed]:
    """Parse up to `limit` of the mailbox's unparsed messages, oldest first."""
    async with rt.engine.connect() as conn:
        ids = [r["id"] for r in await rows(conn, UNPARSED, {"b": box.id, "n": limit})]
    out = []
    for row_id in ids:
        got = await parse_one(rt, box, row_id)
        if got is not None:
            out.append(got)
    return out


async def parse_one(rt: Runtime, box: Mailbox, row_id: int) -> Parsed | None:
    """The row's outcome, or None when another parse already wrote one."""
    async with rt.engine.connect() as conn:
        found = await one(conn, _ROW, {"id": row_id})
    if found is None:
        return None
    row = mail_gate.Row(
        found["id"], found["mailbox_id"], found["message_id"], found["received_at"], found["sender"]
    )
    s = rt.settings
    mail = inbound.read(
        bytes(found["raw"]), max_files=s.message_max_files, max_file_bytes=s.attachment_max_bytes
    )
    sender = mail.sender if "@" in mail.sender else None
    if mail.automatic:
        return await _mark(rt, row_id, InboundOutcome.AUTOMATIC, mail.automatic, sender)
    unreadable = [p for p in mail.problems if p.startswith("unreadable")]
    if sender is None or unreadable:
        why = "; ".join(unreadable) or "no sender address could be read"
        return await _mark(rt, row_id, InboundOutcome.UNREADABLE, why, sender)
    problem = "; ".join(mail.problems)[:1000] or None
    ticket_id, _how = mail.ticket_hint()
    gated = await _gate(rt, box, row, mail, ticket_id)
    if gated is not False:
        return gated if isinstance(gated, Parsed) else None
    try:
        if ticket_id is not None:
            replied = await _reply(rt, box, row, mail, ticket_id, problem)
            if replied is not False:
                return replied if isinstance(replied, Parsed) else None
        return await _open(rt, box, row, mail, problem)
    except (ValidationProblem, TooLarge) as exc:
        return await _mark(rt, row_id, InboundOutcome.UNREADABLE, str(exc)[:1000], sender)


async def _gate(
    rt: Runtime, box: Mailbox, row: mail_gate.Row, mail: inbound.Inbound, hint: int | None
) -> Parsed | bool | None:
    """The mail marked throttled, held or automatic (a loop), with the admins' notice of a
    flood (None: another parse claimed it); False when it goes on to make a ticket or reply."""
    async with rt.engine.begin() as conn:
        stop = await mail_gate.stopped(conn, rt.settings, row, mail.sender, hint)
        if stop is None:
            return False
        if not await _claim(conn, rt, row.id, stop.outcome, stop.problem, mail.sender):
            return None
        if stop.notify:
            await mail_gate.notify_admins(conn, rt.settings, box.team_id, box.id, mail.sender)
    return Parsed(stop.outcome)


async def _duplicate(db: Db, rt: Runtime, row: mail_gate.Row, sender: str) -> Parsed | bool | None:
    """In the making transaction: the row marked a duplicate of an earlier copy (None when
    another parse claimed it), else False."""
    dup = await mail_gate.duplicate(db, row)
    if dup is None:
        return False
    if not await _claim(db, rt, row.id, dup.outcome, dup.problem, sender):
        return None
    await rows(db, _LINK, {"id": row.id, "t": dup.ticket_id, "m": None})
    return Parsed(dup.outcome, dup.ticket_id)


async def _mark(
    rt: Runtime, row_id: int, outcome: str, problem: str | None, sender: str | None
) -> Parsed | None:
    async with rt.engine.begin() as conn:
        claimed = await _claim(conn, rt, row_id, outcome, problem, sender)
    return Parsed(outcome) if claimed else None


async def _claim(
    db: Db, rt: Runtime, row_id: int, outcome: str, problem: str | None, sender: str | None
) -> bool:
    params = {
        "id": row_id, "now": rt.clock(), "outcome": outcome, "problem": problem, "sender": sender,
    }  # fmt: skip
    return await _one(db, _CLAIM, params) is not None


def _files(mail: inbound.Inbound) -> list[IncomingFile]:
    return [IncomingFile(f.filename, attachments.InMemory(f.data)) for f in mail.files]


async def _reply(
    rt: Runtime, box: Mailbox, row: mail_gate.Row, mail: inbound.Inbound, ticket_id: int,
    problem: str | None,
) -> Parsed | bool | None:  # fmt: skip
    """The mail as a reply in the ticket; False when it cannot be one (another team's ticket,
    one the sender may not see, a closed one): then it opens a ticket."""
    text = thread.clean_body(mail.text[: thread.MAX_BODY], allow_empty=True) or "(no text)"
    try:
        async with rt.pg.transaction() as conn:
            owner = await _one(
                conn, "SELECT team_id FROM ticket WHERE id = %(t)s", {"t": ticket_id}
            )
            if owner is None or owner["team_id"] != box.team_id:
                return False
            dup = await _duplicate(conn, rt, row, mail.sender)
            if dup is not False:
                return dup if isinstance(dup, Parsed) else None
            if not await _claim(conn, rt, row.id, InboundOutcome.REPLY, problem, mail.sender):
                return None
            user_id = await senders.customer_for(conn, box.team_id, mail.sender, mail.sender_name)
            # The conversation's own post, in this transaction (its claim commits with it).
            sent = await conversation.post_in_transaction(
                conn, rt, user_id, ticket_id, text, False, _files(mail), [], None
            )
            params = {"id": row.id, "t": ticket_id, "m": sent.written.message.id}
            await rows(conn, _LINK, params)
    except (NotFound, ValidationProblem) as exc:
        log.info("inbound mail %s: not a reply to ticket %s (%s)", row.id, ticket_id, exc)
        return False
    posted = await sent.posted()
    for due in posted.sends:
        await send_reserved(rt, due)
    return Parsed(InboundOutcome.REPLY, ticket_id)


async def _open(
    rt: Runtime, box: Mailbox, row: mail_gate.Row, mail: inbound.Inbound, problem: str | None
) -> Parsed | None:
    s = rt.settings
    title = " ".join(mail.subject.split())[:TITLE_MAX] or "(no subject)"
    body = mail.text[: tickets.MAX_BODY] or "(no text)"
    async with rt.engine.begin() as conn:
        dup = await _duplicate(conn, rt, row, mail.sender)
        if dup is not False:
            return dup if isinstance(dup, Parsed) else None
        if not await _claim(conn, rt, row.id, InboundOutcome.TICKET, problem, mail.sender):
            return None
        user_id = await senders.customer_for(conn, box.team_id, mail.sender, mail.sender_name)
        ticket, member, message = await tickets.insert_ticket(
            conn, rt, user_id, box.team_id, title, body
        )
        stored: list[Any] = []
        for f in _files(mail):
            stored.append(
                await attachments.store(
                    conn, f.source, filename=f.filename, team_id=member.team_id,
                    uploader_id=user_id, message_id=message.id,
                    max_bytes=s.attachment_max_bytes, now=message.created_at,
                )
            )  # fmt: skip
        if sum(a.size for a in stored) > s.message_max_bytes:
            raise TooLarge("files", "the message's files are over the cap of a message")
        if stored:
            await thread.set_attachment_count(conn, message.id, len(stored))
        await rows(conn, _LINK, {"id": row.id, "t": ticket.id, "m": message.id})
    return Parsed(InboundOutcome.TICKET, ticket.id)
