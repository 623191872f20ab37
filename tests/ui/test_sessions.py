"""Sessions that end (issue 12, point 8): logout, a password change and a member's removal
revoke the session server-side, so a copy of the old cookie signs nobody in."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from itsdangerous import URLSafeTimedSerializer

from desk.people import members, users
from desk.people.passwords import hash_password
from web.auth import SESSION_COOKIE

PASSWORD = "s3cret-enough"


@pytest.fixture
async def with_password(rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET password_hash = :h"), {"h": hash_password(PASSWORD)}
        )


async def sign_in(page, email: str) -> str:
    """Sign in through the form; returns the session cookie the browser got."""
    form = (await page.get("/login")).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    r = await page.post("/login", data={"csrf_token": token, "email": email, "password": PASSWORD})
    assert r.status_code == 303, r.text
    return page.cookies[SESSION_COOKIE]


async def signed_in_with(page_as, cookie: str) -> bool:
    """Does this cookie sign anyone in? (Asked of GraphQL's `me`: it needs no team.)"""
    other = await page_as(None)
    other.cookies.set(SESSION_COOKIE, cookie)
    r = await other.post("/graphql", json={"query": "{ me { id } }"})
    return bool((r.json().get("data") or {}).get("me"))


async def test_logout_ends_the_session_for_every_copy_of_the_cookie(
    page_as, world, with_password
) -> None:
    page = await page_as(None)
    cookie = await sign_in(page, "chen@acme.test")
    assert await signed_in_with(page_as, cookie)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', (await page.get("/tickets")).text)
    r = await page.post("/logout", data={"csrf_token": csrf.group(1)})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    # The replayed cookie (stolen, or kept by another tab) no longer signs anyone in.
    replay = await page_as(None)
    replay.cookies.set(SESSION_COOKIE, cookie)
    r = await replay.get("/tickets")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    # GraphQL, too: the cookie is anonymous there now.
    r = await replay.post("/graphql", json={"query": "{ me { id } }"})
    assert r.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_password_change_ends_every_session_of_that_user(
    page_as, rt, world, with_password
) -> None:
    first = await sign_in(await page_as(None), "chen@acme.test")
    second = await sign_in(await page_as(None), "chen@acme.test")
    other = await sign_in(await page_as(None), "lin@acme.test")
    assert await users.set_password(rt, world.staff, "a-new-password") == 2
    assert not await signed_in_with(page_as, first)
    assert not await signed_in_with(page_as, second)
    assert await signed_in_with(page_as, other)  # somebody else's session stays
    assert await users.authenticate(rt, "chen@acme.test", "a-new-password") is not None


async def test_member_removal_ends_their_sessions(page_as, rt, world, with_password) -> None:
    cookie = await sign_in(await page_as(None), "lin@acme.test")
    assert await signed_in_with(page_as, cookie)
    await members.remove_member(rt, world.admin, world.team, world.customer)
    assert not await signed_in_with(page_as, cookie)


async def test_a_signed_cookie_without_a_session_row_signs_nobody_in(page_as, rt, world) -> None:
    # The old format (a signed user id) and a made-up session id: both anonymous now.
    serializer = URLSafeTimedSerializer(rt.settings.secret_key, salt="taskdesk-session")
    for forged in ({"uid": world.admin, "csrf": "x"}, {"sid": "made-up"}):
        assert not await signed_in_with(page_as, serializer.dumps(forged))


async def test_a_session_expires_after_its_max_age(page_as, clock, world, with_password) -> None:
    cookie = await sign_in(await page_as(None), "chen@acme.test")
    clock.advance(13 * 24 * 3600)
    assert await signed_in_with(page_as, cookie)
    clock.advance(2 * 24 * 3600)
    assert not await signed_in_with(page_as, cookie)


async def test_ended_sessions_are_cleared_at_the_next_sign_in(page_as, rt, world, with_password):
    for _ in range(3):
        await sign_in(await page_as(None), "chen@acme.test")
    await users.set_password(rt, world.staff, PASSWORD)  # ends all three
    await sign_in(await page_as(None), "chen@acme.test")
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*), count(revoked_at) FROM web_session WHERE user_id = :u")
        assert tuple((await conn.execute(q, {"u": world.staff})).one()) == (1, 0)
