"""Scheduled exports in the console: an operator sees every team's, a team admin their own
teams'; anyone else gets the unknown address. Pausing one is audited; another team's schedule
answers as missing."""

from __future__ import annotations

import sqlalchemy as sa

from desk.work import schedules
from tests.console.conftest import HTML


async def _two(rt, world):
    acme = await schedules.create_schedule(
        rt, world.staff, world.team, {}, days=[1], time="08:00", name="Acme weekly"
    )
    globex = await schedules.create_schedule(
        rt, world.outsider, world.other_team, {}, days=[2], time="09:00", name="Globex daily"
    )
    return acme, globex


async def _unknown(page):
    r = await page.get("/ops-no-such-page", headers=HTML)
    return r.status_code, r.text


async def test_operator_sees_every_team_and_pauses_with_an_audit(
    page_as, world, operator, rt
) -> None:
    acme, _globex = await _two(rt, world)
    page = await page_as(operator)
    r = await page.get("/ops/schedules", headers=HTML)
    assert r.status_code == 200 and "Acme weekly" in r.text and "Globex daily" in r.text
    r = await page.get(f"/ops/schedules?team={world.other_team}", headers=HTML)
    assert "Globex daily" in r.text and "Acme weekly" not in r.text
    r = await page.post(f"/ops/schedules/{acme.id}/pause", data={"csrf_token": page.csrf})
    assert r.status_code == 303
    assert (await schedules.get_schedule(rt, world.staff, acme.id)).state == "PAUSED"
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT action, team_id FROM ops_audit WHERE actor_id = :u"),
                {"u": operator},
            )
        ).one()
    assert (row.action, row.team_id) == ("schedule_pause", world.team)
    audit = await page.get("/ops/audit", headers=HTML)
    assert "Paused a scheduled export" in audit.text


async def test_team_admin_sees_and_pauses_their_team_only(page_as, world, operator, rt) -> None:
    _acme, globex = await _two(rt, world)
    admin = await page_as(world.admin)
    r = await admin.get("/ops/schedules", headers=HTML)
    assert "Acme weekly" in r.text and "Globex daily" not in r.text
    r = await admin.get(f"/ops/schedules?team={world.other_team}", headers=HTML)
    assert r.status_code == 200 and "Globex daily" not in r.text
    unknown = await _unknown(admin)
    assert (await admin.hx_post(f"/ops/schedules/{globex.id}/pause")).status_code == 404
    r = await admin.post(
        f"/ops/schedules/{globex.id}/pause", data={"csrf_token": admin.csrf}, headers=HTML
    )
    assert (r.status_code, r.text) == unknown
    assert (await schedules.get_schedule(rt, world.outsider, globex.id)).state == "ACTIVE"
    for odd in ("abc", "99999999999"):
        assert (await admin.hx_post(f"/ops/schedules/{odd}/pause")).status_code == 404


async def test_staff_and_customers_get_the_unknown_address(page_as, world, operator, rt) -> None:
    acme, _ = await _two(rt, world)
    for who in (world.staff, world.customer):
        page = await page_as(who)
        unknown = await _unknown(page)
        r = await page.get("/ops/schedules", headers=HTML)
        assert (r.status_code, r.text) == unknown
        assert (await page.hx_post(f"/ops/schedules/{acme.id}/pause")).status_code == 404
    assert (await schedules.get_schedule(rt, world.staff, acme.id)).state == "ACTIVE"
