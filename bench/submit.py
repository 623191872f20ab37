"""Load generator (its own process): accept NOOP tasks through taskdesk, or enqueue raw arq jobs.

    python -m bench.submit noop --user U --team T (--count N --concurrency C | --rate R --seconds S)
    python -m bench.submit arq --queue Q (--count N --concurrency C | --rate R --seconds S)
    python -m bench.submit bare --queue Q --ledger DSN --table T --user U --team T (--count …)

`noop` calls `desk.work.tasks.submit_noop` (accept in one transaction, then enqueue) with the
settings of the environment; `arq` calls `enqueue_job("noop", {"t": time})` on the same Redis.
Bursts run N submissions over C concurrent coroutines; paced runs start one every 1/R s
whatever the previous one is doing (open loop). Prints one JSON line: wall times and counts.
`bare` is `arq` behind the cheapest durable accept: one autocommit INSERT of the task's row into
table T (a plain psycopg pool, no lock, no events), then the enqueue naming the row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from arq.connections import RedisSettings, create_pool
from psycopg_pool import AsyncConnectionPool

from bench.rawarq import bare_pool
from desk.core.queue import dumps, loads
from desk.core.runtime import Runtime
from desk.core.settings import load_settings
from desk.work import tasks

Submit = Callable[[int], Awaitable[Any]]


async def burst(submit: Submit, count: int, concurrency: int) -> None:
    next_i = 0

    async def lane() -> None:
        nonlocal next_i
        while next_i < count:
            i = next_i
            next_i += 1
            await submit(i)

    await asyncio.gather(*(lane() for _ in range(concurrency)))


async def paced(submit: Submit, rate: float, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    pending = []
    for i in range(int(rate * seconds)):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        pending.append(asyncio.create_task(submit(i)))
    await asyncio.gather(*pending)


async def drive(args: argparse.Namespace, submit: Submit) -> dict[str, Any]:
    t0 = time.time()
    if args.rate:
        await paced(submit, args.rate, args.seconds)
    else:
        await burst(submit, args.count, args.concurrency)
    return {"t0": t0, "t1": time.time()}


async def run_noop(args: argparse.Namespace) -> dict[str, Any]:
    rt = await Runtime.open(load_settings(), pool_size=max(args.concurrency, 10))
    ids: list[int] = []

    async def submit(_: int) -> None:
        task = await tasks.submit_noop(rt, args.user, args.team)
        ids.append(task.id or 0)

    try:
        out = await drive(args, submit)
    finally:
        await rt.close()
    return out | {"count": len(ids), "min_id": min(ids), "max_id": max(ids)}


BARE_ACCEPT = (
    "INSERT INTO {table} (kind, team_id, owner_id, scope_key, max_attempts, created_at, "
    "updated_at) VALUES ('NOOP', %s, %s, %s, 5, now(), now()) RETURNING id"
)


async def run_arq(args: argparse.Namespace) -> dict[str, Any]:
    async with bare_pool(args.ledger, args.concurrency) as ledger:
        return await _run_arq(args, ledger)


async def _run_arq(args: argparse.Namespace, ledger: AsyncConnectionPool | None) -> dict[str, Any]:
    redis = await create_pool(
        RedisSettings.from_dsn(load_settings().redis_url),
        job_serializer=dumps,
        job_deserializer=loads,
        default_queue_name=args.queue,
    )
    tag = uuid.uuid4().hex[:6]
    sent = 0

    accept = BARE_ACCEPT.format(table=args.table)

    async def submit(i: int) -> None:
        nonlocal sent
        msg: dict[str, Any] = {"t": time.time()}
        if ledger is not None:
            async with ledger.connection() as conn:
                cur = await conn.execute(accept, (args.team, args.user, f"{tag}:{i}"))
                msg["id"] = (await cur.fetchone() or (0,))[0]
        job = await redis.enqueue_job(
            "noop", msg, _job_id=f"{args.queue}:{tag}:{i}", _queue_name=args.queue
        )
        sent += job is not None

    try:
        out = await drive(args, submit)
    finally:
        await redis.aclose()
    return out | {"count": sent}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["noop", "arq", "bare"])
    p.add_argument("--user", type=int, default=0)
    p.add_argument("--team", type=int, default=0)
    p.add_argument("--queue", default="")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--ledger", default="", help="bare: libpq URL of the ledger's database")
    p.add_argument("--table", default="bench_bare_ledger")
    args = p.parse_args()
    if args.mode == "bare" and not args.ledger:
        p.error("bare needs --ledger")
    result = asyncio.run(run_noop(args) if args.mode == "noop" else run_arq(args))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
