"""PgQueuer as the `pipeline-pgqueuer` row's peer (bench/b_peers.py): its processes.

    python -m bench.peers_pgqueuer install --dsn DSN
    python -m bench.peers_pgqueuer submit --dsn DSN --queue E (--count N --concurrency C | --rate R --seconds S)
    python -m bench.peers_pgqueuer work --dsn DSN --queue E --concurrency C --ready F --out F

Configured as its README and driver docs say: asyncpg (its quick start's driver), the schema
installed by its own installer (`Queries.install()`, what `pgq install` runs: durable tables, its
default) into the bench's run database; the producer `Queries.enqueue(E, payload)`, one job per
call, on an `AsyncpgPoolDriver` (a pool of max(C, 10) connections, as our submitter's); the
consumer a `PgQueuer` over one asyncpg connection with an entrypoint E, run by `pgqueuer.run`
(what `pgq run` calls) on uvloop with the CLI's logging, as `pgq run` does. Its worker
concurrency is `max_concurrent_tasks=C`; PgQueuer wants at least twice the batch size there, so
`batch_size` is C // 2 (its default, 10, would need 20). Everything else is its default.
The entrypoint records its start (bench/b_peers.py `Recorder`).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pgqueuer
import uvloop
from pgqueuer.core import logconfig
from pgqueuer.db import AsyncpgDriver, AsyncpgPoolDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from bench.b_peers import Recorder, process_main
from bench.submit import drive


async def install(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        if not await queries.schema_is_installed():
            await queries.install()
    finally:
        await conn.close()


async def submit(args: argparse.Namespace) -> dict[str, Any]:
    size = max(args.concurrency, 10)
    ids: list[int] = []
    async with asyncpg.create_pool(args.dsn, min_size=size, max_size=size) as pool:
        queries = Queries(AsyncpgPoolDriver(pool))

        async def one(_: int) -> None:
            ids.extend(await queries.enqueue(args.queue, str(time.time()).encode()))

        out = await drive(args, one)
    return out | {"count": len(ids), "min_id": min(ids), "max_id": max(ids)}


async def work(args: argparse.Namespace, rec: Recorder) -> None:
    logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)  # `pgq run`'s default --log-level
    probe = f"{args.queue}_probe"

    @asynccontextmanager
    async def factory() -> AsyncIterator[pgqueuer.PgQueuer]:
        conn = await asyncpg.connect(args.dsn)
        try:
            pgq = pgqueuer.PgQueuer(AsyncpgDriver(conn))

            @pgq.entrypoint(args.queue)
            async def noop(job: Job) -> None:
                rec.started(float(job.payload or b"0"))

            @pgq.entrypoint(probe)
            async def probed(job: Job) -> None:
                rec.ready.set()

            yield pgq
        finally:
            await conn.close()

    runner = asyncio.create_task(
        pgqueuer.run(
            factory,
            batch_size=max(args.concurrency // 2, 1),
            max_concurrent_tasks=args.concurrency,
            shutdown=rec.stop,
        )
    )
    conn = await asyncpg.connect(args.dsn)
    try:
        await Queries(AsyncpgDriver(conn)).enqueue(probe, None)
    finally:
        await conn.close()
    await runner  # until rec.stop (SIGTERM), or its own error


def main() -> None:
    process_main(install, submit, work, run=uvloop.run)


if __name__ == "__main__":
    main()
