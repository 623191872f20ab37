"""sla-timers (issue 42): N SLA timers (10,000; 1,000 with `--quick`) due in the same minute
while the long lanes are busy, through the real path (desk/work/sla_timers.py plans them,
the SLA_TIMER processor fires them: desk/work/sla_firing.py) and one real worker.

A scratch database of its own (the demo people) gets an SLA policy for the small team (the demo
gives the big one its own policy and time rules; their runs stay the big team's): every day
00:00-24:00 UTC, first response of a NORMAL ticket within TARGET s, warned at half of it. N open
tickets are inserted in one statement, their created_at spread so that their warnings fall
evenly over one minute starting LEAD s after they are planned (`sla_timers.replan`, the code a
ticket's creation runs, PLAN_TX tickets a transaction); each ticket gets its warning timer (due
in that minute) and its breach timer (TARGET/2 later, still waiting at the end). During the
minute two whole-team exports run back to back (bench/b_reminders.py's keeper): the long lanes
busy. Lateness of each warning: `ticket_clock_alert.fired_at - background_task.run_at` (the
alert is written in the timer's finishing transaction); `finished_at - run_at` in the note.
Every warning must fire (none skipped). Targets: p99 <= 250 ms.

`sla-timers sweep (nothing due)`: after the burst, the workers stopped, one
`jobs.dispatcher.run_once` with nothing due (median of 20) over that ledger: N finished timers
and N breach timers waiting. Target <= 5 ms (the sweep row's).

    python -m bench --only sla-timers [--quick]
    python -m bench.b_sla [--n 1000]       (alone: skips the table's seeding)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from bench import env
from bench.b_inbound import scratch
from bench.b_reminders import _drained, _keep_exports_busy
from bench.harness import FULL, QUICK, Ctx, load_people, wait_tasks, workers
from bench.stats import Row, Target, percentile, table
from desk.core.runtime import Runtime
from desk.helpdesk import sla_store
from desk.work import sla_timers
from jobs import dispatcher

N_FULL, N_QUICK = 10_000, 1_000
TARGET = 3600  # s: first response of a NORMAL ticket; warned at WARN_SHARE of it
WARN_SHARE = 0.5
SPREAD = 60.0  # s: the warnings fall evenly over this minute
PLAN_TX = 500  # tickets planned a transaction
DAY = ["00:00-24:00"]
CALENDAR = {
    "zone": "UTC",
    "hours": dict.fromkeys(("mon", "tue", "wed", "thu", "fri", "sat", "sun"), DAY),
}


def lead_seconds(n: int) -> float:
    """Time to insert and plan n tickets on a busy small machine, with room to spare."""
    return 30 + n * 0.02


async def _policy(rt: Runtime, team: int, by: int) -> None:
    """The policy row written as sla_store.save writes it, but without its CHANGED hook: that
    would queue a team replan run over these same tickets, which are planned here as their
    creation plans them (sla_store.parse still checks it)."""
    targets = {"first_response": {"NORMAL": TARGET}}
    sla_store.parse(CALENDAR, targets, WARN_SHARE)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO team_sla_policy (team_id, calendar, targets, warn_share, "
                " updated_by_id, updated_at) VALUES (:t, CAST(:c AS jsonb), CAST(:g AS jsonb), "
                " :w, :by, :now)"
            ),
            {"t": team, "c": json.dumps(CALENDAR), "g": json.dumps(targets), "w": WARN_SHARE,
             "by": by, "now": rt.clock()},
        )  # fmt: skip


async def _tickets(rt: Runtime, team: int, creator: int, n: int, first_warn: datetime) -> list[int]:
    """n open NORMAL tickets whose warnings fall evenly over SPREAD s from `first_warn`."""
    start = first_warn - timedelta(seconds=TARGET * WARN_SHARE)
    async with rt.engine.begin() as conn:
        found = await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, body, status, priority, creator_id, "
                " external_id, created_at, updated_at) SELECT :team, 'Waiting for an answer ' || g,"
                " 'Opened for the SLA bench.', 'OPEN', 'NORMAL', :creator, 'sla-bench-' || g, "
                " :start + (g * :step) * interval '1 second', :start "
                "FROM generate_series(0, :n - 1) g RETURNING id"
            ),
            {"team": team, "creator": creator, "start": start, "step": SPREAD / n, "n": n},
        )
        return sorted(r.id for r in found)


async def _customer(rt: Runtime) -> int:
    """The small team's demo customer (Cleo): the tickets' creator."""
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            sa.text("SELECT id FROM app_user WHERE split_part(email, '@', 1) = 'cleo'")
        )
        return int(found.scalar_one())


async def _plan(rt: Runtime, ids: list[int]) -> int:
    """Each ticket's timers, planned by the code a ticket's creation runs; how many queued."""
    queued = 0
    for first in range(0, len(ids), PLAN_TX):
        async with rt.engine.begin() as conn:
            for tid in ids[first : first + PLAN_TX]:
                planned = await sla_timers.replan(conn, tid, rt.clock())
                queued += len(planned.timers) if planned else 0
    return queued


_LATE = (
    "SELECT b.run_at, b.finished_at, b.status, b.result_skipped, a.fired_at "
    "FROM background_task b LEFT JOIN ticket_clock_alert a ON a.task_id = b.id "
    "WHERE b.kind = 'SLA_TIMER' AND b.filters->>'kind' = 'warning' AND b.ticket_id = ANY(:ids)"
)


async def _lateness(rt: Runtime, ids: list[int]) -> dict[str, Any]:
    async with rt.engine.connect() as conn:
        got = (await conn.execute(sa.text(_LATE), {"ids": ids})).all()
    bad = [r for r in got if r.status != "COMPLETED" or r.result_skipped or r.fired_at is None]
    if bad or len(got) != len(ids):
        raise RuntimeError(f"{len(bad)} of {len(got)} warnings did not fire (e.g. {bad[:1]})")
    fired = [(r.fired_at - r.run_at).total_seconds() * 1000 for r in got]
    done = [(r.finished_at - r.run_at).total_seconds() * 1000 for r in got]
    return {"fired": fired, "finished": done}


async def _empty_sweeps(rt: Runtime, times: int = 20) -> list[float]:
    await dispatcher.run_once(rt)  # whatever a stopped worker left: sent, untimed
    out = []
    for _ in range(times):
        began = time.perf_counter()
        sent = await dispatcher.run_once(rt)
        out.append((time.perf_counter() - began) * 1000)
        if sent:
            raise RuntimeError(f"a sweep with nothing due sent {sent} tasks")
    return out


async def _burst(own: Ctx, rt: Runtime, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    p = await load_people(rt)
    await _policy(rt, p.small_team, p.ada)
    lead = lead_seconds(n)
    first = datetime.now(UTC) + timedelta(seconds=lead)
    began = time.monotonic()
    ids = await _tickets(rt, p.small_team, await _customer(rt), n, first)
    queued = await _plan(rt, ids)
    planned_s = time.monotonic() - began
    if datetime.now(UTC) >= first:
        raise RuntimeError(f"planning took {planned_s:.0f} s, past the first warning's instant")
    info: dict[str, Any] = {"tickets": n, "queued": queued, "plan_s": round(planned_s, 1)}
    async with workers(own, rt, "sla"):
        stop = asyncio.Event()
        keeper = asyncio.create_task(_keep_exports_busy(rt, p, stop))
        try:
            await wait_tasks(rt, "kind = 'EXPORT' AND status = 'RUNNING'", {}, 1, within=60)
            where = "kind = 'SLA_TIMER' AND filters->>'kind' = 'warning' AND status = 'COMPLETED'"
            await wait_tasks(rt, where, {}, n, within=lead + SPREAD + 600, interval=0.5)
        finally:
            stop.set()
            info["exports"] = await keeper
        await _drained(rt, "kind = 'EXPORT' AND status IN ('WAITING', 'RUNNING')")
    late = await _lateness(rt, ids)
    info["sweeps_ms"] = await _empty_sweeps(rt)
    return late, info


async def measure(ctx: Ctx, n: int) -> list[Row]:
    async with scratch(ctx, "sla") as (own, rt):
        late, info = await _burst(own, rt, n)
    fired, done = late["fired"], late["finished"]
    note = (
        f"{n:,} warnings due over {SPREAD:.0f} s, two whole-team exports running back to back "
        f"({info['exports']} ran); fired_at - run_at; finished_at - run_at p50/p99 "
        f"{percentile(done, 50):.0f}/{percentile(done, 99):.0f} ms; planned in {info['plan_s']} s"
    )
    sweep = statistics.median(info["sweeps_ms"])
    return [
        Row("sla-timers p50", "ms", [percentile(fired, 50)], note=note, extra=info | late),
        Row("sla-timers p99", "ms", [percentile(fired, 99)], target=Target("value<=", 250)),
        Row("sla-timers sweep (nothing due)", "ms", [sweep], target=Target("value<=", 5),
            note=f"dispatcher.run_once, median of 20, {n:,} finished and {n:,} waiting timers"),
    ]  # fmt: skip


async def sla_timers_row(ctx: Ctx) -> list[Row]:
    return await measure(ctx, N_QUICK if ctx.quick else N_FULL)


async def _alone(n: int) -> list[Row]:
    servers = await asyncio.to_thread(env.open_servers)
    logs = env.ROOT / "bench" / "results" / "logs" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs.mkdir(parents=True, exist_ok=True)
    try:
        return await measure(
            Ctx(n < N_FULL, QUICK if n < N_FULL else FULL, servers, "", "", logs), n
        )
    finally:
        await asyncio.to_thread(servers.close)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.b_sla", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=N_FULL, help="tickets (one warning due each)")
    print(table(asyncio.run(_alone(p.parse_args().n))))


if __name__ == "__main__":
    main()
