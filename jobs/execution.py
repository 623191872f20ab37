"""One execution of one task: claim, fenced progress with a keep-alive lease, and the endings.

`claim_task` takes a delivered `{task_id, run}`; `run_claimed` runs the processor for the task's
kind and turns what happened into exactly one ledger transition; `execute` is both in a row.

A database outage shorter than the lease costs nothing: fenced writes (progress, lease) retry
with backoff while the lease lasts, and a processor that hits a transient database error is run
again within the same execution (same attempt) once the database answers — an import goes on
after its last committed batch, an export starts its stream again. Only when the lease runs out
does the task fail, with "Database unreachable" as its error.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from desk.core import tracing
from desk.core.db import describe_db_error, is_transient, retrying
from desk.core.models import BackgroundTask, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.ledger.delivery import send_now
from desk.ledger.run import Row
from jobs import limits
from jobs.outcomes import (
    Cancelled,
    CancelledAtFinish,
    DatabaseUnreachable,
    JobOutcome,
    LostFence,
    Permanent,
    RanPastLimit,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_RECOVERIES = 5  # a flapping database ends in a normal failed attempt, not a loop
FAIL_PATIENCE = 600.0  # seconds a failed attempt waits for the database to record its end


class Execution:
    """Handed to a processor: the claimed task and fenced writes on its behalf."""

    def __init__(self, rt: Runtime, row: Row, execution_id: str) -> None:
        self.rt = rt
        self.row = row  # what the claim returned: enough for the short lane's processors
        self._task: BackgroundTask | None = None
        self.execution_id = execution_id
        self.lease = timedelta(seconds=rt.settings.lease_seconds)
        self.cancel_requested = False
        self.lost = False
        self._last_write = time.monotonic()
        self.limit = limits.base(rt.settings, row.kind)  # seconds this attempt may run
        self._timer: asyncio.Timeout | None = None
        self._started = 0.0  # the event loop's time when the processor started

    @property
    def task(self) -> BackgroundTask:
        """The row as an ORM object, built on first use (for helpers that take one: exports,
        imports); the NOOP and reminder paths read `row` and never pay for it."""
        if self._task is None:
            self._task = BackgroundTask(**{n: getattr(self.row, n) for n in ledger_run.FIELDS})
        return self._task

    @property
    def task_id(self) -> int:
        return self.row.id

    def lease_left(self) -> float:
        """Seconds until the lease this execution last wrote runs out (as far as it knows)."""
        return self._last_write + self.lease.total_seconds() - time.monotonic()

    def allow_rows(self, rows: int) -> None:
        """An export or import that now knows its size gets the limit of that size."""
        self.limit = limits.for_rows(self.rt.settings, self.row.kind, rows)
        if self._timer is not None:
            self._timer.reschedule(self._started + self.limit)

    async def fenced(
        self, write: Callable[[], Awaitable[T]], *, patience: float | None = None
    ) -> T:
        """Run `write` (one fenced statement, or one transaction), again on transient errors
        while the lease lasts (or for `patience` seconds). A write whose reply was lost may have
        committed: repeating it is safe only because its fence (execution id, RUNNING) makes
        the repeat change nothing more (desk/ledger/run.py)."""
        delay = 0.05
        until = None if patience is None else time.monotonic() + patience
        while True:
            try:
                return await write()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                left = self.lease_left() if until is None else until - time.monotonic()
                if left <= 0:
                    raise DatabaseUnreachable(describe_db_error(exc)) from exc
                log.info("task %s: database unavailable, retrying: %s", self.task_id, exc)
                await asyncio.sleep(min(delay, max(0.01, left)))
                delay = min(delay * 2, 1.0)

    async def _renew(self, write: Callable[[], Awaitable[T]]) -> T:
        """A fenced write that extends the lease. One that set out while the lease lasted but
        committed after it ran out (it waited for a connection through an outage) does not
        count: the outage outlasted the lease, so the attempt fails with "Database unreachable"
        (docs/architecture.md, "Leases") whether or not a rescuer got there first."""
        set_out_alive = self.lease_left() > 0
        result = await self.fenced(write)
        if set_out_alive and self.lease_left() <= 0:
            raise DatabaseUnreachable("it answered only after the lease ran out")
        self._last_write = time.monotonic()
        return result

    async def _pulse(self, **fields: Any) -> None:
        async def write() -> ledger_run.Pulse:
            now = self.rt.clock()
            return await ledger_run.pulse(
                self.rt.pg, self.task_id, self.execution_id, now=now, lease=self.lease, **fields
            )

        pulse = await self._renew(write)
        self.lost = self.lost or not pulse.alive
        self.cancel_requested = self.cancel_requested or pulse.cancel_requested

    async def progress(
        self, current: int | None = None, total: int | None = None, message: str | None = None
    ) -> None:
        """Write progress (extends the lease). Raises Cancelled or LostFence: stop working."""
        await self._pulse(current=current, total=total, message=message)
        self.raise_if_stopped()

    def finished(self, row: Row | None) -> Row:
        """What a committed finish answered: the row it completed, or an outcome to raise —
        LostFence (another execution owns the task) or CancelledAtFinish (a cancel recorded
        before the finish won; the ledger discarded the result)."""
        if row is None:
            raise LostFence()
        if row.status == TaskStatus.CANCELLED:
            raise CancelledAtFinish()
        return row

    def raise_if_stopped(self) -> None:
        if self.lost:
            raise LostFence()
        if self.cancel_requested:
            raise Cancelled()

    async def keep_alive(self) -> None:
        """Extend the lease while a processor works between progress writes."""
        interval = max(0.2, self.rt.settings.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self._last_write < interval:
                continue
            try:
                await self._pulse()
            except Exception as exc:
                log.warning("keep-alive for task %s failed: %s", self.task_id, exc)

    async def recover(self) -> bool:
        """After a transient database error: wait (while the lease lasts) until the database
        answers, then re-read the row. True: run the processor again in this execution;
        False: this execution's finish did commit after all."""

        async def reread() -> Row | None:
            async with self.rt.engine.begin() as conn:
                row = await ledger_run.reread(conn, self.task_id)
                if (
                    row is not None
                    and row.status == TaskStatus.RUNNING
                    and row.execution_id == self.execution_id
                ):
                    await ledger_upkeep.drop_chunks(conn, self.task_id, self.execution_id)
                    await ledger_run.pulse(
                        conn, self.task_id, self.execution_id, now=self.rt.clock(), lease=self.lease
                    )
                return row

        row = await self._renew(reread)
        if row is None or row.execution_id != self.execution_id:
            raise LostFence()
        if row.status == TaskStatus.COMPLETED:
            return False
        if row.status != TaskStatus.RUNNING:
            raise LostFence()
        self.row, self._task = row, None  # an import goes on after the rows it committed
        return True


Processor = Callable[[Execution], Awaitable[None]]


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def claim_task(
    rt: Runtime, task_id: int, run: int, *, team_max: int | None = None
) -> tuple[Row, str] | None:
    """Claim a delivered task; `team_max` for the long lane (one team cannot fill it).

    The execution id is chosen once, before any retry: a claim repeated after its reply was lost
    finds the row it claimed and answers with it (the fence makes the repeat a no-op)."""
    execution_id = uuid.uuid4().hex
    lease = timedelta(seconds=rt.settings.lease_seconds)

    async def once() -> Row | None:
        if team_max is not None:
            return await ledger_run.claim_long(
                rt.pg, task_id, run, execution_id, now=rt.clock(), lease=lease, team_max=team_max
            )
        return await ledger_run.claim(
            rt.pg, task_id, run, execution_id, now=rt.clock(), lease=lease
        )

    task = await retrying(once)
    return (task, execution_id) if task else None


async def claim_batch(rt: Runtime, task_id: int, run: int, *, limit: int) -> list[tuple[Row, str]]:
    """Claim a short-lane message; a reminder or a plain NOOP brings the lane's other ready rows
    with it (up to `limit` in all, `ledger_run.claim_short`). One autocommit statement (a repeat
    after a lost reply finds the rows RUNNING and claims nothing: they are rescued when their
    lease runs out)."""
    lease = timedelta(seconds=rt.settings.lease_seconds)
    eid = uuid.uuid4().hex
    tasks = await retrying(
        lambda: ledger_run.claim_short(
            rt.pg, task_id, run, eid, now=rt.clock(), lease=lease, limit=limit
        )
    )
    # The delivered task first: a scripted NOOP is always alone.
    tasks.sort(key=lambda t: t.id != task_id)
    return [(t, t.execution_id or "") for t in tasks]


async def _fail(ex: Execution, exc: BaseException, *, retryable: bool) -> None:
    rt = ex.rt
    # A JobOutcome (Permanent, RetryLater, …) says what happened in its own words and key.
    message = exc.message if isinstance(exc, JobOutcome) else describe_error(exc)
    key, params = (exc.key, exc.params) if isinstance(exc, JobOutcome) else (None, {})
    if is_transient(exc):
        message, key, params = f"Database unreachable: {describe_db_error(exc)}", None, {}

    async def write() -> Row | None:
        now = rt.clock()
        retry_at = None
        if retryable:
            s = rt.settings
            wait = ledger_run.backoff(ex.row.attempts, s.retry_base_seconds, s.retry_max_seconds)
            retry_at = now + wait
        return await ledger_run.fail(
            rt.pg, ex.task_id, ex.execution_id, now=now, error=message, retry_at=retry_at,
            error_key=key, error_params=params,
        )  # fmt: skip

    # The database may still be away: wait for it (the fence decides who records the end).
    # Meanwhile the task stays listed in this worker's registration, so a rescuer elsewhere
    # also names the database as the cause.
    task = await ex.fenced(write, patience=FAIL_PATIENCE)
    if task is not None and task.status == TaskStatus.WAITING:
        await send_now(rt, task)
    log.info(
        "task %s attempt %s failed (%s): %s",
        ex.task_id,
        ex.row.attempts,
        "retry" if task and task.status == TaskStatus.WAITING else "final",
        message,
    )


@tracing.traced("taskdesk.run")
async def _run(ex: Execution, processor: Processor) -> None:
    """The processor within the attempt's run-time limit (jobs/limits.py): past it the processor
    is cancelled and the attempt fails with RanPastLimit."""
    keeper = asyncio.create_task(ex.keep_alive())
    ex._started = asyncio.get_running_loop().time()
    try:
        async with asyncio.timeout_at(ex._started + ex.limit) as ex._timer:
            await _recovering(ex, processor)
    except TimeoutError:
        if ex._timer is None or not ex._timer.expired():
            raise  # the processor's own timeout (a socket's), not the limit
        log.warning("task %s ran past its limit of %.0f s; stopped", ex.task_id, ex.limit)
        raise RanPastLimit(ex.limit) from None
    finally:
        ex._timer = None
        keeper.cancel()


async def _recovering(ex: Execution, processor: Processor) -> None:
    """The processor, run again within the same attempt after a transient database error."""
    for recoveries in range(MAX_RECOVERIES + 1):
        try:
            await processor(ex)
            return
        except Exception as exc:
            if not is_transient(exc) or recoveries == MAX_RECOVERIES:
                raise
            log.warning("task %s: database error, resuming when it answers: %s", ex.task_id, exc)
            if not await ex.recover():
                return


async def execute(rt: Runtime, processors: dict[str, Processor], task_id: int, run: int) -> str:
    """Run one delivered message; returns what happened (for logs and tests)."""
    claimed = await claim_task(rt, task_id, run)
    if claimed is None:
        return "stale"
    return await run_claimed(rt, processors, *claimed)


async def run_claimed(
    rt: Runtime, processors: dict[str, Processor], task: Row, execution_id: str
) -> str:
    ex = Execution(rt, task, execution_id)
    processor = processors.get(task.kind)
    try:
        if processor is None:
            raise Permanent(f"No processor for tasks of kind {task.kind} on this worker.")
        await _run(ex, processor)
        return "done"
    except Cancelled:
        await ledger_run.ack_cancel(rt.pg, ex.task_id, execution_id, now=rt.clock())
        return "cancelled"
    except CancelledAtFinish:
        log.info("task %s: cancelled while finishing; its result was discarded", ex.task_id)
        return "cancelled"
    except LostFence:
        log.info(
            "task %s: execution %s lost its fence; discarding its work", ex.task_id, execution_id
        )
        async with rt.engine.begin() as conn:
            await ledger_upkeep.drop_chunks(conn, ex.task_id, execution_id)
        return "discarded"
    except Permanent as exc:
        await _fail(ex, exc, retryable=False)
        return "failed"
    except asyncio.CancelledError:
        # The worker is shutting down: hand the task back at once instead of waiting for the lease.
        await _release(rt, ex)
        raise
    except Exception as exc:
        if not is_transient(exc) and not isinstance(exc, JobOutcome):
            log.exception("task %s failed", ex.task_id)
        await _fail(ex, exc, retryable=True)
        return "retry"


async def release_all(rt: Runtime, claimed: list[tuple[Row, str]]) -> None:
    """Hand claimed tasks back (a worker shutting down before it ran them)."""
    for task, execution_id in claimed:
        await _release(rt, Execution(rt, task, execution_id))


async def _release(rt: Runtime, ex: Execution) -> None:
    try:
        task = await ledger_run.release(rt.pg, ex.task_id, ex.execution_id, now=rt.clock())
        if task is not None:
            await send_now(rt, task)
    except Exception as exc:
        log.warning("could not hand back task %s on shutdown: %s", ex.task_id, exc)


def message_fields(msg: Any) -> tuple[int, int]:
    """Validate an arq message: `{task_id, run}` as integers, nothing else."""
    if (
        not isinstance(msg, dict)
        or not isinstance(msg.get("task_id"), int)
        or not isinstance(msg.get("run"), int)
    ):
        raise ValueError(f"malformed task message: {msg!r}")
    return msg["task_id"], msg["run"]
