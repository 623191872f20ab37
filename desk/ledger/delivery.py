"""Sending a task to Redis right after a state change (accept, retry, rescue, a failed attempt).

The send is reserved in the ledger first (`sends + 1`, `dispatched_at`), unless the insert
already reserved send 1; a send Redis does not take is handed back (`dispatched_at` NULL), so the
dispatcher's next sweep tries again instead of waiting out the redelivery window.

One process's sends are gathered (`Sender`): the sends made in the same moment, and those made
while a round trip is out, go to Redis together in the next one (see docs/architecture.md,
"Sends and lanes").
"""

from __future__ import annotations

import weakref
from datetime import timedelta

from desk.core import tracing
from desk.core.gather import Gather, Stopped
from desk.core.models import BackgroundTask, TaskStatus
from desk.core.pg import Pg
from desk.core.queue import Queue, Sent
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends
from desk.ledger.run import Row


async def hand_over(queue: Queue, pg: Pg, dues: list[ledger_sends.Due]) -> Sent:
    """Hand reserved sends to Redis in one round trip; those Redis refused (or could not be
    asked) are handed back in the ledger in one statement, so the next sweep sends them."""
    sent = await queue.send_many([d.message() for d in dues])
    refused = [d for d, ok in zip(dues, sent.accepted, strict=True) if not ok]
    if refused:
        await ledger_sends.unsend(pg, refused)
    return sent


class Sender:
    """One process's direct sends, gathered (desk/core/gather.py): one round trip for all those
    waiting. The round trip itself hands refused sends back (`hand_over`), so a caller that
    stopped waiting (cancelled) leaves no reserved send behind."""

    def __init__(self, queue: Queue, pg: Pg) -> None:
        self._queue = weakref.ref(queue)  # the process's senders are kept by queue, weakly
        self._pg = pg
        self._gather: Gather[ledger_sends.Due, bool] = Gather(self._round_trip)

    async def send(self, due: ledger_sends.Due) -> bool:
        """Hand `due` to Redis with whatever else is being sent; True if Redis took it."""
        try:
            return await self._gather.call(due)
        except Stopped:
            return False  # reserved, not sent: the dispatcher sends it

    async def _round_trip(self, dues: list[ledger_sends.Due]) -> list[bool]:
        queue = self._queue()
        if queue is None:  # its runtime closed: reserved, not sent, the dispatcher sends them
            return [False] * len(dues)
        return (await hand_over(queue, self._pg, dues)).accepted


_senders: weakref.WeakKeyDictionary[Queue, Sender] = weakref.WeakKeyDictionary()


def sender(rt: Runtime) -> Sender:
    """The process's sender for `rt`'s queue (made on first use)."""
    found = _senders.get(rt.queue)
    if found is None:
        found = _senders[rt.queue] = Sender(rt.queue, rt.pg)
    return found


async def send_now(rt: Runtime, task: BackgroundTask | Row) -> bool:
    """Hand the task to arq now (deferred when it is due later); True if Redis took it."""
    now = rt.clock()
    s = rt.settings
    if task.status != TaskStatus.WAITING or task.run_at > now + timedelta(
        seconds=s.dispatch_lookahead_seconds
    ):
        return False  # the dispatcher sends it when it comes within the look-ahead
    assert task.id is not None
    due: ledger_sends.Due | None
    if task.dispatched_at is not None and task.sends > 0:
        # the insert's own send
        filters = getattr(task, "filters", None) or {}
        urgent = ledger_sends.urgent(task.kind, filters.get("template"))
        due = ledger_sends.Due(task.id, task.run, task.run_at, task.sends, task.kind, urgent)
    else:
        async with rt.engine.begin() as conn:
            due = await ledger_sends.reserve_send(
                conn, task.id, task.run, now=now, team_max=s.long_team_max_running,
                mail_max=s.team_mail_max_queued,
            )  # fmt: skip
    if due is None:
        return False
    return await send_reserved(rt, due)


async def send_reserved(rt: Runtime, due: ledger_sends.Due) -> bool:
    """Hand a send the ledger already reserved (and committed) to Redis; True if Redis took it."""
    if tracing.enabled():  # each message carries its own request's trace
        return (await hand_over(rt.queue, rt.pg, [due])).accepted[0]
    return await sender(rt).send(due)
