"""Dispatcher: sends due WAITING tasks to arq (the safety net behind the web's direct send).

Rows are claimed with `FOR UPDATE SKIP LOCKED`, so any number of dispatchers can sweep at once
and each due row is sent by one of them. A sweep reserves a new send number per row in the
ledger (one autocommit statement per batch on `rt.pg`: no BEGIN/COMMIT round trips, no ORM
rows), then hands the batch's messages to Redis in one round trip while the next batch is
claimed; sends Redis refused are handed back. Beside the first claim runs the check of Redis's
epoch key: when it is gone, Redis lost its data, and every sent-but-unclaimed task (deferred
ones included) whose job Redis no longer holds is sent again at once. Only the dispatcher writes
the key, so a Redis no dispatcher has used yet (a new one, the web's sends already in it) has
none either: its sends stay as they are, and with nothing to resend the pass says so at INFO,
not as a loss.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from desk.core.runtime import Runtime
from desk.ledger import delivery
from desk.ledger import sends as ledger_sends

log = logging.getLogger(__name__)
BATCH = 1000  # rows per claim: one Redis round trip sends a whole batch
MAX_BATCHES = 20  # per pass; what is left waits for the next pass


async def _claim(rt: Runtime, now: datetime) -> list[ledger_sends.Due]:
    """Reserve the next batch of sends in the ledger: one autocommit statement on `rt.pg`."""
    s = rt.settings
    return await ledger_sends.claim_due(
        rt.pg,
        now=now,
        lookahead=timedelta(seconds=s.dispatch_lookahead_seconds),
        redelivery=timedelta(seconds=s.redelivery_seconds),
        limit=BATCH,
        team_max=s.long_team_max_running,
        mail_max=s.team_mail_max_queued,
    )


async def _forget_lost(rt: Runtime, keep: list[int]) -> int:
    """No epoch key: hand back (`unsend`) each send whose job Redis no longer holds, so this
    pass sends it again; returns how many. `keep`: reserved by this pass, not yet sent."""
    forgotten, after = 0, 0
    while True:
        async with rt.engine.connect() as conn:
            sent = await ledger_sends.sent_waiting(conn, keep=keep, after=after, limit=BATCH)
        if not sent:
            return forgotten
        held = await rt.queue.held([d.message() for d in sent]) or [False] * len(
            sent
        )  # unknown: resend
        lost = [d for d, ok in zip(sent, held, strict=True) if not ok]
        if lost:
            await ledger_sends.unsend(rt.pg, lost)
        forgotten += len(lost)
        after = sent[-1].task_id


async def _send(rt: Runtime, due: list[ledger_sends.Due]) -> tuple[int, bool]:
    """Hand a batch to Redis in one round trip: (how many Redis took, Redis reachable)."""
    if not due:
        return 0, True
    sent = await delivery.hand_over(rt.queue, rt.pg, due)
    return sum(sent.accepted), sent.reachable


async def run_once(rt: Runtime, now: datetime | None = None) -> int:
    """One pass (batches until nothing more is due); returns how many messages Redis took."""
    now = now or rt.clock()
    # The epoch check runs beside the first claim: a pass costs max(SQL, Redis), not the sum.
    epoch = asyncio.create_task(rt.queue.mark_epoch())
    try:
        due = await _claim(rt, now)
        lost = await _forget_lost(rt, keep=[d.task_id for d in due]) if await epoch else None
    except BaseException:
        if await epoch:
            await rt.queue.clear_epoch()  # noticed, but not acted on: the next pass must see it
        raise
    if lost:
        log.warning("Redis lost its data (no epoch key): resending %d waiting task(s)", lost)
    elif lost == 0:
        log.info("Redis has no epoch key (new or emptied); no waiting task to resend")
    total = 0
    for batch in range(MAX_BATCHES):
        # Only a full batch (or the sends just handed back) can leave more due: the next claim
        # then overlaps this batch's Redis round trip, and a pass with fewer due rows makes no
        # second, empty claim.
        again = len(due) == BATCH or (bool(lost) and batch == 0)
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
                await ledger_sends.unsend(rt.pg, due)
            break
    return total
