"""A team's open tickets planned again after its SLA policy changed (docs/architecture.md,
"Business hours").

Saving or clearing a policy (desk.helpdesk.sla_store, from every face) queues, in the same
transaction (`sla_store.CHANGED`, registered here), one task of kind SLA_TIMER in the scope
`sla-team:<team>:<stamp>` with `filters = {"team_replan": true}`. Why SLA_TIMER and not a kind
of its own: it is the same work as a timer (plan a ticket's clocks, end the timers the plan no
longer wants), on the same short lane and within the same time limit, and a new kind would need
a migration of the CHECK `kind_valid`, its own reach in the access matrix and its own lane —
for a task staff see beside the timers it supersedes anyway.

The run is bounded: each batch (`BATCH` tickets by id, locked one batch at a time in its own
transaction) replans each ticket as a reply would (`sla_timers.replan`, superseded timers ending
as "superseded (the team's SLA policy changed)"), and one execution stops after `PER_RUN`
tickets, completing and queueing its continuation (`after` = the last ticket id) in one
transaction — so a team with 100,000 open tickets is many short tasks, none near a time limit,
none an unbounded transaction, and a killed worker's rescued task resumes at its checkpoint.
A second change while a run is under way queues a run of its own (a newer stamp); every replan
reads the policy current at that moment, so the older run only repeats work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import message
from desk.core.runtime import Runtime
from desk.helpdesk import sla_store
from desk.ledger import run as ledger_run
from desk.ledger.run import Row
from desk.ledger.sql import one, rows
from desk.work import sla_timers

BATCH = 200
PER_RUN = 1_000  # ~3 statements a ticket: one execution stays far inside its 60 s limit
POLICY = "sla_timer.skipped.policy"
# The team's tickets that may have clocks: not resolved or closed, or still carrying a due time.
_BATCH = (
    "SELECT id FROM ticket WHERE team_id = %(team)s AND id > %(after)s "
    " AND (status NOT IN ('RESOLVED', 'CLOSED') OR sla_due_at IS NOT NULL) "
    "ORDER BY id LIMIT %(n)s FOR NO KEY UPDATE"
)
_QUEUE = (
    "INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, "
    " max_attempts, sends, created_at, updated_at) "
    "VALUES ('SLA_TIMER', %(team)s, %(owner)s, %(scope)s, %(filters)s::jsonb, %(now)s, "
    " %(max)s, 0, %(now)s, %(now)s) "
    "ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING "
    "RETURNING id"
)


def is_team_replan(task: Row) -> bool:
    return bool((task.filters or {}).get("team_replan"))


async def queue(
    db: Any, team_id: int, owner_id: int, now: datetime, *, after: int = 0, stamp: str = ""
) -> int | None:
    """A team replan from ticket id `after` on, in the caller's transaction; its id (None: the
    same run is active already)."""
    stamp = stamp or f"{now.timestamp():.6f}"
    filters = {"team_replan": True, "after": after, "stamp": stamp}
    found = await one(
        db, _QUEUE, {"team": team_id, "owner": owner_id, "scope": f"sla-team:{team_id}:{stamp}",
                     "filters": json.dumps(filters), "now": now, "max": sla_timers.MAX_ATTEMPTS},
    )  # fmt: skip
    return found["id"] if found else None


async def _changed(conn: AsyncConnection, team_id: int, by: int, now: datetime) -> None:
    await queue(conn, team_id, by, now)


sla_store.CHANGED.append(_changed)  # a policy saved or cleared, in its transaction


@dataclass(frozen=True)
class Batch:
    planned: int
    last_id: int | None  # None: no ticket left after this batch


async def replan_batch(rt: Runtime, team_id: int, *, after: int) -> Batch:
    """Plan the next `BATCH` tickets after id `after` again, in one transaction."""
    async with rt.engine.begin() as conn:
        found = await rows(conn, _BATCH, {"team": team_id, "after": after, "n": BATCH})
        now = rt.clock()
        for r in found:
            await sla_timers.replan(conn, r["id"], now, why=POLICY)
    last = found[-1]["id"] if len(found) == BATCH else None
    return Batch(len(found), last)


async def run(rt: Runtime, task: Row, execution_id: str, progress: Any) -> Row | None:
    """One execution: batches until none is left or `PER_RUN` tickets are done, then the
    finish (and the continuation, when tickets are left) in one transaction."""
    filters = task.filters or {}
    after, done = int(filters.get("after") or 0), 0
    last: int | None = after
    while last is not None and done < PER_RUN:
        batch = await replan_batch(rt, task.team_id, after=after)
        done += batch.planned
        last = batch.last_id
        after = last or after
        await progress(done)
    said = message("sla_timer.replanned", count=done)
    async with rt.engine.begin() as conn:
        row = await ledger_run.complete(
            conn, task.id or 0, execution_id, now=rt.clock(), summary=said.text,
            summary_key=said.key, summary_params=said.params,
        )  # fmt: skip
        if row is not None and row.status == "COMPLETED" and last is not None:
            await queue(conn, task.team_id, task.owner_id, rt.clock(), after=after,
                        stamp=str(filters.get("stamp") or ""))  # fmt: skip
    return row
