"""The console in 简体中文: every interface string of its templates and labels has a translation,
and every page and live block rendered in Chinese asks the catalog for nothing it lacks."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from jinja2.ext import babel_extract

from desk.console import failures
from desk.people import operators
from tests.console.conftest import HTML
from ui import i18n
from ui.console.pages import ACTION_LABELS, EVENT_LABELS
from ui.render import TEMPLATES

ZH = i18n.catalog("zh_Hans")


def console_msgids() -> set[str]:
    found: set[str] = set()
    for path in sorted((Path(TEMPLATES) / "console").glob("*.html")):
        with path.open("rb") as f:
            for _line, _func, msg, _c in babel_extract(f, ("_", "gettext", "ngettext"), [], {}):
                found.update(m for m in (msg if isinstance(msg, tuple) else (msg,)) if m)
    return found | set(ACTION_LABELS.values()) | set(EVENT_LABELS.values())


def test_every_console_string_has_a_chinese_translation() -> None:
    wanted = console_msgids()
    assert len(wanted) > 100
    assert sorted(m for m in wanted if not ZH.messages.get(m)) == []


async def test_every_console_page_renders_fully_in_chinese(
    page_as, rt, world, scene, operator
) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    key = (await failures.groups(rt, await operators.scope_of(rt, operator)))[0].key
    urls = [
        "/ops",
        "/ops/tasks",
        "/ops/tasks?status=FAILED&error=locked",
        "/ops/tasks?since=bad",
        f"/ops/tasks/{scene.acme_failed[0]}",
        f"/ops/tasks/{scene.acme_waiting}",
        "/ops/failures",
        "/ops/failures?done=retry&n=2&skipped=1",
        f"/ops/failures/{key}/retry",
        f"/ops/failures/{key}/cancel",
        "/ops/workers",
        "/ops/lanes",
        "/ops/audit",
    ]
    ZH.missing.clear()
    page = await page_as(operator)
    await page.hx_post(f"/ops/tasks/{scene.acme_other}/retry")
    for url in urls:
        r = await page.get(url, headers=HTML)
        assert r.status_code in (200, 422), url
        assert 'lang="zh-Hans"' in r.text, url
        assert (await page.hx_get(url)).status_code in (200, 422), url
    admin = await page_as(world.admin)
    assert "团队管理员" in (await admin.get("/ops", headers=HTML)).text
    assert ZH.missing == set()
    assert "运维控制台" in (await page.get("/ops", headers=HTML)).text
