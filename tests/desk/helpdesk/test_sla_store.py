"""A team's SLA policy in team_sla_policy: checked on save (the field to fix named), read back as
written and as parsed; staff read it, admins write it, customers and outsiders see no team."""

import pytest

from desk.core.errors import NotAllowed, NotFound, ValidationProblem
from desk.helpdesk import sla_store

CAL = {"zone": "Europe/Berlin", "hours": {"mon": ["09:00-17:00"], "tue": ["09:00-17:00"]},
       "holidays": ["2026-12-25"]}  # fmt: skip
TARGETS = {"first_response": {"URGENT": 3600}, "resolution": {"URGENT": 86400, "LOW": 604800}}


async def test_saved_policy_reads_back_as_written_and_parsed(rt, world):
    saved = await sla_store.set_team_policy(
        rt, world.admin, world.team, calendar=CAL, targets=TARGETS, warn_share=0.8
    )
    got = await sla_store.get_team_policy(rt, world.staff, world.team)
    assert got is not None and got.calendar_doc == CAL and got.targets_doc == TARGETS
    assert got.warn_share == 0.8 and got.updated_by_id == world.admin
    assert got.policy.targets["first_response"]["URGENT"] == 3600
    assert str(got.calendar.zone) == "Europe/Berlin" and saved.policy == got.policy


async def test_no_policy_is_none_and_clear_removes_it(rt, world):
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None
    await sla_store.set_team_policy(rt, world.admin, world.team, calendar=CAL, targets=TARGETS)
    assert await sla_store.clear_team_policy(rt, world.admin, world.team) is True
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None
    assert await sla_store.clear_team_policy(rt, world.admin, world.team) is False


@pytest.mark.parametrize(
    ("calendar", "targets", "share", "field"),
    [
        ({**CAL, "zone": "Mars/Base"}, TARGETS, 0.75, "zone"),
        ({**CAL, "hours": {"mon": ["17:00-09:00"]}}, TARGETS, 0.75, "hours"),
        ({**CAL, "hours": {"someday": ["09:00-17:00"]}}, TARGETS, 0.75, "hours"),
        ({**CAL, "holidays": ["25/12/2026"]}, TARGETS, 0.75, "holidays"),
        ({**CAL, "colour": "red"}, TARGETS, 0.75, "calendar"),
        ("[1, 2]", TARGETS, 0.75, "calendar"),
        (CAL, {"first_reply": {"URGENT": 60}}, 0.75, "targets"),
        (CAL, {"first_response": {"CRITICAL": 60}}, 0.75, "first_response"),
        (CAL, {"resolution": {"URGENT": 0}}, 0.75, "resolution"),
        (CAL, {"resolution": {"URGENT": 90.5}}, 0.75, "resolution"),
        (CAL, {"resolution": {}}, 0.75, "targets"),
        (CAL, TARGETS, 1.5, "warn_share"),
        (CAL, TARGETS, "most", "warn_share"),
    ],
)
async def test_a_bad_policy_names_the_field_and_writes_nothing(
    rt, world, calendar, targets, share, field
):
    with pytest.raises(ValidationProblem) as problem:
        await sla_store.set_team_policy(
            rt, world.admin, world.team, calendar=calendar, targets=targets, warn_share=share
        )
    assert problem.value.field == field
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None


async def test_staff_read_admins_write_others_see_no_team(rt, world):
    with pytest.raises(NotAllowed):
        await sla_store.set_team_policy(rt, world.staff, world.team, calendar=CAL, targets=TARGETS)
    for who in (world.customer, world.outsider):
        with pytest.raises(NotFound):
            await sla_store.get_team_policy(rt, who, world.team)
        with pytest.raises(NotFound):
            await sla_store.set_team_policy(rt, who, world.team, calendar=CAL, targets=TARGETS)
    with pytest.raises(NotFound):
        await sla_store.get_team_policy(rt, world.admin, 99_999)
