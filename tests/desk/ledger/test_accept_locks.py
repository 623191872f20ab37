"""Accepts that do not queue behind each other (issue 11): an export locks its owner only, so a
colleague's accept never waits for it, while one person's quota still holds under concurrency."""

from __future__ import annotations

import asyncio

import psycopg
import sqlalchemy as sa

from desk.core import locks
from desk.core.errors import QuotaExceeded
from desk.core.models import TaskStatus
from desk.work import tasks
from tests.helpers import wait_for

DEADLINE = 30.0  # generous: the machine is shared


async def _second_staff(rt, team: int) -> int:
    async with rt.engine.begin() as conn:
        user = (
            await conn.execute(
                sa.text(
                    "INSERT INTO app_user (email, display_name) VALUES ('mei@acme.test', 'Mei') "
                    "RETURNING id"
                )
            )
        ).scalar_one()
        await conn.execute(
            sa.text("INSERT INTO membership (user_id, team_id, role) VALUES (:u, :t, 'STAFF')"),
            {"u": user, "t": team},
        )
    return int(user)


async def _waiting_on_locks(rt) -> int:
    row = await rt.pg.one(
        "SELECT count(*) AS n FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    assert row is not None
    return int(row["n"])


async def test_a_colleague_accepts_while_one_persons_lock_is_held(rt, world) -> None:
    mei = await _second_staff(rt, world.team)
    with psycopg.connect(rt.settings.libpq_url) as holder:  # an open transaction holds Chen's lock
        holder.execute(
            f"SELECT pg_advisory_xact_lock(hashtextextended(%s, {locks.PERSON_ACCEPT}))",
            (f"accept:{world.team}:{world.staff}",),
        )
        chen = asyncio.create_task(tasks.create_export(rt, world.staff, world.team, {"q": "a"}))
        await wait_for(
            lambda: _waiting_on_locks_at_least(rt, 1),
            timeout=DEADLINE,
            what="Chen's accept to wait",
        )
        # Mei, same team, is not behind Chen: her accept completes while his lock is held.
        done = await asyncio.wait_for(
            tasks.create_export(rt, mei, world.team, {"q": "b"}), DEADLINE
        )
        assert done.status == TaskStatus.WAITING and done.owner_id == mei
        assert not chen.done()  # Chen's own accept does wait for his lock
        holder.rollback()
    task = await asyncio.wait_for(chen, DEADLINE)
    assert task.owner_id == world.staff and task.status == TaskStatus.WAITING


async def _waiting_on_locks_at_least(rt, n: int) -> bool:
    return await _waiting_on_locks(rt) >= n


async def test_one_persons_quota_holds_under_concurrent_accepts(rt, world) -> None:
    limit = rt.settings.export_max_active_per_user
    attempts = limit + 5
    got = await asyncio.gather(
        *(
            tasks.create_export(rt, world.staff, world.team, {"q": f"parallel {i}"})
            for i in range(attempts)
        ),
        return_exceptions=True,
    )
    accepted = [g for g in got if not isinstance(g, BaseException)]
    refused = [g for g in got if isinstance(g, QuotaExceeded)]
    assert len(accepted) == limit, got
    assert len(refused) == attempts - limit, got
    row = await rt.pg.one(
        "SELECT count(*) AS n FROM background_task WHERE owner_id = %s AND status = 'WAITING'",
        (world.staff,),
    )
    assert row == {"n": limit}


async def test_colleagues_each_get_their_own_quota_concurrently(rt, world) -> None:
    mei = await _second_staff(rt, world.team)
    limit = rt.settings.export_max_active_per_user
    got = await asyncio.gather(
        *(
            tasks.create_export(rt, who, world.team, {"q": f"both {i}"})
            for i in range(limit)
            for who in (world.staff, mei)
        )
    )
    assert sorted(t.owner_id for t in got) == sorted([world.staff, mei] * limit)


async def test_a_refused_accept_rolls_back_and_lets_go_of_the_lock(rt, world) -> None:
    """BEGIN, the lock, the statement and COMMIT travel together (desk.ledger.intake.accept_at_once);
    a refusal must still end the transaction: the lock is free and the connections idle."""
    limit = rt.settings.export_max_active_per_user
    for i in range(limit):
        await tasks.create_export(rt, world.staff, world.team, {"q": f"fill {i}"})
    for i in range(3):
        try:
            await tasks.create_export(rt, world.staff, world.team, {"q": f"over {i}"})
        except QuotaExceeded:
            pass
        else:
            raise AssertionError("the quota should have refused it")
    with psycopg.connect(rt.settings.libpq_url) as other:
        free = other.execute(
            f"SELECT pg_try_advisory_xact_lock(hashtextextended(%s, {locks.PERSON_ACCEPT}))",
            (f"accept:{world.team}:{world.staff}",),
        ).fetchone()
        assert free == (True,)
    row = await rt.pg.one(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
        "AND state LIKE 'idle in transaction%%'"
    )
    assert row == {"n": 0}
    done = await tasks.create_export(rt, world.admin, world.team, {"q": "after"})
    assert done.status == TaskStatus.WAITING
