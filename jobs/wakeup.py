"""An arq consumer whose poll wait can be cut short: `WakeableWorker.wake()` starts the next poll
at once when a slot has freed, instead of at the next poll_delay tick.

Why: a lane lets arq start only as many claims as it has free slots (jobs/worker.py), so arq's
`start_jobs` returns as soon as the slots are full and the next messages were picked only at
the next poll (poll_delay sleep + a new ZRANGEBYSCORE). Raw arq instead blocks in `start_jobs`
on its semaphore and goes on the moment a job ends. Waking the poll keeps the lane's rule (no
message is picked that would have to wait here: a picked message carries an in-progress marker,
which after a kill -9 holds it back until the marker expires) and gives back arq's pace.

Only `main` changes (arq 0.28's loop, with the sleep of `arq.utils.poll` replaced by a wait on an
event with the same deadline): one loop, so never two `_poll_iteration`s at once; a wake during
an iteration is kept and runs one more iteration right after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from arq.connections import create_pool, log_redis_info
from arq.worker import Worker

log = logging.getLogger("taskdesk.worker")


class WakeableWorker(Worker):
    """arq's Worker with a poll wait that `wake()` ends early."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._woken = asyncio.Event()
        self.wakes = 0  # polls started early by a wake (read by tests and profiles)

    def wake(self) -> None:
        """Poll now if a message could be picked now (a free slot arq would fill); otherwise
        the regular tick stays: waking a loop that cannot pick anything only costs a round trip."""
        if self.allow_pick_jobs and self.job_counter < self.max_jobs:
            self._woken.set()

    def _release_sem_dec_counter_on_complete(self) -> None:
        # An arq job (a claim) ended: a slot that the lane freed while this claim was still
        # counted by arq can be filled now.
        super()._release_sem_dec_counter_on_complete()
        self.wake()

    async def main(self) -> None:
        if self._pool is None:
            self._pool = await create_pool(
                self.redis_settings,
                job_deserializer=self.job_deserializer,
                job_serializer=self.job_serializer,
                default_queue_name=self.queue_name,
                expires_extra_ms=self.expires_extra_ms,
            )
        log.info(
            "Starting worker for %d functions: %s", len(self.functions), ", ".join(self.functions)
        )
        await log_redis_info(self.pool, log.info)
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            self._woken.clear()  # a wake from here on (even during the iteration) polls again
            await self._poll_iteration()
            if self.burst and await self._burst_done():
                return
            await self._pause(self.poll_delay_s - (loop.time() - started))

    async def _pause(self, seconds: float) -> None:
        if self._woken.is_set():
            self.wakes += 1
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), max(0.0, seconds))
            self.wakes += 1

    async def _burst_done(self) -> bool:
        """arq's own burst exit (unused by taskdesk's workers; kept so the class stays a Worker)."""
        if 0 <= self.max_burst_jobs <= self._jobs_started() or not await self.pool.zcard(
            self.queue_name
        ):
            await asyncio.gather(*self.tasks.values())
            return True
        return False
