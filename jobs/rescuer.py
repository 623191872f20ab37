"""Rescuer: RUNNING tasks whose lease expired (their worker died) are re-armed or failed."""

from __future__ import annotations

import logging
from datetime import datetime

from desk import ledger
from desk.runtime import Runtime
from desk.tasks import kick

log = logging.getLogger(__name__)
BATCH = 200


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    async with rt.engine.begin() as conn:
        rescued = await ledger.rescue(conn, now=now or rt.clock(), limit=BATCH)
    for task in rescued:
        log.warning("task %s lost its worker; now %s (run %s)", task.id, task.status, task.run)
        if task.status == "WAITING":
            await kick(rt, task)
    return len(rescued)
