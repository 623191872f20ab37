"""desk.people.invitations and desk.work.onboarding: a team admin invites an address with a role;
the link works once, expires, can be withdrawn or replaced; staff, customers and other teams'
admins are refused (the last as a missing team); accepting makes the account and the membership,
or joins an existing account that is signed in; every step is audited, never with the token."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import LinkGone, NotAllowed, NotFound, ValidationProblem
from desk.core.models import Role
from desk.people import access, invitations, members, teams, users
from desk.people.throttle import Throttled
from desk.work import onboarding

PASSWORD = "correct horse battery"


async def _invite(rt, world, email="new@acme.test", role="STAFF", by=None):
    return await onboarding.invite_member(rt, by or world.admin, world.team, email, role)


async def _audit(rt) -> list[tuple[str, str, int | None, str]]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT action, actor, team_id, detail FROM ops_audit ORDER BY id")
        )
        return [tuple(r) for r in rows]


async def test_accept_once_makes_the_account_and_membership(rt, world) -> None:
    new = await _invite(rt, world, "New.Person@acme.test", "customer")
    assert new.path == f"/invitations/{new.token}" and new.invitation.role is Role.CUSTOMER
    assert new.invitation.expires_at - new.invitation.created_at == timedelta(hours=168)
    done = await invitations.accept(
        rt, new.token, display_name=" Nina  New ", password=PASSWORD, user_id=None
    )
    assert done.new_account and done.role is Role.CUSTOMER and done.team_name == "Acme"
    user = await users.authenticate(rt, "new.person@acme.test", PASSWORD)
    assert user is not None and user.id == done.user_id and user.display_name == "Nina New"
    async with rt.engine.connect() as conn:
        assert (await access.membership(conn, done.user_id, world.team)).role is Role.CUSTOMER
    with pytest.raises(LinkGone) as gone:
        await invitations.accept(rt, new.token, display_name="x", password=PASSWORD, user_id=None)
    assert gone.value.reason == "used" and gone.value.http_status == 410
    with pytest.raises(LinkGone):
        await invitations.peek(rt, new.token)
    trail = await _audit(rt)
    assert [a[0] for a in trail] == ["invite", "invitation_accept"]
    assert all(new.token not in str(a) for a in trail)
    assert trail[0][1] == "zhou@acme.test" and trail[0][2] == world.team


async def test_staff_invited_becomes_staff_and_can_sign_in(rt, world) -> None:
    new = await _invite(rt, world, "agent@acme.test", "STAFF")
    done = await invitations.accept(
        rt, new.token, display_name="Agent", password=PASSWORD, user_id=None
    )
    assert done.role is Role.STAFF
    assert (await users.authenticate(rt, "agent@acme.test", PASSWORD)) is not None


async def test_expired_link_is_refused(rt, world, clock) -> None:
    new = await _invite(rt, world)
    clock.advance(rt.settings.invitation_ttl_hours * 3600 + 1)
    with pytest.raises(LinkGone) as gone:
        await invitations.accept(rt, new.token, display_name="N", password=PASSWORD, user_id=None)
    assert gone.value.reason == "expired" and "expired" in gone.value.message
    assert await invitations.list_pending(rt, world.admin, world.team) == []


async def test_revoked_and_replaced_links_are_refused(rt, world) -> None:
    first = await _invite(rt, world)
    second = await _invite(rt, world, "NEW@acme.test", "CUSTOMER")  # replaces the first
    with pytest.raises(LinkGone) as gone:
        await invitations.peek(rt, first.token)
    assert gone.value.reason == "revoked"
    pending = await invitations.list_pending(rt, world.admin, world.team)
    assert [p.id for p in pending] == [second.invitation.id]
    await invitations.revoke(rt, world.admin, second.invitation.id)
    with pytest.raises(LinkGone):
        await invitations.accept(
            rt, second.token, display_name="N", password=PASSWORD, user_id=None
        )
    assert "invitation_revoke" in [a[0] for a in await _audit(rt)]


@pytest.mark.parametrize("token", ["", "x" * 43, "a" * 5000, "abc\x00" * 10, "é" * 43])
async def test_unknown_or_odd_tokens_are_not_found(rt, world, token) -> None:
    with pytest.raises(NotFound):
        await invitations.peek(rt, token)
    with pytest.raises(NotFound):
        await invitations.accept(rt, token, display_name="N", password=PASSWORD, user_id=None)


@pytest.mark.parametrize(
    "who, error", [("staff", NotAllowed), ("customer", NotAllowed), ("outsider", NotFound)]
)
async def test_only_the_teams_admins_invite(rt, world, who, error) -> None:
    user = getattr(world, who)
    with pytest.raises(error) as refused:
        await onboarding.invite_member(rt, user, world.team, "x@acme.test", "STAFF")
    if error is NotFound:  # another team's admin: exactly what a missing team answers
        with pytest.raises(NotFound) as missing:
            await onboarding.invite_member(rt, user, 99_999, "x@acme.test", "STAFF")
        assert refused.value.message == missing.value.message
    with pytest.raises(error):
        await invitations.list_pending(rt, user, world.team)
    new = await _invite(rt, world)
    with pytest.raises(error):
        await invitations.revoke(rt, user, new.invitation.id)


async def test_an_existing_account_joins_only_when_signed_in(rt, world) -> None:
    # Olga (Globex's admin) is invited to Acme as staff.
    new = await _invite(rt, world, "olga@globex.test", "STAFF")
    pending = await invitations.peek(rt, new.token)
    assert pending.account_id == world.outsider
    for who in (None, world.staff):
        with pytest.raises(NotAllowed, match="sign in as that account"):
            await invitations.accept(rt, new.token, display_name="", password="", user_id=who)
    done = await invitations.accept(
        rt, new.token, display_name="", password="", user_id=world.outsider
    )
    assert not done.new_account and done.role is Role.STAFF
    assert {t.team_id for t in await users.teams_of(rt, world.outsider)} == {
        world.team,
        world.other_team,
    }


@pytest.mark.parametrize(
    "email",
    ["", "   ", "no-at-sign", "a@b", "x\x00@acme.test", "a" * 10_000 + "@acme.test", "a b@c.d"],
)
async def test_odd_addresses_are_validation_problems(rt, world, email) -> None:
    with pytest.raises(ValidationProblem) as bad:
        await _invite(rt, world, email)
    assert bad.value.field == "email"


@pytest.mark.parametrize(
    "name, password, field",
    [
        ("", PASSWORD, "display_name"),
        ("N\x00", PASSWORD, "display_name"),
        ("N", "short", "password"),
    ],
)
async def test_odd_accept_input_is_a_validation_problem(rt, world, name, password, field) -> None:
    new = await _invite(rt, world)
    with pytest.raises(ValidationProblem) as bad:
        await invitations.accept(rt, new.token, display_name=name, password=password, user_id=None)
    assert bad.value.field == field
    await invitations.peek(rt, new.token)  # still usable


async def test_bad_role_is_refused(rt, world) -> None:
    with pytest.raises(ValidationProblem) as bad:
        await _invite(rt, world, role="OWNER")
    assert bad.value.field == "role"


async def test_invitations_are_throttled_per_admin(rt, world) -> None:
    rt.settings = rt.settings.model_copy(update={"invitation_max_per_hour": 2})
    await _invite(rt, world, "a@acme.test")
    await _invite(rt, world, "b@acme.test")
    with pytest.raises(Throttled):
        await _invite(rt, world, "c@acme.test")


async def test_operators_create_teams_with_a_first_admin(rt, world) -> None:
    created = await onboarding.create_team(rt, None, "  Initech ", "boss@initech.test")
    assert created.team.name == "Initech" and created.invitation is not None
    assert created.invitation.invitation.role is Role.ADMIN
    with pytest.raises(ValidationProblem, match="already exists"):
        await onboarding.create_team(rt, None, "initech")
    with pytest.raises(ValidationProblem):
        await onboarding.create_team(rt, None, "  ")
    with pytest.raises(NotFound):  # not an operator: the console's usual refusal
        await onboarding.create_team(rt, world.admin, "Umbrella")
    with pytest.raises(ValidationProblem):  # a bad address: no team either
        await onboarding.create_team(rt, None, "Umbrella", "nope")
    async with rt.engine.connect() as conn:
        with pytest.raises(NotFound):
            await teams.by_name(conn, "Umbrella")
    done = await invitations.accept(
        rt, created.invitation.token, display_name="Boss", password=PASSWORD, user_id=None
    )
    assert done.role is Role.ADMIN and done.team_id == created.team.id
    assert [a[0] for a in await _audit(rt)][:2] == ["team_create", "invite"]


async def test_members_are_not_invited_again(rt, world) -> None:
    with pytest.raises(ValidationProblem, match="already a member"):
        await _invite(rt, world, "CHEN@acme.test")


async def test_member_changes_are_audited(rt, world) -> None:
    await members.change_role(rt, world.admin, world.team, world.customer, "STAFF")
    await members.remove_member(rt, world.admin, world.team, world.customer2)
    await members.add_member(rt, world.admin, world.team, "olga@globex.test", "CUSTOMER")
    assert await _audit(rt) == [
        ("member_role", "zhou@acme.test", world.team, "lin@acme.test: CUSTOMER -> STAFF"),
        ("member_remove", "zhou@acme.test", world.team, "wang@acme.test (CUSTOMER)"),
        ("member_add", "zhou@acme.test", world.team, "olga@globex.test as CUSTOMER"),
    ]
