"""People over GraphQL: invite (session or an admin's API token), list, withdraw, accept (no
caller; an existing account only as itself), password resets, and role changes and removals
that take effect on the very next request, for sessions and API tokens alike."""

from __future__ import annotations

import pytest

from desk.people import users
from desk.work import onboarding

INVITE = (
    "mutation($t: ID!, $e: String!, $r: Role!) { inviteMember(teamId: $t, email: $e, role: $r) "
    "{ __typename ... on Invitation { id email role link expiresAt teamName } "
    "... on Problem { message } ... on ValidationProblem { field } } }"
)
ACCEPT = (
    "mutation($k: String!, $n: String!, $p: String!) { acceptInvitation(token: $k, "
    "displayName: $n, password: $p) { __typename ... on InvitationAccepted { email role "
    "teamName newAccount } ... on LinkGone { reason message } ... on Problem { message } "
    "... on ValidationProblem { field } } }"
)
REQUEST = (
    "mutation($e: String!) { requestPasswordReset(email: $e) { __typename "
    "... on PasswordResetRequested { message } ... on ValidationProblem { field } } }"
)
RESET = (
    "mutation($k: String!, $p: String!) { resetPassword(token: $k, password: $p) { __typename "
    "... on PasswordChanged { sessionsEnded } ... on LinkGone { reason } } }"
)
TEAM = "query($id: ID!) { team(id: $id) { id myRole } }"
PASSWORD = "correct horse battery"


def _token(link: str) -> str:
    return link.rsplit("/", 1)[1]


async def test_invite_with_an_admin_token_and_accept_once(api, world) -> None:
    _row, token = await users.create_token(api.rt, world.admin, "ci")
    body = await api(INVITE, {"t": world.team, "e": "ada@acme.test", "r": "CUSTOMER"}, token=token)
    invited = body["data"]["inviteMember"]
    assert invited["__typename"] == "Invitation" and invited["role"] == "CUSTOMER"
    assert "/invitations/" in invited["link"] and invited["teamName"] == "Acme"
    listed = await api(
        "query($t: ID!) { invitations(teamId: $t) { id email link } }",
        {"t": world.team},
        user=world.admin,
    )
    assert listed["data"]["invitations"] == [
        {"id": invited["id"], "email": "ada@acme.test", "link": None}
    ]
    variables = {"k": _token(invited["link"]), "n": "Ada", "p": PASSWORD}
    done = (await api(ACCEPT, variables))["data"]["acceptInvitation"]
    assert done == {
        "__typename": "InvitationAccepted",
        "email": "ada@acme.test",
        "role": "CUSTOMER",
        "teamName": "Acme",
        "newAccount": True,
    }
    again = (await api(ACCEPT, variables))["data"]["acceptInvitation"]
    assert again["__typename"] == "LinkGone" and again["reason"] == "used"
    # The new customer signs in (the page does; GraphQL signed nobody in) and sees the team.
    user = await users.authenticate(api.rt, "ada@acme.test", PASSWORD)
    assert user is not None
    seen = await api(TEAM, {"id": world.team}, user=user.id)
    assert seen["data"]["team"]["myRole"] == "CUSTOMER"


async def test_wrong_teams_admin_is_answered_as_a_missing_team(api, world) -> None:
    foreign = await api(
        INVITE, {"t": world.team, "e": "x@acme.test", "r": "STAFF"}, user=world.outsider
    )
    missing = await api(INVITE, {"t": 99_999, "e": "x@acme.test", "r": "STAFF"}, user=world.admin)
    assert foreign["data"]["inviteMember"] == missing["data"]["inviteMember"]
    assert foreign["data"]["inviteMember"]["__typename"] == "NotFound"


async def test_revoked_and_expired_links_are_typed(api, world, clock) -> None:
    first = await onboarding.invite_member(api.rt, world.admin, world.team, "r@acme.test", "STAFF")
    body = await api(
        "mutation($id: ID!) { revokeInvitation(id: $id) { __typename } }",
        {"id": first.invitation.id},
        user=world.admin,
    )
    assert body["data"]["revokeInvitation"]["__typename"] == "Invitation"
    gone = await api(ACCEPT, {"k": first.token, "n": "R", "p": PASSWORD})
    assert gone["data"]["acceptInvitation"]["reason"] == "revoked"
    second = await onboarding.invite_member(api.rt, world.admin, world.team, "e@acme.test", "STAFF")
    clock.advance(api.rt.settings.invitation_ttl_hours * 3600 + 1)
    gone = await api(ACCEPT, {"k": second.token, "n": "E", "p": PASSWORD})
    assert gone["data"]["acceptInvitation"]["reason"] == "expired"
    unknown = await api(ACCEPT, {"k": "x" * 43, "n": "E", "p": PASSWORD})
    assert unknown["data"]["acceptInvitation"]["__typename"] == "NotFound"


async def test_an_existing_account_accepts_only_as_itself(api, world) -> None:
    new = await onboarding.invite_member(
        api.rt, world.admin, world.team, "olga@globex.test", "STAFF"
    )
    variables = {"k": new.token, "n": "", "p": ""}
    refused = (await api(ACCEPT, variables))["data"]["acceptInvitation"]
    assert refused["__typename"] == "NotAllowed" and "sign in" in refused["message"]
    done = (await api(ACCEPT, variables, user=world.outsider))["data"]["acceptInvitation"]
    assert done["newAccount"] is False and done["role"] == "STAFF"


@pytest.mark.parametrize(
    "email", ["", "a\u0000@acme.test", "a" * 10_000 + "@acme.test", "not an address"]
)
async def test_odd_input_is_typed(api, world, email) -> None:
    body = await api(INVITE, {"t": world.team, "e": email, "r": "STAFF"}, user=world.admin)
    assert body["data"]["inviteMember"] == {
        "__typename": "ValidationProblem",
        "message": body["data"]["inviteMember"]["message"],
        "field": "email",
    }
    asked = await api(REQUEST, {"e": email})
    assert asked["data"]["requestPasswordReset"]["__typename"] == "ValidationProblem"
    new = await onboarding.invite_member(api.rt, world.admin, world.team, "n@acme.test", "STAFF")
    for name, password in (("", PASSWORD), ("\u0000", PASSWORD), ("N", "x")):
        answer = await api(ACCEPT, {"k": new.token, "n": name, "p": password})
        assert answer["data"]["acceptInvitation"]["__typename"] == "ValidationProblem"


async def test_password_reset_over_graphql(api, world) -> None:
    known = await api(REQUEST, {"e": "chen@acme.test"})
    unknown = await api(REQUEST, {"e": "nobody@acme.test"})
    assert known == unknown
    from datetime import timedelta

    from desk.people import resets

    async with api.rt.engine.begin() as conn:
        to = await resets.issue(
            conn,
            email="chen@acme.test",
            client="t",
            now=api.rt.clock(),
            ttl=timedelta(minutes=60),
        )
    assert to is not None
    await api(TEAM, {"id": world.team}, user=world.staff)  # a live session of Chen's
    done = await api(RESET, {"k": to.token, "p": "a whole new password"})
    assert done["data"]["resetPassword"] == {"__typename": "PasswordChanged", "sessionsEnded": 1}
    after = await api(TEAM, {"id": world.team}, user=world.staff)  # the old cookie
    assert after["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    again = await api(RESET, {"k": to.token, "p": "a whole new password"})
    assert again["data"]["resetPassword"]["reason"] == "used"


async def test_password_reset_is_rate_limited(make_api, world) -> None:
    async with make_api(password_reset_max_per_client=2) as api:
        for _ in range(2):
            await api(REQUEST, {"e": "nobody@acme.test"})
        body = await api(REQUEST, {"e": "chen@acme.test"})
        assert body["errors"][0]["extensions"]["code"] == "RATE_LIMITED"


async def test_removal_and_role_change_apply_on_the_next_request(api, world) -> None:
    _row, token = await users.create_token(api.rt, world.staff, "laptop")
    by_token = await api(TEAM, {"id": world.team}, token=token)
    assert by_token["data"]["team"]["myRole"] == "STAFF"
    changed = await api(
        "mutation($t: ID!, $u: ID!) { changeMemberRole(teamId: $t, userId: $u, role: CUSTOMER) "
        "{ __typename ... on Member { role } } }",
        {"t": world.team, "u": world.staff},
        user=world.admin,
    )
    assert changed["data"]["changeMemberRole"] == {"__typename": "Member", "role": "CUSTOMER"}
    for who in ({"token": token}, {"user": world.staff}):
        seen = await api(TEAM, {"id": world.team}, **who)
        assert seen["data"]["team"]["myRole"] == "CUSTOMER"
        refused = await api(INVITE, {"t": world.team, "e": "z@acme.test", "r": "STAFF"}, **who)
        assert refused["data"]["inviteMember"]["__typename"] == "NotAllowed"
    removed = await api(
        "mutation($t: ID!, $u: ID!) { removeMember(teamId: $t, userId: $u) { __typename } }",
        {"t": world.team, "u": world.staff},
        user=world.admin,
    )
    assert removed["data"]["removeMember"]["__typename"] == "Member"
    gone = await api(TEAM, {"id": world.team}, token=token)  # the token: the team is gone
    assert gone["data"]["team"] is None
    ended = await api(TEAM, {"id": world.team}, user=world.staff)  # the session: ended
    assert ended["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
