"""Who may do what with schedules, through the desk functions every face calls: each Acme
person and the other team's admin, for create, list, read, pause, resume and delete. A schedule
one may not see answers exactly like a missing one."""

from __future__ import annotations

import pytest

from desk.core.errors import NotAllowed, NotFound
from desk.work import schedules

MISSING = 99_999
PEOPLE = ("admin", "staff", "customer", "customer2", "outsider")
# Who may create one in Acme: staff and admins; customers may not; the outsider is not a member.
CREATE = {
    "admin": "ok", "staff": "ok", "customer": NotAllowed, "customer2": NotAllowed,
    "outsider": NotFound,
}  # fmt: skip
# Who reaches the staff member's schedule: its owner and Acme's admin.
REACH = {"admin": "ok", "staff": "ok", "customer": NotFound, "customer2": NotFound,
         "outsider": NotFound}  # fmt: skip
LIST = {"admin": 2, "staff": 1, "customer": 0, "customer2": 0, "outsider": NotFound}


async def _outcome(call):
    try:
        await call
    except (NotAllowed, NotFound) as exc:
        return type(exc)
    return "ok"


@pytest.mark.parametrize("who", PEOPLE)
async def test_create(rt, world, who) -> None:
    user = getattr(world, who)
    call = schedules.create_schedule(rt, user, world.team, {}, days=[1], time="08:00")
    assert await _outcome(call) == CREATE[who]


@pytest.mark.parametrize("who", PEOPLE)
async def test_reach_and_change(rt, world, who) -> None:
    mine = await schedules.create_schedule(rt, world.staff, world.team, {}, days=[1], time="08:00")
    await schedules.create_schedule(rt, world.admin, world.team, {}, days=[2], time="09:00")
    user = getattr(world, who)
    try:
        listed = len(await schedules.list_schedules(rt, user, world.team))
    except NotFound:
        listed = NotFound
    assert listed == LIST[who]
    for act in (schedules.get_schedule, schedules.runs, schedules.pause_schedule,
                schedules.resume_schedule):  # fmt: skip
        assert await _outcome(act(rt, user, mine.id)) == REACH[who], act.__name__
        # A missing schedule answers the same as one out of reach.
        assert await _outcome(act(rt, user, MISSING)) == NotFound
    assert await _outcome(schedules.delete_schedule(rt, user, mine.id)) == REACH[who]
    gone = REACH[who] == "ok"
    assert await _outcome(schedules.get_schedule(rt, world.staff, mine.id)) == (
        NotFound if gone else "ok"
    )


async def test_a_removed_owner_no_longer_reaches_their_schedule(rt, world) -> None:
    from desk.people import members

    mine = await schedules.create_schedule(rt, world.staff, world.team, {}, days=[1], time="08:00")
    await members.remove_member(rt, world.admin, world.team, world.staff)
    assert await _outcome(schedules.get_schedule(rt, world.staff, mine.id)) == NotFound
    assert await _outcome(schedules.get_schedule(rt, world.admin, mine.id)) == "ok"
