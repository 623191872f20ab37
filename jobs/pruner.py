"""Pruner: deletes expired export files (the row stays, shown as expired) and old finished rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from desk.core.runtime import Runtime
from desk.ledger import upkeep as ledger_upkeep

BATCH = 1000


async def run_once(rt: Runtime, now: datetime | None = None) -> ledger_upkeep.Pruned:
    async with rt.engine.begin() as conn:
        return await ledger_upkeep.prune(
            conn,
            now=now or rt.clock(),
            retention=timedelta(days=rt.settings.task_retention_days),
            limit=BATCH,
        )
