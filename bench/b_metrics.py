"""metrics-scrape: the web's /metrics collector (`desk.console.scrape.scrape`) over a big ledger.

A database of its own gets N finished ledger rows and 1,000 due WAITING rows (as for `sweep`).
Each run times one whole scrape — this process's counters and histograms, the active-row count
by kind and status, and the health gauges (Redis registrations, queue depth, oldest overdue) —
against the seed's scrape query, a `GROUP BY kind, status` over the whole ledger (baseline).

`python -m bench --only metrics-scrape` runs it inside the table; `python -m bench.b_metrics
[--rows N] [--runs R]` alone, without the table's ticket seeding (the figure in bench/README).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from bench import env
from bench.b_ledger import _fill, _vacuum
from bench.harness import Ctx, runtime
from bench.stats import Row, Target, table
from desk.console import scrape as collector
from desk.core.runtime import Runtime

SEED_SCRAPE = "SELECT kind, status, count(*) AS n FROM background_task GROUP BY 1, 2"
SCRAPES_PER_RUN = 20  # each run's figure: the median of this many scrapes


async def _ours(rt: Runtime) -> float:
    began = time.perf_counter()
    body = await collector.scrape(rt)
    took = (time.perf_counter() - began) * 1000
    assert b"taskdesk_tasks_active" in body
    return took


async def _baseline(rt: Runtime) -> float:
    async with rt.engine.connect() as conn:
        began = time.perf_counter()
        (await conn.execute(sa.text(SEED_SCRAPE))).all()
        return (time.perf_counter() - began) * 1000


async def _sql_only(rt: Runtime) -> float:
    began = time.perf_counter()
    await collector._active(rt, rt.clock())
    return (time.perf_counter() - began) * 1000


async def _measure(rt: Runtime, runs: int) -> tuple[list[float], list[float], list[float]]:
    ours: list[float] = []
    base: list[float] = []
    sql: list[float] = []
    await _ours(rt)  # warm-up: connections, plans
    await _baseline(rt)
    for _ in range(runs):
        ours.append(statistics.median([await _ours(rt) for _ in range(SCRAPES_PER_RUN)]))
        base.append(statistics.median([await _baseline(rt) for _ in range(SCRAPES_PER_RUN)]))
        sql.append(statistics.median([await _sql_only(rt) for _ in range(SCRAPES_PER_RUN)]))
    return ours, base, sql


async def measure_on(servers: env.Servers, rows: int, runs: int, log: Path) -> list[Row]:
    name, url = await asyncio.to_thread(env.empty_db, servers, log)
    prefix = env.new_prefix("metrics")
    try:
        async with runtime(env.settings_for(url, servers.redis_url, prefix)) as rt:
            await _fill(rt, rows)
            await _vacuum(url)
            ours, base, sql = await _measure(rt, runs)
    finally:
        await asyncio.to_thread(env.drop_db, servers, name)
    note = (
        f"{rows:,} finished + 1,000 WAITING rows; median of {SCRAPES_PER_RUN} scrapes per run; "
        f"its SQL alone {statistics.median(sql):.2f} ms; load average {os.getloadavg()[0]:.1f}; "
        "baseline: the seed's GROUP BY over the whole ledger"
    )
    extra = {"sql_ms": sql, "rows": rows}
    return [
        Row("metrics-scrape", "ms", ours, base, target=Target("value<=", 5), note=note, extra=extra)
    ]


async def scrape(ctx: Ctx) -> list[Row]:
    return await measure_on(ctx.servers, ctx.sizes.ledger_rows, ctx.sizes.runs, ctx.log("seed.log"))


async def _main(rows: int, runs: int) -> int:
    servers = await asyncio.to_thread(env.open_servers)
    try:
        log = env.ROOT / "bench" / "results" / "metrics-seed.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        result = await measure_on(servers, rows, runs, log)
    finally:
        await asyncio.to_thread(servers.close)
    print(table(result))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.b_metrics", description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000, help="finished ledger rows")
    p.add_argument("--runs", type=int, default=5, help="alternations of ours and baseline")
    args = p.parse_args()
    sys.exit(asyncio.run(_main(args.rows, args.runs)))
