"""English and Simplified Chinese: every interface string has a translation, and every page and
fragment rendered in Chinese asks the catalog for nothing it lacks. The user's `locale` setting
wins; before sign-in, the browser's Accept-Language decides."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from jinja2.ext import babel_extract

from desk.core import messages
from desk.core.models import Priority, Role, TicketStatus
from desk.helpdesk import notifications
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from ui import i18n, taskview, texts
from ui.render import TEMPLATES

ZH = i18n.catalog("zh_Hans")


def template_msgids() -> set[str]:
    found: set[str] = set()
    for path in sorted(Path(TEMPLATES).glob("*.html")):
        with path.open("rb") as f:
            for _line, _func, msg, _c in babel_extract(f, ("_", "gettext", "ngettext"), [], {}):
                found.update(m for m in (msg if isinstance(msg, tuple) else (msg,)) if m)
    return found


def value_labels() -> set[str]:
    """Strings the templates translate from values: enum labels, kinds, task status words."""
    enums = [m.value.title() for e in (TicketStatus, Priority, Role) for m in e]
    return {*enums, *taskview.KIND_LABELS.values(), *taskview.TONE, "Anyone", "Me", "Nobody"}


def server_msgids() -> set[str]:
    """Text the desk writes by key (summaries, skip reasons, quotas, notifications) and the
    words export descriptions are made of."""
    keyed = {m for t in messages.TEMPLATES.values() for m in messages.msgids(t)}
    return keyed | set(texts.MSGIDS)


def test_every_interface_string_has_a_chinese_translation() -> None:
    wanted = template_msgids() | value_labels() | server_msgids()
    assert len(wanted) > 150
    missing = sorted(m for m in wanted if not ZH.messages.get(m))
    assert missing == []


def test_po_parser_reads_multiline_and_skips_fuzzy() -> None:
    po = (
        'msgid ""\nmsgstr ""\n"Language: zh\\n"\n\n'
        'msgid "a"\nmsgstr ""\n"甲"\n"乙"\n\n'
        '#, fuzzy\nmsgid "b"\nmsgstr "丙"\n\n'
        'msgid "c \\"q\\""\nmsgstr "丁"\n'
    )
    assert i18n.parse_po(po) == {"a": "甲乙", 'c "q"': "丁"}


@pytest.mark.parametrize(
    "user, header, expected",
    [
        ("zh-CN", None, "zh_Hans"),
        ("en", "zh-CN,zh;q=0.9", "en"),
        (None, "fr, zh-TW;q=0.5", "zh_Hans"),
        (None, "de", "en"),
        ("zh_Hans", "en", "zh_Hans"),
    ],
)
def test_locale_choice(user, header, expected) -> None:
    assert i18n.pick(user, header) == expected


@pytest.fixture
async def chinese(rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh-CN', timezone = 'Asia/Shanghai'")
        )


async def _tasks_in_every_state(rt, world, clock) -> None:
    done = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    await execute(rt, registry(), done.id, done.run)
    failed = await tasks.create_export(rt, world.staff, world.team, {"q": "x"})
    running = await tasks.create_export(rt, world.staff, world.team, {"q": "y"})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'FAILED', attempts = 5, last_error = 'boom' WHERE id = :id"
            ),
            {"id": failed.id},
        )
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'RUNNING', attempts = 1, progress = 0.5, "
                "progress_current = 5, progress_total = 10, started_at = :t WHERE id = :id"
            ),
            {"id": running.id, "t": clock.now},
        )
    fired = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=1)
    clock.advance(61)
    await execute(rt, registry(), fired.id, fired.run)
    await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=30)
    await tasks.create_export(rt, world.customer, world.team, {})
    async with rt.engine.begin() as conn:
        await notifications.insert_many(
            conn,
            user_ids=[world.customer],
            team_id=world.team,
            task_id=None,
            kind="REMINDER",
            text=messages.message("reminder.notification", ticket=1, title="x", status="OPEN"),
            link="/tickets/1",
        )
        await notifications.insert_many(
            conn,
            user_ids=[world.customer],
            team_id=world.team,
            task_id=None,
            kind="EXPORT_READY",
            text=messages.message("export.ready", task=7, rows=1234, expires_at=clock.now),
            link="/tasks/7/download",
        )


async def test_every_page_renders_fully_in_chinese(page_as, world, rt, clock, chinese) -> None:
    await _tasks_in_every_state(rt, world, clock)
    ticket = world.tickets["login"]
    visits = {
        world.staff: [
            "/tickets",
            "/tickets?status=OPEN",
            f"/tickets/{ticket}",
            "/tickets/new",
            "/tasks",
            "/tasks/1",
            "/notifications",
            "/tickets/99999",
        ],
        world.admin: ["/members", "/tokens", "/tasks"],
        world.customer: [
            "/tickets",
            f"/tickets/{ticket}",
            "/tasks",
            "/notifications",
            "/members",
            "/settings/notifications",
        ],
    }
    fragments = {
        world.staff: [
            "/tasks/1",
            "/tasks/2",
            "/tasks/3",
            "/tasks?newer_than=0",
            "/notifications/badge?seen=0",
            "/health/badge",
            "/watch?bell=-1&h=&list=tasks",
            f"/tickets/{ticket}",
        ],
        world.customer: ["/notifications/badge?seen=0"],
    }
    ZH.missing.clear()
    for user, urls in visits.items():
        page = await page_as(user)
        for url in urls:
            r = await page.get(url, headers={"Accept": "text/html"})
            assert r.status_code in (200, 403, 404), url
            assert 'lang="zh-Hans"' in r.text, url
        for url in fragments.get(user, []):
            assert (await page.hx_get(url)).status_code == 200, url
    admin = await page_as(world.admin)
    await admin.hx_post("/tokens", {"name": "脚本"})
    await admin.hx_post("/members", {"email": "nobody@x.test", "role": "STAFF"})
    staff = await page_as(world.staff)
    await staff.hx_post("/exports", {})
    await staff.hx_post("/exports", {})
    await staff.hx_post(f"/tickets/{ticket}/reminder", {"preset": "custom", "at": "bad"})
    assert ZH.missing == set()
    r = await staff.get("/tickets")
    assert "导出这些工单" in r.text and "工单" in r.text


async def test_sign_in_page_follows_the_browser(page_as, world) -> None:
    anonymous = await page_as(None)
    r = await anonymous.get("/login", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert 'lang="zh-Hans"' in r.text and "登录 taskdesk" in r.text
    r = await anonymous.get("/login", headers={"Accept-Language": "en-GB"})
    assert 'lang="en"' in r.text and "Sign in to taskdesk" in r.text


async def test_the_users_setting_wins(page_as, world) -> None:
    page = await page_as(world.staff)  # locale "en"
    r = await page.get("/tickets", headers={"Accept-Language": "zh-CN"})
    assert 'lang="en"' in r.text and "Export these tickets" in r.text
