"""Tickets: list (filtered, keyset-paged), read, create and update, with the visibility rules."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.db import retry_transient
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Priority, Role, Ticket, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import thread
from desk.helpdesk.filters import TicketFilter, filter_sql, to_pyformat
from desk.people import access

MAX_PAGE = 200
# Run in the transaction of a ticket's creation and of every clocked change, with (conn, ticket
# id, now): the SLA timers' replan, which desk/work/sla_timers.py registers here (a lower layer
# cannot import it); it answers the ticket's new (sla_due_at, sla_breached_at), or None.
Replan = Callable[[AsyncConnection, int, datetime], Awaitable[tuple[Any, Any] | None]]
REPLAN: list[Replan] = []
# A change to any of these is one an SLA timer or a time rule must see: it bumps the revision.
CLOCKED = frozenset({"status", "priority"})
TICKET_COLUMNS = (
    "t.id, t.team_id, t.title, t.body, t.status, t.priority, t.creator_id, t.assignee_id, "
    "t.reminder_revision, t.external_id, t.message_count, t.first_response_at, "
    "t.last_public_reply_at, t.revision, t.status_since, t.sla_due_at, t.sla_breached_at, "
    "t.created_at, t.updated_at"
)


# Above this many matches a list says "10,000+" instead of counting on: an exact count of a
# common word reads every matching row (52k for "invoice" on 1M tickets, ~100 ms).
COUNT_CAP = 10_000


@dataclass
class TicketPage:
    items: list[Ticket]
    total: int | None  # matches, at most COUNT_CAP; None when the caller did not ask
    end_cursor: str | None
    has_next: bool
    total_exact: bool = True  # False: there are more than `total` (= COUNT_CAP)


def encode_cursor(created_at: datetime, ticket_id: int) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{ticket_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """The (created_at, id) a cursor stands for; anything else is a ValidationProblem on `after`."""
    cursor = inputs.cursor("after", cursor)
    try:
        ts, _, tid = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        stamp = datetime.fromisoformat(ts)
    except (ValueError, UnicodeDecodeError):
        raise ValidationProblem("after", "not a cursor this list gave out") from None
    ticket_id = inputs.optional_id(tid)
    if ticket_id is None or stamp.tzinfo is None:
        raise ValidationProblem("after", "not a cursor this list gave out")
    return stamp, ticket_id


def _ticket(row: Any) -> Ticket:
    return Ticket(**row._mapping)


async def visible_ticket(
    conn: AsyncConnection, user_id: int, ticket_id: int, *, lock: bool = False
) -> tuple[Ticket, access.Member]:
    """The ticket and the reader's membership; NotFound when missing or not theirs to see."""
    row = (
        await conn.execute(
            sa.text(
                f"SELECT {TICKET_COLUMNS} FROM ticket t WHERE t.id = :id"
                + (" FOR UPDATE" if lock else "")
            ),
            {"id": ticket_id},
        )
    ).first()
    if row is None:
        raise NotFound("Ticket not found.")
    ticket = _ticket(row)
    member = await access.membership(conn, user_id, ticket.team_id)
    if member is None or not access.can_see_ticket(member, ticket.creator_id):
        raise NotFound("Ticket not found.")
    return ticket, member


async def get_ticket(rt: Runtime, user_id: int, ticket_id: int) -> Ticket:
    async with rt.engine.connect() as conn:
        ticket, _ = await visible_ticket(conn, user_id, ticket_id)
        return ticket


def list_sql(
    f: TicketFilter,
    *,
    team_id: int,
    user_id: int,
    staff: bool,
    first: int,
    after: tuple[datetime, int] | None = None,
    now: datetime | None = None,
) -> tuple[str, str, dict[str, Any]]:
    """(capped count, page, params) of a ticket list, psycopg placeholders; the page is keyset
    (created_at, id) after `after`, `first + 1` rows to tell whether there is a next page.
    `now`: the instant the SLA filter is read at."""
    where, params = filter_sql(
        f, team_id=team_id, me=user_id, creator_id=None if staff else user_id, staff=staff,
        now=now,
    )  # fmt: skip
    where = to_pyformat(where)
    count = (
        f"SELECT count(*) AS n FROM (SELECT 1 FROM ticket t WHERE {where} "
        f"LIMIT {COUNT_CAP + 1}) capped"
    )
    if after:
        where += " AND (t.created_at, t.id) < (%(c_ts)s, %(c_id)s)"
        params |= {"c_ts": after[0], "c_id": after[1]}
    page = (
        f"SELECT {TICKET_COLUMNS} FROM ticket t WHERE {where} "
        "ORDER BY t.created_at DESC, t.id DESC LIMIT %(lim)s"
    )
    return count, page, params | {"lim": first + 1}


async def list_tickets(
    rt: Runtime,
    user_id: int,
    team_id: int,
    f: TicketFilter,
    *,
    first: int = 50,
    after: str | None = None,
    count: bool = True,
) -> TicketPage:
    """A page of the team's tickets the user may see; with `count`, how many match (capped)."""
    if not 1 <= first <= MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {MAX_PAGE}")
    cursor = decode_cursor(after) if after else None
    role = await rt.pg.one(
        "SELECT role FROM membership WHERE user_id = %(u)s AND team_id = %(t)s",
        {"u": user_id, "t": team_id},
    )
    if role is None:
        raise NotFound("Team not found.")
    staff = access.Member(user_id, team_id, Role(role["role"])).is_staff
    if f.sla and not staff:  # SLA is staff's (docs/architecture.md, "Business hours")
        raise ValidationProblem("sla", "only staff and admins filter on SLA")
    count_sql, page_sql, params = list_sql(
        f, team_id=team_id, user_id=user_id, staff=staff, first=first, after=cursor,
        now=rt.clock(),
    )  # fmt: skip
    # The count and the page on two connections at once: the answer waits for the slower only.
    # Both are awaited to the end, so a failure of one leaves no statement running behind it.
    rows, counted = await asyncio.gather(
        rt.pg.all(page_sql, params),
        rt.pg.one(count_sql, params) if count else _nothing(),
        return_exceptions=True,
    )
    for outcome in (rows, counted):
        if isinstance(outcome, BaseException):
            raise outcome
    assert isinstance(rows, list) and not isinstance(counted, BaseException)
    items = [Ticket(**r) for r in rows[:first]]
    end = encode_cursor(items[-1].created_at, items[-1].id or 0) if items else None
    total = None if counted is None else int(counted["n"])
    return TicketPage(
        items=items,
        total=None if total is None else min(total, COUNT_CAP),
        end_cursor=end,
        has_next=len(rows) > first,
        total_exact=total is None or total <= COUNT_CAP,
    )


async def _nothing() -> None:
    return None


MAX_TITLE = 500
MAX_BODY = 100_000


def _clean_title(title: str) -> str:
    title = inputs.line("title", title or "", max_len=MAX_TITLE)
    if not title:
        raise ValidationProblem("title", "cannot be empty")
    return title


def _enum(field: str, value: str, enum: type[TicketStatus] | type[Priority]) -> str:
    up = (value or "").strip().upper()
    if up not in {m.value for m in enum}:
        raise ValidationProblem(field, f"use one of {', '.join(m.value for m in enum)}")
    return up


async def insert_ticket(
    conn: AsyncConnection,
    rt: Runtime,
    user_id: int,
    team_id: int,
    title: str,
    body: str = "",
    priority: str = "NORMAL",
) -> tuple[Ticket, access.Member, thread.Message]:
    """A new ticket and its opening message (the body), in the caller's transaction."""
    title = _clean_title(title)
    prio = _enum("priority", priority, Priority)
    body = inputs.text("body", body or "", max_len=MAX_BODY)
    member = await access.require_member(conn, user_id, team_id)
    now = rt.clock()
    row = (
        await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, body, priority, creator_id, message_count, "
                "last_public_reply_at, created_at, updated_at) "
                "VALUES (:team, :title, :body, :prio, :me, 0, NULL, :now, :now) "
                f"RETURNING {TICKET_COLUMNS.replace('t.', '')}"
            ),
            {"team": team_id, "title": title, "body": body, "prio": prio, "me": user_id,
             "now": now},
        )
    ).one()  # fmt: skip
    ticket = _ticket(row)
    opening = await thread.insert_message(
        conn, ticket, author_id=user_id, body=body, internal=False, staff=False, now=now
    )
    ticket.message_count, ticket.last_public_reply_at = 1, now
    await _replan(conn, ticket, now)
    return ticket, member, opening


async def _replan(conn: AsyncConnection, ticket: Ticket, now: datetime) -> Ticket:
    for replan in REPLAN:
        found = await replan(conn, ticket.id or 0, now)
        if found is not None:
            ticket.sla_due_at = found[0]
            ticket.sla_breached_at = ticket.sla_breached_at or found[1]
    return ticket


@retry_transient
async def create_ticket(
    rt: Runtime, user_id: int, team_id: int, title: str, body: str = "", priority: str = "NORMAL"
) -> Ticket:
    async with rt.engine.begin() as conn:
        ticket, _member, _opening = await insert_ticket(
            conn, rt, user_id, team_id, title, body, priority
        )
    return ticket


_UNSET: Any = object()


@retry_transient
async def update_ticket(
    rt: Runtime,
    user_id: int,
    ticket_id: int,
    *,
    status: str | None = None,
    priority: str | None = None,
    assignee_id: int | None = _UNSET,
    title: str | None = None,
) -> Ticket:
    """Staff and admins only. Resolving or closing makes a pending reminder skip when it fires.
    Each changed field is recorded in the ticket's history, in the same transaction."""
    changes = clean_changes(status=status, priority=priority, title=title)
    async with rt.engine.begin() as conn:
        ticket, member = await visible_ticket(conn, user_id, ticket_id, lock=True)
        access.require_staff(member)
        if assignee_id is not _UNSET:
            await _check_assignee(conn, ticket, assignee_id)
            changes["assignee_id"] = assignee_id
        ticket, _history = await apply_changes(
            conn, ticket, changes, actor_id=user_id, now=rt.clock()
        )
        return ticket


def clean_changes(
    *, status: str | None = None, priority: str | None = None, title: str | None = None
) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if status is not None:
        changes["status"] = _enum("status", status, TicketStatus)
    if priority is not None:
        changes["priority"] = _enum("priority", priority, Priority)
    if title is not None:
        changes["title"] = _clean_title(title)
    return changes


async def _check_assignee(conn: AsyncConnection, ticket: Ticket, assignee_id: int | None) -> None:
    if assignee_id is None:
        return
    assignee = await access.membership(conn, assignee_id, ticket.team_id)
    if assignee is None or assignee.role is Role.CUSTOMER:
        raise ValidationProblem("assignee", "must be a staff member or admin of this team")


async def apply_changes(
    conn: AsyncConnection,
    ticket: Ticket,
    changes: dict[str, Any],
    *,
    actor_id: int | None,
    now: datetime,
) -> tuple[Ticket, list[thread.Change]]:
    """Write the changes that differ from the ticket (locked by the caller), with their history."""
    changes = {k: v for k, v in changes.items() if getattr(ticket, k) != v}
    if not changes:
        return ticket, []
    history = await thread.record_changes(conn, ticket, changes, actor_id=actor_id, now=now)
    sets = ", ".join(f"{k} = :{k}" for k in changes)
    if changes.keys() & CLOCKED:  # the clocks' facts (docs/architecture.md, "Business hours")
        sets += ", revision = revision + 1"
    if "status" in changes:
        sets += ", status_since = :now"
    row = (
        await conn.execute(
            sa.text(
                f"UPDATE ticket SET {sets}, updated_at = :now WHERE id = :id "
                f"RETURNING {TICKET_COLUMNS.replace('t.', '')}"
            ),
            changes | {"id": ticket.id, "now": now},
        )
    ).one()
    if changes.keys() & CLOCKED:
        return await _replan(conn, _ticket(row), now), history
    return _ticket(row), history


async def team_members(rt: Runtime, user_id: int, team_id: int) -> list[tuple[int, str, str, str]]:
    """(user id, display name, email, role) of the team, for assignee pickers; members only.

    A customer sees the team's staff and themselves, and no one else's email address."""
    async with rt.engine.connect() as conn:
        member = await access.require_member(conn, user_id, team_id)
        rows = await conn.execute(
            sa.text(
                "SELECT u.id, u.display_name, u.email, m.role FROM membership m "
                "JOIN app_user u ON u.id = m.user_id WHERE m.team_id = :t "
                "AND (:all OR m.role <> 'CUSTOMER' OR u.id = :me) ORDER BY u.display_name"
            ),
            {"t": team_id, "all": member.is_staff, "me": user_id},
        )
        return [
            (r.id, r.display_name, r.email if member.is_staff or r.id == user_id else "", r.role)
            for r in rows
        ]
