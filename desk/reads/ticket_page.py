"""Everything a ticket's page shows, read in ONE statement (docs/architecture.md,
"Conversation"): the ticket and the reader's role, the thread's opening window (its newest
messages, their files, their e-mails' delivery for staff, the history among them, the names in
it), the team's people for the Details block, and for staff the ticket's reminders.

The page used to ask these one by one through SQLAlchemy (14 statements, a round trip and a
pool ping each), then as 9 pipelined statements in a read-only snapshot, each computing the
visibility check and the window again. Here CTEs compute them once (`r`: the ticket, only when
the reader may see it; `w`/`s`: the window; `h`: the history in it) and the answer is one row:
the ticket's columns, each part of many rows as a JSON array of positional arrays, and the
pending reminder's columns. One statement is one snapshot, so no transaction is needed.

The rules are those of the reads they replace — `conversation.read_thread`,
`tickets.team_members`, `reminders.pending_reminder`, `tasks.list_tasks` — and every part reads
through `r`: a ticket the reader may not see answers no row at all (NotFound, as a missing
one), and a note, its files and its delivery states are never read for a customer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from desk.core.errors import NotFound
from desk.core.models import Role, Ticket
from desk.core.pg import Pg
from desk.core.rows import TaskRow
from desk.helpdesk import attachments, thread
from desk.helpdesk.attachments import Attachment
from desk.helpdesk.tickets import TICKET_COLUMNS
from desk.people import access, sessions
from desk.reads import tasks
from desk.reads.conversation import HISTORY_WINDOW, Delivery, ThreadView, delivery_state
from desk.reads.json_rows import converter, decoder, json_array
from desk.reads.tasks import SessionView, TaskPage

REMINDERS_SHOWN = 5  # the reminder box's "Earlier reminders" (ui/reminders_box.py HISTORY)

_TICKET_NAMES = [c.strip().removeprefix("t.") for c in TICKET_COLUMNS.split(",")]
_N_TICKET = len(_TICKET_NAMES)


def _bare(columns: str) -> list[str]:
    return [c.strip() for c in columns.split(",")]


# `r`: the ticket, only when the reader may see it (access.can_see_ticket), with their role.
# The ticket's own id in the index conditions below (not r's: the planner then walks the
# (ticket_id, id) index backwards for the window instead of reading the whole thread and sorting
# it); `r` gates them as one-time filters (InitPlans), computed once for the whole statement.
# `w`, the window (`thread.messages(latest=True)`): the newest `wlim` = first + 1 messages the
# reader may see (the one beyond `first` says there are earlier ones); `s`, the ones shown.
# `h`, the history shown among them (`conversation._history_between` for the newest window):
# from the first message shown on when there are earlier ones, else all of it.
_CTES = f"""r AS (
 SELECT t.id, t.team_id, m.role, m.role IN ('ADMIN', 'STAFF') AS staff FROM ticket t
 JOIN membership m ON m.team_id = t.team_id AND m.user_id = %(u)s
 WHERE t.id = %(t)s AND (m.role IN ('ADMIN', 'STAFF') OR t.creator_id = %(u)s)),
w AS (SELECT {thread.MESSAGE_COLUMNS} FROM ticket_message m
 WHERE m.ticket_id = %(t)s AND EXISTS (SELECT FROM r) AND ((SELECT staff FROM r) OR NOT m.internal)
 ORDER BY m.id DESC LIMIT %(wlim)s),
s AS (SELECT * FROM w ORDER BY id DESC LIMIT %(first)s),
h AS (SELECT {thread.CHANGE_COLUMNS} FROM ticket_history h
 WHERE h.ticket_id = %(t)s AND EXISTS (SELECT FROM r) AND ((SELECT count(*) FROM w) <= %(first)s
 OR h.at >= (SELECT created_at FROM s ORDER BY id LIMIT 1)) ORDER BY h.id LIMIT %(hlim)s)"""

_MESSAGES = f"(SELECT {json_array(_bare(thread.MESSAGE_COLUMNS), 'm.id DESC')} FROM w m)"
_FILES = (
    f"(SELECT {json_array(_bare(attachments.COLUMNS), 'a.message_id, a.id')} "
    "FROM message_attachment a WHERE a.message_id IN (SELECT id FROM s))"
)
# Staff only: a customer's statement reads no delivery (the `r.staff` filter comes first).
_DELIVERY_COLUMNS = [
    "e.message_id", "b.id", "e.recipient_id", "coalesce(u.display_name, '')", "b.status",
    "b.attempts", "b.last_error",
]  # fmt: skip
_DELIVERIES = (
    f"(SELECT {json_array(_DELIVERY_COLUMNS, 'e.message_id, b.id')} FROM message_email e "
    "JOIN background_task b ON b.id = e.task_id LEFT JOIN app_user u ON u.id = e.recipient_id "
    "WHERE r.staff AND e.message_id IN (SELECT id FROM s))"
)
_CHANGES = f"(SELECT {json_array(_bare(thread.CHANGE_COLUMNS), 'h.id')} FROM h)"
# Authors, redactors, actors and assignees named in the window (they may have left the team).
_NAMES = (
    f"(SELECT {json_array(['n.id', 'n.display_name'], 'n.id')} FROM app_user n WHERE n.id IN ("
    "SELECT author_id FROM s UNION SELECT redacted_by FROM s UNION SELECT actor_id FROM h "
    "UNION SELECT CAST(x.v AS bigint) FROM h, LATERAL (VALUES (h.old_value), (h.new_value)) "
    "x(v) WHERE h.field = 'assignee' AND x.v ~ '^[0-9]{1,18}$'))"
)
# `tickets.team_members`: a customer sees the staff and themselves, and no one else's address.
_MEMBER_COLUMNS = [
    "u.id", "u.display_name", "CASE WHEN r.staff OR u.id = %(u)s THEN u.email ELSE '' END",
    "m.role",
]  # fmt: skip
_MEMBERS = (
    f"(SELECT {json_array(_MEMBER_COLUMNS, 'u.display_name, u.id')} FROM membership m "
    "JOIN app_user u ON u.id = m.user_id WHERE m.team_id = r.team_id "
    "AND (r.staff OR m.role <> 'CUSTOMER' OR u.id = %(u)s))"
)
# Staff only: the ticket's reminders as `tasks.list_tasks(kind=REMINDER, ticket_id=…)` lists
# them (a customer's team is NULL here: no membership row, nothing read).
_STAFF_TEAM = sql.SQL("(SELECT team_id FROM r WHERE staff)")
_RECENT = sql.SQL("(SELECT {agg} FROM ({listed}) l)").format(
    agg=sql.SQL(json_array([f"l.{c}" for c in tasks.LIST_ROW], "l.id DESC NULLS FIRST")),
    listed=tasks.list_sql(tasks.U, _STAFF_TEAM, ("kind", "ticket"), exists=False),
)
# `reminders.pending_reminder`: the ticket's active reminder, staff only (its columns as they are).
_PENDING = sql.SQL(
    "LEFT JOIN LATERAL (SELECT {cols} FROM background_task t WHERE r.staff "
    "AND t.team_id = r.team_id AND t.kind = 'REMINDER' AND t.scope_key = 'ticket:' || r.id "
    "AND t.status IN ('WAITING', 'RUNNING') LIMIT 1) p ON true"
).format(cols=tasks.task_columns())

_ROW = (
    f"SELECT {TICKET_COLUMNS}, r.role, "
    + ", ".join([_MESSAGES, _FILES, _DELIVERIES, _CHANGES, _NAMES, _MEMBERS, tasks.render(_RECENT)])
    + ", p.* FROM r JOIN ticket t ON t.id = r.id " + tasks.render(_PENDING)
)  # fmt: skip
# Run through `Pg.row`: prepared after its first runs on a connection, and PostgreSQL then settles
# on its generic plan by itself (planning it takes ~2 ms, running it well under one). Forcing that
# plan from the first run took a SET and a RESET around every load, ~0.2 ms of each in the
# pipeline's Python, to spare a pooled connection's first dozen loads their planning.
STATEMENT = f"WITH {_CTES} {_ROW}"
# The page with the session's viewer first (`tasks.viewer` with teams, as whole pages read it):
# its user is the reader, and a ticket they may not see leaves the page's columns NULL.
_ME = "(SELECT id FROM me)"
WITH_SESSION = (
    f"WITH me AS ({tasks.viewer_sql(True, False)}), {_CTES.replace('%(u)s', _ME)} "
    f"SELECT me.*, x.* FROM me LEFT JOIN LATERAL ({_ROW.replace('%(u)s', _ME)}) x ON true"
)
_N_SESSION = 2 + len(tasks.PERSON_COLUMNS)  # csrf, the person, the teams

_message = decoder(thread.Message)
_file = decoder(Attachment)
_change = decoder(thread.Change)
_task_values = converter(TaskRow)  # a reminder row's TaskRow columns, in place


@dataclass
class TicketPage:
    view: ThreadView
    members: list[tuple[int, str, str, str]]  # as `tickets.team_members` answers
    pending: TaskRow | None  # staff only
    reminders: TaskPage | None  # staff only: the ticket's latest reminders


def _params(ticket_id: int, first: int) -> dict[str, Any]:
    # `lim` is the reminder list's (`tasks.list_sql`): one more than it shows, as list_tasks.
    return {"t": ticket_id, "first": first, "wlim": first + 1, "hlim": HISTORY_WINDOW,
            "kind": "REMINDER", "ticket": ticket_id, "lim": REMINDERS_SHOWN + 2}  # fmt: skip


async def read_page(pg: Pg, user_id: int, ticket_id: int, *, first: int = 50) -> TicketPage:
    """The ticket's page as `user_id` may see it, opening on its newest `first` messages;
    NotFound when the ticket is missing or not theirs (as `tickets.visible_ticket`)."""
    row = await pg.row(STATEMENT, _params(ticket_id, first) | {"u": user_id})
    found = _page_of(row, user_id, first) if row is not None else None
    if found is None:
        raise NotFound("Ticket not found.")
    return found


async def read_with_session(
    pg: Pg, secret: str, now: datetime, ticket_id: int, *, first: int = 50
) -> tuple[SessionView | None, TicketPage | None]:
    """The live session behind a cookie's secret, as `tasks.viewer(teams=True)` reads it, and
    the ticket's page as its user may see it (`read_page`), in one statement: (None, None)
    without a live session, (the session, None) when the ticket is missing or not theirs."""
    if not secret or len(secret) > 128:
        return None, None
    params = _params(ticket_id, first) | {"sid": sessions.session_digest(secret), "now": now}
    row = await pg.row(WITH_SESSION, params)
    if row is None:
        return None, None
    found = tasks.session_view(row[:_N_SESSION], teams=True)
    page = row[_N_SESSION:]
    return found, _page_of(page, found.person.id, first) if page[0] is not None else None


def _page_of(row: Sequence[Any], user_id: int, first: int) -> TicketPage | None:
    """The page part of a row (`_ROW`'s columns); None when `user_id` may not see the ticket."""
    ticket = Ticket(**dict(zip(_TICKET_NAMES, row[:_N_TICKET], strict=True)))
    member = access.Member(user_id, ticket.team_id, Role(row[_N_TICKET]))
    if not access.can_see_ticket(member, ticket.creator_id):  # `r` checked it; so does Python
        return None
    messages, files, mailed, changes, names, members, recent = (
        part or [] for part in row[_N_TICKET + 1 : _N_TICKET + 8]
    )
    pending = row[_N_TICKET + 8 :]
    view = ThreadView(ticket, member, _window([_message(m) for m in messages], first))
    view.files = _by_message([_file(a) for a in files], [m.id for m in view.messages.items])
    if member.is_staff:
        view.deliveries = _deliveries(mailed, view.messages.items)
    view.history = [_change(c) for c in changes]
    view.names = {uid: name for uid, name in names}
    staff = member.is_staff
    return TicketPage(
        view,
        [(r[0], r[1], r[2], r[3]) for r in members],
        TaskRow(*pending) if staff and pending[0] is not None else None,
        _reminders(recent) if staff else None,
    )


def _reminders(rows: list[list[Any]]) -> TaskPage:
    """The reminder list's rows (`tasks.LIST_ROW`, JSON) as `tasks.page_of` takes them."""
    for r in rows:
        _task_values(r)
    return tasks.page_of(rows, REMINDERS_SHOWN + 1)


def _window(items: list[thread.Message], first: int) -> thread.Page[thread.Message]:
    shown = items[:first]
    shown.reverse()
    return thread.Page(shown, has_next=False, has_previous=len(items) > first)


def _by_message(files: list[Attachment], ids: list[int]) -> dict[int, list[Attachment]]:
    out: dict[int, list[Attachment]] = {m: [] for m in ids}
    for a in files:
        out.setdefault(a.message_id or 0, []).append(a)
    return out


def _deliveries(rows: list[list[Any]], shown: list[thread.Message]) -> dict[int, list[Delivery]]:
    out: dict[int, list[Delivery]] = {m.id: [] for m in shown}
    for message_id, task_id, recipient, name, status, attempts, error in rows:
        state = delivery_state(status, attempts)
        reply = error if state in ("retrying", "failed") else None
        out.setdefault(message_id, []).append(
            Delivery(task_id, recipient, name, state, reply, attempts)
        )
    return out
