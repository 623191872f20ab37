"""reminder-burst: 200 reminders due in the same second while every long slot runs a whole-team
export of the 1M-ticket team (issue 10).

One worker with its default slots; the team may fill every long slot for this row
(`LONG_TEAM_MAX_RUNNING` = the long slots), so three 1M-row exports run at once: two people,
three filters that each match every ticket. N reminders on N open tickets are scheduled due at
one instant; six seconds before it the three exports start (scheduling 200 reminders beside
them would take longer than they run). Lateness is `finished_at - run_at` (the
notification commits at `finished_at`); the exports running at the instant the reminders were
due are counted in the note (the row is void if none was).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta

import sqlalchemy as sa

from bench.b_reminders import _drained, _lateness, _open_tickets
from bench.harness import Ctx, runtime, wait_tasks, workers
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime
from desk.work import reminders, tasks

SCHEDULE_SECONDS_EACH = 0.1  # the reminders' due instant leaves this much per reminder to schedule
EXPORTS_AHEAD = 6.0  # the exports start this long before the burst, so they are in full swing
EVERYTHING = ("OPEN", "PENDING", "RESOLVED", "CLOSED")


async def _fill_long_slots(ctx: Ctx, rt: Runtime, slots: int) -> list[tuple[int, int]]:
    p = ctx.people
    assert p is not None
    wanted = [(p.zhou, {}), (p.chen, {}), (p.zhou, {"status": list(EVERYTHING)})]
    wanted += [(p.chen, {"status": list(EVERYTHING)})] * max(0, slots - 3)
    made = []
    for user, filters in wanted[:slots]:
        made.append((user, (await tasks.create_export(rt, user, p.big_team, filters)).id or 0))
    await wait_tasks(rt, "kind = 'EXPORT' AND status = 'RUNNING'", {}, slots, within=60)
    return made


async def _burst(ctx: Ctx, rt: Runtime, run: int) -> tuple[list[int], datetime]:
    p = ctx.people
    assert p is not None
    n = ctx.sizes.reminders
    tickets = await _open_tickets(rt, p.big_team, n, (10 + run) * n)
    due = rt.clock() + timedelta(seconds=EXPORTS_AHEAD + 3 + n * SCHEDULE_SECONDS_EACH)
    ids = [(await reminders.schedule_reminder(rt, p.chen, t, at=due)).id or 0 for t in tickets]
    return ids, due


async def _running_at(rt: Runtime, ids: list[int], due: datetime) -> int:
    """How many of the exports ran at the instant the reminders were due."""
    async with rt.engine.connect() as conn:
        q = sa.text(
            "SELECT count(*) FROM background_task WHERE id = ANY(:i) AND started_at <= :due "
            " AND (finished_at IS NULL OR finished_at > :due)"
        )
        return int((await conn.execute(q, {"i": ids, "due": due})).scalar_one())


async def reminder_burst(ctx: Ctx) -> list[Row]:
    p50: list[float] = []
    p99: list[float] = []
    start50: list[float] = []  # started_at - run_at: the part spent waiting for a slot
    busy: list[int] = []
    slots = 3
    settings = ctx.settings("burst", worker_long_slots=slots, long_team_max_running=slots)
    async with runtime(settings) as rt, workers(ctx, rt, "burst"):
        for run in range(ctx.sizes.long_runs):
            ids, due = await _burst(ctx, rt, run)
            ahead = (due - rt.clock()).total_seconds() - EXPORTS_AHEAD
            await asyncio.sleep(max(0.0, ahead))  # a benchmark's schedule, not a wait for state
            began = time.monotonic()
            exports = await _fill_long_slots(ctx, rt, slots)
            fire, start = await _lateness(rt, ids, EXPORTS_AHEAD + 10)
            start50.append(percentile(start, 50))
            busy.append(await _running_at(rt, [t for _, t in exports], due))
            for user, task_id in exports:
                await tasks.cancel_task(rt, user, task_id)
            await _drained(rt, "kind = 'EXPORT' AND status IN ('WAITING', 'RUNNING')")
            p50.append(percentile(fire, 50))
            p99.append(percentile(fire, 99))
            if not busy[-1]:
                raise RuntimeError(
                    f"no export ran when the burst was due ({time.monotonic() - began:.1f} s)"
                )
    note = (
        f"{ctx.sizes.reminders} reminders due at one instant; {slots} long slots each running a "
        f"{ctx.sizes.big:,}-row export; exports running at the due instant: {busy}"
    )
    return [
        Row(
            "reminder-burst p50",
            "ms",
            p50,
            target=Target("value<=", 100),
            note=note,
            extra={"start_p50_ms": start50},
        ),
        Row("reminder-burst p99", "ms", p99, target=Target("value<=", 250)),
    ]
