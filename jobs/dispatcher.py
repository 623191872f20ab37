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

from desk.core.queue import Send
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends

log = logging.getLogger(__name__)
BATCH = 1000  # one Redis round trip sends a whole batch
MAX_BATCHES = 20  # per pass; what is left waits for the next pass


async def _claim(rt: Runtime, now: datetime) -> list[ledger_sends.Due]:
    """Reserve the next batch of sends in the ledger (one transaction)."""
    s = rt.settings
    async with rt.engine.begin() as conn:
        return await ledger_sends.claim_due(
            conn,
            now=now,
            lookahead=timedelta(seconds=s.dispatch_lookahead_seconds),
            redelivery=timedelta(seconds=s.redelivery_seconds),
            limit=BATCH,
            team_max=s.long_team_max_running,
        )


async def _send(rt: Runtime, due: list[ledger_sends.Due]) -> tuple[int, bool]:
    """Hand a batch to Redis in one round trip: (how many Redis took, Redis reachable)."""
    if not due:
        return 0, True
    sent = await rt.queue.send_many([Send(d.task_id, d.run, d.send, d.lane, d.run_at) for d in due])
    failed = [d for d, ok in zip(due, sent.accepted, strict=True) if not ok]
    if failed:
        async with rt.engine.begin() as conn:
            await ledger_sends.unsend(conn, failed)
    return len(due) - len(failed), sent.reachable


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    """One pass (batches until nothing more is due); returns how many messages Redis took."""
    now = now or rt.clock()
    # The epoch check runs beside the first claim: a pass costs max(SQL, Redis), not the sum.
    epoch = asyncio.create_task(rt.queue.mark_epoch())
    try:
        due = await _claim(rt, now)
    except BaseException:
        if await epoch:
            await rt.queue.clear_epoch()  # noticed, but not acted on: the next pass must see it
        raise
    lost = bool(await epoch)
    if lost:
        # Sent messages may be gone: resend all (each resend removes its predecessor).
        async with rt.engine.begin() as conn:
            forgotten = await ledger_sends.forget_sends(conn, keep=[d.task_id for d in due])
        log.warning("Redis lost its data (no epoch key): resending %d waiting task(s)", forgotten)
    total = 0
    for batch in range(MAX_BATCHES):
        # Only a full batch (or the sends just forgotten) can leave more due: the next claim
        # then overlaps this batch's Redis round trip, and a pass with fewer due rows makes no
        # second, empty claim.
        again = len(due) == BATCH or (lost and batch == 0)
        more = asyncio.create_task(_claim(rt, now)) if again and batch < MAX_BATCHES - 1 else None
        try:
            taken, reachable = await _send(rt, due)
        except BaseException:
            if more is not None:
                more.cancel()  # committed or not: its rows wait for the redelivery window
            raise
        total += taken
        if more is None:
            break
        due = await more
        if not reachable:
            if due:  # Redis is away: hand the overlapping claim's reservations back at once
                async with rt.engine.begin() as conn:
                    await ledger_sends.unsend(conn, due)
            break
    return total
