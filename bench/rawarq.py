"""The baseline worker: plain arq running a no-op function, with the worker settings ours uses.

`python -m bench.rawarq --redis URL --queue NAME --expect N [--max-jobs M --poll-delay S]`
starts an arq Worker (keep_result=0, JSON messages, INFO logging like `taskdesk worker`),
announces itself with the key `<queue>:ready`, records when each job started (and when its
function returned), and once N jobs ran prints one JSON line and exits. Bounded by --timeout.

With `--ledger DSN --table T` each job also writes the bare ledger (bench/b_pipeline.py
`pipeline-bare-ledger`): its row's claim and its finish, two autocommit UPDATEs on a plain
psycopg pool, as `bench.submit bare` inserted it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from arq.connections import RedisSettings
from arq.worker import Worker, func
from psycopg_pool import AsyncConnectionPool

from desk.core.queue import dumps, loads

# The cheapest durable ledger's two writes per job: no fence beyond the row's state, no events.
CLAIM = (
    "UPDATE {table} SET status = 'RUNNING', attempts = attempts + 1, started_at = now(), "
    "lease_until = now() + interval '30 seconds', updated_at = now() "
    "WHERE id = %s AND status = 'WAITING' RETURNING id"
)
FINISH = (
    "UPDATE {table} SET status = 'COMPLETED', progress = 1, finished_at = now(), "
    "lease_until = NULL, updated_at = now() WHERE id = %s AND status = 'RUNNING'"
)


class Recorder:
    def __init__(
        self, expect: int, ledger: AsyncConnectionPool | None = None, table: str = ""
    ) -> None:
        self.expect = expect
        self.ledger = ledger
        self.claim, self.finish = CLAIM.format(table=table), FINISH.format(table=table)
        self.latency_ms: list[float] = []
        self.first_start = 0.0
        self.last_done = 0.0
        self.done = asyncio.Event()

    async def noop(self, ctx: dict[str, Any], msg: dict[str, Any]) -> None:
        now = time.time()
        if not self.latency_ms:
            self.first_start = now
        self.latency_ms.append((now - float(msg["t"])) * 1000)
        if self.ledger is not None:
            async with self.ledger.connection() as conn:
                await conn.execute(self.claim, (msg["id"],))
                await conn.execute(self.finish, (msg["id"],))
        self.last_done = time.time()
        if len(self.latency_ms) >= self.expect:
            self.done.set()


@asynccontextmanager
async def bare_pool(url: str, size: int) -> AsyncIterator[AsyncConnectionPool | None]:
    """The bare ledger's autocommit pool of `size` (`--ledger URL`), or None without a URL."""
    if not url:
        yield None
        return
    pool = AsyncConnectionPool(
        url, min_size=size, max_size=size, open=False, kwargs={"autocommit": True}
    )
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bare_pool(args.ledger, args.max_jobs) as ledger:
        return await _work(args, Recorder(args.expect, ledger, args.table))


async def _work(args: argparse.Namespace, rec: Recorder) -> dict[str, Any]:
    worker = Worker(
        functions=[func(rec.noop, name="noop")],  # type: ignore[list-item]
        queue_name=args.queue,
        redis_settings=RedisSettings.from_dsn(args.redis),
        keep_result=0,
        max_jobs=args.max_jobs,
        poll_delay=args.poll_delay,
        handle_signals=False,
        health_check_key=f"{args.queue}:arq-health",
        job_serializer=dumps,
        job_deserializer=loads,
    )
    runner = asyncio.create_task(worker.async_run())
    while worker._pool is None and not runner.done():  # noqa: ASYNC110 - bounded by the timeout below
        await asyncio.sleep(0.01)
    await worker.pool.set(f"{args.queue}:ready", b"1", ex=int(args.timeout) + 60)
    try:
        await asyncio.wait_for(rec.done.wait(), args.timeout)
    finally:
        await asyncio.sleep(0.05)  # let the last job's bookkeeping finish
        runner.cancel()
        try:
            await worker.close()
        except (asyncio.CancelledError, Exception) as exc:
            logging.getLogger("bench.rawarq").info("close: %r", exc)
        await asyncio.gather(runner, return_exceptions=True)
    return {
        "count": len(rec.latency_ms),
        "first_start": rec.first_start,
        "last_done": rec.last_done,
        "latency_ms": rec.latency_ms,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--redis", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--max-jobs", type=int, default=10)
    p.add_argument("--poll-delay", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--ledger", default="", help="libpq URL: also write the bare ledger")
    p.add_argument("--table", default="bench_bare_ledger")
    args = p.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    result = asyncio.run(run(args))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
