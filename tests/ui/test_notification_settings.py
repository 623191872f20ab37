"""The notification settings page: your own choices only, both languages, odd input a 422."""

from __future__ import annotations

import sqlalchemy as sa

from desk.people import preferences
from ui.i18n import catalog

PATH = "/settings/notifications"


async def test_anonymous_is_sent_to_sign_in(page_as) -> None:
    r = await (await page_as(None)).get(PATH)
    assert r.status_code in (303, 401) or "/login" in r.headers.get("location", "")


async def test_each_person_sees_and_sets_only_their_own(page_as, rt, world) -> None:
    for user in (world.admin, world.staff, world.customer, world.outsider):
        page = await page_as(user)
        r = await page.get(PATH)
        assert r.status_code == 200 and 'name="export_ready_email"' in r.text
        assert " checked" not in r.text  # no row: nothing by e-mail
    customer = await page_as(world.customer)
    r = await customer.post(PATH, data={"export_ready_email": "on", "csrf_token": customer.csrf})
    assert r.status_code == 303 and r.headers["location"].endswith(PATH + "?saved=1")
    assert await preferences.get(rt, world.customer) == preferences.Preferences(True, False)
    assert await preferences.get(rt, world.staff) == preferences.Preferences(False, False)
    # a user id in the form is not a way to reach someone else's: there is no such field
    r = await customer.hx_post(PATH, {"reminder_email": "on", "user_id": str(world.staff)})
    assert r.status_code == 200 and "Saved." in r.text
    assert await preferences.get(rt, world.customer) == preferences.Preferences(False, True)
    assert await preferences.get(rt, world.staff) == preferences.Preferences(False, False)


async def test_odd_input_is_a_422_saying_what_to_fix(page_as, rt, world) -> None:
    page = await page_as(world.staff)
    for data in ({"reminder_email": "maybe"}, {"reminder_email": ["on", "on"]}):
        r = await page.hx_post(PATH, data)
        assert r.status_code == 422 and "tick the box or leave it empty" in r.text
    assert await preferences.get(rt, world.staff) == preferences.Preferences()


async def test_without_csrf_nothing_changes(page_as, rt, world) -> None:
    page = await page_as(world.staff)
    r = await page.post(PATH, data={"reminder_email": "on"})
    assert r.status_code == 403
    assert await preferences.get(rt, world.staff) == preferences.Preferences()


async def test_the_page_and_header_link_in_chinese(page_as, rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh-CN' WHERE id = :u"), {"u": world.staff}
        )
    page = await page_as(world.staff)
    zh = catalog("zh_Hans")
    zh.missing.clear()
    r = await page.get(PATH)
    assert r.status_code == 200 and "通知设置" in r.text and "当我的导出可以下载时" in r.text
    r = await page.get("/tickets")
    assert f'href="{PATH}"' in r.text and "设置" in r.text
    assert zh.missing == set()
