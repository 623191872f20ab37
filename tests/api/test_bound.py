"""The in-flight bound adapts to how soon answers start (web/overload.py `Bound`): judged by
windows of answers (at least `window` answers and one target interval), cut by a tenth when more
than 5 % of a window started later than the target, grown back by about one per `limit` answers
in time otherwise, never below the floor nor above the ceiling. Time is passed in; the edge
feeds it each poll's time to its first byte."""

from __future__ import annotations

import asyncio
from typing import Any

from desk.core.settings import load_settings
from tests.api.edge_helpers import Held, call, scope
from web.edge import Edge
from web.overload import Bound, urgent


def _window(bound: Bound, late: int, now: float, size: int = 20) -> None:
    """One window of `size` answers, `late` of them later than the target."""
    for i in range(size):
        bound.seen(1.0 if i < late else 0.01, now=now)


def test_a_window_with_too_many_late_answers_cuts_the_bound_once() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    assert bound.admits(47) and not bound.admits(48)
    _window(bound, late=2, now=10.0)  # 10 % late
    assert int(bound.limit) == 43  # 48 x 0.9
    _window(bound, late=20, now=10.05)  # within the same target interval: it waits
    assert int(bound.limit) == 43
    bound.seen(1.0, now=10.2)  # then the window closes, its answers mostly late
    assert int(bound.limit) == 38
    assert not bound.admits(38) and bound.admits(37)


def test_one_late_answer_in_twenty_does_not_cut_it() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    _window(bound, late=2, now=1.0)
    limit = bound.limit
    for i in range(10):
        _window(bound, late=1, now=2.0 + i)  # 5 %: the tail is at the target
    assert bound.limit > limit


def test_what_a_person_asked_for_is_refused_only_at_the_ceiling() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    for i in range(30):
        _window(bound, late=20, now=float(i))
    assert not bound.admits(8) and bound.admits(8, urgent=True)
    assert bound.admits(47, urgent=True) and not bound.admits(48, urgent=True)
    assert urgent({"method": "POST"}) and not urgent({"method": "GET"})
    assert not urgent({"method": "HEAD"})


def test_the_bound_stays_between_its_floor_and_ceiling() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    for i in range(100):
        _window(bound, late=20, now=float(i))
    assert bound.limit == 8.0 and bound.admits(7) and not bound.admits(8)
    for i in range(2_000):
        _window(bound, late=0, now=200.0 + i)
    assert bound.limit == 48.0
    assert Bound(ceiling=2, floor=8, target_seconds=0.1).floor == 2  # a low ceiling wins


def test_answers_in_time_grow_the_bound_back_by_about_one_per_limit_answers() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1, window=8)
    for i in range(30):
        _window(bound, late=8, now=float(i), size=8)
    assert bound.limit == 8.0
    _window(bound, late=0, now=100.0, size=8)
    assert 8.9 < bound.limit < 9.1


class Spy(Bound):
    """Records what the edge tells the bound."""

    def __init__(self) -> None:
        super().__init__(ceiling=48, floor=8, target_seconds=0.005)
        self.told: list[float] = []

    def seen(self, seconds: float, now: float) -> None:
        self.told.append(round(seconds, 3))


async def test_the_edge_times_polls_to_their_first_byte_and_nothing_else() -> None:
    inner = Held()
    now = [100.0]
    settings = load_settings(web_max_in_flight=48, web_target_latency_ms=5)
    edge = Edge(inner, settings=settings, prod=True, timer=lambda: now[0])
    spy = edge.bound = Spy()

    async def answered(path: str, method: str = "GET") -> None:
        inner.reached.clear()
        inner.release.clear()
        task = asyncio.create_task(call(edge, scope(path, method=method)))
        await asyncio.wait_for(inner.reached.wait(), 10)
        now[0] += 0.05  # the answer starts 50 ms after arrival
        inner.release.set()
        answer: Any = await task
        assert answer[0]["status"] == 200

    await answered("/tickets")
    assert spy.told == [0.05]
    await answered("/health")  # exempt: neither counted nor timed
    # A click's answer is its own work, not the queue's wait: not told.
    await answered("/tickets/1/remind", method="POST")
    assert spy.told == [0.05]
