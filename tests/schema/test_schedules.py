"""Scheduled exports over GraphQL: the whole round (schedule, list, pause, resume, delete) and
odd input as typed problems naming the field."""

from __future__ import annotations

import pytest

from tests.schema.scene import outcome

SCHEDULE = (
    "mutation($t: ID!, $d: [Int!]!, $h: String!, $z: String) { r: scheduleExport(teamId: $t, "
    'days: $d, time: $h, timezone: $z, name: "Mondays", filter: {status: [OPEN]}) { __typename '
    "... on ExportSchedule { id state days time timezone nextRunAt filters name } "
    "... on Problem { message } ... on ValidationProblem { field } } }"
)
LIST = (
    "query($t: ID!) { schedules(teamId: $t) { id state nextRunAt lastTaskId lastTask { id } "
    "stoppedReason lastSkipReason } }"
)


async def test_schedule_list_pause_resume_delete(api, world) -> None:
    v = {"t": world.team, "d": [1], "h": "08:00", "z": "Europe/Berlin"}
    made = (await api(SCHEDULE, v, user=world.staff))["data"]["r"]
    assert made["__typename"] == "ExportSchedule", made
    assert (made["state"], made["days"], made["time"], made["timezone"]) == (
        "ACTIVE", [1], "08:00", "Europe/Berlin",
    )  # fmt: skip
    assert made["filters"]["status"] == ["OPEN"] and made["name"] == "Mondays"
    listed = (await api(LIST, {"t": world.team}, user=world.staff))["data"]["schedules"]
    assert [s["id"] for s in listed] == [made["id"]]
    assert listed[0]["lastTask"] is None and listed[0]["stoppedReason"] is None
    sid = {"id": made["id"]}
    paused = await api("mutation($id: ID!) { pauseSchedule(id: $id) { ... on ExportSchedule "
                       "{ state } } }", sid, user=world.admin)  # fmt: skip
    assert paused["data"]["pauseSchedule"] == {"state": "PAUSED"}
    resumed = await api("mutation($id: ID!) { resumeSchedule(id: $id) { ... on ExportSchedule "
                        "{ state } } }", sid, user=world.staff)  # fmt: skip
    assert resumed["data"]["resumeSchedule"] == {"state": "ACTIVE"}
    gone = await api("mutation($id: ID!) { deleteSchedule(id: $id) { __typename } }", sid,
                     user=world.staff)  # fmt: skip
    assert outcome(gone, "deleteSchedule") == "ScheduleDeleted"
    again = await api("mutation($id: ID!) { deleteSchedule(id: $id) { __typename } }", sid,
                      user=world.staff)  # fmt: skip
    assert outcome(again, "deleteSchedule") == "NotFound"


async def test_timezone_defaults_to_the_owners(api, rt, world) -> None:
    import sqlalchemy as sa

    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET timezone = 'Asia/Shanghai' WHERE id = :u"),
            {"u": world.staff},
        )
    v = {"t": world.team, "d": [1, 2, 3, 4, 5], "h": "09:30", "z": None}
    made = (await api(SCHEDULE, v, user=world.staff))["data"]["r"]
    assert made["timezone"] == "Asia/Shanghai"


@pytest.mark.parametrize(
    ("days", "time", "zone", "field"),
    [
        ([], "08:00", "UTC", "days"),
        ([0], "08:00", "UTC", "days"),
        ([8], "08:00", "UTC", "days"),
        ([1], "25:00", "UTC", "time"),
        ([1], "8 am", "UTC", "time"),
        ([1], "08:00\x00", "UTC", "time"),
        ([1], "08:00", "Mars/Olympus", "timezone"),
        ([1], "08:00", "Europe/Berlin\x00", "timezone"),
    ],
)
async def test_odd_input_is_a_validation_problem(api, world, days, time, zone, field) -> None:
    v = {"t": world.team, "d": days, "h": time, "z": zone}
    got = (await api(SCHEDULE, v, user=world.staff))["data"]["r"]
    assert got["__typename"] == "ValidationProblem" and got["field"] == field, got


async def test_last_task_is_shown_to_whoever_may_see_the_export(api, rt, world, clock) -> None:
    from datetime import UTC, datetime

    from desk.work import schedules
    from jobs import scheduler

    clock.now = datetime(2027, 1, 4, 6, tzinfo=UTC)
    for owner in (world.staff, world.admin):
        await schedules.create_schedule(rt, owner, world.team, {}, days=[1], time="08:00")
    clock.now = datetime(2027, 1, 4, 8, tzinfo=UTC)
    made = (await scheduler.run_once(rt, clock.now)).created
    assert len(made) == 2
    seen = {}
    for who in ("staff", "admin"):
        body = await api(LIST, {"t": world.team}, user=getattr(world, who))
        seen[who] = [
            (s["lastTaskId"] is not None, s["lastTask"]) for s in body["data"]["schedules"]
        ]
    assert [ok for ok, _ in seen["admin"]] == [True, True]
    # Exports are their owner's alone: the admin sees both schedules, only their own export.
    assert sum(t is not None for _, t in seen["admin"]) == 1
    assert [t is not None for _, t in seen["staff"]] == [True]


async def test_a_named_assignee_must_be_staff(api, world) -> None:
    q = (
        'mutation($t: ID!, $a: ID!) { r: scheduleExport(teamId: $t, days: [1], time: "08:00", '
        "filter: {assignment: USER, assigneeId: $a}) { __typename ... on ValidationProblem "
        "{ field } } }"
    )
    bad = (await api(q, {"t": world.team, "a": world.customer}, user=world.staff))["data"]["r"]
    assert bad == {"__typename": "ValidationProblem", "field": "assigneeId"}
    ok = (await api(q, {"t": world.team, "a": world.staff}, user=world.admin))["data"]["r"]
    assert ok["__typename"] == "ExportSchedule"
