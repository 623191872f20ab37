"""desk/core/gather.py: calls made together share one round trip, calls made while it is out
share the next, an item's own error reaches its caller alone, and a drain cancelled mid-way
(its process stopping) answers every waiting caller with Stopped instead of leaving it hanging."""

import asyncio

import pytest

from desk.core.gather import Gather, Stopped


class Trips:
    """A round trip that records its batches and, while `hold` is clear, waits for it."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.entered = asyncio.Event()

    async def run(self, items: list[int]) -> list[int | Exception]:
        self.batches.append(items)
        self.entered.set()
        await self.hold.wait()
        return [ValueError(i) if i < 0 else i * 10 for i in items]


async def test_calls_made_together_share_one_round_trip():
    trips = Trips()
    gather = Gather(trips.run)
    assert await asyncio.gather(*(gather.call(i) for i in range(5))) == [0, 10, 20, 30, 40]
    assert trips.batches == [[0, 1, 2, 3, 4]]


async def test_calls_made_while_one_is_out_share_the_next():
    trips = Trips()
    trips.hold.clear()
    gather = Gather(trips.run)
    first = asyncio.ensure_future(gather.call(1))
    await asyncio.wait_for(trips.entered.wait(), 10)
    later = [asyncio.ensure_future(gather.call(i)) for i in (2, 3)]
    trips.hold.set()
    assert await asyncio.wait_for(asyncio.gather(first, *later), 10) == [10, 20, 30]
    assert trips.batches == [[1], [2, 3]]


async def test_an_items_error_reaches_its_caller_alone():
    gather = Gather(Trips().run)
    got = await asyncio.gather(*(gather.call(i) for i in (1, -2, 3)), return_exceptions=True)
    assert got[0] == 10 and got[2] == 30 and isinstance(got[1], ValueError)


async def test_a_failed_round_trip_fails_each_of_its_calls():
    async def broken(items: list[int]) -> list[int | Exception]:
        raise ConnectionError("gone")

    gather = Gather(broken)
    got = await asyncio.gather(*(gather.call(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(g, ConnectionError) for g in got)


async def test_a_cancelled_drain_answers_its_callers_with_stopped():
    trips = Trips()
    trips.hold.clear()
    gather = Gather(trips.run)
    calls = [asyncio.ensure_future(gather.call(i)) for i in range(3)]
    await asyncio.wait_for(trips.entered.wait(), 10)
    assert gather._drain is not None
    gather._drain.cancel()
    for call in calls:
        with pytest.raises(Stopped):
            await asyncio.wait_for(call, 10)
    trips.hold.set()
    assert await asyncio.wait_for(gather.call(4), 10) == 40, "the next call starts a new drain"
