"""Dispatcher: sends due WAITING tasks to arq (the safety net behind the web's direct send).

Rows are claimed with `FOR UPDATE SKIP LOCKED`, so any number of dispatchers can sweep at once
and each due row is sent by one of them. A sweep reserves a new send number per row in the
ledger, then hands all its messages to Redis in one round trip; sends Redis refused are handed
back. The same round trip checks Redis's epoch key: when it is gone, Redis lost its data, and
every sent-but-unclaimed task (deferred ones included) is sent again at once.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from desk import ledger_sends
from desk.queue import Send
from desk.runtime import Runtime

log = logging.getLogger(__name__)
BATCH = 1000  # one Redis round trip sends a whole batch
MAX_BATCHES = 20  # per pass; what is left waits for the next pass


async def _batch(rt: Runtime, now: datetime) -> tuple[list[int], int, bool]:
    """One batch: (ids reserved, how many Redis took, Redis reachable)."""
    s = rt.settings
    async with rt.engine.begin() as conn:
        due = await ledger_sends.claim_due(
            conn,
            now=now,
            lookahead=timedelta(seconds=s.dispatch_lookahead_seconds),
            redelivery=timedelta(seconds=s.redelivery_seconds),
            limit=BATCH,
            team_max=s.long_team_max_running,
        )
    if not due:
        return [], 0, True
    sends = [Send(d.task_id, d.run, d.send, d.lane, d.run_at) for d in due]
    sent = await rt.queue.send_many(sends)
    failed = [d for d, ok in zip(due, sent.accepted, strict=True) if not ok]
    if failed:
        async with rt.engine.begin() as conn:
            await ledger_sends.unsend(conn, failed)
    return [d.task_id for d in due], len(due) - len(failed), sent.reachable


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    """One pass (batches until nothing more is due); returns how many messages Redis took."""
    now = now or rt.clock()
    # The epoch check runs beside the first claim: a pass costs max(SQL, Redis), not the sum.
    epoch = asyncio.create_task(rt.queue.mark_epoch())
    try:
        reserved, total, reachable = await _batch(rt, now)
    except BaseException:
        if await epoch:
            await rt.queue.clear_epoch()  # noticed, but not acted on: the next pass must see it
        raise
    if await epoch:
        # Sent messages may be gone: resend all (each resend removes its predecessor).
        async with rt.engine.begin() as conn:
            forgotten = await ledger_sends.forget_sends(conn, keep=reserved)
        log.warning("Redis lost its data (no epoch key): resending %d waiting task(s)", forgotten)
    elif len(reserved) < BATCH or not reachable:
        return total
    for _ in range(MAX_BATCHES - 1):
        reserved, taken, reachable = await _batch(rt, now)
        total += taken
        if len(reserved) < BATCH or not reachable:
            break
    return total
