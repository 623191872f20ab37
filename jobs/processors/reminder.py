"""REMINDER: at fire time skip (and say why) or notify, in the transaction that completes it."""

from __future__ import annotations

from desk import access, ledger, notifications, reminders
from desk.messages import message
from jobs.execution import Execution
from jobs.outcomes import LostFence


async def process(ex: Execution) -> None:
    rt, task = ex.rt, ex.task
    async with rt.engine.begin() as conn:
        owner = await access.membership(conn, task.owner_id, task.team_id)
        if owner is None or not owner.is_staff:
            firing = reminders.Firing(True, message("reminder.skipped.owner_left"))
        else:
            firing = await reminders.decide(conn, task)
        done = await ledger.finish(
            conn,
            ex.task_id,
            ex.execution_id,
            now=rt.clock(),
            summary=firing.summary.text,
            summary_key=firing.summary.key,
            summary_params=firing.summary.params,
            skipped=firing.skipped,
        )
        if done is None:
            raise LostFence()  # rolls back: nothing is written twice
        if not firing.skipped:
            await notifications.insert_many(
                conn,
                user_ids=list(firing.recipients),
                team_id=task.team_id,
                task_id=ex.task_id,
                kind="REMINDER",
                text=firing.text,
                link=firing.link,
            )
