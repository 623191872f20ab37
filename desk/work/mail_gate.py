"""What stops a fetched mail before it makes anything (docs/architecture.md, "Mail in", No
loops, no spam storms): a Message-ID this mailbox already read (a server that renumbered its
UIDs delivers the same mail again), a sender flooding the mailbox, a stranger writing to a
staff-only mailbox, and a sender's replies to one ticket repeating as a mail loop does.

Each is decided from the mailbox's own rows (`inbound_mail`, its index on (mailbox, sender,
received_at)): the sender's messages counted over the window that ends at this one's arrival,
in arrival order, so a burst fetched in one batch is judged as it was sent, whichever parse reads
it. The duplicate check runs in the transaction that makes the ticket or reply, under a
transaction lock on (mailbox, Message-ID), so two parsers of two copies make one ticket.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.mail_models import InboundOutcome
from desk.core.settings import Settings
from desk.helpdesk import notifications
from desk.ledger.sql import Db, execute, one, rows

# A sender's replies to one ticket within the flood window beyond this many are a loop (two
# auto-responders answering each other with the headers that say so stripped): marked automatic.
LOOP_REPLIES = 5
NOTICE = "mail_throttled"

_LOCK = "SELECT pg_advisory_xact_lock(%(b)s, hashtext(%(m)s))"
_EARLIER = (
    "SELECT id, ticket_id FROM inbound_mail WHERE mailbox_id = %(b)s AND message_id = %(m)s "
    "AND id <> %(id)s AND parsed_at IS NOT NULL ORDER BY id LIMIT 1"
)
# The sender's earlier messages in the window (capped: only "more than the limit" matters),
# whether one of them was throttled already (then the admins heard), and their earlier replies
# to the hinted ticket; the mailbox's staff-only flag and whether the sender is in its team.
_LOOK = (
    "SELECT m.staff_only, m.team_id, "
    " (SELECT count(*) FROM (SELECT 1 FROM inbound_mail i WHERE i.mailbox_id = m.id "
    "  AND i.sender = %(k)s AND i.received_at > %(since)s AND i.received_at <= %(at)s "
    "  AND i.id < %(id)s LIMIT %(cap)s) c) AS recent, "
    " EXISTS (SELECT 1 FROM inbound_mail i WHERE i.mailbox_id = m.id AND i.sender = %(k)s "
    "  AND i.received_at > %(since)s AND i.id < %(id)s AND i.outcome = 'throttled') AS noticed, "
    " (SELECT count(*) FROM (SELECT 1 FROM inbound_mail i WHERE i.mailbox_id = m.id "
    "  AND i.sender = %(k)s AND i.received_at > %(since)s AND i.id < %(id)s "
    "  AND i.ticket_id = %(t)s AND i.outcome = 'reply' LIMIT %(loop)s) c) AS replies, "
    " EXISTS (SELECT 1 FROM app_user u JOIN membership ms ON ms.user_id = u.id "
    "  AND ms.team_id = m.team_id WHERE lower(u.email) = %(s)s) AS member "
    "FROM mailbox m WHERE m.id = %(b)s"
)
_ADMINS = "SELECT user_id FROM membership WHERE team_id = %(t)s AND role = 'ADMIN' ORDER BY user_id"


@dataclass(frozen=True)
class Stop:
    outcome: str
    problem: str
    ticket_id: int | None = None
    notify: bool = False  # the first throttled message of a flood: tell the admins


@dataclass(frozen=True)
class Row:
    """The stored facts of one fetched message the gates need."""

    id: int
    mailbox_id: int
    message_id: str | None
    received_at: datetime
    # The From address as the fetch stored it: what the flood and loop counts match on, the
    # same column they count over (a Reply-To of its own cannot hide a flood).
    sender: str | None = None


async def duplicate(db: Db, row: Row) -> Stop | None:
    """A parsed copy of this Message-ID in the mailbox; takes the (mailbox, Message-ID) lock
    until the caller's transaction ends, so call it before making anything."""
    if not row.message_id:
        return None
    params = {"b": row.mailbox_id, "m": row.message_id, "id": row.id}
    if isinstance(db, psycopg.AsyncConnection):  # pipelined: read the answers as we go
        await execute(db, _LOCK, params)
        cursor = db.cursor(row_factory=dict_row)
        await cursor.execute(_EARLIER, params)
        earlier: dict[str, Any] | None = await cursor.fetchone()
    else:
        await rows(db, _LOCK, params)
        earlier = await one(db, _EARLIER, params)
    if earlier is None:
        return None
    said = f"the same Message-ID as fetched message {earlier['id']}"
    return Stop(InboundOutcome.DUPLICATE, said, earlier["ticket_id"])


async def stopped(
    db: Db, settings: Settings, row: Row, sender: str, ticket_hint: int | None
) -> Stop | None:
    """Why this sender's mail makes nothing now — throttled, held, a loop — or None."""
    window = settings.inbound_flood_window_seconds
    cap = settings.inbound_flood_max
    params = {
        "b": row.mailbox_id, "s": sender, "k": row.sender or sender, "id": row.id, "at": row.received_at,
        "since": row.received_at - timedelta(seconds=window), "cap": cap,
        "t": ticket_hint, "loop": LOOP_REPLIES,
    }  # fmt: skip
    look = await one(db, _LOOK, params)
    if look is None:
        return None
    if look["recent"] >= cap:
        said = f"more than {cap} messages from {sender} in {window} s"
        return Stop(InboundOutcome.THROTTLED, said, notify=not look["noticed"])
    if look["staff_only"] and not look["member"]:
        return Stop(InboundOutcome.HELD, f"{sender} is not in the team: held for review")
    if ticket_hint is not None and look["replies"] >= LOOP_REPLIES:
        said = f"loop guard: more than {LOOP_REPLIES} replies from {sender} to ticket in {window} s"
        return Stop(InboundOutcome.AUTOMATIC, said)
    return None


async def notify_admins(
    conn: AsyncConnection, settings: Settings, team_id: int, mailbox_id: int, sender: str
) -> int:
    """One in-app notice to the team's admins that a sender's flood is being throttled."""
    admins = [int(r["user_id"]) for r in await rows(conn, _ADMINS, {"t": team_id})]
    text = (
        f"Mail from {sender} to mailbox {mailbox_id} is over {settings.inbound_flood_max} "
        f"messages in {settings.inbound_flood_window_seconds} s: the rest is kept, not read."
    )
    return await notifications.insert_many(
        conn, user_ids=admins, team_id=team_id, task_id=None, kind=NOTICE, text=text,
        link=f"/mailboxes/{mailbox_id}",
    )  # fmt: skip
