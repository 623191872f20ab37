"""Many tickets' threads at once, for GraphQL's DataLoaders (docs/architecture.md,
"Conversation"): a page of messages per ticket with their files and (for staff) their e-mails'
delivery, a page of history per ticket, or messages by id — each a fixed number of statements,
however many tickets a list shows. The rules are `desk.reads.conversation`'s: a ticket the reader
may not see is absent from the answer, exactly like a missing one, and a note (with its files)
is there only for staff."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import ValidationProblem
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, thread
from desk.helpdesk.attachments import Attachment
from desk.people import access
from desk.reads.conversation import Delivery, deliveries


@dataclass(frozen=True)
class MessageView:
    """One message as its reader may see it: its files, and its e-mails for staff (else none)."""

    message: thread.Message
    files: list[Attachment] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


@dataclass(frozen=True)
class Window:
    """A page of one ticket's thread, as one reader sees it."""

    staff: bool
    page: thread.Page[MessageView]


def _checked(first: int) -> None:
    if not 1 <= first <= thread.MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {thread.MAX_PAGE}")


async def readers(
    conn: AsyncConnection, user_id: int, ticket_ids: Sequence[int]
) -> dict[int, access.Member]:
    """The tickets among `ticket_ids` the user may see (access.can_see_ticket), each with the
    user's membership of its team (one statement)."""
    if not ticket_ids:
        return {}
    rows = await conn.execute(
        sa.text(
            "SELECT t.id, t.team_id, t.creator_id, m.role FROM ticket t "
            "JOIN membership m ON m.team_id = t.team_id AND m.user_id = :u WHERE t.id = ANY(:ids)"
        ),
        {"u": user_id, "ids": list(ticket_ids)},
    )
    out: dict[int, access.Member] = {}
    for r in rows:
        member = access.Member(user_id, r.team_id, Role(r.role))
        if access.can_see_ticket(member, r.creator_id):
            out[r.id] = member
    return out


async def _views(
    conn: AsyncConnection, messages: list[thread.Message], staff_tickets: set[int]
) -> dict[int, MessageView]:
    """The messages with their files and, on staff's tickets, their deliveries (two statements)."""
    ids = [m.id for m in messages]
    files = await attachments.of_messages(conn, ids)
    mailed = await deliveries(conn, [m.id for m in messages if m.ticket_id in staff_tickets])
    return {m.id: MessageView(m, files.get(m.id, []), mailed.get(m.id, [])) for m in messages}


async def windows(
    rt: Runtime,
    user_id: int,
    ticket_ids: Sequence[int],
    *,
    first: int = 50,
    after: int | None = None,
    before: int | None = None,
    latest: bool = False,
) -> dict[int, Window]:
    """Per visible ticket, what `thread.messages` answers for it (the first `first` messages
    after `after`, or with `latest` the last `first` before `before`), with files and
    deliveries: four statements for any number of tickets."""
    _checked(first)
    async with rt.engine.connect() as conn:
        members = await readers(conn, user_id, ticket_ids)
        if not members:
            return {}
        rows = await _message_rows(conn, members, first, after, before, latest)
        staff = {t for t, m in members.items() if m.is_staff}
        views = await _views(conn, [m for ms in rows.values() for m in ms], staff)
    out = {}
    for ticket_id, member in members.items():
        found = rows.get(ticket_id, [])
        items = [views[m.id] for m in found[:first]]
        more = len(found) > first
        if latest:
            items.reverse()
            page = thread.Page(items, has_next=before is not None, has_previous=more)
        else:
            page = thread.Page(items, has_next=more, has_previous=after is not None)
        out[ticket_id] = Window(member.is_staff, page)
    return out


async def _message_rows(
    conn: AsyncConnection,
    members: dict[int, access.Member],
    first: int,
    after: int | None,
    before: int | None,
    latest: bool,
) -> dict[int, list[thread.Message]]:
    """Up to `first` + 1 messages per ticket in the page's order (one statement: a LATERAL
    read of each ticket's (ticket_id, id) index)."""
    where = "m.ticket_id = r.ticket_id AND (r.staff OR NOT m.internal)"
    ids = list(members)
    params: dict[str, Any] = {
        "ids": ids, "staff": [members[t].is_staff for t in ids], "lim": first + 1,
    }  # fmt: skip
    if after is not None:
        where += " AND m.id > :after"
        params["after"] = after
    if before is not None:
        where += " AND m.id < :before"
        params["before"] = before
    order = "DESC" if latest else "ASC"
    found = await conn.execute(
        sa.text(
            "SELECT x.* FROM unnest(CAST(:ids AS int[]), CAST(:staff AS boolean[])) "
            "AS r(ticket_id, staff) CROSS JOIN LATERAL ("
            f"SELECT {thread.MESSAGE_COLUMNS} FROM ticket_message m WHERE {where} "
            f"ORDER BY m.id {order} LIMIT :lim) x"
        ),
        params,
    )
    out: dict[int, list[thread.Message]] = {}
    for r in found:
        out.setdefault(r.ticket_id, []).append(thread.Message(**r._mapping))
    for ms in out.values():  # unnest keeps no order across tickets: each ticket's in page order
        ms.sort(key=lambda m: m.id, reverse=latest)
    return out


async def histories(
    rt: Runtime,
    user_id: int,
    ticket_ids: Sequence[int],
    *,
    first: int = 50,
    after: int | None = None,
) -> dict[int, thread.Page[thread.Change]]:
    """Per visible ticket, what `thread.changes` answers for it: two statements in all."""
    _checked(first)
    async with rt.engine.connect() as conn:
        members = await readers(conn, user_id, ticket_ids)
        if not members:
            return {}
        where = "h.ticket_id = r.ticket_id"
        params: dict[str, Any] = {"ids": list(members), "lim": first + 1}
        if after is not None:
            where += " AND h.id > :after"
            params["after"] = after
        found = await conn.execute(
            sa.text(
                "SELECT x.* FROM unnest(CAST(:ids AS int[])) AS r(ticket_id) CROSS JOIN LATERAL ("
                f"SELECT {thread.CHANGE_COLUMNS} FROM ticket_history h WHERE {where} "
                "ORDER BY h.id LIMIT :lim) x"
            ),
            params,
        )
        rows: dict[int, list[thread.Change]] = {t: [] for t in members}
        for r in found:
            rows[r.ticket_id].append(thread.Change(**r._mapping))
    return {
        t: thread.Page(
            sorted(cs, key=lambda c: c.id)[:first],
            has_next=len(cs) > first,
            has_previous=after is not None,
        )
        for t, cs in rows.items()
    }


async def messages(rt: Runtime, user_id: int, message_ids: Sequence[int]) -> dict[int, MessageView]:
    """The messages among `message_ids` the user may see (a note only if staff of its team),
    with files and deliveries; an unseen one is absent, like a missing one. Three statements."""
    if not message_ids:
        return {}
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                f"SELECT {thread.MESSAGE_COLUMNS}, t.creator_id, s.role FROM ticket_message m "
                "JOIN ticket t ON t.id = m.ticket_id "
                "JOIN membership s ON s.team_id = t.team_id AND s.user_id = :u "
                "WHERE m.id = ANY(:ids)"
            ),
            {"u": user_id, "ids": list(message_ids)},
        )
        seen: list[thread.Message] = []
        staff: set[int] = set()
        for r in rows:
            data = dict(r._mapping)
            member = access.Member(user_id, data["team_id"], Role(data.pop("role")))
            if not access.can_see_ticket(member, data.pop("creator_id")):
                continue
            if data["internal"] and not member.is_staff:
                continue
            seen.append(thread.Message(**data))
            if member.is_staff:
                staff.add(data["ticket_id"])
        return await _views(conn, seen, staff)
