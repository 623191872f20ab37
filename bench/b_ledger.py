"""sweep: one dispatcher pass (`jobs.dispatcher.run_once`) over a big ledger.

A database of its own gets N finished ledger rows (COMPLETED, spread over the last day) and
1,000 due WAITING rows never sent. Each run times one pass that sends the 1,000 (ours), then a
second pass right after it with nothing left to send (the steady state, every DISPATCH_INTERVAL);
then the rows are marked unsent again and the namespace's Redis keys deleted. The SQL claim alone
(rolled back) is kept in the JSON to split the pass into database and Redis time: it is the
claim of the 1,000 due rows in one statement (`limit=DUE`, not the dispatcher's BATCH, so a
change of the pass's batch size never changes its baseline with it).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import psycopg
import sqlalchemy as sa

from bench import env
from bench.harness import Ctx, clear_namespace, load_people, runtime
from bench.stats import Row, Target, percentile
from desk.core.queue import epoch_key
from desk.core.runtime import Runtime
from desk.ledger import sends as ledger_sends
from jobs import dispatcher

DUE = 1000


async def _fill(rt: Runtime, finished: int) -> None:
    p = await load_people(rt)
    common = (
        "INSERT INTO background_task (kind, team_id, owner_id, scope_key, status, run_at, "
        " started_at, finished_at, created_at, updated_at, progress, attempts, run, execution_id, "
        " dispatched_at) SELECT 'NOOP', :team, :owner, :prefix || g, "
    )
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                common + "'COMPLETED', now() - interval '1 day' + g * (interval '1 day' / :n), "
                " now() - interval '1 day' + g * (interval '1 day' / :n), "
                " now() - interval '1 day' + g * (interval '1 day' / :n) + interval '5 ms', "
                " now() - interval '1 day', now() - interval '1 day', 1, 1, 1, md5(g::text), "
                " now() - interval '1 day' FROM generate_series(1, :n) g"
            ),
            {"team": p.big_team, "owner": p.chen, "prefix": "noop:done:", "n": finished},
        )
        await conn.execute(
            sa.text(
                common + "'WAITING', now() - interval '1 second', NULL, NULL, now(), now(), 0, 0, "
                " 1, NULL, NULL FROM generate_series(1, :n) g"
            ),
            {"team": p.big_team, "owner": p.chen, "prefix": "noop:due:", "n": DUE},
        )


async def _vacuum(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("VACUUM ANALYZE background_task")


async def _rearm(rt: Runtime) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET dispatched_at = NULL WHERE status = 'WAITING'")
        )
    await clear_namespace(rt.redis, rt.settings.queue_prefix)
    # Keys deleted, but not a Redis that lost its data: keep the epoch the dispatcher checks.
    await rt.redis.set(epoch_key(rt.settings.queue_prefix), "bench")


async def _timed_pass(rt: Runtime) -> tuple[float, int]:
    began = time.perf_counter()
    sent = await dispatcher.run_once(rt)
    return (time.perf_counter() - began) * 1000, sent


async def _claim_only(rt: Runtime) -> float:
    s = rt.settings
    async with rt.engine.connect() as conn, conn.begin() as tx:
        began = time.perf_counter()
        await ledger_sends.claim_due(
            conn,
            now=rt.clock(),
            lookahead=timedelta(seconds=s.dispatch_lookahead_seconds),
            redelivery=timedelta(seconds=s.redelivery_seconds),
            limit=DUE,  # the 1,000 due rows in one statement, whatever the pass's batch
            team_max=s.long_team_max_running,
        )
        took = (time.perf_counter() - began) * 1000
        await tx.rollback()
    return took


async def sweep(ctx: Ctx) -> list[Row]:
    n = ctx.sizes.ledger_rows
    name, url = await asyncio.to_thread(env.empty_db, ctx.servers, ctx.log("seed.log"))
    full: list[float] = []
    idle: list[float] = []
    claim: list[float] = []
    try:
        async with runtime(ctx.settings("sweep", db_url=url)) as rt:
            await _fill(rt, n)
            await _vacuum(url)
            await _timed_pass(rt)  # warm-up: connections, plans
            for _ in range(ctx.sizes.runs):
                await _rearm(rt)
                claim.append(await _claim_only(rt))
                took, sent = await _timed_pass(rt)
                if sent != DUE:
                    raise RuntimeError(f"the pass sent {sent} of {DUE} due tasks")
                full.append(took)
                for _ in range(DUE // dispatcher.BATCH + 1):  # send the rest, untimed
                    if not (await _timed_pass(rt))[1]:
                        break
                idle.append((await _timed_pass(rt))[0])
    finally:
        await asyncio.to_thread(env.drop_db, ctx.servers, name)
    note = (
        f"{n:,} finished + {DUE:,} due rows, sent in one pass: its claim SQL alone "
        f"{percentile(claim, 50):.1f} ms, the rest is one Redis round trip (a Lua script); baseline: that claim SQL alone"
    )
    return [
        # issue 25: the pass within 1.3 x its claim SQL alone (the baseline column), same run
        Row("sweep (1k due)", "ms", full, claim, Target("ratio<=", 1.3), note=note),
        Row("sweep (nothing due)", "ms", idle, target=Target("value<=", 5)),
    ]
