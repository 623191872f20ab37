"""REMINDER: at fire time skip (and say why) or notify, in the transaction that completes it.

Reminders due together fire together: `fire_many` decides a whole batch with one read, finishes
every row whose fence still holds with one UPDATE and writes their notifications with one
INSERT, all in one transaction — so each fired reminder notifies exactly once, however often a
message arrives or whichever worker dies mid-batch (its rows are rescued and fire again).
"""

from __future__ import annotations

from desk.core.messages import message
from desk.core.models import TaskStatus
from desk.core.runtime import Runtime
from desk.helpdesk import notifications
from desk.ledger import upkeep as ledger_upkeep
from desk.ledger.run import Row
from desk.work import news, reminder_firing
from jobs.execution import Execution
from jobs.outcomes import LostFence


async def fire_many(rt: Runtime, claimed: list[tuple[Row, str]]) -> set[int]:
    """Fire claimed reminders (task, execution id); returns the ids this call ended. A reminder
    whose cancel was recorded before the finish ends CANCELLED and notifies nobody."""
    ids = [task.id or 0 for task, _ in claimed]
    async with rt.engine.begin() as conn:
        firings = await reminder_firing.decide_many(conn, ids)
        missing = reminder_firing.Firing(True, message("reminder.skipped.task_gone"))
        endings = [
            ledger_upkeep.Ending(
                task.id or 0, eid, f.summary.text, f.skipped, f.summary.key, f.summary.params
            )
            for task, eid in claimed
            for f in [firings.get(task.id or 0, missing)]
        ]
        done = await ledger_upkeep.complete_many(conn, endings, now=rt.clock())
        rows = [
            (user, task.team_id, task.id or 0, "REMINDER", f.text, f.link)
            for task in done
            for f in [firings[task.id or 0]]
            if task.status == TaskStatus.COMPLETED and not f.skipped and f.text is not None
            for user in f.recipients
        ]
        await notifications.insert_rows(conn, rows)
        fired = [
            news.Reminded(task.team_id, task.ticket_id, str(f.text.params["title"]), f.recipients)
            for task in done
            for f in [firings[task.id or 0]]
            if task.status == TaskStatus.COMPLETED and not f.skipped and f.text is not None
            if task.ticket_id is not None
        ]
        await news.reminder_emails(conn, fired, now=rt.clock())
    return {task.id or 0 for task in done}


async def process(ex: Execution) -> None:
    """One reminder taken on its own (the batch path with one row)."""
    if ex.task_id not in await fire_many(ex.rt, [(ex.row, ex.execution_id)]):
        raise LostFence()  # another execution holds the row now: nothing was written
