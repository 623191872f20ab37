"""Three real worker processes, and `kill -9` of one whose scheduler is inside a pass (holding a
schedule's row in an open transaction): every occurrence still makes exactly one task."""

import os
import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.console import health
from desk.core.clock import utcnow
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


async def test_kill_9_during_the_pass_makes_exactly_one_task_per_occurrence(
    rt, world, clock, settings, tmp_path
):
    await make(rt, clock, world.staff, world.team, at=utcnow(), filters={"q": "s0"})
    async with rt.engine.begin() as conn:
        # More of the same, held back (paused) until every worker is up; distinct filters, so
        # distinct scopes: no occurrence is skipped for another's running export.
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
    rt.clock = utcnow
    with running_workers(settings, tmp_path, count=3, **ENV) as workers:
        await wait_for(lambda: _live(rt, 3), timeout=60, what="three workers registered")
        by_pid = {w.pid: w for w in workers}
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text("UPDATE export_schedule SET paused_at = NULL, next_run_at = :t"),
                {"t": utcnow() - timedelta(minutes=5)},
            )
        victim = await wait_for(
            lambda: _holder(rt, by_pid), timeout=30, interval=0.001, what="a pass holding a row"
        )
        victim.kill()
        assert not victim.alive()
        await wait_for(lambda: _all_ran(rt), timeout=90, what=f"all {N} occurrences recorded")
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


async def _holder(rt, by_pid):
    async with rt.engine.connect() as conn:
        names = (await conn.execute(IN_PASS)).scalars().all()
    for name in names:
        found = re.search(r"-(\d+)-[0-9a-f]+$", name)
        if found and int(found.group(1)) in by_pid and int(found.group(1)) != os.getpid():
            return by_pid[int(found.group(1))]
    return None


async def _all_ran(rt):
    return await _count(rt, "SELECT count(*) FROM schedule_run") >= N
