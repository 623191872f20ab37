"""reminder-lateness (idle) and reminder-lateness-busy (while two big exports run).

N reminders on N open tickets of the big team, due evenly over a window that starts a few
seconds after they are all scheduled (through `desk.work.reminders.schedule_reminder`, which hands
them to arq with a defer). Lateness is `finished_at - run_at` from the ledger (the notification
is committed at `finished_at`); `started_at - run_at` is kept in the JSON. Busy runs keep two
exports of the big team (two people, all tickets) running for the whole window.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

import sqlalchemy as sa

from bench.harness import Ctx, People, runtime, wait_tasks, workers
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime
from desk.work import reminders, tasks

LEAD_SECONDS = 3.0


async def _open_tickets(rt: Runtime, team: int, n: int, offset: int) -> list[int]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT id FROM ticket WHERE team_id = :t AND status IN ('OPEN', 'PENDING') "
                "ORDER BY id LIMIT :n OFFSET :o"
            ),
            {"t": team, "n": n, "o": offset},
        )
        return [r.id for r in rows]


async def _schedule(ctx: Ctx, rt: Runtime, run: int) -> tuple[list[int], float]:
    """Schedule the reminders; (task ids, seconds until the last one is due)."""
    p = ctx.people
    assert p is not None
    n, span = ctx.sizes.reminders, ctx.sizes.reminder_span
    tickets = await _open_tickets(rt, p.big_team, n, run * n)
    start = rt.clock() + timedelta(seconds=LEAD_SECONDS + n * 0.01)
    ids = []
    for i, ticket in enumerate(tickets):
        at = start + timedelta(seconds=span * i / max(1, n - 1))
        task = await reminders.schedule_reminder(rt, p.chen, ticket, at=at)
        ids.append(task.id or 0)
    return ids, (start - rt.clock()).total_seconds() + span


async def _lateness(rt: Runtime, ids: list[int], wait: float) -> tuple[list[float], list[float]]:
    where = "id = ANY(:ids) AND status IN ('COMPLETED', 'FAILED')"
    await wait_tasks(rt, where, {"ids": ids}, len(ids), within=wait + 60, interval=0.2)
    async with rt.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.text(
                    "SELECT run_at, started_at, finished_at, status, result_skipped "
                    "FROM background_task WHERE id = ANY(:ids)"
                ),
                {"ids": ids},
            )
        ).all()
    bad = [r for r in rows if r.status != "COMPLETED" or r.result_skipped]
    if bad:
        raise RuntimeError(f"{len(bad)} reminders did not fire normally (e.g. {bad[0]})")
    fire = [(r.finished_at - r.run_at).total_seconds() * 1000 for r in rows]
    start = [(r.started_at - r.run_at).total_seconds() * 1000 for r in rows]
    return fire, start


async def _keep_exports_busy(rt: Runtime, p: People, stop: asyncio.Event) -> int:
    """Keep one whole-team export per person (two at once) running until `stop`; count started."""
    started = 0
    active: dict[int, int] = {}
    deadline = time.monotonic() + 600
    while not stop.is_set() and time.monotonic() < deadline:
        for user in (p.zhou, p.chen):
            task_id = active.get(user)
            if task_id is not None:
                task = await tasks.get_task(rt, user, task_id)
                if task.status in ("WAITING", "RUNNING"):
                    continue
            active[user] = (await tasks.create_export(rt, user, p.big_team, {})).id or 0
            started += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
    for user, task_id in active.items():
        await tasks.cancel_task(rt, user, task_id)
    return started


async def _run(ctx: Ctx, rt: Runtime, run: int, busy: bool) -> tuple[list[float], list[float], int]:
    p = ctx.people
    assert p is not None
    stop = asyncio.Event()
    keeper = asyncio.create_task(_keep_exports_busy(rt, p, stop)) if busy else None
    try:
        if keeper is not None:
            where = "kind = 'EXPORT' AND status = 'RUNNING'"
            await wait_tasks(rt, where, {}, 2, within=60)
        ids, wait = await _schedule(ctx, rt, run)
        fire, start = await _lateness(rt, ids, wait)
    finally:
        stop.set()
        exports = await keeper if keeper is not None else 0
    if keeper is not None:  # let the cancelled exports stop before the next run
        await _drained(rt, "kind = 'EXPORT' AND status IN ('WAITING', 'RUNNING')")
    return fire, start, exports


async def _drained(rt: Runtime, where: str, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            left = (
                await conn.execute(sa.text(f"SELECT count(*) FROM background_task WHERE {where}"))
            ).scalar_one()
        if not left:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("exports still active after the busy run")


async def reminder_lateness(ctx: Ctx) -> list[Row]:
    idle: dict[str, list[float]] = {"p50": [], "p99": [], "start_p99": []}
    busy: dict[str, list[float]] = {"p50": [], "p99": [], "start_p99": []}
    exports = 0
    async with runtime(ctx.settings("remind")) as rt, workers(ctx, rt, "remind"):
        for i in range(ctx.sizes.long_runs):
            for mode, store in (("idle", idle), ("busy", busy)):
                run = 2 * i + (mode == "busy")
                fire, start, n = await _run(ctx, rt, run, busy=mode == "busy")
                exports += n
                store["p50"].append(percentile(fire, 50))
                store["p99"].append(percentile(fire, 99))
                store["start_p99"].append(percentile(start, 99))
    n, span = ctx.sizes.reminders, ctx.sizes.reminder_span
    return [
        Row(
            "reminder-lateness p50",
            "ms",
            idle["p50"],
            note=f"{n} reminders due over {span:.0f} s; fire = finished_at",
            extra=idle,
        ),
        Row("reminder-lateness p99", "ms", idle["p99"], target=Target("value<=", 250)),
        Row("reminder-lateness-busy p50", "ms", busy["p50"], idle["p50"], extra=busy),
        Row(
            "reminder-lateness-busy p99",
            "ms",
            busy["p99"],
            idle["p99"],
            Target("value<=", 500),
            note=f"baseline: idle lateness; {exports} exports of the big team ran two at a time",
        ),
    ]
