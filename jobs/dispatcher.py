"""Dispatcher: sends due WAITING tasks to arq (the safety net behind the web's direct enqueue).

Rows are claimed with `FOR UPDATE SKIP LOCKED`, so any number of dispatchers can sweep at once
and each due row is sent by one of them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from desk import ledger
from desk.runtime import Runtime

BATCH = 500


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    """One sweep; returns how many messages Redis took."""
    now = now or rt.clock()
    s = rt.settings
    async with rt.engine.begin() as conn:
        due = await ledger.claim_due(
            conn,
            now=now,
            lookahead=timedelta(seconds=s.dispatch_lookahead_seconds),
            redelivery=timedelta(seconds=s.redelivery_seconds),
            limit=BATCH,
        )
    failed = [
        d
        for d in due
        if not await rt.queue.enqueue(d.task_id, d.run, d.run_at if d.run_at > now else None)
    ]
    if failed:
        async with rt.engine.begin() as conn:
            await ledger.unsend(conn, failed)
    return len(due) - len(failed)
