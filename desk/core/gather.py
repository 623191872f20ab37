"""Group commit for one process: calls made at the same moment share one round trip.

A call joins the waiting list; the first one starts a drain, which (from the next turn of the
event loop on, so every call made in this turn joins it) runs the whole list at once, then
again whatever came while that round trip was out, until none is left. A lone call goes at
once; under load the calls of one process share round trips instead of paying one each (see
docs/architecture.md, "Sends and lanes"). Used for the direct sends to Redis
(desk/ledger/delivery.py) and the counts of the change budget (desk/people/throttle.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Stopped(RuntimeError):
    """The drain was cancelled (its process is stopping) before this call's answer came."""


class Gather(Generic[T, R]):
    """`await gather.call(item)`: `run(items)` answers a list of results in the items' order (an
    exception in it is raised to that item's caller alone); when `run` raises, every call of
    that round trip raises the same."""

    def __init__(self, run: Callable[[list[T]], Awaitable[Sequence[R | Exception]]]) -> None:
        self._run = run
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._drain: asyncio.Task[None] | None = None

    async def call(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        if self._drain is not None and self._drain.get_loop() is not loop:
            self._drain, self._waiting = None, []  # a loop that is gone took its calls with it
        answer: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, answer))
        if self._drain is None:
            self._drain = loop.create_task(self._drain_all())
        return await answer

    async def _drain_all(self) -> None:
        batch: list[tuple[T, asyncio.Future[R]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._round_trip(batch)
        finally:
            self._drain = None
            for _, answer in batch + self._waiting:  # only when the drain was cancelled
                if not answer.done():
                    answer.set_exception(Stopped())
            self._waiting = []

    async def _round_trip(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run([item for item, _ in batch])
        except Exception as exc:
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
            return
        for (_, answer), result in zip(batch, results, strict=True):
            if answer.done():  # its caller stopped waiting
                continue
            if isinstance(result, Exception):
                answer.set_exception(result)
            else:
                answer.set_result(result)
