"""The demo tickets' conversations: each gets its opening message (the ticket's body), and most
a short thread drawn from a fixed seed — a staff reply, the customer's answer, now and then an
internal note or a screenshot, the assignment and status changes between them — with the
figures the ticket keeps beside its thread (docs/architecture.md,
"Conversation"). Written straight into the tables, so seeding sends no e-mail; only demo
tickets that have no message yet are touched, so running it again changes nothing."""

# ruff: noqa: RUF001 (Chinese text uses full-width punctuation)
from __future__ import annotations

import random
import struct
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.models import TicketStatus
from desk.helpdesk import attachments, thread

STAFF_REPLIES = (
    "Thanks for the report. Could you tell us which browser and version you use?",
    "Sorry about that. We have reproduced it and are working on a fix.",
    "Could you send a screenshot of the error message? That helps us find the cause.",
    "This should be fixed now. Please try again and let us know if it still happens.",
    "We have reset the setting on our side; it may take a few minutes to apply.",
    "感谢反馈！请问这个问题是从什么时候开始出现的？",
    "我们已经修复了这个问题，请刷新页面后再试一次。",
)
CUSTOMER_REPLIES = (
    "It happens every morning, in Chrome and in Firefox.",
    "Thanks, it works again!",
    "Still the same for me, I am afraid.\n\n> Please try again and let us know if it still happens.",
    "I attached the details to my first message. Any news?",
    "谢谢，现在可以正常使用了。",
)
NOTES = (
    "Known issue, see KB-7. Engineering has a fix in review.",
    "Customer is on the old plan; check billing before promising anything.",
    "Escalated to second line, waiting for their answer.",
    "内部备注：和上周的工单是同一个问题。",
)


def screenshot() -> bytes:
    """A small PNG that looks like a screenshot of an error dialog (drawn here, so the demo's
    thumbnails show something): grey window, dark title bar, a red error band."""
    width, height = 240, 150

    def pixel(x: int, y: int) -> bytes:
        if y < 18:
            return b"\x1d\x23\x30"
        if 50 <= y < 80 and 20 <= x < width - 20:
            return b"\xb3\x26\x1e"
        if 100 <= y < 106 and 20 <= x < 160:
            return b"\x9a\xa3\xb2"
        return b"\xf6\xf7\xf9"

    raw = b"".join(b"\x00" + b"".join(pixel(x, y) for x in range(width)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))  # fmt: skip


FILE_SHARE = 0.15  # of demo tickets whose opening message carries files


@dataclass(frozen=True)
class _Ticket:
    id: int
    team_id: int
    creator_id: int
    assignee_id: int | None
    status: str
    body: str
    created_at: datetime
    updated_at: datetime
    external_id: str


def _thread(
    t: _Ticket, staff: list[int], seed: str, now: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ticket's messages and changes, the same on every run, in the order they happened:
    the agent takes the ticket, perhaps notes something, answers, the customer perhaps answers
    back, and the agent sets the status the ticket has now."""
    rng = random.Random(f"{seed}:{t.external_id}")
    helpers = [s for s in staff if s != t.creator_id] or staff
    agent = t.assignee_id if t.assignee_id not in (None, t.creator_id) else rng.choice(helpers)
    span = max(t.updated_at - t.created_at, timedelta(minutes=30))
    at = t.created_at

    def later() -> datetime:
        nonlocal at
        at = min(at + span * rng.uniform(0.05, 0.3), now)
        return at

    def say(author: int, body: str, internal: bool = False) -> dict[str, Any]:
        return {"t": t.id, "team": t.team_id, "a": author, "i": internal, "b": body, "at": later()}

    def change(field: str, old: str | None, new: str) -> dict[str, Any]:
        return {"t": t.id, "team": t.team_id, "a": agent, "at": later(), "f": field, "o": old,
                "n": new}  # fmt: skip

    messages = [say(t.creator_id, t.body)]
    messages[0]["at"] = at = t.created_at
    changes = [change("assignee", None, str(t.assignee_id))] if t.assignee_id else []
    if rng.random() < 0.25:
        messages.append(say(agent, rng.choice(NOTES), internal=True))
    if t.status != TicketStatus.OPEN.value or rng.random() < 0.3:
        messages.append(say(agent, rng.choice(STAFF_REPLIES)))
        if t.status != TicketStatus.PENDING.value and rng.random() < 0.6:
            messages.append(say(t.creator_id, rng.choice(CUSTOMER_REPLIES)))
    if t.status != TicketStatus.OPEN.value:
        changes.append(change("status", TicketStatus.OPEN.value, t.status))
    return messages, changes


async def ensure_threads(
    conn: AsyncConnection, staff: dict[int, list[int]], seed: str, now: datetime
) -> int:
    """Write the threads of the demo tickets that have none; returns the messages written.
    `staff`: each team's staff and admins, who answer unassigned tickets."""
    rows = await conn.execute(
        sa.text(
            "SELECT id, team_id, creator_id, assignee_id, status, body, created_at, updated_at, "
            "external_id FROM ticket t WHERE external_id LIKE 'demo-%' "
            "AND NOT EXISTS (SELECT 1 FROM ticket_message m WHERE m.ticket_id = t.id) ORDER BY id"
        )
    )
    tickets = [_Ticket(*r) for r in rows.all()]
    threads = [_thread(t, staff[t.team_id], seed, now) for t in tickets]
    messages = [m for said, _ in threads for m in said]
    changes = [c for _, changed in threads for c in changed]
    if not messages:
        return 0
    await conn.execute(
        sa.text(
            "INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, "
            "created_at) VALUES (:t, :team, :a, :i, :b, :at)"
        ),
        messages,
    )
    if changes:
        await conn.execute(
            sa.text(
                "INSERT INTO ticket_history (ticket_id, team_id, actor_id, at, field, old_value, "
                "new_value) VALUES (:t, :team, :a, :at, :f, :o, :n)"
            ),
            changes,
        )
    await conn.execute(_FIGURES, {"ids": [t.id for t in tickets]})
    await _attach(conn, [t for t in tickets if _with_files(t, seed)], now)
    return len(messages)


def _with_files(t: _Ticket, seed: str) -> bool:
    return random.Random(f"{seed}:files:{t.external_id}").random() < FILE_SHARE


def _files(t: _Ticket) -> list[tuple[str, bytes]]:
    log = "".join(
        f"{t.created_at:%Y-%m-%d %H:%M:%S} ERROR session expired (request {t.id}-{i})\n"
        for i in range(20)
    )
    return [("screenshot.png", screenshot()), ("error-log.txt", log.encode())]


async def _attach(conn: AsyncConnection, tickets: list[_Ticket], now: datetime) -> None:
    """The opening messages of `tickets` get a screenshot and a log file."""
    if not tickets:
        return
    opening = await conn.execute(
        sa.text(
            "SELECT DISTINCT ON (ticket_id) ticket_id, id FROM ticket_message "
            "WHERE ticket_id = ANY(:ids) ORDER BY ticket_id, id"
        ),
        {"ids": [t.id for t in tickets]},
    )
    first: dict[int, int] = {int(r.ticket_id): int(r.id) for r in opening}
    for t in tickets:
        files = _files(t)
        for name, data in files:
            await attachments.store(
                conn, attachments.InMemory(data), filename=name, team_id=t.team_id, uploader_id=t.creator_id,
                message_id=first[t.id], max_bytes=len(data), now=t.created_at,
            )  # fmt: skip
        await thread.set_attachment_count(conn, first[t.id], len(files))


# What post_message keeps up to date, worked out once from the thread just written.
_FIGURES = sa.text(
    """
UPDATE ticket t SET message_count = f.n, last_public_reply_at = f.last,
                    first_response_at = f.first_response
FROM (
  SELECT m.ticket_id, count(*) FILTER (WHERE NOT m.internal) AS n,
         max(m.created_at) FILTER (WHERE NOT m.internal) AS last,
         min(m.created_at) FILTER (WHERE NOT m.internal AND m.author_id <> k.creator_id
                                   AND r.role IN ('STAFF', 'ADMIN')) AS first_response
  FROM ticket_message m JOIN ticket k ON k.id = m.ticket_id
  LEFT JOIN membership r ON r.user_id = m.author_id AND r.team_id = m.team_id
  WHERE m.ticket_id = ANY(:ids) GROUP BY m.ticket_id
) f
WHERE t.id = f.ticket_id
"""
)
