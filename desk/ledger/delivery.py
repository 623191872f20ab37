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
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from desk.core import tracing
from desk.core.gather import Gather, Stopped
from desk.core.queue import Queue, Send
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends


class Sender:
    """One process's direct sends to one queue, gathered (desk/core/gather.py): one round
    trip for all those waiting. The sends Redis refused are handed back in the ledger in one
    statement by the round trip itself, so a caller that stopped waiting (cancelled) leaves no
    reserved send behind."""

    def __init__(self, queue: Queue, engine: AsyncEngine) -> None:
        self._queue = weakref.ref(queue)  # the process's senders are kept by queue, weakly
        self._engine = engine
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
        sent = await queue.send_many([_message(d) for d in dues])
        refused = [d for d, ok in zip(dues, sent.accepted, strict=True) if not ok]
        if refused:
            async with self._engine.begin() as conn:
                await ledger_sends.unsend(conn, refused)
        return sent.accepted


def _message(due: ledger_sends.Due) -> Send:
    return Send(due.task_id, due.run, due.send, due.lane, due.run_at)


_senders: weakref.WeakKeyDictionary[Queue, Sender] = weakref.WeakKeyDictionary()


def sender(rt: Runtime) -> Sender:
    """The process's sender for `rt`'s queue (made on first use)."""
    found = _senders.get(rt.queue)
    if found is None:
        found = _senders[rt.queue] = Sender(rt.queue, rt.engine)
    return found


class Sendable(Protocol):
    """What a send reads of a task: a `BackgroundTask`, or an execution's `Row`."""

    @property
    def id(self) -> int | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def run(self) -> int: ...
    @property
    def run_at(self) -> datetime: ...
    @property
    def sends(self) -> int: ...
    @property
    def dispatched_at(self) -> datetime | None: ...


async def send_now(rt: Runtime, task: Sendable) -> bool:
    """Hand the task to arq now (deferred when it is due later); True if Redis took it."""
    now = rt.clock()
    s = rt.settings
    if task.status != "WAITING" or task.run_at > now + timedelta(
        seconds=s.dispatch_lookahead_seconds
    ):
        return False  # the dispatcher sends it when it comes within the look-ahead
    assert task.id is not None
    due: ledger_sends.Due | None
    if task.dispatched_at is not None and task.sends > 0:
        # the insert's own send
        due = ledger_sends.Due(task.id, task.run, task.run_at, task.sends, task.kind)
    else:
        async with rt.engine.begin() as conn:
            due = await ledger_sends.reserve_send(
                conn, task.id, task.run, now=now, team_max=s.long_team_max_running
            )
    if due is None:
        return False
    if tracing.enabled():
        return await _send_alone(rt, due)  # each message carries its own request's trace
    return await sender(rt).send(due)


async def _send_alone(rt: Runtime, due: ledger_sends.Due) -> bool:
    sent = await rt.queue.send_many([_message(due)])
    if not sent.accepted[0]:
        async with rt.engine.begin() as conn:
            await ledger_sends.unsend(conn, [due])
        return False
    return True
