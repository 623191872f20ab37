"""procrastinate as the `pipeline-procrastinate` row's peer (bench/b_peers.py): its processes.

    python -m bench.peers_procrastinate install --dsn DSN
    python -m bench.peers_procrastinate submit --dsn DSN --queue Q (--count N --concurrency C | --rate R --seconds S)
    python -m bench.peers_procrastinate work --dsn DSN --queue Q --concurrency C --ready F --out F

Configured as its documentation says: `App(connector=PsycopgConnector(conninfo=DSN))` (psycopg 3,
its async connector), the schema applied by `app.schema_manager.apply_schema_async()` (what
`procrastinate schema --apply` runs) into the bench's run database, an async task deferred with
`defer_async` one job per call, the worker `app.run_worker_async(queues=[Q], concurrency=C)`
inside the open app, as `procrastinate worker` runs it (asyncio, logging at its CLI's default
INFO). Every other option is its default: LISTEN/NOTIFY on (polling every 5 s behind it), jobs
kept after they succeed. Only the pool is sized: psycopg_pool's default of 4 connections would
starve C sub-workers (the listener keeps one), so it has C + 2, and the submitter max(C, 10) as
ours. The task records its start (bench/b_peers.py `Recorder`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from typing import Any

import procrastinate

from bench.b_peers import Recorder, process_main
from bench.submit import drive

NOOP = "bench_noop"
PROBE = "bench_probe"


def make_app(dsn: str, pool: int, rec: Recorder | None = None) -> procrastinate.App:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=pool, max_size=pool)
    )

    @app.task(name=NOOP)
    async def noop(t: float) -> None:
        if rec is not None:
            rec.started(t)

    @app.task(name=PROBE)
    async def probe() -> None:
        if rec is not None:
            rec.ready.set()

    return app


async def install(dsn: str) -> None:
    app = make_app(dsn, 1)
    async with app.open_async():
        row = await app.connector.execute_query_one_async(
            query="SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present"
        )
        if not row["present"]:
            await app.schema_manager.apply_schema_async()


async def submit(args: argparse.Namespace) -> dict[str, Any]:
    app = make_app(args.dsn, max(args.concurrency, 10))
    ids: list[int] = []
    async with app.open_async():
        noop = app.tasks[NOOP]

        async def one(_: int) -> None:
            ids.append(await noop.configure(queue=args.queue).defer_async(t=time.time()))

        out = await drive(args, one)
    return out | {"count": len(ids), "min_id": min(ids), "max_id": max(ids)}


async def work(args: argparse.Namespace, rec: Recorder) -> None:
    app = make_app(args.dsn, args.concurrency + 2, rec)
    async with app.open_async():
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=[args.queue],
                concurrency=args.concurrency,
                name="bench",
                install_signal_handlers=False,
            )
        )
        await app.tasks[PROBE].configure(queue=args.queue).defer_async()
        stopping = asyncio.create_task(rec.stop.wait())
        await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if worker.done():
            worker.result()  # it stopped by itself: its error
        worker.cancel()  # its graceful stop (docs: "Launch a worker … inside an application")
        await asyncio.gather(worker, return_exceptions=True)


async def logged_work(args: argparse.Namespace, rec: Recorder) -> None:
    # `procrastinate worker`'s default: INFO, logging.BASIC_FORMAT (two lines per job). The
    # submitter is left unconfigured, as ours is (defer_async would log one INFO line a job).
    logging.basicConfig(level=logging.INFO, format=logging.BASIC_FORMAT)
    await work(args, rec)


def main() -> None:
    process_main(install, submit, logged_work)


if __name__ == "__main__":
    main()
