"""desk.people.members: admins add, re-role and remove members; everyone else is refused (outsiders as
"not found"); a team keeps an admin; removal takes effect on the member's queued exports."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from desk.core.errors import NotAllowed, NotFound, ValidationProblem
from desk.core.models import Role
from desk.helpdesk import tickets
from desk.people import access, members
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry


async def _role(rt, user_id, team_id):
    async with rt.engine.connect() as conn:
        m = await access.membership(conn, user_id, team_id)
    return m.role if m else None


async def test_admin_lists_the_team(rt, world) -> None:
    rows = await members.list_members(rt, world.admin, world.team)
    assert {r.email for r in rows} == {
        "zhou@acme.test",
        "chen@acme.test",
        "lin@acme.test",
        "wang@acme.test",
    }
    assert {r.role for r in rows} == {Role.ADMIN, Role.STAFF, Role.CUSTOMER}


@pytest.mark.parametrize(
    "who, error", [("staff", NotAllowed), ("customer", NotAllowed), ("outsider", NotFound)]
)
async def test_only_admins_of_the_team_may(rt, world, who, error) -> None:
    user = getattr(world, who)
    with pytest.raises(error):
        await members.list_members(rt, user, world.team)
    with pytest.raises(error):
        await members.add_member(rt, user, world.team, "olga@globex.test", "STAFF")
    with pytest.raises(error):
        await members.change_role(rt, user, world.team, world.customer, "ADMIN")
    with pytest.raises(error):
        await members.remove_member(rt, user, world.team, world.customer2)
    with pytest.raises(error):
        await members.require_team_admin(rt, user, world.team)
    assert await _role(rt, world.customer, world.team) is Role.CUSTOMER
    assert await _role(rt, world.customer2, world.team) is Role.CUSTOMER


async def test_add_by_email(rt, world) -> None:
    row = await members.add_member(rt, world.admin, world.team, " OLGA@globex.test ", "staff")
    assert row.user_id == world.outsider and row.role is Role.STAFF
    assert await _role(rt, world.outsider, world.team) is Role.STAFF
    with pytest.raises(ValidationProblem, match="already a member"):
        await members.add_member(rt, world.admin, world.team, "olga@globex.test", "STAFF")
    with pytest.raises(ValidationProblem, match="no account"):
        await members.add_member(rt, world.admin, world.team, "nobody@acme.test", "STAFF")
    with pytest.raises(ValidationProblem, match="e-mail"):
        await members.add_member(rt, world.admin, world.team, "not-an-address", "STAFF")
    with pytest.raises(ValidationProblem, match="use one of"):
        await members.add_member(rt, world.admin, world.team, "olga@globex.test", "OWNER")


@pytest.mark.parametrize(
    "email", ["olga\x00@globex.test", "olga@globex.test\x00", "o\ud800@x.test"]
)
async def test_an_address_postgresql_cannot_hold_is_a_problem_of_the_field(
    rt, world, email
) -> None:
    # It used to reach the lookup: PostgreSQL refuses NUL in text (a 500 on the members page).
    with pytest.raises(ValidationProblem) as problem:
        await members.add_member(rt, world.admin, world.team, email, "STAFF")
    assert problem.value.field == "email"
    assert await _role(rt, world.outsider, world.team) is None


async def test_change_role_and_unassign_on_demotion(rt, world) -> None:
    row = await members.change_role(rt, world.admin, world.team, world.customer, "ADMIN")
    assert row.role is Role.ADMIN
    ticket = world.tickets["login"]
    assert (await tickets.get_ticket(rt, world.staff, ticket)).assignee_id == world.staff
    await members.change_role(rt, world.admin, world.team, world.staff, "CUSTOMER")
    assert await _role(rt, world.staff, world.team) is Role.CUSTOMER
    assert (await tickets.get_ticket(rt, world.admin, ticket)).assignee_id is None
    with pytest.raises(NotFound):
        await members.change_role(rt, world.admin, world.team, world.outsider, "STAFF")


async def test_a_team_keeps_an_admin(rt, world) -> None:
    with pytest.raises(ValidationProblem, match="at least one admin"):
        await members.change_role(rt, world.admin, world.team, world.admin, "STAFF")
    with pytest.raises(ValidationProblem, match="at least one admin"):
        await members.remove_member(rt, world.admin, world.team, world.admin)
    await members.change_role(rt, world.admin, world.team, world.staff, "ADMIN")
    await members.remove_member(rt, world.admin, world.team, world.admin)  # now allowed
    assert await _role(rt, world.admin, world.team) is None


async def test_removal_takes_effect_on_queued_exports(rt, world) -> None:
    task = await tasks.create_export(rt, world.customer, world.team, {})
    gone = await members.remove_member(rt, world.admin, world.team, world.customer)
    assert gone.user_id == world.customer
    assert await execute(rt, registry(), task.id, task.run) == "failed"
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT status, last_error, result_bytes FROM background_task WHERE id = :id"
                ),
                {"id": task.id},
            )
        ).one()
    assert row.status == "FAILED" and "no longer a member" in row.last_error
    assert row.result_bytes is None
    with pytest.raises(NotFound):
        await tasks.get_task(rt, world.customer, task.id)
