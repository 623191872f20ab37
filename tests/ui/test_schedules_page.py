"""The scheduled exports page: staff and admins use it (an admin sees and changes every schedule
of the team, staff their own); customers and people of no team get exactly what an unknown
address answers; odd input is shown in place as a 4xx; a stopped schedule says why."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from desk.people import members
from desk.work import schedules
from jobs import scheduler

HTML = {"Accept": "text/html"}
FORM = {"name": "Monday report", "days": ["1", "3"], "time": "08:00", "timezone": "Europe/Berlin"}


async def _staff_schedule(rt, world):
    return await schedules.create_schedule(
        rt, world.staff, world.team, {"status": ["OPEN"]}, days=[1], time="08:00", name="Weekly"
    )


@pytest.mark.parametrize("who", ["admin", "staff"])
async def test_staff_and_admins_use_the_page(page_as, world, who) -> None:
    page = await page_as(getattr(world, who))
    for r in (await page.get("/schedules"), await page.hx_get("/schedules")):
        assert r.status_code == 200 and 'id="schedule-list"' in r.text
    nav = (await page.get("/tickets")).text
    assert 'href="/schedules"' in nav and "Save as schedule" in nav


async def test_customers_get_exactly_a_missing_page(page_as, world, rt) -> None:
    mine = await _staff_schedule(rt, world)
    page = await page_as(world.customer)
    nav = (await page.get("/tickets")).text
    assert 'href="/schedules"' not in nav and "Save as schedule" not in nav
    asks = [
        ("GET", "/schedules", {}),
        ("POST", "/schedules", FORM),
        ("POST", f"/schedules/{mine.id}/pause", {}),
        ("POST", f"/schedules/{mine.id}/resume", {}),
        ("POST", f"/schedules/{mine.id}/delete", {}),
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
                    r = await page.post(target, data=data | {"csrf_token": page.csrf}, headers=HTML)
                answers.append((r.status_code, r.text, r.headers.get("hx-retarget")))
            assert answers[0] == answers[1], (method, url, hx)
            assert answers[0][0] == 404
    assert (await schedules.get_schedule(rt, world.staff, mine.id)).state == "ACTIVE"
    assert len(await schedules.list_schedules(rt, world.admin, world.team)) == 1


async def test_create_pause_resume_delete_through_the_page(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    r = await page.hx_post("/schedules", FORM | {"status": ["OPEN"], "q": "printer"})
    assert r.status_code == 201 and "Monday report" in r.text and "Europe/Berlin" in r.text
    (made,) = await schedules.list_schedules(rt, world.staff, world.team)
    assert made.days == (1, 3) and made.filters == {
        "assignment": "anyone", "status": ["OPEN"], "q": "printer",
    }  # fmt: skip
    r = await page.hx_post(f"/schedules/{made.id}/pause")
    assert r.status_code == 200 and "paused" in r.text
    admin = await page_as(world.admin)  # the team's admin sees and resumes it
    r = await admin.hx_post(f"/schedules/{made.id}/resume")
    assert r.status_code == 200 and "resumed" in r.text and "Monday report" in r.text
    r = await page.post(f"/schedules/{made.id}/delete", data={"csrf_token": page.csrf})
    assert r.status_code == 303 and r.headers["location"] == "/schedules"
    assert await schedules.list_schedules(rt, world.staff, world.team) == []


async def test_save_as_schedule_carries_the_filters(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.get("/schedules?status=PENDING&q=login")
    assert r.status_code == 200
    assert 'value="PENDING" checked' in r.text and 'value="login"' in r.text


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"time": "25:00"}, "time", "HH:MM"),
        ({"timezone": "Mars/Olympus"}, "timezone", "IANA"),
        ({"timezone": "Europe/Berlin\x00"}, "timezone", "NUL"),
        ({"days": []}, "days", "weekday"),
        ({"days": ["9"]}, "days", "weekday"),
        ({"days": ["x" * 50]}, "days", "weekday"),
        ({"name": "bad\x00name"}, "name", "NUL"),
        ({"status": ["NOPE"]}, "status", "unknown value"),
    ],
)
async def test_odd_input_is_shown_in_place(page_as, world, change, field, says) -> None:
    page = await page_as(world.staff)
    r = await page.hx_post("/schedules", FORM | change)
    assert r.status_code == 422, r.text[:300]
    assert f'id="err-{field}"' in r.text and says in r.text


async def test_odd_ids_are_missing(page_as, world) -> None:
    page = await page_as(world.staff)
    for raw in ("abc", "99999999999", "0", "-1"):
        r = await page.hx_post(f"/schedules/{raw}/pause")
        assert r.status_code == 404, raw


async def test_a_stopped_schedule_says_why_in_both_languages(page_as, world, rt, clock) -> None:
    clock.now = datetime(2027, 1, 4, 6, tzinfo=UTC)
    made = await _staff_schedule(rt, world)
    await members.change_role(rt, world.admin, world.team, world.staff, "CUSTOMER")
    clock.now = datetime(2027, 1, 4, 8, tzinfo=UTC)
    assert (await scheduler.run_once(rt, clock.now)).stopped == 1
    admin = await page_as(world.admin)
    r = await admin.get("/schedules")
    assert "Stopped: its owner is no longer staff or an admin of the team." in r.text
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh_Hans' WHERE id = :u"), {"u": world.admin}
        )
    r = await (await page_as(world.admin)).get("/schedules")
    assert "其所有者已不再是该团队的客服或管理员" in r.text and "定时导出" in r.text
    # Resuming waits for the owner to be staff again.
    r = await admin.hx_post(f"/schedules/{made.id}/resume")
    assert r.status_code == 409
    await members.change_role(rt, world.admin, world.team, world.staff, "STAFF")
    r = await admin.hx_post(f"/schedules/{made.id}/resume")
    assert r.status_code == 200
    assert (await schedules.get_schedule(rt, world.staff, made.id)).state == "ACTIVE"
