"""Mail held for review (docs/architecture.md, "Mail in"): a staff-only mailbox's parse marks
mail from someone outside the team `held` instead of making them a customer; the team's admins
see those messages and accept the sender as a customer or discard the message.

Accepting and discarding are the gate's own release (`mail_review.release_held`, here scoped to
the admin's team): the sender's account made a customer through desk/people/senders.py, the row
turned back to unparsed and the mailbox's parse queued, all in one transaction, each a
conditional UPDATE on `outcome = 'held'` — two admins clicking at once act once; the loser is
told it is gone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.parser import BytesHeaderParser
from email.policy import default as default_policy
from typing import Any

from desk.core.inputs import optional_id
from desk.core.runtime import Runtime
from desk.ledger.sql import one, rows
from desk.work import mail_review, mailbox_admin

LIST_MAX = 100
_HEAD_BYTES = 16_384  # the headers are near the top; nothing more is parsed to list a message

_HELD = (
    "SELECT i.id, i.mailbox_id, i.sender, i.received_at, i.problem, "
    " substring(i.raw from 1 for %(head)s) AS head FROM inbound_mail i "
    " JOIN mailbox m ON m.id = i.mailbox_id "
    "WHERE m.team_id = %(t)s AND i.outcome = 'held' ORDER BY i.id DESC LIMIT %(n)s"
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
    """The sender becomes a customer and the message is parsed again (desk/work/mail_review.py,
    the gate's own release); the mailbox's id."""
    return (await _release(rt, user_id, team_id, inbound_id, as_customer=True)).mailbox_id


async def discard(rt: Runtime, user_id: int, team_id: object, inbound_id: object) -> None:
    """Kept raw, marked discarded: it no longer shows in the list and never becomes a ticket."""
    await _release(rt, user_id, team_id, inbound_id, as_customer=False)


async def _release(
    rt: Runtime, user_id: int, team_id: object, inbound_id: object, *, as_customer: bool
) -> mail_review.Released:
    async with rt.engine.begin() as conn:
        team = await mailbox_admin.require_admin(conn, user_id, team_id)
        return await mail_review.release_held(
            conn, _id(inbound_id), as_customer=as_customer, by=user_id, now=rt.clock(),
            team_id=team,
        )  # fmt: skip


def _id(value: object) -> int:
    return optional_id(value) or 0
