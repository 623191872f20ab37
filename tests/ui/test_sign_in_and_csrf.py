"""Sign-in (argon2, signed cookie, back to where you were), the team switcher, and CSRF:
every state-changing request without the session's token is refused."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from desk.people.passwords import hash_password
from desk.reads import tasks as reads
from desk.work import tasks

PASSWORD = "s3cret-enough"


@pytest.fixture
async def with_password(rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET password_hash = :h"), {"h": hash_password(PASSWORD)}
        )


def login_token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


async def test_anonymous_page_goes_to_sign_in_and_comes_back(page_as, world, with_password) -> None:
    page = await page_as(None)
    r = await page.get("/tickets?status=OPEN&q=log")
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=/tickets%3Fstatus%3DOPEN%26q%3Dlog"
    r = await page.get(r.headers["location"])
    assert r.status_code == 200 and 'name="next" value="/tickets?status=OPEN&amp;q=log"' in r.text
    form = {
        "csrf_token": login_token(r.text),
        "email": "CHEN@acme.test",
        "password": PASSWORD,
        "next": "/tickets?status=OPEN&q=log",
    }
    r = await page.post("/login", data=form)
    assert r.status_code == 303 and r.headers["location"] == "/tickets?status=OPEN&q=log"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("samesite", "SameSite")
    r = await page.get("/tickets?status=OPEN&q=log")
    assert r.status_code == 200 and "Cannot log in" in r.text


async def test_htmx_call_without_session_redirects_the_page(page_as, world) -> None:
    r = await (await page_as(None)).hx_get(
        "/notifications/badge", headers={"HX-Current-URL": "http://test/tasks"}
    )
    assert r.status_code == 204 and r.headers["HX-Redirect"] == "/login?next=/tasks"


async def test_wrong_password_and_foreign_next_url(page_as, world, with_password) -> None:
    page = await page_as(None)
    token = login_token((await page.get("/login")).text)
    r = await page.post(
        "/login", data={"csrf_token": token, "email": "chen@acme.test", "password": "nope"}
    )
    assert r.status_code == 401 and "do not match" in r.text and "set-cookie" not in r.headers
    r = await page.post(
        "/login",
        data={
            "csrf_token": token,
            "email": "chen@acme.test",
            "password": PASSWORD,
            "next": "//evil.example/x",
        },
    )
    assert r.status_code == 303 and r.headers["location"] == "/tickets"


async def test_sign_in_needs_its_form_token(page_as, world, with_password) -> None:
    page = await page_as(None)
    r = await page.post("/login", data={"email": "chen@acme.test", "password": PASSWORD})
    assert r.status_code == 403 and "set-cookie" not in r.headers


@pytest.mark.parametrize(
    "path, data",
    [
        ("/exports", {"status": "OPEN"}),
        ("/tickets", {"title": "Forged"}),
        ("/tickets/{login}", {"status": "CLOSED"}),
        ("/tickets/{login}/reminder", {"preset": "1h"}),
        ("/tickets/{login}/reminder/cancel", {}),
        ("/tasks/{task}/cancel", {}),
        ("/notifications/read", {}),
        ("/team", {"team_id": "{team}"}),
        ("/logout", {}),
        ("/members", {"email": "wang@acme.test", "role": "ADMIN"}),
        ("/tokens", {"name": "forged"}),
        ("/settings/notifications", {"export_ready_email": "on"}),
    ],
)
async def test_state_changes_without_the_token_are_refused(page_as, world, rt, path, data) -> None:
    task = await tasks.create_export(rt, world.admin, world.team, {})
    ids = {"login": world.tickets["login"], "task": task.id, "team": world.team}
    page = await page_as(world.admin)
    url = path.format(**ids)
    body = {k: v.format(**ids) for k, v in data.items()}
    for headers in ({"HX-Request": "true"}, {"HX-Request": "true", "X-CSRF-Token": "wrong"}, {}):
        r = await page.post(url, data=body, headers=headers)
        assert r.status_code == 403, (url, headers, r.text)
        assert "out of date" in r.text
    # Nothing happened.
    assert (await tasks.get_task(rt, world.admin, task.id)).status == "WAITING"
    assert len((await reads.list_tasks(rt.pg, world.admin, world.team)).items) == 1


async def test_token_as_form_field_or_header_is_accepted(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    r = await page.post("/tickets", data={"csrf_token": page.csrf, "title": "From a plain form"})
    assert r.status_code == 303 and r.headers["location"].startswith("/tickets/")
    r = await page.hx_post("/tickets", {"title": "From htmx"})
    assert r.status_code == 204 and r.headers["HX-Redirect"].startswith("/tickets/")


async def test_a_session_token_does_not_work_for_another_session(page_as, world) -> None:
    staff, admin = await page_as(world.staff), await page_as(world.admin)
    r = await staff.post(
        "/exports", data={}, headers={"HX-Request": "true", "X-CSRF-Token": admin.csrf}
    )
    assert r.status_code == 403


async def test_logout_ends_the_session(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.post("/logout", data={"csrf_token": page.csrf})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    cleared = r.headers["set-cookie"]
    assert cleared.startswith('taskdesk_session="";') and "Max-Age=0" in cleared


async def test_team_switcher(page_as, world, rt) -> None:
    import sqlalchemy as sa

    async with rt.engine.begin() as conn:  # Chen also helps at Globex
        await conn.execute(
            sa.text("INSERT INTO membership (user_id, team_id, role) VALUES (:u, :t, 'STAFF')"),
            {"u": world.staff, "t": world.other_team},
        )
    page = await page_as(world.staff)
    r = await page.get("/tickets")
    assert 'name="team_id"' in r.text and "Cannot log in" in r.text
    r = await page.post(
        "/team",
        data={"csrf_token": page.csrf, "team_id": str(world.other_team), "next": "/tickets"},
    )
    assert r.status_code == 303
    r = await page.get("/tickets")
    assert "Globex only" in r.text and "Cannot log in" not in r.text
    # A team one is not in does not exist.
    r = await page.post("/team", data={"csrf_token": page.csrf, "team_id": "999999"})
    assert r.status_code == 404
