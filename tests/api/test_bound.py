"""The in-flight bound adapts to how soon answers start (web/overload.py `Bound`): cut by a
tenth when an answer starts later than the target (once per target interval), grown back by
about one per `limit` answers in time, never below the floor nor above the ceiling. Time is
passed in; the edge feeds it each counted answer's time to its first byte."""

from __future__ import annotations

import asyncio
from typing import Any

from desk.core.settings import load_settings
from tests.api.edge_helpers import Held, call, scope
from web.edge import Edge
from web.overload import Bound, urgent


def test_a_late_answer_cuts_the_bound_once_per_target_interval() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    assert bound.admits(47) and not bound.admits(48)
    bound.seen(0.5, now=10.0)
    assert int(bound.limit) == 43  # 48 x 0.9
    bound.seen(0.5, now=10.05)  # admitted under the old bound: no second cut yet
    assert int(bound.limit) == 43
    bound.seen(0.5, now=10.2)
    assert int(bound.limit) == 38
    assert not bound.admits(38) and bound.admits(37)


def test_what_a_person_asked_for_is_refused_only_at_the_ceiling() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    for i in range(30):
        bound.seen(1.0, now=float(i))
    assert not bound.admits(8) and bound.admits(8, urgent=True)
    assert bound.admits(47, urgent=True) and not bound.admits(48, urgent=True)
    assert urgent({"method": "POST"}) and not urgent({"method": "GET"})
    assert not urgent({"method": "HEAD"})


def test_the_bound_stays_between_its_floor_and_ceiling() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    for i in range(100):
        bound.seen(1.0, now=float(i))
    assert bound.limit == 8.0 and bound.admits(7) and not bound.admits(8)
    for _ in range(10_000):
        bound.seen(0.01, now=200.0)
    assert bound.limit == 48.0
    assert Bound(ceiling=2, floor=8, target_seconds=0.1).floor == 2  # a low ceiling wins


def test_answers_in_time_grow_the_bound_back_by_about_one_per_limit_answers() -> None:
    bound = Bound(ceiling=48, floor=8, target_seconds=0.1)
    for i in range(30):
        bound.seen(1.0, now=float(i))
    assert bound.limit == 8.0
    for _ in range(8):
        bound.seen(0.01, now=100.0)
    assert 8.9 < bound.limit < 9.1


async def test_the_edge_times_counted_answers_to_their_first_byte() -> None:
    inner = Held()
    now = [100.0]
    settings = load_settings(web_max_in_flight=48, web_target_latency_ms=5)
    edge = Edge(inner, settings=settings, prod=True, timer=lambda: now[0])
    first = asyncio.create_task(call(edge, scope("/tickets")))
    await asyncio.wait_for(inner.reached.wait(), 10)
    now[0] += 0.05  # the answer starts 50 ms after arrival: later than the 5 ms target
    inner.release.set()
    answer: Any = await first
    assert answer[0]["status"] == 200
    assert int(edge.bound.limit) == 43
    now[0] += 1.0
    inner.reached.clear()
    health = asyncio.create_task(call(edge, scope("/health")))  # exempt: neither counted nor timed
    await asyncio.wait_for(inner.reached.wait(), 10)
    now[0] += 0.05
    answer = await health
    assert answer[0]["status"] == 200
    assert int(edge.bound.limit) == 43
    now[0] += 1.0
    inner.reached.clear()
    inner.release.clear()
    # A click's answer is its own work, not the queue's wait: a slow one does not cut the bound.
    click = asyncio.create_task(call(edge, scope("/tickets/1/remind", method="POST")))
    await asyncio.wait_for(inner.reached.wait(), 10)
    now[0] += 0.5
    inner.release.set()
    answer = await click
    assert answer[0]["status"] == 200
    assert int(edge.bound.limit) == 43
