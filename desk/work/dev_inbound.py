"""Development only: "send as a customer" (docs/architecture.md, "Mail in") — a message typed on
the dev mail page enters the team's inbound path exactly as a fetched one does.

Each team gets one dev mailbox on demand (host `mailbox_admin.DEV_HOST`, reserved: no admin can
make one, and it is stored switched off, so no fetch is ever queued for it and
`mailboxes.ensure_fetches` passes it by). The message is built as RFC 822 bytes and stored with
`fetch.store_batch`, the fetch's own write (its next UID under the mailbox's lock), and the
mailbox's MAIL_PARSE is queued in the same transaction: desk/work/mail_parse.py and
mail_gate.py then make a ticket or a reply as for any mail. A reply to a ticket carries
`In-Reply-To`/`References` naming our Message-ID of the ticket's latest public message — what a
customer's mail program sends back — so threading is the real one, not a shortcut.
"""

from __future__ import annotations

import email.policy
import email.utils
import uuid
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.ledger import run as ledger_run
from desk.ledger.delivery import send_now
from desk.ledger.sql import Db, one, rows
from desk.work import conversation, fetch, mailboxes
from desk.work.mail import thread_id
from desk.work.mailbox_admin import DEV_HOST
from desk.work.mailboxes import Mailbox

VALIDITY = 1  # the dev mailbox's UIDVALIDITY: its UIDs are ours and never renumbered
BODY_MAX = 20_000
_OWNER = (
    "SELECT user_id FROM membership WHERE team_id = %(t)s "
    "ORDER BY (role = 'ADMIN') DESC, user_id LIMIT 1"
)
_FIND = f"SELECT {mailboxes.COLUMNS} FROM mailbox WHERE team_id = %(t)s AND host = %(h)s"
# Stored switched off: never fetched (the fetch chain and ensure_fetches need `enabled`).
_INSERT = (
    "INSERT INTO mailbox (team_id, created_by_id, host, port, use_tls, username, password_enc, "
    " folder, cadence_seconds, enabled, created_at) VALUES (%(t)s, %(by)s, %(h)s, 993, true, "
    " %(user)s, %(pw)s, 'INBOX', 86400, false, %(now)s) "
    f"RETURNING {mailboxes.COLUMNS}"
)
_LATEST = (
    "SELECT t.id AS ticket_id, t.title, m.id AS message_id FROM ticket t "
    "LEFT JOIN LATERAL (SELECT id FROM ticket_message WHERE ticket_id = t.id AND NOT internal "
    " ORDER BY id DESC LIMIT 1) m ON true WHERE t.id = %(t)s AND t.team_id = %(team)s"
)
_ACTIVE_PARSE = (
    "SELECT id FROM background_task WHERE kind = 'MAIL_PARSE' AND team_id = %(t)s "
    "AND scope_key = %(s)s AND status IN ('WAITING', 'RUNNING') ORDER BY id DESC LIMIT 1"
)


@dataclass(frozen=True)
class Draft:
    """What the form asked for, checked."""

    team_id: int
    address: str
    name: str
    subject: str
    body: str
    ticket_id: int | None


@dataclass(frozen=True)
class Sent:
    inbound_id: int
    mailbox_id: int
    task_id: int | None  # the mailbox's MAIL_PARSE that will read it


@dataclass(frozen=True)
class Status:
    """A sent message as the page shows it: parsed yet, how, and into which ticket."""

    inbound_id: int
    team_id: int
    sender: str | None
    received_at: datetime
    parsed_at: datetime | None
    outcome: str | None
    problem: str | None
    ticket_id: int | None


def draft(raw: dict[str, Any]) -> Draft:
    """The form's values checked, each bad one a ValidationProblem naming its field."""
    team = inputs.optional_id(raw.get("team"))
    if team is None:
        raise ValidationProblem("team", "choose a team")
    address = inputs.line("address", raw.get("address") or "", max_len=320).lower()
    parsed = email.utils.parseaddr(address)[1]
    if parsed != address or "@" not in address or address.startswith("@"):
        raise ValidationProblem("address", "an e-mail address, e.g. customer@example.com")
    ticket_raw = str(raw.get("ticket") or "").strip().lstrip("#")
    ticket = inputs.optional_id(ticket_raw) if ticket_raw else None
    if ticket_raw and ticket is None:
        raise ValidationProblem("ticket", "a ticket number, or empty for a new ticket")
    return Draft(
        team_id=team,
        address=address,
        name=inputs.line("name", raw.get("name") or "", max_len=200),
        subject=inputs.line("subject", raw.get("subject") or "", max_len=300),
        body=inputs.text("body", raw.get("body") or "", max_len=BODY_MAX),
        ticket_id=ticket,
    )


async def dev_mailbox(db: Db, settings: Settings, team_id: int, *, now: datetime) -> Mailbox:
    """The team's dev mailbox, made the first time (under a lock on the team, so one)."""
    await rows(db, "SELECT pg_advisory_xact_lock(hashtext('dev-mailbox'), %(t)s)", {"t": team_id})
    found = await one(db, _FIND, {"t": team_id, "h": DEV_HOST})
    if found is not None:
        return Mailbox(**found)
    owner = await one(db, _OWNER, {"t": team_id})
    if owner is None:
        raise ValidationProblem("team", "no such team, or it has no members")
    params = {
        "t": team_id, "by": owner["user_id"], "h": DEV_HOST, "user": f"team-{team_id}",
        "pw": mailboxes.encrypt(settings, "dev"), "now": now,
    }  # fmt: skip
    made = await one(db, _INSERT, params)
    assert made is not None
    return Mailbox(**made)


def build(d: Draft, *, to: str, now: datetime, in_reply_to: str | None) -> bytes:
    """The message as a customer's mail program would send it (RFC 822, CRLF)."""
    msg = EmailMessage()
    msg["From"] = email.utils.formataddr((d.name, d.address))
    msg["To"] = to
    msg["Subject"] = d.subject
    msg["Date"] = email.utils.format_datetime(now)
    msg["Message-ID"] = f"<dev-{uuid.uuid4().hex}@{DEV_HOST}>"
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        msg["References"] = in_reply_to
    msg.set_content(d.body or "\n")
    return msg.as_bytes(policy=email.policy.SMTP)


async def _reply_target(db: Db, d: Draft, public_url: str) -> tuple[str | None, str]:
    """(our Message-ID the reply answers, the subject to use) for a reply; (None, subject)."""
    if d.ticket_id is None:
        return None, d.subject or "(no subject)"
    found = await one(db, _LATEST, {"t": d.ticket_id, "team": d.team_id})
    if found is None:
        raise ValidationProblem("ticket", "no such ticket in this team")
    mid = found["message_id"]
    answered = thread_id(conversation.token(d.ticket_id, mid), public_url) if mid else None
    return answered, d.subject or f"Re: {found['title']}"


async def send(rt: Runtime, d: Draft) -> Sent:
    """Store the message in the team's dev mailbox as a fetch would, and queue its parse."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        box = await dev_mailbox(conn, rt.settings, d.team_id, now=now)
        box = await mailboxes.get(conn, box.id, lock=True) or box  # UIDs in order
        answered, subject = await _reply_target(conn, d, rt.settings.public_url)
        to = f"support+{d.team_id}@{DEV_HOST}"
        raw = build(
            Draft(**{**d.__dict__, "subject": subject}), to=to, now=now, in_reply_to=answered
        )
        uid = box.last_uid + 1 if box.uidvalidity == VALIDITY else 1
        await fetch.store_batch(conn, box, VALIDITY, [fetch.Fetched(uid, raw)], now=now)
        stored = await one(
            conn, "SELECT id FROM inbound_mail WHERE mailbox_id = %(b)s AND uidvalidity = %(v)s "
            "AND uid = %(u)s", {"b": box.id, "v": VALIDITY, "u": uid},
        )  # fmt: skip
        assert stored is not None
        task_id = await mailboxes.queue(conn, mailboxes.PARSE, box, run_at=now, now=now)
        if task_id is None:  # a parse is already active: it reads this message too
            active = await one(conn, _ACTIVE_PARSE, {"t": d.team_id, "s": mailboxes.scope(box.id)})
            task_id = int(active["id"]) if active else None
    await _kick(rt, task_id)
    return Sent(int(stored["id"]), box.id, task_id)


async def _kick(rt: Runtime, task_id: int | None) -> None:
    """Hand the parse to the queue now (the dispatcher would, a moment later)."""
    if task_id is None:
        return
    async with rt.engine.connect() as conn:
        task = await ledger_run.reread(conn, task_id)
    if task is not None:
        await send_now(rt, task)


async def status(rt: Runtime, inbound_id: int) -> Status:
    """A message sent from the page (only a dev mailbox's: any other answers as missing)."""
    async with rt.engine.connect() as conn:
        found = await one(
            conn, "SELECT i.id AS inbound_id, m.team_id, i.sender, i.received_at, i.parsed_at, "
            " i.outcome, i.problem, i.ticket_id FROM inbound_mail i JOIN mailbox m "
            " ON m.id = i.mailbox_id WHERE i.id = %(i)s AND m.host = %(h)s",
            {"i": inbound_id, "h": DEV_HOST},
        )  # fmt: skip
    if found is None:
        raise NotFound("No such message.")
    return Status(**found)


async def teams(rt: Runtime) -> list[dict[str, Any]]:
    """Every team (id, name): the form's choice (development only)."""
    async with rt.engine.connect() as conn:
        return await rows(conn, "SELECT id, name FROM team ORDER BY id LIMIT 500", {})
