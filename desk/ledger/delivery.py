"""Sending a task to Redis right after a state change (accept, retry, rescue, a failed attempt).

The send is reserved in the ledger first (`sends + 1`, `dispatched_at`), unless the insert
already reserved send 1; a send Redis does not take is handed back (`dispatched_at` NULL), so the
dispatcher's next sweep tries again instead of waiting out the redelivery window.
"""

from __future__ import annotations

from datetime import timedelta

from desk.core.models import BackgroundTask
from desk.core.queue import Send
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends
from desk.ledger.run import Row


async def send_now(rt: Runtime, task: BackgroundTask | Row) -> bool:
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
    sent = await rt.queue.send_many([Send(due.task_id, due.run, due.send, due.lane, due.run_at)])
    if not sent.accepted[0]:
        async with rt.engine.begin() as conn:
            await ledger_sends.unsend(conn, [due])
        return False
    return True
