"""The bell's toast, read on `rt.pg` as `desk.reads.tasks` reads (one statement, no ORM objects):
when a page's unread count grew, its watcher shows the newest unread notification (ui/watch/watcher.py).
Through the ORM this read was ~3 % of a loaded web process: a pool checkout with its ping, and a
model object per row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from desk.core.pg import Pg


@dataclass(frozen=True, slots=True)
class Toast:
    """What the toast shows of a notification (base.html's `toast` block)."""

    text: str
    text_key: str | None
    text_params: dict[str, Any]
    link: str


async def newest_unread(pg: Pg, user_id: int) -> Toast | None:
    data = await pg.row(
        "SELECT text, text_key, text_params, link FROM notification "
        "WHERE user_id = %(u)s AND read_at IS NULL ORDER BY id DESC LIMIT 1",
        {"u": user_id},
    )
    return Toast(*data) if data is not None else None


async def toast_for(pg: Pg, user_id: int, seen: int, unread: int) -> Toast | None:
    """The toast a bell shows: the newest unread notification when the count grew since the
    page's `seen` (-1: the page does not know it), else none."""
    return await newest_unread(pg, user_id) if 0 <= seen < unread else None
