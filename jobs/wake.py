"""Wake-ups: a lane's arq consumer polls its queue as soon as work is sent to it, not on a timer
(docs/architecture.md, "Wake-ups").

The send script (desk/core/queue.py) publishes on a queue's wake channel in the same script that
queues the jobs, so a lane woken by it finds them. Each worker process listens on one Redis
connection (`Listener`), which sets the woken lane's event; each lane's arq consumer
(`LaneWorker`) waits for its next poll on that event, at most:

- WORKER_POLL_DELAY while the lane has claims or work in flight (a slot that frees, arq's own
  deferred retries), or while the listener is not subscribed (Redis away, reconnecting): the
  polling of before;
- while it is idle, until its queue's next deferred job is due (a reminder sent ahead) or
  WORKER_IDLE_POLL_SECONDS, whichever comes first.

A wake-up only shortens a wait: the ledger and the dispatcher's resends decide what runs, so a lost
one (published while the listener reconnects) costs at most WORKER_IDLE_POLL_SECONDS, never a task;
after each (re)subscription every lane polls at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from arq.utils import timestamp_ms
from arq.worker import Worker
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from desk.core.queue import REDIS_ERRORS

log = logging.getLogger("taskdesk.worker")
RECONNECT_SECONDS = 1.0
# The listener's connection is pinged when quiet this long; no answer (not even a pong) within two
# of them means a dead connection (e.g. Redis gone without closing it): reconnect.
QUIET_SECONDS = 5.0


class Listener:
    """One connection per worker process, subscribed to its lanes' wake channels."""

    def __init__(self, redis_url: str, channels: dict[str, str], name: str) -> None:
        self.redis_url = redis_url
        self.name = name  # its connection's client name (CLIENT LIST)
        self.channels = channels  # lane -> channel
        self.events = {lane: asyncio.Event() for lane in channels}
        self.subscribed = False

    def wake_all(self) -> None:
        for event in self.events.values():
            event.set()

    async def run(self) -> None:
        """Listen until cancelled, reconnecting after any Redis error."""
        while True:
            try:
                await self._listen()
            except Exception as exc:  # Redis away above all; the lanes poll meanwhile
                log.warning("wake-ups unavailable (%s); polling, reconnecting in 1 s", exc)
            finally:
                self.subscribed = False
                self.wake_all()  # each lane polls now, then every WORKER_POLL_DELAY
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen(self) -> None:
        redis = Redis.from_url(
            self.redis_url, socket_connect_timeout=0.5, socket_timeout=None, client_name=self.name
        )
        lanes = {ch.encode(): lane for lane, ch in self.channels.items()}
        try:
            async with redis.pubsub() as sub:
                await sub.subscribe(*self.channels.values())
                confirmed = 0
                quiet = 0
                while True:
                    msg = await sub.get_message(timeout=QUIET_SECONDS)
                    if msg is None:
                        quiet += 1
                        if quiet > 1:
                            raise RedisConnectionError("no answer to a ping on the wake channel")
                        await sub.ping()
                        continue
                    quiet = 0
                    if msg["type"] == "message":
                        self.events[lanes[msg["channel"]]].set()
                    elif msg["type"] == "subscribe":
                        confirmed += 1
                        if confirmed == len(self.channels):
                            self.subscribed = True
                            self.wake_all()  # anything sent before we listened
        finally:
            with contextlib.suppress(*REDIS_ERRORS):
                await redis.aclose()


class LaneWorker(Worker):
    """arq's Worker whose pause between polls (arq's `poll_delay`, here 0) is a wait on the lane's
    wake-up event, bounded as the module says."""

    def __init__(
        self,
        *args: Any,
        listener: Listener,
        lane: str,
        busy: Callable[[], bool],
        busy_poll: float,
        idle_poll: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, poll_delay=0, **kwargs)
        self.listener = listener
        self.wake = listener.events[lane]
        self.busy = busy
        self.busy_poll = busy_poll
        self.idle_poll = idle_poll

    async def _poll_iteration(self) -> None:
        # Cleared before the poll: a wake-up during it ends the next pause at once. One handled
        # before the clear was published after its jobs were queued, so this poll sees them.
        self.wake.clear()
        await super()._poll_iteration()
        pause = await self._pause_seconds()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(pause):
                await self.wake.wait()

    async def _pause_seconds(self) -> float:
        if not self.listener.subscribed or self.job_counter > 0 or self.busy():
            return self.busy_poll
        now = timestamp_ms()
        nxt = await self.pool.zrangebyscore(
            self.queue_name, min=f"({now}", max="+inf", start=0, num=1, withscores=True
        )
        if not nxt:
            return self.idle_poll
        # 1 ms past its score, so the poll it wakes for finds it due (arq reads up to now).
        return min(self.idle_poll, max(0.0, (float(nxt[0][1]) - now + 1) / 1000))
