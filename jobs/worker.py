"""The worker process: one arq consumer per lane runs processors; beside them run the
dispatcher (with the heartbeat), the rescuer, the janitor, the pruner and the scheduler.
`run_worker(settings)` blocks until SIGTERM/SIGINT.

Lanes (desk/ledger/lanes.py): each lane has its own arq queue and its own slots here, so long work
(exports, imports) never takes a slot of short work (reminders). The arq job only claims the
ledger row: the work then runs in a task of its own under the ledger's lease, so arq's job
timeout (about one lease) and in-progress marker cover a claim of milliseconds, never the work.
arq starts only as many claims as the lane has free slots (its `max_jobs` follows them).

Shutdown: the loops (dispatcher with the heartbeat, rescuer, janitor, pruner, scheduler) stop,
then the registration disappears, no new job is picked, running tasks get WORKER_GRACE_SECONDS to finish,
and any still running then is handed back to the ledger.
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
from arq.worker import Retry, Worker, func
from redis.exceptions import RedisError

from desk.core import budget, logs, metrics, tracing
from desk.core.db import is_transient
from desk.core.models import TaskKind
from desk.core.queue import PROCESS_FUNCTION, dumps, job_id, loads, wake_channel
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.ledger import events, lanes
from desk.ledger.run import Row, batchable
from jobs import dispatcher, heartbeat, pruner, rescuer, scheduler
from jobs.execution import (
    Processor,
    claim_batch,
    claim_task,
    message_fields,
    release_all,
    run_claimed,
)
from jobs.processors import noop, registry, reminder
from jobs.wake import LaneWorker, Listener

log = logging.getLogger("taskdesk.worker")
JANITOR_SECONDS = 2.0
CLOSE_SECONDS = 5.0  # per shutdown step after the grace period
REMINDER_BATCH = 500  # short-lane rows ready together, run by one claim (one slot)
LONG_POLL_DELAY = 0.03
BatchFinish = Callable[[Runtime, list[tuple[Row, str]]], Awaitable[object]]


class Lane:
    """One lane in this worker: its arq consumer, its slots and the tasks it runs now."""

    def __init__(self, rt: Runtime, name: str, processors: dict[str, Processor]) -> None:
        self.rt = rt
        self.name = name
        self.slots = lanes.slots(rt.settings, name)
        self.processors = processors
        self.team_max = rt.settings.long_team_max_running if name == lanes.LONG else None
        # execution id (a batch: its first) -> (task ids, their work); keyed by execution, as a
        # task rescued while a cut-off execution of it still winds down here may be claimed here
        # again. A batch (reminders, plain NOOPs) takes one slot.
        self.running: dict[str, tuple[list[int], asyncio.Task[str]]] = {}
        self.batched: dict[int, int] = {}  # task id -> run, claimed by a batch here
        self.claiming = 0
        self.stopping = False
        self.worker: Worker | None = None

    def _update(self) -> None:
        """Let arq start only as many claims as there are free slots. arq reads `max_jobs`
        before each job it starts (`start_jobs`: `if self.job_counter >= self.max_jobs`) and
        before each poll, and counts the claims in flight itself, so no job is picked that
        would have to be handed back."""
        if self.worker is not None:
            room = 0 if self.stopping else self.slots - len(self.running)
            self.worker.max_jobs = max(0, room)
            self.worker.allow_pick_jobs = room > 0

    async def take(self, task_id: int, run: int) -> str:
        """arq's job: claim the row and start the work detached from arq (its timeout, its
        in-progress marker), or leave the message queued when every slot is busy. In the short
        lane a reminder's or plain NOOP's claim brings the lane's other ready rows, run as one
        batch in one slot."""
        if self.batched.get(task_id) == run:
            return "stale"  # taken by one of this worker's batches: no need to ask the database
        if self.stopping or len(self.running) + self.claiming >= self.slots:
            raise Retry(defer=timedelta(milliseconds=200))
        self.claiming += 1
        self._update()
        try:
            claimed = await self._claim(task_id, run)
        except Exception as exc:
            if not is_transient(exc):
                raise
            # The database is away: keep the message queued rather than wait for a redelivery.
            raise Retry(defer=timedelta(seconds=1)) from exc
        finally:
            self.claiming -= 1
        if not claimed:
            self._update()
            return "stale"
        task, execution_id = claimed[0]
        if batchable(task):
            self._remember(claimed)
            work = asyncio.create_task(self._batch(claimed))
        else:
            work = asyncio.create_task(self._work(task, execution_id))
        self.running[execution_id] = ([t.id for t, _ in claimed], work)
        self._update()
        return "started"

    async def _claim(self, task_id: int, run: int) -> list[tuple[Row, str]]:
        if self.team_max is None:
            return await claim_batch(self.rt, task_id, run, limit=REMINDER_BATCH)
        one = await claim_task(self.rt, task_id, run, team_max=self.team_max)
        return [one] if one else []

    def _remember(self, claimed: list[tuple[Row, str]]) -> None:
        if len(self.batched) > 10 * REMINDER_BATCH * self.slots:
            self.batched.clear()  # only a shortcut: the claim drops stale messages anyway
        self.batched.update((t.id, t.run) for t, _ in claimed)

    async def _batch(self, claimed: list[tuple[Row, str]]) -> str:
        with tracing.span("taskdesk.run"):  # as a single task's run: the finish nests under it
            return await self._batch_run(claimed)

    async def _batch_run(self, claimed: list[tuple[Row, str]]) -> str:
        """Reminders and plain NOOPs claimed together, each kind finished in one transaction;
        the other rows' jobs leave the queue meanwhile, so arq never starts them."""
        try:
            reminders = [c for c in claimed if c[0].kind == TaskKind.REMINDER]
            noops = [c for c in claimed if c[0].kind != TaskKind.REMINDER]
            results = await asyncio.gather(
                self._drop_queued(claimed[1:]),
                self._finish(reminders, reminder.fire_many),
                self._finish(noops, noop.complete_many),
            )
            return "done" if all(results[1:]) else "done one by one"
        except asyncio.CancelledError:
            await release_all(self.rt, claimed)  # shutting down: hand them back at once
            raise
        finally:
            self.running.pop(claimed[0][1], None)
            self._update()

    async def _finish(self, part: list[tuple[Row, str]], finish: BatchFinish) -> bool:
        """One kind's share of a batch in one go; if that fails, each runs on its own (with the
        usual retries), so one bad row cannot hold the others back. False: one by one."""
        if not part:
            return True
        try:
            await finish(self.rt, part)
            return True
        except Exception as exc:
            log.warning("batch of %d %s failed (%s); one by one", len(part), part[0][0].kind, exc)
            for task, execution_id in part:
                await run_claimed(self.rt, self.processors, task, execution_id)
            return False

    async def _drop_queued(self, others: list[tuple[Row, str]]) -> int:
        prefix = self.rt.settings.queue_prefix
        ids = [job_id(prefix, t.id, t.run, t.sends) for t, _ in others if t.sends > 0]
        try:
            return await self.rt.queue.drop_queued(self.name, ids)
        except Exception as exc:  # only a saving: a job left queued answers "stale"
            log.warning("could not drop %d batch-claimed job(s): %s", len(ids), exc)
            return 0

    async def _work(self, task: Row, execution_id: str) -> str:
        try:
            return await run_claimed(self.rt, self.processors, task, execution_id)
        except Exception:
            log.exception("task %s: execution %s ended with an error", task.id, execution_id)
            return "error"
        finally:
            self.running.pop(execution_id, None)
            self._update()

    def task_ids(self) -> list[int]:
        return [task_id for ids, _ in self.running.values() for task_id in ids]

    def works(self) -> list[asyncio.Task[str]]:
        return [work for _, work in self.running.values()]


async def process_task(ctx: dict[str, Any], msg: Any) -> str:
    task_id, run = message_fields(msg)
    tracing.attach(msg)  # the worker's spans join the trace of the request that sent it
    lane: Lane = ctx["lane"]
    return await lane.take(task_id, run)


def poll_delay(s: Settings, lane: str) -> float:
    """Seconds between arq's polls of a lane's queue while it is busy or has no wake-ups
    (jobs/wake.py; an idle lane waits for one). The long lane polls at most every
    LONG_POLL_DELAY: each poll is a Redis round trip whether or not work waits (an idle worker
    spends most of its CPU there), and a few more milliseconds before an export or import starts
    are nothing beside its run; the short lane keeps WORKER_POLL_DELAY (its start latency)."""
    return s.worker_poll_delay if lane == lanes.SHORT else max(s.worker_poll_delay, LONG_POLL_DELAY)


def build_worker(
    rt: Runtime, reg: heartbeat.Registration, lane: Lane, listener: Listener
) -> Worker:
    s = rt.settings
    lane.worker = LaneWorker(
        # A claim takes milliseconds; about one lease bounds it even through a database hiccup.
        functions=[func(process_task, name=PROCESS_FUNCTION, timeout=s.lease_seconds)],
        queue_name=rt.queue.lane_queue(lane.name),
        redis_settings=RedisSettings.from_dsn(s.redis_url),
        keep_result=0,
        max_jobs=lane.slots,
        listener=listener,
        lane=lane.name,
        busy=lambda: bool(lane.running),
        busy_poll=poll_delay(s, lane.name),
        idle_poll=max(s.worker_idle_poll_seconds, poll_delay(s, lane.name)),
        handle_signals=False,
        health_check_key=f"{s.queue_prefix}:arq-health:{reg.worker_id}:{lane.name}",
        ctx={"rt": rt, "registration": reg, "lane": lane},
        job_serializer=dumps,
        job_deserializer=loads,
        max_tries=1_000_000,  # arq's retries are not the policy; stale re-runs are dropped anyway
    )
    return lane.worker


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
        try:
            await dispatcher.run_once(rt)
            reg.last_sweep = rt.clock()
        finally:
            # Renewed even while the database is away: this worker is alive (see the rescuer).
            await heartbeat.run_once(rt, reg)

    return [
        asyncio.create_task(_forever("dispatcher", sweep, s.dispatch_interval)),
        asyncio.create_task(
            _forever("rescuer", lambda: rescuer.run_once(rt), min(5.0, s.lease_seconds / 4))
        ),
        asyncio.create_task(_forever("janitor", lambda: rescuer.sweep_queues(rt), JANITOR_SECONDS)),
        asyncio.create_task(_forever("pruner", lambda: pruner.run_once(rt), 60.0)),
        asyncio.create_task(
            _forever("scheduler", lambda: scheduler.run_once(rt), s.scheduler_interval_seconds)
        ),
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
    pool = budget.worker_pool_size(settings)  # the slots' connections and the services'
    # The host name is cut so the id fits the connections' application_name, through which the
    # task event log names who claimed what (desk/ledger/events.py).
    reg = heartbeat.Registration(
        f"{socket.gethostname()[:30]}-{os.getpid()}-{secrets.token_hex(3)}"
    )
    rt = await Runtime.open(
        settings,
        pool_size=pool,
        application_name=events.worker_application_name(reg.worker_id),
    )
    procs = registry()
    lanes_here = [Lane(rt, name, procs) for name in lanes.LANES]
    reg.lanes = lambda: {ln.name: (ln.slots, ln.task_ids()) for ln in lanes_here}
    listener = Listener(
        settings.redis_url,
        {ln: wake_channel(rt.queue.lane_queue(ln)) for ln in lanes.LANES},
        f"taskdesk-wake-{reg.worker_id}",
    )
    workers = [build_worker(rt, reg, ln, listener) for ln in lanes_here]
    await metrics.start_worker(
        settings, reg.worker_id, lambda: sum(len(ln.task_ids()) for ln in lanes_here)
    )
    services = [*start_services(rt, reg), asyncio.create_task(listener.run())]
    arq_tasks = [asyncio.create_task(_run_arq(w, stop)) for w in workers]
    log.info("worker %s started (lanes %s)", reg.worker_id, ", ".join(lanes.LANES))
    await asyncio.wait(
        {*arq_tasks, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED
    )
    await _shutdown(rt, reg, lanes_here, services, arq_tasks)


async def _shutdown(
    rt: Runtime,
    reg: heartbeat.Registration,
    lanes_here: list[Lane],
    services: list[asyncio.Task[None]],
    arq_tasks: list[asyncio.Task[None]],
) -> None:
    log.info("worker %s stopping", reg.worker_id)
    await _stop_services(rt, reg, services)
    for lane in lanes_here:
        lane.stopping = True
        lane._update()
    running = [t for lane in lanes_here for t in lane.works() if not t.done()]
    if running:
        log.info(
            "waiting up to %.0fs for %d running task(s)",
            rt.settings.worker_grace_seconds,
            len(running),
        )
        await asyncio.wait(running, timeout=rt.settings.worker_grace_seconds)
    for work in running:
        work.cancel()  # still running after the grace period: each hands its task back
    await asyncio.gather(*running, return_exceptions=True)
    # Each step is bounded: a stuck Redis call must not keep a stopping worker alive.
    for lane in lanes_here:
        if lane.worker is not None:
            await _bounded(lane.worker.close(), f"closing the {lane.name} lane's arq consumer")
    for t in arq_tasks:
        t.cancel()
    await asyncio.wait([*arq_tasks, *services], timeout=CLOSE_SECONDS)
    await _bounded(rt.close(), "closing the database and Redis pools")
    log.info("worker %s stopped", reg.worker_id)


async def _stop_services(
    rt: Runtime, reg: heartbeat.Registration, services: list[asyncio.Task[None]]
) -> None:
    """Stop the loops, then remove the registration. The other order let a dispatcher pass
    under way renew it afterwards (its heartbeat runs in a `finally`, cancelled or not), and
    health counted a stopping worker as live."""
    reg.stopping = True  # a pass still winding down skips its heartbeat
    for t in services:
        t.cancel()
    if services:
        _, stuck = await asyncio.wait(services, timeout=CLOSE_SECONDS)
        if stuck:
            log.warning("%d loop(s) did not stop within %.0f s", len(stuck), CLOSE_SECONDS)
    try:
        await heartbeat.unregister(rt, reg)
    except (RedisError, OSError) as exc:
        log.warning("could not remove the registration (it expires by itself): %s", exc)


async def _bounded(step: Awaitable[object], what: str) -> None:
    try:
        await asyncio.wait_for(step, CLOSE_SECONDS)
    except (TimeoutError, RedisError, OSError, asyncio.CancelledError) as exc:
        log.warning("%s did not finish cleanly: %r", what, exc)


def run_worker(settings: Settings) -> None:
    """Blocking entry point of `taskdesk worker`."""
    logs.setup(settings.log_format, settings.log_level)
    tracing.setup(settings, "taskdesk-worker")
    asyncio.run(serve(settings))


if __name__ == "__main__":
    from desk.core.settings import load_settings

    run_worker(load_settings())
