"""Lanes (docs/architecture.md, "Sends and lanes"): kinds map to lanes, a paused lane's tasks
are accepted but stay unsent until it is resumed, and one team cannot hold every long slot."""

import subprocess
import sys
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import ValidationProblem
from desk.ledger import lanes
from desk.people import audit
from desk.work import tasks
from jobs import dispatcher
from jobs.execution import claim_task
from tests.helpers import ROOT, settings_env


async def _row(rt, task_id):
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE id = :i")
        return (await conn.execute(q, {"i": task_id})).one()


async def _queued(rt, lane):
    return await rt.redis.zcard(rt.queue.lane_queue(lane))


def test_every_kind_has_one_lane():
    from desk.core.models import TaskKind

    assert {k.value for k in TaskKind} == {k for kinds in lanes.LANES.values() for k in kinds}
    assert lanes.lane_of("REMINDER") == lanes.lane_of("NOOP") == "short"
    assert lanes.lane_of("EXPORT") == lanes.lane_of("IMPORT") == "long"


async def test_states_pause_and_resume(rt, world, clock):
    before = {s.name: s for s in await lanes.states(rt)}
    assert not before["long"].paused and before["long"].slots == rt.settings.worker_long_slots
    assert before["short"].slots == rt.settings.worker_max_jobs
    paused = await lanes.pause(rt, "long", world.admin)
    assert (paused.paused, paused.paused_by, paused.paused_at) == (True, world.admin, clock())
    resumed = await lanes.resume(rt, "long")
    assert (resumed.paused, resumed.paused_by, resumed.paused_at) == (False, None, None)
    with pytest.raises(ValidationProblem, match="unknown lane 'fast'"):
        await lanes.pause(rt, "fast", None)


async def test_every_pause_and_resume_is_audited_with_its_change(rt, world, clock):
    """The CLI's changes land in ops_audit too (as "cli (login)"), and an unknown lane none."""
    await lanes.pause(rt, "long", None, "cli (ops)")
    await lanes.resume(rt, "long", world.admin, "admin@acme.test")
    with pytest.raises(ValidationProblem):
        await lanes.pause(rt, "fast", None, "cli (ops)")
    entries = await audit.recent(rt, operator=True, team_ids=[])
    assert [(e.action, e.actor, e.detail) for e in entries] == [
        ("lane_resume", "admin@acme.test", "long"),
        ("lane_pause", "cli (ops)", "long"),
    ]


async def test_a_paused_lane_accepts_but_sends_nothing_until_resumed(rt, world, clock):
    await dispatcher.run_once(rt)
    await lanes.pause(rt, "long", None)
    export = await tasks.create_export(rt, world.staff, world.team, {})
    noop = await tasks.submit_noop(rt, world.staff, world.team)
    assert export.status == "WAITING"
    assert (await _row(rt, export.id)).dispatched_at is None, "accepted, not sent"
    assert await _queued(rt, "long") == 0 and await _queued(rt, "short") == 1
    clock.advance(rt.settings.redelivery_seconds + 1)
    await dispatcher.run_once(rt)
    assert await _queued(rt, "long") == 0, "the dispatcher skips a paused lane"
    await lanes.resume(rt, "long")
    assert await dispatcher.run_once(rt) == 1
    assert await _queued(rt, "long") == 1
    assert noop.id


async def test_one_team_cannot_hold_every_long_slot(rt, world, clock):
    await dispatcher.run_once(rt)
    team_max = rt.settings.long_team_max_running
    made = [
        await tasks.create_export(rt, world.staff, world.team, {"q": f"t{i}"})
        for i in range(team_max + 1)
    ]
    claimed = [await claim_task(rt, t.id, t.run, team_max=team_max) for t in made]
    assert [c is not None for c in claimed] == [True] * team_max + [False]
    last = await _row(rt, made[-1].id)
    assert last.status == "WAITING" and last.dispatched_at is None, "handed back, unsent"
    clock.advance(1)
    assert await dispatcher.run_once(rt) == 0, "not sent while the team's long slots are full"
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET status = 'COMPLETED' WHERE id = :i"),
            {"i": made[0].id},
        )
    assert await dispatcher.run_once(rt) == 1, "sent once one of the team's long tasks ended"
    assert timedelta(0) <= clock() - last.run_at


def _taskdesk(settings, *args):
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT, env=settings_env(settings), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_lanes_command(rt, settings):
    paused = _taskdesk(settings, "lanes", "pause", "long")
    assert paused.returncode == 0, paused.stderr
    assert "long   PAUSED" in paused.stdout
    listed = _taskdesk(settings, "lanes", "list")
    assert "short  running" in listed.stdout and "EXPORT, IMPORT" in listed.stdout
    assert (await lanes.state(rt, "long")).paused
    resumed = _taskdesk(settings, "lanes", "resume", "long")
    assert "long   running" in resumed.stdout
    bad = _taskdesk(settings, "lanes", "pause", "fast")
    assert bad.returncode == 1 and "unknown lane 'fast'" in bad.stderr
