"""Pruner: deletes expired export files (the row stays, shown as expired), old finished rows,
export schedules' occurrence records as old, and the rows tables of exports that ended without
dropping theirs (a killed worker's; desk/work/export_rows.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from desk.core.runtime import Runtime
from desk.ledger import upkeep as ledger_upkeep
from desk.work import export_rows, schedule_store

BATCH = 1000


async def run_once(rt: Runtime, now: datetime | None = None) -> ledger_upkeep.Pruned:
    now = now or rt.clock()
    retention = timedelta(days=rt.settings.task_retention_days)
    async with rt.engine.begin() as conn:
        pruned = await ledger_upkeep.prune(conn, now=now, retention=retention, limit=BATCH)
        # Export schedules' occurrence records live as long as the tasks they name.
        await schedule_store.prune_runs(conn, before=now - retention, limit=BATCH)
    # Apart: a DROP holds its table's lock until its transaction ends.
    async with rt.engine.begin() as conn:
        await export_rows.drop_leftovers(conn, limit=BATCH)
    return pruned
