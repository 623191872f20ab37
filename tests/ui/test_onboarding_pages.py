"""The pages of onboarding, as a new team uses them: an admin invites from /members and sees the
link once; the invitee opens it, sets a name and password, lands signed in on the workspace;
used, expired and withdrawn links get a 410 page that says what to do, unknown ones a 404; an
existing account joins after signing in; "Forgot your password?" answers the same for any
address, and its link sets the password once and signs every session out; removing someone or
changing their role applies on their very next request (session and API token alike); the
console's teams page is for operators only."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from desk.people import operators, resets, users
from desk.work import onboarding, tasks

PASSWORD = "correct horse battery"
HTML = {"Accept": "text/html"}


def _form_token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def _open_and_accept(page, path: str, **fields: str):
    r = await page.get(path, headers=HTML)
    assert r.status_code == 200, r.text
    return await page.post(path, data={"csrf_token": _form_token(r.text), **fields})


async def test_invite_accept_and_land_on_the_workspace(page_as, world, rt) -> None:
    admin = await page_as(world.admin)
    r = await admin.post(
        "/members/invitations",
        data={"email": "ada@acme.test", "role": "CUSTOMER", "csrf_token": admin.csrf},
        headers=HTML,
    )
    assert r.status_code == 201 and 'data-testid="invitation-link"' in r.text
    link = re.search(r'value="(http://test/invitations/[^"]+)"', r.text)
    assert link, r.text
    path = link.group(1).removeprefix("http://test")
    listed = (await admin.get("/members")).text
    assert "ada@acme.test" in listed and "Pending invitations" in listed and path not in listed
    ada = await page_as(None)
    r = await ada.get(path, headers=HTML)
    assert "Join Acme" in r.text and "ada@acme.test" in r.text
    r = await _open_and_accept(ada, path, display_name="Ada", password=PASSWORD)
    assert r.status_code == 303 and r.headers["location"] == "/tickets"
    r = await ada.get("/tickets")
    assert r.status_code == 200 and "My tickets" in r.text  # signed in, as a customer
    assert await users.authenticate(rt, "ada@acme.test", PASSWORD) is not None
    again = await page_as(None)
    r = await again.get(path, headers=HTML)
    assert r.status_code == 410 and "already accepted" in r.text
    assert "This link no longer works" in r.text


async def test_stale_links_get_clear_pages(page_as, world, rt, clock) -> None:
    anon = await page_as(None)
    r = await anon.get("/invitations/" + "x" * 43, headers=HTML)
    assert r.status_code == 404 and "not valid" in r.text
    r = await anon.get("/invitations/%00%01", headers=HTML)
    assert r.status_code == 404
    withdrawn = await onboarding.invite_member(rt, world.admin, world.team, "w@acme.test", "STAFF")
    admin = await page_as(world.admin)
    r = await admin.hx_post(f"/members/invitations/{withdrawn.invitation.id}/revoke")
    assert r.status_code == 200 and "was withdrawn" in r.text
    r = await anon.get(withdrawn.path, headers=HTML)
    assert r.status_code == 410 and "withdrawn" in r.text
    late = await onboarding.invite_member(rt, world.admin, world.team, "l@acme.test", "STAFF")
    page = await anon.get(late.path, headers=HTML)
    clock.advance(rt.settings.invitation_ttl_hours * 3600 + 1)
    r = await anon.post(
        late.path,
        data={"csrf_token": _form_token(page.text), "display_name": "L", "password": PASSWORD},
    )
    assert r.status_code == 410 and "expired" in r.text
    r = await anon.get(late.path, headers={**HTML, "Accept-Language": "zh-CN"})
    assert r.status_code == 410 and "此邀请已过期" in r.text


async def test_odd_input_on_the_accept_form(page_as, world, rt) -> None:
    new = await onboarding.invite_member(rt, world.admin, world.team, "o@acme.test", "STAFF")
    anon = await page_as(None)
    for name, password, expect in (
        ("", PASSWORD, "enter your name"),
        ("N\x00", PASSWORD, "NUL"),
        ("N" * 10_000, PASSWORD, "at most"),
        ("N", "short", "8 to 1000"),
    ):
        r = await _open_and_accept(anon, new.path, display_name=name, password=password)
        assert r.status_code == 422 and expect in r.text, r.text
    r = await anon.post(new.path, data={"display_name": "N", "password": PASSWORD})
    assert r.status_code == 403  # no form token: refused, nothing accepted
    await _open_and_accept(anon, new.path, display_name="N", password=PASSWORD)


async def test_an_existing_account_joins_after_signing_in(page_as, world, rt) -> None:
    new = await onboarding.invite_member(rt, world.admin, world.team, "olga@globex.test", "STAFF")
    anon = await page_as(None)
    r = await anon.get(new.path, headers=HTML)
    assert "Sign in as that account" in r.text and f"/login?next={new.path}" in r.text
    r = await _open_and_accept(anon, new.path, display_name="x", password=PASSWORD)
    assert r.status_code == 403 and "sign in as that account" in r.text
    chen = await page_as(world.staff)  # signed in as someone else: told so, offered sign-out
    r = await chen.get(new.path, headers=HTML)
    assert "You are signed in as chen@acme.test" in r.text and 'formaction="/logout"' in r.text
    r = await chen.post("/logout", data={"csrf_token": _form_token(r.text)})
    assert r.status_code == 303 and (await chen.get("/tickets")).status_code == 303
    olga = await page_as(world.outsider)
    r = await olga.get(new.path, headers=HTML)
    assert "Join Acme as Outsider" in r.text and 'name="password"' not in r.text
    r = await olga.post(new.path, data={"csrf_token": olga.csrf})
    assert r.status_code == 303
    assert world.team in {t.team_id for t in await users.teams_of(rt, world.outsider)}


async def test_forgot_and_reset_password(page_as, world, rt) -> None:
    anon = await page_as(None)
    assert 'href="/password/forgot"' in (await anon.get("/login")).text
    answers = []
    for email in ("chen@acme.test", "nobody@acme.test"):
        page = await anon.get("/password/forgot")
        r = await anon.post(
            "/password/forgot", data={"csrf_token": _form_token(page.text), "email": email}
        )
        answers.append((r.status_code, r.text))
    assert answers[0] == answers[1] and answers[0][0] == 200
    assert 'data-testid="reset-sent"' in answers[0][1]
    async with rt.engine.begin() as conn:
        to = await resets.issue(
            conn, email="chen@acme.test", client="t", now=rt.clock(), ttl=timedelta(minutes=60)
        )
    assert to is not None
    chen = await page_as(world.staff)  # a browser still signed in elsewhere
    assert (await chen.get("/tickets")).status_code == 200
    page = await anon.get(to.path)
    assert page.status_code == 200
    token = _form_token(page.text)
    r = await anon.post(to.path, data={"csrf_token": token, "password": "x" * 9, "again": "y" * 9})
    assert r.status_code == 422 and "differ" in r.text
    new = "a whole new password"
    r = await anon.post(to.path, data={"csrf_token": token, "password": new, "again": new})
    assert r.status_code == 200 and "1 session was signed out everywhere" in r.text
    assert (await chen.get("/tickets")).status_code == 303  # ended: off to sign in
    assert await users.authenticate(rt, "chen@acme.test", new) is not None
    r = await anon.get(to.path, headers=HTML)
    assert r.status_code == 410 and "already used" in r.text


@pytest.mark.parametrize("email", ["", "a\x00@acme.test", "a" * 10_000 + "@acme.test"])
async def test_odd_addresses_on_the_forgot_form(page_as, world, email) -> None:
    anon = await page_as(None)
    page = await anon.get("/password/forgot")
    r = await anon.post(
        "/password/forgot", data={"csrf_token": _form_token(page.text), "email": email}
    )
    assert r.status_code == 422 and 'class="field-error"' in r.text


async def test_removal_and_role_change_apply_on_the_next_request(page_as, world, rt) -> None:
    export = await tasks.create_export(rt, world.staff, world.team, {})
    _row, token = await users.create_token(rt, world.staff, "script")
    bearer = {"Authorization": f"Bearer {token}"}
    chen = await page_as(world.staff)
    rest = await page_as(None)
    assert "Assigned to" in (await chen.get("/tickets")).text  # the staff view
    assert (await rest.get(f"/api/v1/tasks/{export.id}", headers=bearer)).status_code == 200
    admin = await page_as(world.admin)
    r = await admin.hx_post(f"/members/{world.staff}/role", {"role": "CUSTOMER"})
    assert r.status_code == 200
    r = await chen.get("/tickets")
    assert r.status_code == 200 and "My tickets" in r.text and "Assigned to" not in r.text
    r = await admin.hx_post(f"/members/{world.staff}/remove")
    assert r.status_code == 200
    assert (await chen.get("/tickets")).status_code == 303  # the session ended
    assert (await rest.get(f"/api/v1/tasks/{export.id}", headers=bearer)).status_code == 404


async def test_console_teams_page_is_for_operators(page_as, world, rt) -> None:
    admin = await page_as(world.admin)  # a team admin: the console, but no teams page
    for r in (
        await admin.get("/ops/teams", headers=HTML),
        await admin.post("/ops/teams", data={"name": "X", "csrf_token": admin.csrf}, headers=HTML),
    ):
        missing = await admin.get("/ops/no-such-page", headers=HTML)
        assert r.status_code == 404 and r.text == missing.text
    await operators.add(rt, "zhou@acme.test")
    page = await admin.get("/ops/teams")
    assert page.status_code == 200 and "Acme" in page.text and "Globex" in page.text
    r = await admin.post(
        "/ops/teams",
        data={"name": "Initech", "admin_email": "boss@initech.test", "csrf_token": admin.csrf},
    )
    assert r.status_code == 201 and "/invitations/" in r.text and "Initech" in r.text
    r = await admin.post("/ops/teams", data={"name": "initech", "csrf_token": admin.csrf})
    assert r.status_code == 422 and "already exists" in r.text
    r = await admin.post("/ops/teams", data={"name": "\x00", "csrf_token": admin.csrf})
    assert r.status_code == 422
