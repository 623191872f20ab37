"""The SQL of posting a message (desk/work/conversation.py, docs/architecture.md,
"Conversation"): what a post needs to know, read in one statement with the ticket locked, and
the message with the ticket change it makes, written in one more. Both run on the psycopg
connection of the post's transaction; a post is on every reply's path, so it costs as few round
trips as the rows it writes allow (the bench row conversation-post compares it with bare
INSERTs of the same rows)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from desk.core.models import Role, Ticket
from desk.core.pg import fetched, send
from desk.helpdesk.thread import Change, Message
from desk.helpdesk.tickets import TICKET_COLUMNS
from desk.people.access import Member

# The people a public message e-mails: staff writing reach the ticket's customer (customers
# always get replies to their own tickets; a staff creator only by preference); a customer
# writing reaches the assignee, or every staff member of the team while nobody is assigned —
# each by their preference. An internal note reaches nobody.
_RECIPIENTS = (
    "SELECT array_agg(u.id ORDER BY u.id) AS r_ids, array_agg(u.email ORDER BY u.id) AS r_emails,"
    " array_agg(u.locale ORDER BY u.id) AS r_locales,"
    " array_agg(u.timezone ORDER BY u.id) AS r_zones "
    "FROM membership rm JOIN app_user u ON u.id = rm.user_id "
    "LEFT JOIN notification_preference p ON p.user_id = u.id "
    "WHERE rm.team_id = t.team_id AND u.id <> %(u)s AND NOT %(internal)s AND ("
    " (m.role <> 'CUSTOMER' AND u.id = t.creator_id "
    "  AND (rm.role = 'CUSTOMER' OR coalesce(p.ticket_reply_email, true))) "
    " OR (m.role = 'CUSTOMER' AND rm.role <> 'CUSTOMER' AND coalesce(p.ticket_reply_email, true) "
    "  AND (u.id = t.assignee_id OR t.assignee_id IS NULL)))"
)
# The ticket (locked: posts to one ticket take turns), the writer's role in its team, the
# thread's first and latest public messages (the new one's References and In-Reply-To), the
# names its e-mail shows, the new message's id, and who hears of it.
READ = (
    f"SELECT {TICKET_COLUMNS}, m.role, "
    " (SELECT min(id) FROM ticket_message WHERE ticket_id = t.id AND NOT internal) AS root,"
    " (SELECT max(id) FROM ticket_message WHERE ticket_id = t.id AND NOT internal) AS parent,"
    " (SELECT display_name FROM app_user WHERE id = %(u)s) AS author_name,"
    " (SELECT name FROM team WHERE id = t.team_id) AS team_name,"
    " nextval(pg_get_serial_sequence('ticket_message', 'id')) AS message_id,"
    # Whether its SLA timers are planned again after the post (docs/architecture.md, "Business
    # hours"): folded in here, so a team without a policy pays no statement for it.
    " (t.sla_due_at IS NOT NULL OR EXISTS (SELECT 1 FROM team_sla_policy p"
    "  WHERE p.team_id = t.team_id)) AS sla, r.* "
    "FROM ticket t LEFT JOIN membership m ON m.team_id = t.team_id AND m.user_id = %(u)s "
    f"LEFT JOIN LATERAL ({_RECIPIENTS}) r ON true "
    "WHERE t.id = %(t)s FOR UPDATE OF t"
)
# The message; the ticket's figures (a public one counts, the first staff reply to another's
# ticket is its first response) and the status it sets; that status change in the history.
WRITE = f"""
WITH msg AS (
  INSERT INTO ticket_message (id, ticket_id, team_id, author_id, internal, body, created_at)
  VALUES (%(id)s, %(t)s, %(team)s, %(a)s, %(internal)s, %(body)s, %(now)s)
),
h AS (
  INSERT INTO ticket_history (ticket_id, team_id, actor_id, at, field, old_value, new_value)
  SELECT %(t)s, %(team)s, %(a)s, %(now)s, 'status', %(old)s, %(status)s::text
  WHERE %(status)s::text IS NOT NULL
  RETURNING id
),
tk AS (
  UPDATE ticket t SET
   message_count = message_count + CASE WHEN %(internal)s THEN 0 ELSE 1 END,
   last_public_reply_at = CASE WHEN %(internal)s THEN last_public_reply_at ELSE %(now)s END,
   first_response_at = CASE WHEN NOT %(internal)s AND %(staff)s AND first_response_at IS NULL
    AND creator_id <> %(a)s THEN %(now)s ELSE first_response_at END,
   status = coalesce(%(status)s::text, status), updated_at = %(now)s,
   status_since = CASE WHEN %(status)s::text <> status THEN %(now)s ELSE status_since END,
   revision = revision + CASE WHEN NOT %(internal)s OR %(status)s::text <> status THEN 1 ELSE 0 END
  WHERE t.id = %(t)s AND (NOT %(internal)s OR %(status)s::text IS NOT NULL)
  RETURNING {TICKET_COLUMNS}
)
SELECT tk.*, (SELECT id FROM h) AS history_id FROM tk
"""
_TICKET_KEYS = [c.strip().removeprefix("t.") for c in TICKET_COLUMNS.split(",")]


@dataclass(frozen=True)
class Recipient:
    id: int
    email: str
    locale: str
    timezone: str


@dataclass(frozen=True)
class Context:
    """What a post needs to know, read with the ticket locked (`READ`)."""

    ticket: Ticket
    member: Member | None  # None: the writer is not in the ticket's team
    root: int | None
    parent: int | None
    author_name: str
    team_name: str
    message_id: int  # the new message's id, taken from its sequence
    recipients: list[Recipient]
    sla: bool = False  # the team has an SLA policy (or the ticket still carries a due time)


def _ticket(row: dict[str, Any]) -> Ticket:
    return Ticket(**{k: row[k] for k in _TICKET_KEYS})


async def read(
    conn: psycopg.AsyncConnection[Any], user_id: int, ticket_id: int, *, internal: bool
) -> Context | None:
    """The post's context, or None when the ticket does not exist."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(READ, {"u": user_id, "t": ticket_id, "internal": internal})
    row = await cur.fetchone()
    if row is None:
        return None
    ticket = _ticket(row)
    member = Member(user_id, ticket.team_id, Role(row["role"])) if row["role"] else None
    recipients = [
        Recipient(*r)
        for r in zip(row["r_ids"] or [], row["r_emails"] or [], row["r_locales"] or [],
                     row["r_zones"] or [], strict=True)
    ]  # fmt: skip
    return Context(ticket, member, row["root"], row["parent"], row["author_name"] or "",
                   row["team_name"] or "", row["message_id"], recipients, row["sla"])  # fmt: skip


async def write(
    conn: psycopg.AsyncConnection[Any],
    ctx: Context,
    *,
    body: str,
    internal: bool,
    status: str | None,
    now: datetime,
) -> Written:
    """The message (id `ctx.message_id`) and what it changes on the ticket, in one statement;
    `status` is the status it sets (None: unchanged). Sent, not waited for (`sql.send`):
    `Written.result` reads it."""
    t, member = ctx.ticket, ctx.member
    assert member is not None and t.id is not None
    params = {
        "id": ctx.message_id, "t": t.id, "team": t.team_id, "a": member.user_id,
        "internal": internal, "body": body, "now": now, "staff": member.is_staff,
        "status": status, "old": t.status,
    }  # fmt: skip
    message = Message(ctx.message_id, t.id, t.team_id, member.user_id, internal, body, 0, now,
                      None, None)  # fmt: skip
    return Written(message, ctx, status, await send(conn, WRITE, params))


@dataclass(frozen=True)
class Written:
    message: Message
    ctx: Context
    status: str | None
    cursor: Any

    async def result(self) -> tuple[Ticket, list[Change]]:
        """The ticket as the message left it, and the history entry of the status it set."""
        found = await fetched(self.cursor)
        t, m = self.ctx.ticket, self.message
        if not found:  # a note that sets nothing leaves the ticket as it was
            return t, []
        row = found[0]
        changes = []
        if row["history_id"] is not None:
            changes.append(Change(row["history_id"], m.ticket_id, m.author_id, m.created_at,
                                  "status", t.status, self.status))  # fmt: skip
        return _ticket(row), changes
