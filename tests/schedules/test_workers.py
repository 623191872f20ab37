"""Three real worker processes, and `kill -9` of one whose scheduler is inside a pass (it has
claimed a schedule's row and is accepting its export, in one open transaction): every
occurrence still makes exactly one task.

To kill inside the pass every time, not by luck, the test holds the owner's accept lock (the
advisory lock every export of that person takes, desk.ledger.intake.lock_person): each worker's
pass then claims a schedule and waits inside its transaction. One of them is killed there; the
lock is let go, and the others finish every occurrence, the killed one's too."""

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.console import health
from desk.core.clock import utcnow
from desk.ledger import intake
from tests.helpers import running_workers, wait_for
from tests.schedules.helpers import make

pytestmark = pytest.mark.slow  # starts real worker processes

N = 240
ENV = {
    "scheduler_interval_seconds": 0.05,
    "export_max_active_per_user": 1000,
    "export_max_per_hour": 100_000,
    "lease_seconds": 2,
    "heartbeat_ttl_seconds": 3,
}
# A scheduler's pass holds the row it claimed (FOR UPDATE: a row-share lock on the table) until
# its transaction ends; the holder's connection names its worker, whose id carries its pid.
IN_PASS = sa.text(
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.relation = 'export_schedule'::regclass AND l.mode = 'RowShareLock' "
    " AND a.application_name LIKE 'taskdesk-worker %'"
)


async def _count(rt, sql):
    async with rt.engine.connect() as conn:
        return (await conn.execute(sa.text(sql))).scalar_one()


async def _many_paused(rt, clock, world):
    """N daily schedules of one person, paused until every worker is up; distinct filters, so
    distinct scopes: no occurrence is skipped for another's running export."""
    await make(rt, clock, world.staff, world.team, at=utcnow(), filters={"q": "s0"})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO export_schedule (team_id, owner_id, name, filters, days, local_time, "
                " timezone, next_run_at) SELECT team_id, owner_id, name, "
                " jsonb_build_object('assignment', 'anyone', 'q', 's' || g), days, local_time, "
                " timezone, next_run_at FROM export_schedule, generate_series(1, :n) g"
            ),
            {"n": N - 1},
        )
        await conn.execute(sa.text("UPDATE export_schedule SET paused_at = now()"))


async def test_kill_9_during_the_pass_makes_exactly_one_task_per_occurrence(
    rt, world, clock, settings, tmp_path
):
    await _many_paused(rt, clock, world)
    rt.clock = utcnow
    with running_workers(settings, tmp_path, count=3, **ENV) as workers:
        await wait_for(lambda: _live(rt, 3), timeout=60, what="three workers registered")
        by_pid = {w.pid: w for w in workers}
        async with rt.engine.connect() as held:
            await held.begin()
            await intake.lock_person(held, world.team, world.staff)  # every pass waits in it
            async with rt.engine.begin() as conn:
                await conn.execute(
                    sa.text("UPDATE export_schedule SET paused_at = NULL, next_run_at = :t"),
                    {"t": utcnow() - timedelta(minutes=5)},
                )
            inside = await wait_for(
                lambda: _holders(rt, by_pid, 3), timeout=30, what="three passes inside a claim"
            )
            victim = inside[0]
            victim.kill()
            assert not victim.alive()
            assert await _count(rt, "SELECT count(*) FROM schedule_run") == 0
            await held.rollback()  # the survivors' passes go on
        await wait_for(lambda: _all_ran(rt), timeout=90, what=f"all {N} occurrences recorded")
        assert all(w.alive() for w in workers if w is not victim)
    runs = await _count(rt, "SELECT count(*) FROM schedule_run")
    made = await _count(rt, "SELECT count(DISTINCT task_id) FROM schedule_run")
    tasks = await _count(rt, "SELECT count(*) FROM background_task WHERE kind = 'EXPORT'")
    assert (runs, made, tasks) == (N, N, N), "one task per occurrence, and no other"
    linked = await _count(
        rt,
        "SELECT count(*) FROM export_schedule s JOIN schedule_run r "
        "ON r.schedule_id = s.id AND r.task_id = s.last_task_id",
    )
    assert linked == N


async def _live(rt, n):
    return len(await health.live_workers(rt)) >= n


async def _holders(rt, by_pid, n):
    """The worker processes whose scheduler holds a claimed schedule, once `n` of them do."""
    async with rt.engine.connect() as conn:
        names = (await conn.execute(IN_PASS)).scalars().all()
    pids = {int(m.group(1)) for m in (re.search(r"-(\d+)-[0-9a-f]+$", n) for n in names) if m}
    found = [by_pid[p] for p in sorted(pids) if p in by_pid]
    return found if len(found) >= n else None


async def _all_ran(rt):
    return await _count(rt, "SELECT count(*) FROM schedule_run") >= N
