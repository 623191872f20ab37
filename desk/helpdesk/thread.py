"""A ticket's thread: its messages (public replies and internal notes) and its history of
changes, written in the caller's transaction and read a page at a time (docs/architecture.md,
"Conversation"). An internal note is staff's only: every read here takes `staff` and, without
it, no note — nor a hint that one exists — comes back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.db import driver
from desk.core.errors import ValidationProblem
from desk.core.models import Ticket

MAX_BODY = 100_000
T = TypeVar("T")
MAX_PAGE = 200


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    ticket_id: int
    team_id: int
    author_id: int | None
    internal: bool
    body: str
    attachment_count: int
    created_at: datetime
    redacted_at: datetime | None
    redacted_by: int | None


@dataclass(frozen=True, slots=True)
class Change:
    """One history entry: `field` went from `old_value` to `new_value` (an assignee as a user
    id's text, or None for nobody)."""

    id: int
    ticket_id: int
    actor_id: int | None
    at: datetime
    field: str
    old_value: str | None
    new_value: str | None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    has_next: bool
    has_previous: bool


MESSAGE_COLUMNS = (
    "m.id, m.ticket_id, m.team_id, m.author_id, m.internal, m.body, m.attachment_count, "
    "m.created_at, m.redacted_at, m.redacted_by"
)
CHANGE_COLUMNS = "h.id, h.ticket_id, h.actor_id, h.at, h.field, h.old_value, h.new_value"


def clean_body(body: object, *, allow_empty: bool = False) -> str:
    """A message's text: no NUL or control characters (tabs and line breaks are kept), at most
    MAX_BODY characters, not blank unless files come with it."""
    text = inputs.text("body", body if body is not None else "", max_len=MAX_BODY)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip() and not allow_empty:
        raise ValidationProblem("body", "write a message (or attach a file)")
    return text.strip("\n")


async def insert_message(
    conn: AsyncConnection,
    ticket: Ticket,
    *,
    author_id: int,
    body: str,
    internal: bool,
    staff: bool,
    now: datetime,
) -> Message:
    """The message, and the ticket's figures with it (public messages, the first staff reply,
    the last public one), in the caller's transaction."""
    row = (
        await conn.execute(
            sa.text(
                "INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, "
                "created_at) VALUES (:t, :team, :a, :i, :b, :now) "
                f"RETURNING {MESSAGE_COLUMNS.replace('m.', '')}"
            ),
            {"t": ticket.id, "team": ticket.team_id, "a": author_id, "i": internal, "b": body,
             "now": now},
        )
    ).one()  # fmt: skip
    if not internal:
        await conn.execute(
            sa.text(
                "UPDATE ticket SET message_count = message_count + 1, last_public_reply_at = :now, "
                "first_response_at = CASE WHEN :staff AND first_response_at IS NULL "
                "AND creator_id <> :a THEN :now ELSE first_response_at END, updated_at = :now "
                "WHERE id = :t"
            ),
            {"now": now, "staff": staff, "a": author_id, "t": ticket.id},
        )
    return Message(**row._mapping)


async def set_attachment_count(conn: Any, message_id: int, count: int) -> None:
    """On SQLAlchemy's connection or psycopg's (a post, desk/helpdesk/posting.py)."""
    await (await driver(conn)).execute(
        "UPDATE ticket_message SET attachment_count = %s WHERE id = %s", (count, message_id)
    )


async def record_changes(
    conn: AsyncConnection,
    ticket: Ticket,
    changes: dict[str, Any],
    *,
    actor_id: int | None,
    now: datetime,
) -> list[Change]:
    """A history entry for each field of `changes` (status, priority, assignee_id, title) whose
    value differs from the ticket's; one statement."""
    fields = {"status": "status", "priority": "priority", "assignee_id": "assignee",
              "title": "title"}  # fmt: skip
    entries = []
    for key, name in fields.items():
        if key not in changes:
            continue
        old, new = getattr(ticket, key), changes[key]
        if old != new:
            entries.append((name, None if old is None else str(old)[:500],
                            None if new is None else str(new)[:500]))  # fmt: skip
    if not entries:
        return []
    rows = await conn.execute(
        sa.text(
            "INSERT INTO ticket_history (ticket_id, team_id, actor_id, at, field, old_value, "
            "new_value) SELECT :t, :team, :a, :now, e.f, e.o, e.n "
            "FROM unnest(CAST(:fs AS text[]), CAST(:os AS text[]), CAST(:ns AS text[])) "
            "WITH ORDINALITY AS e(f, o, n, i) ORDER BY e.i "
            f"RETURNING {CHANGE_COLUMNS.replace('h.', '')}"
        ),
        {"t": ticket.id, "team": ticket.team_id, "a": actor_id, "now": now,
         "fs": [e[0] for e in entries], "os": [e[1] for e in entries],
         "ns": [e[2] for e in entries]},
    )  # fmt: skip
    return [Change(**r._mapping) for r in rows]


def _window(first: int) -> None:
    if not 1 <= first <= MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {MAX_PAGE}")


async def messages(
    conn: AsyncConnection,
    ticket_id: int,
    *,
    staff: bool,
    first: int = 50,
    after: int | None = None,
    before: int | None = None,
    latest: bool = False,
) -> Page[Message]:
    """Messages in thread order: the first `first` after message `after`, or — with `latest` —
    the last `first` (before `before`, when given), the window a thread page opens on."""
    _window(first)
    where = "m.ticket_id = :t AND (:staff OR NOT m.internal)"
    params: dict[str, Any] = {"t": ticket_id, "staff": staff, "lim": first + 1}
    if after is not None:
        where += " AND m.id > :after"
        params["after"] = after
    if before is not None:
        where += " AND m.id < :before"
        params["before"] = before
    order = "DESC" if latest else "ASC"
    rows = (
        await conn.execute(
            sa.text(f"SELECT {MESSAGE_COLUMNS} FROM ticket_message m WHERE {where} "
                    f"ORDER BY m.id {order} LIMIT :lim"),
            params,
        )
    ).all()  # fmt: skip
    items = [Message(**r._mapping) for r in rows[:first]]
    more = len(rows) > first
    if latest:
        items.reverse()
        return Page(items, has_next=before is not None, has_previous=more)
    return Page(items, has_next=more, has_previous=after is not None)


async def changes(
    conn: AsyncConnection,
    ticket_id: int,
    *,
    first: int = 50,
    after: int | None = None,
    since: datetime | None = None,
) -> Page[Change]:
    """History entries in order, the first `first` after entry `after` (or from `since`)."""
    _window(first)
    where = "h.ticket_id = :t"
    params: dict[str, Any] = {"t": ticket_id, "lim": first + 1}
    if after is not None:
        where += " AND h.id > :after"
        params["after"] = after
    if since is not None:
        where += " AND h.at >= :since"
        params["since"] = since
    rows = (
        await conn.execute(
            sa.text(f"SELECT {CHANGE_COLUMNS} FROM ticket_history h WHERE {where} "
                    "ORDER BY h.id LIMIT :lim"),
            params,
        )
    ).all()  # fmt: skip
    return Page(
        [Change(**r._mapping) for r in rows[:first]],
        has_next=len(rows) > first,
        has_previous=after is not None,
    )


async def message_of(conn: AsyncConnection, message_id: int) -> Message | None:
    row = (
        await conn.execute(
            sa.text(f"SELECT {MESSAGE_COLUMNS} FROM ticket_message m WHERE m.id = :m"),
            {"m": message_id},
        )
    ).first()
    return Message(**row._mapping) if row else None


async def redact(conn: AsyncConnection, message_id: int, *, by: int, now: datetime) -> Message:
    """Empty the message's text and drop its files, keeping who redacted it and when."""
    await conn.execute(
        sa.text("DELETE FROM message_attachment WHERE message_id = :m"), {"m": message_id}
    )
    row = (
        await conn.execute(
            sa.text(
                "UPDATE ticket_message SET body = '', attachment_count = 0, redacted_at = :now, "
                f"redacted_by = :by WHERE id = :m RETURNING {MESSAGE_COLUMNS.replace('m.', '')}"
            ),
            {"m": message_id, "by": by, "now": now},
        )
    ).one()
    return Message(**row._mapping)
