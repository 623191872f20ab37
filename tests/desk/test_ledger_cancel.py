"""A cancel is recorded at once, even while a running export's chunk transaction holds its row."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from desk.ledger import accept as ledger
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.work import tasks

LEASE = timedelta(seconds=30)


async def _claimed(rt, task, eid="e1"):
    return await ledger_run.claim(rt.pg, task.id, task.run, eid, now=rt.clock(), lease=LEASE)


async def test_a_cancel_is_recorded_at_once_while_an_export_stores_its_chunks(
    rt, world, clock
) -> None:
    """An export's chunk transaction holds a key-share lock on its task row (the chunks' foreign
    key) until the whole file is stored: neither a person's nor the console's cancel waits."""
    task = await tasks.create_export(rt, world.staff, world.team, {})
    await _claimed(rt, task)
    async with rt.engine.begin() as building:
        await ledger_upkeep.store_chunk(building, task.id, "e1", 0, b"id,title\n")
        asked = await asyncio.wait_for(tasks.cancel_task(rt, world.staff, task.id), 30)
        assert asked.status == "RUNNING" and asked.cancel_requested
        other = await tasks.create_export(rt, world.staff, world.team, {"q": "x"})
        await _claimed(rt, other, "e2")
        await ledger_upkeep.store_chunk(building, other.id, "e2", 0, b"id,title\n")
        async with rt.engine.begin() as conn:
            console = await asyncio.wait_for(ledger.cancel_id(conn, other.id, now=clock()), 30)
        assert console.cancel_requested
