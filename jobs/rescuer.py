"""Rescuer: RUNNING tasks whose lease expired (their worker died) are re-armed or failed; and
the janitor, which removes what arq keeps for sends the ledger has moved past.

A task whose lease expired while a live worker still lists it in its registration was not
abandoned: that worker could not reach the database, and `last_error` says so.

The janitor reads each lane's queue (oldest first) and removes the entries — with their job,
in-progress and retry keys — of tasks that are gone, no longer WAITING, in a later round, or
sent again since. arq reads a bounded window of the oldest due jobs and skips the ones marked
in progress, so such leftovers of a killed worker would otherwise hide newer work.
"""

from __future__ import annotations

import logging
from datetime import datetime

from desk.core.models import TaskStatus
from desk.core.queue import LANES, REDIS_ERRORS, parse_job_id
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends
from desk.ledger import upkeep as ledger_upkeep
from desk.work.tasks import kick
from jobs.heartbeat import live_task_ids

log = logging.getLogger(__name__)
BATCH = 200
JANITOR_WINDOW = 2000  # queue entries read per lane and pass


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    try:
        alive = tuple(await live_task_ids(rt))
    except REDIS_ERRORS:
        alive = ()
    async with rt.engine.begin() as conn:
        rescued = await ledger_upkeep.rescue(
            conn, now=now or rt.clock(), limit=BATCH, unreachable=alive
        )
    for task in rescued:
        log.warning("task %s lost its worker; now %s (run %s)", task.id, task.status, task.run)
        if task.status == TaskStatus.WAITING:
            await kick(rt, task)
    return len(rescued)


async def sweep_queues(rt: Runtime) -> int:
    """The janitor's pass: returns how many leftover jobs it removed."""
    prefix = rt.settings.queue_prefix
    removed = 0
    for lane in LANES:
        entries = await rt.redis.zrange(rt.queue.lane_queue(lane), 0, JANITOR_WINDOW - 1)
        jobs = {raw.decode(): parse_job_id(prefix, raw.decode()) for raw in entries}
        if not jobs:
            continue
        ids = list({p[0] for p in jobs.values() if p is not None})
        async with rt.engine.connect() as conn:
            rows = await ledger_sends.sends_of(conn, ids)
        # Ids of another form (an older version's `task:{id}:{run}`) are never current.
        past = [
            jid
            for jid, parsed in jobs.items()
            if parsed is None or rows.get(parsed[0]) != (TaskStatus.WAITING, parsed[1], parsed[2])
        ]
        await rt.queue.purge(past)
        removed += len(past)
    if removed:
        log.info("janitor removed %d queue entries of sends the ledger moved past", removed)
    return removed
