"""Mail held for review (docs/architecture.md, "Mail in"): a staff-only mailbox's parse marks
mail from someone outside the team `held` instead of making them a customer; the team's admins
see those messages and accept the sender as a customer or discard the message.

Accepting makes the sender's account (by address, no password: they write by mail) a customer
of the team, turns the row back to unparsed and queues the mailbox's parse, all in one
transaction — the parse (desk/work/mail_parse.py) then reads it as any other message from a
customer, with its own exactly-once claim. Each action is a conditional UPDATE on
`outcome = 'held'`, so two admins clicking at once act once; the loser is told it is gone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.parser import BytesHeaderParser
from email.policy import default as default_policy
from typing import Any

from desk.core.errors import NotFound
from desk.core.inputs import optional_id
from desk.core.mail_models import InboundOutcome
from desk.core.runtime import Runtime
from desk.ledger.sql import one, rows
from desk.work import mailbox_admin, mailboxes

LIST_MAX = 100
_HEAD_BYTES = 16_384  # the headers are near the top; nothing more is parsed to list a message

_HELD = (
    "SELECT i.id, i.mailbox_id, i.sender, i.received_at, i.problem, "
    " substring(i.raw from 1 for %(head)s) AS head FROM inbound_mail i "
    " JOIN mailbox m ON m.id = i.mailbox_id "
    "WHERE m.team_id = %(t)s AND i.outcome = 'held' ORDER BY i.id DESC LIMIT %(n)s"
)
_REOPEN = (
    "UPDATE inbound_mail i SET parsed_at = NULL, outcome = NULL, problem = NULL "
    "FROM mailbox m WHERE i.id = %(id)s AND i.outcome = 'held' AND m.id = i.mailbox_id "
    " AND m.team_id = %(t)s RETURNING i.mailbox_id, i.sender"
)
_DISCARD = (
    "UPDATE inbound_mail i SET outcome = %(discarded)s FROM mailbox m WHERE i.id = %(id)s "
    " AND i.outcome = 'held' AND m.id = i.mailbox_id AND m.team_id = %(t)s RETURNING i.id"
)
_ACCOUNT = (
    "INSERT INTO app_user (email, display_name) VALUES (%(e)s, %(n)s) "
    "ON CONFLICT ((lower(email))) DO UPDATE SET email = app_user.email RETURNING id"
)
_CUSTOMER = (
    "INSERT INTO membership (user_id, team_id, role) VALUES (%(u)s, %(t)s, 'CUSTOMER') "
    "ON CONFLICT DO NOTHING"
)


@dataclass(frozen=True)
class Held:
    id: int
    mailbox_id: int
    sender: str | None
    subject: str
    received_at: datetime
    problem: str | None


def _subject(head: bytes) -> str:
    try:
        parsed = BytesHeaderParser(policy=default_policy).parsebytes(head)
        return " ".join(str(parsed.get("subject", "")).split())[:200]
    except Exception:  # a header no parser reads is listed without its subject
        return ""


async def list_held(rt: Runtime, user_id: int, team_id: object) -> list[Held]:
    """The team's held messages, newest first (at most LIST_MAX)."""
    async with rt.engine.connect() as conn:
        team = await mailbox_admin.require_admin(conn, user_id, team_id)
        found = await rows(conn, _HELD, {"t": team, "n": LIST_MAX, "head": _HEAD_BYTES})
    return [_held(r) for r in found]


async def held_in(rt: Runtime, mailbox_id: int, inbound_id: object) -> bool:
    """Whether `inbound_id` is mail held in that mailbox (for faces that address held mail under
    its mailbox); no access check: accept and discard check the admin."""
    found = await one(
        rt.pg,
        "SELECT 1 AS x FROM inbound_mail WHERE id = %(id)s AND mailbox_id = %(m)s "
        " AND outcome = 'held'",
        {"id": _id(inbound_id), "m": mailbox_id},
    )
    return found is not None


def _held(r: dict[str, Any]) -> Held:
    return Held(
        r["id"], r["mailbox_id"], r["sender"], _subject(bytes(r["head"])), r["received_at"],
        r["problem"],
    )  # fmt: skip


async def accept(rt: Runtime, user_id: int, team_id: object, inbound_id: object) -> int:
    """The sender becomes a customer and the message is parsed again; the parse task's id (or
    the one already queued for the mailbox) is not returned — the mailbox id is."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        team = await mailbox_admin.require_admin(conn, user_id, team_id)
        row = await one(conn, _REOPEN, {"id": _id(inbound_id), "t": team})
        if row is None or not row["sender"]:
            raise NotFound("Held message not found.")
        sender = str(row["sender"])
        user = await one(conn, _ACCOUNT, {"e": sender, "n": sender.split("@")[0][:200]})
        assert user is not None
        await rows(conn, _CUSTOMER, {"u": user["id"], "t": team})
        box = await mailboxes.get(conn, int(row["mailbox_id"]))
        assert box is not None
        await mailboxes.queue(conn, mailboxes.PARSE, box, run_at=now, now=now)
        return box.id


async def discard(rt: Runtime, user_id: int, team_id: object, inbound_id: object) -> None:
    """Kept raw, marked discarded: it no longer shows in the list and never becomes a ticket."""
    async with rt.engine.begin() as conn:
        team = await mailbox_admin.require_admin(conn, user_id, team_id)
        params = {"id": _id(inbound_id), "t": team, "discarded": InboundOutcome.DISCARDED.value}
        if await one(conn, _DISCARD, params) is None:
            raise NotFound("Held message not found.")


def _id(value: object) -> int:
    return optional_id(value) or 0
