"""The scheduler's pass (`jobs.scheduler.run_once` with an injected `now`): one ordinary EXPORT
task per occurrence, missed occurrences collapsed, paused and stopped schedules idle."""

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from desk.people import members
from desk.work import schedule_runs, schedules
from jobs import scheduler
from tests.schedules.helpers import finish_all, make, runs_of, tasks_of

MON = datetime(2027, 1, 4, 6, 0, tzinfo=UTC)  # a Monday, 06:00 UTC
BERLIN = ZoneInfo("Europe/Berlin")


async def test_daily_runs_once_per_occurrence_as_an_ordinary_export(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    assert s.next_run_at == MON.replace(hour=8) and s.state == "ACTIVE"
    assert (await scheduler.run_once(rt, MON.replace(hour=7, minute=59))).created == []
    at_8 = MON.replace(hour=8)
    clock.now = at_8
    done = await scheduler.run_once(rt, at_8)
    assert len(done.created) == 1
    assert (await scheduler.run_once(rt, at_8)).created == [], "the occurrence already ran"
    (task,) = await tasks_of(rt, world.staff)
    assert (task.id, task.owner_id, task.team_id) == (done.created[0], world.staff, world.team)
    assert task.status == "WAITING" and task.filters["status"] == ["OPEN"]
    after = await schedules.get_schedule(rt, world.staff, s.id)
    assert after.last_task_id == task.id and after.last_run_at == at_8
    assert after.next_run_at == at_8 + timedelta(days=1)
    await finish_all(rt)
    clock.now = at_8 + timedelta(days=1, seconds=3)
    assert len((await scheduler.run_once(rt, clock.now)).created) == 1
    assert [r.outcome for r in await runs_of(rt, s.id)] == ["created", "created"]


async def test_weekly_through_a_dst_week_keeps_the_local_time(rt, world, clock):
    # Mondays and Sundays 02:30 in Berlin around 2027-03-28 (spring forward, a Sunday).
    start = datetime(2027, 3, 20, tzinfo=UTC)
    s = await make(
        rt, clock, world.admin, world.team, at=start, days=(1, 7), time="02:30",
        zone="Europe/Berlin",
    )  # fmt: skip
    made = []
    for _ in range(4):
        due = (await schedules.get_schedule(rt, world.admin, s.id)).next_run_at
        clock.now = due
        assert (await scheduler.run_once(rt, due - timedelta(seconds=1))).created == []
        assert len((await scheduler.run_once(rt, due)).created) == 1
        made.append(due.astimezone(BERLIN).strftime("%a %d %H:%M"))
        await finish_all(rt)
    assert made == ["Sun 21 02:30", "Mon 22 02:30", "Sun 28 03:00", "Mon 29 02:30"]
    assert len(await tasks_of(rt, world.admin)) == 4


async def test_ten_missed_occurrences_run_once_on_return(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    back = MON + timedelta(days=10, hours=5)  # ten 08:00s went by while nothing ran
    clock.now = back
    assert len((await scheduler.run_once(rt, back)).created) == 1
    assert (await scheduler.run_once(rt, back)).created == []
    assert len(await tasks_of(rt, world.staff)) == 1
    after = await schedules.get_schedule(rt, world.staff, s.id)
    assert after.next_run_at == (MON + timedelta(days=11)).replace(hour=8), "the next one ahead"
    assert len(await runs_of(rt, s.id)) == 1


async def test_paused_makes_nothing_and_resume_skips_what_was_missed(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    await schedules.pause_schedule(rt, world.staff, s.id)
    clock.now = MON + timedelta(days=3)
    assert (await scheduler.run_once(rt, clock.now)).created == []
    resumed = await schedules.resume_schedule(rt, world.staff, s.id)
    assert resumed.state == "ACTIVE" and resumed.next_run_at > clock.now
    assert (await scheduler.run_once(rt, clock.now)).created == []
    assert await tasks_of(rt, world.staff) == []


async def test_owner_removed_stops_with_a_reason_and_no_task(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    await members.remove_member(rt, world.admin, world.team, world.staff)
    clock.now = MON.replace(hour=9)
    done = await scheduler.run_once(rt, clock.now)
    assert (done.created, done.stopped) == ([], 1)
    assert await tasks_of(rt, world.staff) == []
    after = await schedules.get_schedule(rt, world.admin, s.id)  # the admin still sees it
    assert after.state == "STOPPED" and after.stopped_reason == schedule_runs.OWNER_REMOVED
    assert schedules.reason_text(after.stopped_reason) == (
        "Stopped: its owner is no longer a member of the team."
    )
    clock.now += timedelta(days=2)
    assert (await scheduler.run_once(rt, clock.now)).created == [], "stopped stays stopped"


async def test_owner_demoted_to_customer_stops(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    await members.change_role(rt, world.admin, world.team, world.staff, "CUSTOMER")
    clock.now = MON.replace(hour=8)
    assert (await scheduler.run_once(rt, clock.now)).stopped == 1
    after = await schedules.get_schedule(rt, world.admin, s.id)
    assert after.stopped_reason == schedule_runs.OWNER_NOT_STAFF
    assert await tasks_of(rt, world.staff) == []


async def test_previous_export_still_running_skips_the_occurrence_with_a_reason(rt, world, clock):
    s = await make(rt, clock, world.staff, world.team, at=MON)
    clock.now = MON.replace(hour=8)
    assert len((await scheduler.run_once(rt, clock.now)).created) == 1
    clock.now += timedelta(days=1)
    done = await scheduler.run_once(rt, clock.now)
    assert (done.created, done.skipped) == ([], 1), "the first export is still queued"
    after = await schedules.get_schedule(rt, world.staff, s.id)
    assert after.last_skip_reason == schedule_runs.SKIPPED_RUNNING and after.state == "ACTIVE"
    assert after.next_run_at == MON.replace(hour=8) + timedelta(days=2)
    await finish_all(rt)
    clock.now += timedelta(days=1)
    assert len((await scheduler.run_once(rt, clock.now)).created) == 1
    outcomes = [r.outcome for r in await runs_of(rt, s.id)]
    assert outcomes == ["created", schedule_runs.SKIPPED_RUNNING, "created"]


async def test_concurrent_passes_make_one_task_per_occurrence(rt, world, clock):
    for owner in (world.staff, world.admin):
        for status in ("OPEN", "PENDING", "RESOLVED"):
            await make(rt, clock, owner, world.team, at=MON, filters={"status": [status]})
    clock.now = MON.replace(hour=8)
    passes = await asyncio.gather(*(scheduler.run_once(rt, clock.now) for _ in range(4)))
    made = [t for p in passes for t in p.created]
    assert len(made) == len(set(made)) == 6
    async with rt.engine.connect() as conn:
        n = (await conn.execute(sa.text("SELECT count(*) FROM schedule_run"))).scalar_one()
    assert n == 6


async def test_one_schedule_that_cannot_run_does_not_hold_up_the_others(rt, world, clock):
    broken = await make(rt, clock, world.staff, world.team, at=MON)
    fine = await make(rt, clock, world.admin, world.team, at=MON)
    async with rt.engine.begin() as conn:  # a row no code writes: a zone this system lacks
        await conn.execute(
            sa.text("UPDATE export_schedule SET timezone = 'Mars/Olympus' WHERE id = :i"),
            {"i": broken.id},
        )
    clock.now = MON.replace(hour=8)
    done = await scheduler.run_once(rt, clock.now)
    assert len(done.created) == 1
    assert (await schedules.get_schedule(rt, world.admin, fine.id)).last_task_id == done.created[0]
    still = await schedules.get_schedule(rt, world.staff, broken.id)
    assert still.next_run_at == MON.replace(hour=8) and still.last_run_at is None, "still due"
    assert await tasks_of(rt, world.staff) == [], "its attempt was rolled back whole"


async def test_a_named_assignee_no_longer_staff_stops_it(rt, world, clock):
    s = await make(
        rt, clock, world.admin, world.team, at=MON,
        filters={"assignment": "user", "assignee_id": world.staff},
    )  # fmt: skip
    await members.change_role(rt, world.admin, world.team, world.staff, "CUSTOMER")
    clock.now = MON.replace(hour=8)
    assert (await scheduler.run_once(rt, clock.now)).stopped == 1
    after = await schedules.get_schedule(rt, world.admin, s.id)
    assert after.stopped_reason == schedule_runs.BAD_FILTERS


async def test_old_occurrence_records_are_pruned_with_the_tasks(rt, world, clock):
    from jobs import pruner

    s = await make(rt, clock, world.staff, world.team, at=MON)
    clock.now = MON.replace(hour=8)
    await scheduler.run_once(rt, clock.now)
    await pruner.run_once(rt, clock.now + timedelta(days=1))
    assert len(await runs_of(rt, s.id)) == 1
    await pruner.run_once(rt, clock.now + timedelta(days=rt.settings.task_retention_days + 1))
    assert await runs_of(rt, s.id) == []
    assert (await schedules.get_schedule(rt, world.staff, s.id)).next_run_at > clock.now
