"""Shared bits of the schedule tests: a schedule made at a given time, its row, its tasks."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.work import schedules


async def make(
    rt: Runtime,
    clock,
    owner: int,
    team: int,
    *,
    at: datetime,
    days=(1, 2, 3, 4, 5, 6, 7),
    time="08:00",
    zone="UTC",
    filters=None,
):
    clock.now = at
    return await schedules.create_schedule(
        rt, owner, team, filters if filters is not None else {"status": ["OPEN"]},
        days=list(days), time=time, timezone=zone,
    )  # fmt: skip


async def tasks_of(rt: Runtime, owner: int) -> list[sa.Row]:
    async with rt.engine.connect() as conn:
        return list(
            await conn.execute(
                sa.text(
                    "SELECT * FROM background_task WHERE owner_id = :o AND kind = 'EXPORT' "
                    "ORDER BY id"
                ),
                {"o": owner},
            )
        )


async def runs_of(rt: Runtime, schedule_id: int) -> list[sa.Row]:
    async with rt.engine.connect() as conn:
        return list(
            await conn.execute(
                sa.text("SELECT * FROM schedule_run WHERE schedule_id = :s ORDER BY occurrence_at"),
                {"s": schedule_id},
            )
        )


async def finish_all(rt: Runtime) -> None:
    """End every active export as COMPLETED (the previous occurrence's export is done)."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'COMPLETED', finished_at = now() "
                "WHERE status IN ('WAITING', 'RUNNING')"
            )
        )
