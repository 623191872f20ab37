"""TIME_RULE: one run of a team's time rules (docs/architecture.md, "Time rules on the ledger").

The run goes once through the team's due tickets in batches (desk/work/rule_runs.py
`run_once`), each ticket acted on and claimed in its own transaction, writing progress (and so
its fence and lease) between batches. It ends in the transaction that completes it and queues
the team's next run at its next due instant, so a team with rules always has a run active or
due — and the scheduler's pass restarts a chain that a run failed for good ended."""

from __future__ import annotations

from desk.ledger import run as ledger_run
from desk.work import rule_runs
from jobs.execution import Execution


async def process(ex: Execution) -> None:
    rt = ex.rt
    team_id = ex.row.team_id
    after, acted, seen = 0, 0, 0
    while True:
        done = await rule_runs.run_once(rt, team_id, ex.task_id, after=after)
        acted += len(done.acted)
        seen += done.seen
        await ex.progress(acted, message=f"{acted} tickets acted on")
        if done.seen < rule_runs.BATCH:
            break
        after = done.last_id
    said = f"{acted} tickets acted on ({seen - acted} no longer due)." if seen else "Nothing due."
    async with rt.engine.begin() as conn:
        row = await ledger_run.complete(
            conn, ex.task_id, ex.execution_id, now=rt.clock(), summary=said
        )
        if row is not None:
            await rule_runs.schedule_next(conn, team_id, now=rt.clock())
    ex.finished(row)
