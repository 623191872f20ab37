"""Members and API tokens pages: admins only (staff and customers get exactly what an unknown
address answers, other teams never see this team), add/change/remove, and a token shown exactly
once."""

from __future__ import annotations

import pytest

from desk.core.models import Role
from desk.people import invitations, members, users
from desk.work import onboarding

PAGES = ["/members", "/tokens"]
HTML = {"Accept": "text/html"}


@pytest.mark.parametrize("path", PAGES)
async def test_admins_use_the_pages(page_as, world, path) -> None:
    page = await page_as(world.admin)
    for r in (await page.get(path), await page.hx_get(path)):
        assert r.status_code == 200, path
    nav = (await page.get("/tickets")).text
    assert 'href="/members"' in nav and 'href="/tokens"' in nav


@pytest.mark.parametrize("who", ["staff", "customer"])
async def test_staff_and_customers_get_exactly_a_missing_page(page_as, world, rt, who) -> None:
    """The project's rule for a page a role may not use (docs/architecture.md, "Visibility"), as
    /imports and the console answer it: what an unknown address answers, GET or POST."""
    page = await page_as(getattr(world, who))
    nav = (await page.get("/tickets")).text
    assert 'href="/members"' not in nav and 'href="/tokens"' not in nav
    zhou_token, _ = await users.create_token(rt, world.admin, "zhou's")
    invited = await onboarding.invite_member(rt, world.admin, world.team, "p@acme.test", "STAFF")
    asks: list[tuple[str, str, dict[str, str]]] = [
        ("POST", "/members/invitations", {"email": "x@acme.test", "role": "ADMIN"}),
        ("POST", f"/members/invitations/{invited.invitation.id}/revoke", {}),
        ("GET", "/members", {}),
        ("GET", "/tokens", {}),
        ("POST", "/members", {"email": "olga@globex.test", "role": "ADMIN"}),
        ("POST", f"/members/{world.customer2}/role", {"role": "ADMIN"}),
        ("POST", f"/members/{world.customer2}/remove", {}),
        ("POST", "/tokens", {"name": "mine"}),
        ("POST", f"/tokens/{zhou_token.id}/revoke", {}),
    ]
    for method, url, data in asks:
        for hx in (False, True):
            answers = []
            for target in (url, "/no-such-page"):
                if method == "GET":
                    r = await (page.hx_get(target) if hx else page.get(target, headers=HTML))
                elif hx:
                    r = await page.hx_post(target, data)
                else:
                    form = data | {"csrf_token": page.csrf}
                    r = await page.post(target, data=form, headers=HTML)
                answers.append((r.status_code, r.text, r.headers.get("hx-retarget")))
            assert answers[0] == answers[1], (method, url, hx)
            assert answers[0][0] == 404 and "Not found" in answers[0][1]
    for path in PAGES:  # a script (no text/html): the JSON of any unknown address
        r = await page.get(path)
        assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    # And nothing was done.
    names = {m.user_id: m.role for m in await members.list_members(rt, world.admin, world.team)}
    assert names[world.customer2] is Role.CUSTOMER and world.outsider not in names
    assert await users.list_tokens(rt, getattr(world, who)) == []
    assert (await users.list_tokens(rt, world.admin))[0].revoked_at is None
    pending = await invitations.list_pending(rt, world.admin, world.team)
    assert [p.email for p in pending] == ["p@acme.test"]


async def test_other_teams_admin_sees_only_their_team(page_as, world) -> None:
    olga = await page_as(world.outsider)
    r = await olga.get("/members")
    assert r.status_code == 200 and "olga@globex.test" in r.text and "chen@acme.test" not in r.text
    # Acme's members are not members of Olga's team: same as missing.
    r = await olga.hx_post(f"/members/{world.staff}/role", {"role": "CUSTOMER"})
    assert r.status_code == 404
    r = await olga.hx_post(f"/members/{world.staff}/remove")
    assert r.status_code == 404


async def test_members_add_change_remove(page_as, world) -> None:
    admin = await page_as(world.admin)
    r = await admin.hx_post("/members", {"email": "olga@globex.test", "role": "STAFF"})
    assert r.status_code == 200 and "was added" in r.text and "olga@globex.test" in r.text
    r = await admin.hx_post("/members", {"email": "nobody@x.test", "role": "STAFF"})
    assert (
        r.status_code == 422
        and "no account uses that address" in r.text
        and 'aria-invalid="true"' in r.text
    )
    r = await admin.hx_post(f"/members/{world.outsider}/role", {"role": "ADMIN"})
    assert r.status_code == 200 and "Role changed." in r.text
    r = await admin.hx_post(f"/members/{world.outsider}/remove")
    assert r.status_code == 200 and "was removed" in r.text and "olga@globex.test" not in r.text
    r = await admin.hx_post(f"/members/{world.admin}/remove")
    assert r.status_code == 422 and "at least one admin" in r.text


async def test_tokens_create_once_list_revoke(page_as, world, rt) -> None:
    admin = await page_as(world.admin)
    r = await admin.hx_post("/tokens", {"name": "CI script"})
    assert r.status_code == 201 and "shown only this once" in r.text
    secret = r.text.split('id="new-token" class="mono" readonly value="', 1)[1].split('"', 1)[0]
    assert secret.startswith("tdk_") and await users.user_for_token(rt, secret) == world.admin
    r = await admin.get("/tokens")
    assert "CI script" in r.text and secret not in r.text and secret[:12] in r.text
    token = (await users.list_tokens(rt, world.admin))[0]
    r = await admin.hx_post(f"/tokens/{token.id}/revoke")
    assert r.status_code == 200 and "revoked" in r.text
    assert await users.user_for_token(rt, secret) is None
    r = await admin.hx_post("/tokens", {"name": "  "})
    assert r.status_code == 422 and "give the token a name" in r.text
    # Someone else's token id is not found.
    other, _ = await users.create_token(rt, world.outsider, "olga's")
    assert (await admin.hx_post(f"/tokens/{other.id}/revoke")).status_code == 404
