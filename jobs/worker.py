"""The worker process: arq runs processors; beside it run the dispatcher (with the heartbeat),
the rescuer and the pruner. `run_worker(settings)` blocks until SIGTERM/SIGINT.

Shutdown: the registration disappears at once, no new job is picked, running tasks get
WORKER_GRACE_SECONDS to finish, and any still running then is handed back to the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from arq.connections import RedisSettings
from arq.worker import Worker, func
from redis.exceptions import RedisError

from desk import logs, telemetry, tracing
from desk.queue import PROCESS_FUNCTION, dumps, loads
from desk.runtime import Runtime
from desk.settings import Settings
from jobs import dispatcher, heartbeat, pruner, rescuer
from jobs.execution import Processor, execute, message_fields
from jobs.processors import registry

log = logging.getLogger("taskdesk.worker")
JOB_TIMEOUT = timedelta(hours=12)  # the ledger's lease, not arq's timeout, detects stuck work


async def process_task(ctx: dict[str, Any], msg: Any) -> str:
    task_id, run = message_fields(msg)
    tracing.attach(msg)  # the worker's spans join the trace of the request that sent it
    reg: heartbeat.Registration = ctx["registration"]
    reg.running += 1
    try:
        return await execute(ctx["rt"], ctx["processors"], task_id, run)
    finally:
        reg.running -= 1


def build_worker(
    rt: Runtime, reg: heartbeat.Registration, processors: dict[str, Processor] | None = None
) -> Worker:
    s = rt.settings
    return Worker(
        functions=[func(process_task, name=PROCESS_FUNCTION, timeout=JOB_TIMEOUT)],
        queue_name=rt.queue.name,
        redis_settings=RedisSettings.from_dsn(s.redis_url),
        keep_result=0,
        max_jobs=s.worker_max_jobs,
        poll_delay=s.worker_poll_delay,
        handle_signals=False,
        health_check_key=f"{s.queue_prefix}:arq-health:{reg.worker_id}",
        ctx={"rt": rt, "registration": reg, "processors": processors or registry()},
        job_serializer=dumps,
        job_deserializer=loads,
        max_tries=1_000_000,  # arq's retries are not the policy; stale re-runs are dropped anyway
    )


async def _forever(name: str, once: Callable[[], Awaitable[object]], interval: float) -> None:
    while True:
        try:
            await once()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s pass failed: %s", name, exc)
        await asyncio.sleep(interval)


def start_services(rt: Runtime, reg: heartbeat.Registration) -> list[asyncio.Task[None]]:
    s = rt.settings

    async def sweep() -> None:
        await dispatcher.run_once(rt)
        reg.last_sweep = rt.clock()
        await heartbeat.run_once(rt, reg)

    return [
        asyncio.create_task(_forever("dispatcher", sweep, s.dispatch_interval)),
        asyncio.create_task(
            _forever("rescuer", lambda: rescuer.run_once(rt), min(5.0, s.lease_seconds / 4))
        ),
        asyncio.create_task(_forever("pruner", lambda: pruner.run_once(rt), 60.0)),
    ]


async def _run_arq(worker: Worker, stop: asyncio.Event) -> None:
    """arq's loop, restarted when Redis goes away, until asked to stop."""
    while not stop.is_set():
        try:
            await worker.async_run()
            return
        except (RedisError, OSError) as exc:
            log.warning("Redis unavailable (%s); retrying in 1 s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # An export holds up to three connections (COPY, chunk writer, progress); most tasks one.
    rt = await Runtime.open(settings, pool_size=settings.worker_max_jobs * 3 + 4, pre_ping=False)
    reg = heartbeat.Registration(f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}")
    worker = build_worker(rt, reg)
    await telemetry.start_worker(settings, reg.worker_id, lambda: reg.running)
    services = start_services(rt, reg)
    arq_task = asyncio.create_task(_run_arq(worker, stop))
    log.info("worker %s started (queue %s)", reg.worker_id, rt.queue.name)
    await asyncio.wait(
        {arq_task, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED
    )
    await _shutdown(rt, reg, worker, services, arq_task)


async def _shutdown(
    rt: Runtime,
    reg: heartbeat.Registration,
    worker: Worker,
    services: list[asyncio.Task[None]],
    arq_task: asyncio.Task[None],
) -> None:
    log.info("worker %s stopping", reg.worker_id)
    try:
        await heartbeat.unregister(rt, reg)
    except (RedisError, OSError) as exc:
        log.warning("could not remove the registration (it expires by itself): %s", exc)
    for t in services:
        t.cancel()
    worker.allow_pick_jobs = False
    running = [t for t in worker.tasks.values() if not t.done()]
    if running:
        log.info(
            "waiting up to %.0fs for %d running task(s)",
            rt.settings.worker_grace_seconds,
            len(running),
        )
        await asyncio.wait(running, timeout=rt.settings.worker_grace_seconds)
    try:
        await worker.close()  # cancels what is still running: those tasks are handed back
    except (RedisError, OSError, asyncio.CancelledError) as exc:
        log.warning("arq did not close cleanly: %s", exc)
    arq_task.cancel()
    await asyncio.gather(arq_task, *services, return_exceptions=True)
    await rt.close()
    log.info("worker %s stopped", reg.worker_id)


def run_worker(settings: Settings) -> None:
    """Blocking entry point of `taskdesk worker`."""
    logs.setup(settings.log_format, settings.log_level)
    tracing.setup(settings, "taskdesk-worker")
    asyncio.run(serve(settings))


if __name__ == "__main__":
    from desk.settings import load_settings

    run_worker(load_settings())
