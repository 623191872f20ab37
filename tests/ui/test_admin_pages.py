"""Members and API tokens pages: admins only (staff and customers get the friendly 403, other
teams never see this team), add/change/remove, and a token shown exactly once."""

from __future__ import annotations

import pytest

from desk.people import users

PAGES = ["/members", "/tokens"]


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("who, status", [("admin", 200), ("staff", 403), ("customer", 403)])
async def test_role_matrix(page_as, world, path, who, status) -> None:
    page = await page_as(getattr(world, who))
    for r in (await page.get(path), await page.hx_get(path)):
        assert r.status_code == status, (path, who)
    if status == 403:
        assert "Only team admins" in r.text
    nav = (await page.get("/tickets")).text
    assert ('href="/members"' in nav) is (who == "admin")


@pytest.mark.parametrize("who", ["staff", "customer"])
async def test_non_admins_cannot_act(page_as, world, rt, who) -> None:
    page = await page_as(getattr(world, who))
    assert (
        await page.hx_post("/members", {"email": "olga@globex.test", "role": "ADMIN"})
    ).status_code == 403
    assert (
        await page.hx_post(f"/members/{world.customer2}/role", {"role": "ADMIN"})
    ).status_code == 403
    assert (await page.hx_post(f"/members/{world.customer2}/remove")).status_code == 403
    assert (await page.hx_post("/tokens", {"name": "mine"})).status_code == 403
    assert await users.list_tokens(rt, getattr(world, who)) == []


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
