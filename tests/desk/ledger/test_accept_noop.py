"""The NOOP accept (benchmarks, tests) is one statement on rt.pg: a member's task is inserted and
sent once; a non-member or a missing team is told the team does not exist, and nothing is written."""

from datetime import timedelta

import pytest

from desk.core.errors import NotFound
from desk.work import tasks


async def _count(rt) -> int:
    row = await rt.pg.one("SELECT count(*) AS n FROM background_task")
    return int(row["n"])


async def test_a_member_submits_and_it_is_sent_once(rt, world):
    task = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 2})
    row = await rt.pg.one("SELECT * FROM background_task WHERE id = %(i)s", {"i": task.id})
    assert row is not None
    assert (row["status"], row["owner_id"], row["team_id"]) == ("WAITING", world.staff, world.team)
    assert row["filters"] == {"steps": 2}
    assert row["sends"] == 1 and row["dispatched_at"] is not None
    assert task.id == row["id"] and task.sends == 1


async def test_a_customer_member_may_submit_too(rt, world):
    task = await tasks.submit_noop(rt, world.customer, world.team)
    assert task.owner_id == world.customer


async def test_a_non_member_is_told_the_team_does_not_exist(rt, world):
    before = await _count(rt)
    with pytest.raises(NotFound):
        await tasks.submit_noop(rt, world.outsider, world.team)
    with pytest.raises(NotFound):
        await tasks.submit_noop(rt, world.staff, 999_999)
    assert await _count(rt) == before


async def test_a_later_run_at_is_not_sent_now(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team, run_at=clock() + timedelta(hours=2))
    assert task.sends == 0 and task.dispatched_at is None
