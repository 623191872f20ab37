"""One execution of one task: claim, fenced progress with a keep-alive lease, and the endings.

`process_task` is the arq entry point. It drops stale messages, claims the row, runs the
processor for the task's kind, and turns what happened into exactly one ledger transition.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from desk import ledger, tracing
from desk.db import is_transient, retry_transient
from desk.models import BackgroundTask
from desk.runtime import Runtime
from desk.tasks import kick
from jobs.outcomes import Cancelled, LostFence, Permanent

log = logging.getLogger(__name__)


class Execution:
    """Handed to a processor: the claimed task and fenced writes on its behalf."""

    def __init__(self, rt: Runtime, task: BackgroundTask, execution_id: str) -> None:
        self.rt = rt
        self.task = task
        self.execution_id = execution_id
        self.lease = timedelta(seconds=rt.settings.lease_seconds)
        self.cancel_requested = False
        self.lost = False
        self._last_write = time.monotonic()

    @property
    def task_id(self) -> int:
        assert self.task.id is not None
        return self.task.id

    async def progress(
        self, current: int | None = None, total: int | None = None, message: str | None = None
    ) -> None:
        """Write progress (extends the lease). Raises Cancelled or LostFence: stop working."""
        async with self.rt.engine.begin() as conn:
            pulse = await ledger.progress(
                conn,
                self.task_id,
                self.execution_id,
                now=self.rt.clock(),
                lease=self.lease,
                current=current,
                total=total,
                message=message,
            )
        self._last_write = time.monotonic()
        if not pulse.alive:
            self.lost = True
        self.cancel_requested = self.cancel_requested or pulse.cancel_requested
        self.raise_if_stopped()

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
                async with self.rt.engine.begin() as conn:
                    pulse = await ledger.progress(
                        conn, self.task_id, self.execution_id, now=self.rt.clock(), lease=self.lease
                    )
            except Exception as exc:
                log.warning("keep-alive for task %s failed: %s", self.task_id, exc)
                continue
            self._last_write = time.monotonic()
            self.lost = self.lost or not pulse.alive
            self.cancel_requested = self.cancel_requested or pulse.cancel_requested


Processor = Callable[[Execution], Awaitable[None]]


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@tracing.traced("taskdesk.claim")
@retry_transient
async def _claim(rt: Runtime, task_id: int, run: int) -> tuple[BackgroundTask, str] | None:
    execution_id = uuid.uuid4().hex
    # One conditional UPDATE: autocommit spares the BEGIN and COMMIT round trips.
    async with rt.engine.connect() as plain:
        conn = await plain.execution_options(isolation_level="AUTOCOMMIT")
        task = await ledger.claim(
            conn,
            task_id,
            run,
            execution_id,
            now=rt.clock(),
            lease=timedelta(seconds=rt.settings.lease_seconds),
        )
    return (task, execution_id) if task else None


@retry_transient
async def _fail(ex: Execution, exc: BaseException, *, retryable: bool) -> None:
    rt = ex.rt
    now = rt.clock()
    retry_at = None
    if retryable:
        s = rt.settings
        retry_at = now + ledger.backoff(ex.task.attempts, s.retry_base_seconds, s.retry_max_seconds)
    message = exc.message if isinstance(exc, Permanent) else describe_error(exc)
    async with rt.engine.begin() as conn:
        task = await ledger.fail(
            conn, ex.task_id, ex.execution_id, now=now, error=message, retry_at=retry_at
        )
    if task is not None and task.status == "WAITING":
        await kick(rt, task)
    log.info(
        "task %s attempt %s failed (%s): %s",
        ex.task_id,
        ex.task.attempts,
        "retry" if task and task.status == "WAITING" else "final",
        message,
    )


@tracing.traced("taskdesk.run")
async def _run(ex: Execution, processor: Processor) -> None:
    keeper = asyncio.create_task(ex.keep_alive())
    try:
        await processor(ex)
    finally:
        keeper.cancel()


async def execute(rt: Runtime, processors: dict[str, Processor], task_id: int, run: int) -> str:
    """Run one delivered message; returns what happened (for logs and tests)."""
    claimed = await _claim(rt, task_id, run)
    if claimed is None:
        return "stale"
    task, execution_id = claimed
    ex = Execution(rt, task, execution_id)
    processor = processors.get(task.kind)
    try:
        if processor is None:
            raise Permanent(f"No processor for tasks of kind {task.kind} on this worker.")
        await _run(ex, processor)
        return "done"
    except Cancelled:
        async with rt.engine.begin() as conn:
            await ledger.drop_chunks(conn, ex.task_id, execution_id)
            await ledger.ack_cancel(conn, ex.task_id, execution_id, now=rt.clock())
        return "cancelled"
    except LostFence:
        log.info("task %s: execution %s lost its fence; discarding its work", task_id, execution_id)
        async with rt.engine.begin() as conn:
            await ledger.drop_chunks(conn, ex.task_id, execution_id)
        return "discarded"
    except Permanent as exc:
        await _fail(ex, exc, retryable=False)
        return "failed"
    except asyncio.CancelledError:
        # The worker is shutting down: hand the task back at once instead of waiting for the lease.
        await _release(rt, ex)
        raise
    except Exception as exc:
        if not is_transient(exc):
            log.exception("task %s failed", task_id)
        await _fail(ex, exc, retryable=True)
        return "retry"


async def _release(rt: Runtime, ex: Execution) -> None:
    try:
        async with rt.engine.begin() as conn:
            task = await ledger.release(conn, ex.task_id, ex.execution_id, now=rt.clock())
        if task is not None:
            await kick(rt, task)
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
