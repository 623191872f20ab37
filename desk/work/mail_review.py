"""Mail held for review (docs/architecture.md, "Mail in"): a stranger's mail to a staff-only
mailbox is kept raw as `held`, with no ticket and no account made, until an admin of the team
accepts it — the sender becomes a customer and the mail is read again by the mailbox's parse,
as if it had just come — or discards it (kept raw, marked `discarded`). Either is one
conditional UPDATE … WHERE outcome = 'held' RETURNING, so a second click changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from desk.core.errors import NotFound
from desk.core.mail_models import InboundOutcome
from desk.helpdesk import inbound
from desk.ledger.sql import one
from desk.people import senders
from desk.work import mailboxes

# The held row and its team, found only for an admin of that team: anyone else is told it does
# not exist, exactly as for a missing one.
_HELD = (
    "SELECT i.id, i.mailbox_id, i.raw, b.team_id FROM inbound_mail i "
    "JOIN mailbox b ON b.id = i.mailbox_id JOIN membership ms ON ms.team_id = b.team_id "
    " AND ms.user_id = %(by)s AND ms.role = 'ADMIN' "
    "WHERE i.id = %(id)s AND i.outcome = 'held' "
    " AND (%(team)s::int IS NULL OR b.team_id = %(team)s::int) FOR UPDATE OF i"
)
_ACCEPT = (
    "UPDATE inbound_mail SET parsed_at = NULL, outcome = NULL, "
    " problem = %(why)s WHERE id = %(id)s AND outcome = 'held' RETURNING id"
)
_DISCARD = (
    "UPDATE inbound_mail SET outcome = 'discarded', parsed_at = %(now)s, problem = %(why)s "
    "WHERE id = %(id)s AND outcome = 'held' RETURNING id"
)


_GONE = "Held message not found."


@dataclass(frozen=True)
class Released:
    inbound_id: int
    outcome: str  # "accepted" (to be read again by the queued parse) or "discarded"
    mailbox_id: int
    customer_id: int | None = None
    parse_task_id: int | None = None  # None: the mailbox's parse was already queued


async def release_held(
    db: senders.Conn,
    inbound_id: int,
    *,
    as_customer: bool,
    by: int,
    now: datetime,
    team_id: int | None = None,
) -> Released:
    """Accept (`as_customer`) or discard one held mail, in the caller's transaction. NotFound
    when it is not held, not in `team_id`'s mailboxes (when given), or `by` is not an admin of
    its mailbox's team. `db` is a transaction
    (SQLAlchemy or psycopg), never the autocommit pool: the sender's account, the row and the
    queued parse commit together."""
    found = await one(db, _HELD, {"id": inbound_id, "by": by, "team": team_id})
    if found is None:
        raise NotFound(_GONE)
    if not as_customer:
        why = f"discarded by user {by}"
        await one(db, _DISCARD, {"id": inbound_id, "now": now, "why": why})
        return Released(inbound_id, InboundOutcome.DISCARDED, found["mailbox_id"])
    mail = inbound.read(bytes(found["raw"]), max_files=0, max_file_bytes=0)
    if "@" not in mail.sender:
        raise NotFound(_GONE)  # never held: a held mail has a sender
    customer = await senders.customer_for(db, found["team_id"], mail.sender, mail.sender_name)
    await one(db, _ACCEPT, {"id": inbound_id, "why": f"accepted by user {by}"})
    box = await mailboxes.get(db, found["mailbox_id"])
    assert box is not None
    task = await mailboxes.queue(db, mailboxes.PARSE, box, run_at=now, now=now)
    return Released(inbound_id, "accepted", found["mailbox_id"], customer, task)
