"""desk.reads.bell: the toast is the reader's own newest unread notification, only when the
count grew since the page's copy; someone else's, or one already read, is never it."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from desk.helpdesk import notifications
from desk.reads import bell


async def _notify(rt: Any, team: int, user_id: int, text: str) -> None:
    async with rt.engine.begin() as conn:
        await notifications.insert_many(
            conn,
            user_ids=[user_id],
            team_id=team,
            task_id=None,
            kind="REMINDER",
            text=text,
            link="/tickets",
        )


async def test_the_toast_is_the_readers_newest_unread_when_the_count_grew(rt, world) -> None:
    assert await bell.toast_for(rt.pg, world.staff, 0, 0) is None  # nothing to show
    await _notify(rt, world.team, world.staff, "Older")
    await _notify(rt, world.team, world.staff, "Newest")
    await _notify(rt, world.team, world.admin, "The admin's")  # newer still, not the staff's
    toast = await bell.toast_for(rt.pg, world.staff, 0, 2)
    assert toast is not None and toast.text == "Newest" and toast.link == "/tickets"
    assert await bell.toast_for(rt.pg, world.staff, 2, 2) is None  # the page has seen them
    assert await bell.toast_for(rt.pg, world.staff, -1, 2) is None  # the page does not know
    admins = await bell.toast_for(rt.pg, world.admin, 0, 1)
    assert admins is not None and admins.text == "The admin's"
    async with rt.engine.begin() as conn:  # read: no longer the toast
        await conn.execute(sa.text("UPDATE notification SET read_at = now() WHERE text = 'Newest'"))
    older = await bell.newest_unread(rt.pg, world.staff)
    assert older is not None and older.text == "Older"
    assert await bell.newest_unread(rt.pg, world.customer) is None
