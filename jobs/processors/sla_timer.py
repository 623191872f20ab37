"""SLA_TIMER: a ticket's SLA warning or breach at its instant (desk/work/sla_firing.py), or a
bounded run of a team's replan after its policy changed (desk/work/sla_replans.py).

A timer decides, finishes and notifies in one transaction with the ticket locked, so each alert
is written exactly once whichever worker dies mid-way (the rescued row fires again and finds it
written, or finds nothing and writes it).
"""

from __future__ import annotations

from desk.work import sla_firing, sla_replans
from jobs.execution import Execution


async def process(ex: Execution) -> None:
    if sla_replans.is_team_replan(ex.row):

        async def progress(done: int) -> None:
            await ex.progress(done, message=f"{done} tickets planned again")
            ex.raise_if_stopped()

        ex.finished(await sla_replans.run(ex.rt, ex.row, ex.execution_id, progress))
        return
    ex.finished(await sla_firing.fire(ex.rt, ex.row, ex.execution_id))
