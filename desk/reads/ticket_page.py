"""Everything a ticket's page shows, read in one round trip (docs/architecture.md,
"Conversation"): the ticket and the reader's role, the thread's opening window (its newest
messages, their files, their e-mails' delivery for staff, the history among them, the names in
it), the team's people for the Details block, and for staff the ticket's reminders.

The page used to ask these one by one through SQLAlchemy (14 statements, a round trip and a
pool ping each); here they go down one connection as a pipeline, in one read-only snapshot, as
plain psycopg rows. The rules are those of the reads they replace — `conversation.read_thread`,
`tickets.team_members`, `reminders.pending_reminder`, `tasks.list_tasks` — and every statement
carries the visibility check itself (`_READER`): a ticket the reader may not see, or a note for
a customer, is never read, not only never shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from desk.core.db import stale_plan
from desk.core.errors import NotFound
from desk.core.models import Role, Ticket
from desk.core.pg import Pg
from desk.helpdesk import attachments, thread
from desk.helpdesk.attachments import Attachment
from desk.helpdesk.tickets import TICKET_COLUMNS
from desk.people import access
from desk.reads import tasks
from desk.reads.conversation import HISTORY_WINDOW, Delivery, ThreadView, delivery_state
from desk.reads.tasks import TaskPage, TaskRow

REMINDERS_SHOWN = 5  # the reminder box's "Earlier reminders" (ui/reminders_box.py HISTORY)

_TICKET_NAMES = [c.strip().removeprefix("t.") for c in TICKET_COLUMNS.split(",")]
_TICKET = (
    f"SELECT {TICKET_COLUMNS}, m.role FROM ticket t LEFT JOIN membership m "
    "ON m.team_id = t.team_id AND m.user_id = %(u)s WHERE t.id = %(t)s"
)
# The ticket, only when the reader may see it (access.can_see_ticket), with whether they are staff.
_READER = (
    "WITH r AS (SELECT t.id, t.team_id, m.role IN ('ADMIN', 'STAFF') AS staff FROM ticket t "
    "JOIN membership m ON m.team_id = t.team_id AND m.user_id = %(u)s "
    "WHERE t.id = %(t)s AND (m.role IN ('ADMIN', 'STAFF') OR t.creator_id = %(u)s))"
)
# The ticket's own id in the index conditions (not r's: the planner then walks the (ticket_id, id)
# index backwards for the window instead of reading the whole thread and sorting it).
# The window (`thread.messages(latest=True)`): the newest `wlim` = first + 1 messages the reader
# may see (the one beyond `first` says there are earlier ones); `s`, the ones shown.
_WINDOW = (
    _READER + f", w AS (SELECT {thread.MESSAGE_COLUMNS} FROM ticket_message m "
    "WHERE m.ticket_id = %(t)s AND EXISTS (SELECT FROM r) AND ((SELECT staff FROM r) "
    "OR NOT m.internal) ORDER BY m.id DESC LIMIT %(wlim)s), "
    "s AS (SELECT * FROM w ORDER BY id DESC LIMIT %(first)s)"
)
# The history shown among them (`conversation._history_between` for the newest window): from the
# first message shown on when there are earlier ones, else all of it.
_HISTORY = (
    _WINDOW + f", h AS (SELECT {thread.CHANGE_COLUMNS} FROM ticket_history h "
    "WHERE h.ticket_id = %(t)s AND EXISTS (SELECT FROM r) AND ((SELECT count(*) FROM w) <= %(first)s "
    "OR h.at >= (SELECT created_at FROM s ORDER BY id LIMIT 1)) ORDER BY h.id LIMIT %(hlim)s)"
)
_MESSAGES = _WINDOW + " SELECT * FROM w ORDER BY id DESC"
_FILES = (
    _WINDOW + f" SELECT {attachments.COLUMNS} FROM message_attachment a "
    "WHERE a.message_id IN (SELECT id FROM s) ORDER BY a.message_id, a.id"
)
_DELIVERIES = (
    _WINDOW + " SELECT e.message_id, b.id, e.recipient_id, coalesce(u.display_name, ''), "
    "b.status, b.attempts, b.last_error FROM message_email e "
    "JOIN background_task b ON b.id = e.task_id LEFT JOIN app_user u ON u.id = e.recipient_id "
    "WHERE e.message_id IN (SELECT id FROM s) AND (SELECT staff FROM r) "
    "ORDER BY e.message_id, b.id"
)
_CHANGES = _HISTORY + " SELECT * FROM h"
# Authors, redactors, actors and assignees named in the window (they may have left the team).
_NAMES = (
    _HISTORY + " SELECT id, display_name FROM app_user WHERE id IN ("
    "SELECT author_id FROM s UNION SELECT redacted_by FROM s UNION SELECT actor_id FROM h "
    "UNION SELECT CAST(x.v AS bigint) FROM h, LATERAL (VALUES (h.old_value), (h.new_value)) "
    "x(v) WHERE h.field = 'assignee' AND x.v ~ '^[0-9]{1,18}$')"
)
# `tickets.team_members`: a customer sees the staff and themselves, and no one else's address.
_MEMBERS = (
    _READER + " SELECT u.id, u.display_name, "
    "CASE WHEN r.staff OR u.id = %(u)s THEN u.email ELSE '' END, m.role "
    "FROM r JOIN membership m ON m.team_id = r.team_id JOIN app_user u ON u.id = m.user_id "
    "WHERE r.staff OR m.role <> 'CUSTOMER' OR u.id = %(u)s ORDER BY u.display_name"
)
# `reminders.pending_reminder`: the ticket's active reminder, staff only.
_PENDING = sql.SQL(
    _READER + " SELECT {cols} FROM r JOIN background_task t ON t.team_id = r.team_id "
    "AND t.kind = 'REMINDER' AND t.scope_key = 'ticket:' || r.id "
    "AND t.status IN ('WAITING', 'RUNNING') WHERE r.staff LIMIT 1"
).format(cols=tasks.task_columns())
_TEAM = sql.SQL("(SELECT team_id FROM ticket WHERE id = %(t)s)")


@dataclass
class TicketPage:
    view: ThreadView
    members: list[tuple[int, str, str, str]]  # as `tickets.team_members` answers
    pending: TaskRow | None  # staff only
    reminders: TaskPage | None  # staff only: the ticket's latest reminders


def _statements() -> list[str]:
    # The ticket's reminders as `tasks.list_tasks(kind=REMINDER, ticket_id=…)` lists them.
    recent = tasks.list_sql(tasks.U, _TEAM, ("kind", "ticket"), exists=False)
    return [
        _TICKET, _MESSAGES, _FILES, _DELIVERIES, _CHANGES, _NAMES, _MEMBERS,
        tasks.render(_PENDING), tasks.render(recent),
    ]  # fmt: skip


STATEMENTS = _statements()


async def _pipelined(pg: Pg, params: dict[str, Any]) -> list[list[tuple[Any, ...]]]:
    """Every statement's rows, once more after a stale plan (as `Pg`'s reads: a migration
    changed a prepared statement's result under this connection; nothing ran)."""
    async with pg.connection() as conn:
        try:
            return await _snapshot(conn, params)
        except psycopg.errors.FeatureNotSupported as exc:
            if not stale_plan(exc):
                raise
        await conn.execute("DEALLOCATE ALL")
        return await _snapshot(conn, params)


async def _snapshot(
    conn: psycopg.AsyncConnection[Any], params: dict[str, Any]
) -> list[list[tuple[Any, ...]]]:
    """One round trip, one read-only snapshot (a message posted meanwhile is in all of the
    answers or in none). Prepared from the first use on each connection: planning these
    statements costs more than running them, and a pooled connection would otherwise plan them
    afresh its first five times."""
    async with conn.pipeline(), conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursors = [conn.cursor(row_factory=tuple_row) for _ in STATEMENTS]
        for cursor, statement in zip(cursors, STATEMENTS, strict=True):
            await cursor.execute(statement, params, prepare=True)
        return [await c.fetchall() for c in cursors]


async def read_page(pg: Pg, user_id: int, ticket_id: int, *, first: int = 50) -> TicketPage:
    """The ticket's page as `user_id` may see it, opening on its newest `first` messages;
    NotFound when the ticket is missing or not theirs (as `tickets.visible_ticket`)."""
    # `lim` is the reminder list's (`tasks.list_sql`): one more than it shows, as list_tasks.
    params = {"u": user_id, "t": ticket_id, "first": first, "wlim": first + 1,
              "hlim": HISTORY_WINDOW, "kind": "REMINDER", "ticket": ticket_id,
              "lim": REMINDERS_SHOWN + 2}  # fmt: skip
    found = await _pipelined(pg, params)
    ticket_rows, messages, files, mailed, changes, names, members, pending, recent = found
    if not ticket_rows or ticket_rows[0][-1] is None:
        raise NotFound("Ticket not found.")
    row = ticket_rows[0]
    ticket = Ticket(**dict(zip(_TICKET_NAMES, row[:-1], strict=True)))
    member = access.Member(user_id, ticket.team_id, Role(row[-1]))
    if not access.can_see_ticket(member, ticket.creator_id):
        raise NotFound("Ticket not found.")
    view = ThreadView(ticket, member, _window(messages, first))
    view.files = _by_message([Attachment(*r) for r in files], [m.id for m in view.messages.items])
    if member.is_staff:
        view.deliveries = _deliveries(mailed, view.messages.items)
    view.history = [thread.Change(*r) for r in changes]
    view.names = dict(names)
    staff = member.is_staff
    return TicketPage(
        view,
        [(r[0], r[1], r[2], r[3]) for r in members],
        TaskRow(*pending[0]) if staff and pending else None,
        tasks.page_of(recent, REMINDERS_SHOWN + 1) if staff else None,
    )


def _window(rows: list[tuple[Any, ...]], first: int) -> thread.Page[thread.Message]:
    items = [thread.Message(*r) for r in rows[:first]]
    items.reverse()
    return thread.Page(items, has_next=False, has_previous=len(rows) > first)


def _by_message(files: list[Attachment], ids: list[int]) -> dict[int, list[Attachment]]:
    out: dict[int, list[Attachment]] = {m: [] for m in ids}
    for a in files:
        out.setdefault(a.message_id or 0, []).append(a)
    return out


def _deliveries(
    rows: list[tuple[Any, ...]], shown: list[thread.Message]
) -> dict[int, list[Delivery]]:
    out: dict[int, list[Delivery]] = {m.id: [] for m in shown}
    for message_id, task_id, recipient, name, status, attempts, error in rows:
        state = delivery_state(status, attempts)
        reply = error if state in ("retrying", "failed") else None
        out.setdefault(message_id, []).append(
            Delivery(task_id, recipient, name, state, reply, attempts)
        )
    return out
