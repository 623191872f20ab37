"""Scheduler: turns due export schedules into EXPORT tasks (desk.work.schedule_runs), one pass
per SCHEDULER_INTERVAL_SECONDS in every worker. Passes of several workers never make two tasks
for one occurrence: each due schedule is claimed `FOR UPDATE SKIP LOCKED` and advanced in the
transaction that creates its task (docs/architecture.md, "Scheduled exports")."""

from __future__ import annotations

from datetime import datetime

from desk.core.runtime import Runtime
from desk.work import mailboxes, rule_runs, schedule_runs


async def run_once(rt: Runtime, now: datetime | None = None) -> schedule_runs.Pass:
    """One pass: every schedule due at `now` (default: the runtime's clock); and every enabled
    mailbox without an active fetch gets one (docs/architecture.md, "Mail in")."""
    await mailboxes.ensure_fetches(rt.pg, now=now or rt.clock())
    await rule_runs.ensure_runs(rt.pg, now=now or rt.clock())  # "Time rules on the ledger"
    return await schedule_runs.run_due(rt, now or rt.clock())
