"""In-app notifications: written by the worker (reminders), read and marked by their user."""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.core.messages import Message
from desk.core.models import Notification
from desk.core.runtime import Runtime

MAX_PAGE = 100


async def insert_many(
    conn: AsyncConnection,
    *,
    user_ids: list[int],
    team_id: int,
    task_id: int | None,
    kind: str,
    text: str | Message | None,
    link: str,
) -> int:
    """Inside the caller's transaction (the one that completes the task), so they commit together.

    A `Message` is stored as its English text plus its key and parameters (for the pages)."""
    if not user_ids:
        return 0
    said = text if isinstance(text, Message) else None
    await conn.execute(
        sa.text(
            "INSERT INTO notification (user_id, team_id, task_id, kind, text, text_key, text_params, link) "
            "SELECT u, :team, :task, :kind, :text, :key, CAST(:params AS jsonb), :link "
            "FROM unnest(CAST(:users AS int[])) AS u"
        ),
        {
            "users": user_ids,
            "team": team_id,
            "task": task_id,
            "kind": kind,
            "text": said.text if said else (text or ""),
            "key": said.key if said else None,
            "params": json.dumps(said.params if said else {}),
            "link": link,
        },
    )
    return len(user_ids)


async def insert_rows(
    conn: AsyncConnection, rows: list[tuple[int, int, int, str, Message, str]]
) -> int:
    """(user, team, task, kind, text, link) rows in one statement, inside the caller's
    transaction (a batch of reminders completes and notifies together). Each text is stored as
    its English plus its key and parameters (for the pages)."""
    if not rows:
        return 0
    cols = list(zip(*rows, strict=True))
    texts: list[Message] = list(cols[4])
    await conn.execute(
        sa.text(
            "INSERT INTO notification (user_id, team_id, task_id, kind, text, text_key, "
            " text_params, link) "
            "SELECT u, team, task, kind, text, tkey, CAST(tparams AS jsonb), link "
            "FROM unnest(CAST(:u AS int[]), CAST(:team AS int[]), CAST(:task AS int[]), "
            " CAST(:kind AS text[]), CAST(:text AS text[]), CAST(:tkey AS text[]), "
            " CAST(:tparams AS text[]), CAST(:link AS text[])) "
            " AS r(u, team, task, kind, text, tkey, tparams, link)"
        ),
        {
            "u": list(cols[0]),
            "team": list(cols[1]),
            "task": list(cols[2]),
            "kind": list(cols[3]),
            "text": [t.text for t in texts],
            "tkey": [t.key for t in texts],
            "tparams": [json.dumps(t.params) for t in texts],
            "link": list(cols[5]),
        },
    )
    return len(rows)


@dataclass
class NotificationPage:
    items: list[Notification]
    end_cursor: str | None
    has_next: bool


async def list_notifications(
    rt: Runtime,
    user_id: int,
    *,
    unread_only: bool = False,
    first: int = 20,
    after: str | None = None,
) -> NotificationPage:
    if not 1 <= first <= MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {MAX_PAGE}")
    clauses = ["user_id = :u"]
    params: dict[str, object] = {"u": user_id, "lim": first + 1}
    if unread_only:
        clauses.append("read_at IS NULL")
    if after:
        before = inputs.optional_id(inputs.cursor("after", after))
        if before is None:
            raise ValidationProblem("after", "not a cursor this list gave out")
        clauses.append("id < :after")
        params["after"] = before
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                f"SELECT * FROM notification WHERE {' AND '.join(clauses)} ORDER BY id DESC LIMIT :lim"
            ),
            params,
        )
        items = [Notification(**r._mapping) for r in rows]
    page = items[:first]
    return NotificationPage(page, str(page[-1].id) if page else None, len(items) > first)


async def unread_count(rt: Runtime, user_id: int) -> int:
    async with rt.engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    sa.text(
                        "SELECT count(*) FROM notification WHERE user_id = :u AND read_at IS NULL"
                    ),
                    {"u": user_id},
                )
            ).scalar_one()
        )


async def mark_read(rt: Runtime, user_id: int, ids: list[int] | None = None) -> int:
    """Mark the given notifications (or, with None, all) of this user as read; returns how many."""
    sql = "UPDATE notification SET read_at = :now WHERE user_id = :u AND read_at IS NULL"
    params: dict[str, object] = {"u": user_id, "now": rt.clock()}
    if ids is not None:
        sql += " AND id = ANY(:ids)"
        params["ids"] = ids
    async with rt.engine.begin() as conn:
        result = await conn.execute(sa.text(sql), params)
    return int(result.rowcount)
