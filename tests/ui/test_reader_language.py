"""Server-written text in the reader's language: a Chinese reader sees export descriptions,
result summaries, skip reasons, quota messages and reminder notifications in Chinese, with
numbers and times formatted for them — while the stored English stays as it was."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from desk.imports import service as imports
from desk.ledger import run as ledger_run
from desk.work import exports, reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import bulk_tickets
from tests.helpers import export_over_the_limit
from ui import i18n, texts

ZH = i18n.catalog("zh_Hans")
EN = i18n.catalog("en")


async def _chinese(rt, user_id: int) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE app_user SET locale = 'zh-CN', timezone = 'Asia/Shanghai' WHERE id = :u"
            ),
            {"u": user_id},
        )


async def test_task_rows_speak_chinese(page_as, world, rt, clock) -> None:
    await _chinese(rt, world.staff)
    export = await tasks.create_export(rt, world.staff, world.team, {"priority": ["URGENT"]})
    await execute(rt, registry(), export.id, export.run)
    ticket = world.tickets["login"]
    first = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=5)
    await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=10)
    due_local = (clock() + timedelta(minutes=10)).astimezone(ZoneInfo("Asia/Shanghai"))
    page = await page_as(world.staff)
    ZH.missing.clear()
    html = (await page.get("/tasks")).text
    assert "全部工单（紧急优先级）" in html and "All urgent tickets" not in html  # noqa: RUF001
    assert "已导出 1 行。" in html and "row exported" not in html
    assert f"已被 {due_local:%Y-%m-%d %H:%M} 的新提醒取代。" in html and "Superseded" not in html
    assert ZH.missing == set()
    stored = await tasks.get_task(rt, world.staff, first.id)
    assert stored.result_summary.startswith("Superseded by a reminder for ")  # English kept


async def test_reminder_notification_and_its_toast_speak_chinese(page_as, world, rt, clock) -> None:
    await _chinese(rt, world.staff)
    ticket = world.tickets["login"]  # assigned to Chen (staff)
    fired = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=1, note="回电")
    clock.advance(61)
    await execute(rt, registry(), fired.id, fired.run)
    page = await page_as(world.staff)
    listing = (await page.get("/notifications")).text
    assert f"提醒：工单 #{ticket}“Cannot log in”仍为“打开”。备注：回电" in listing  # noqa: RUF001
    toast = (await page.hx_get("/notifications/badge?seen=0")).text
    assert "提醒：工单" in toast and "is still open" not in toast  # noqa: RUF001
    assert "data-toast-close" in toast and 'aria-label="关闭此消息"' in toast
    row = (await page.hx_get(f"/tasks/{fired.id}")).text
    assert "已提醒处理人。" in row


async def _cancelled_while_finishing(rt, world, clock) -> int:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    lease = timedelta(seconds=30)
    await ledger_run.claim(rt.pg, task.id, task.run, "e1", now=clock(), lease=lease)
    await tasks.cancel_task(rt, world.staff, task.id)
    said = exports.summary(4)
    await ledger_run.complete(
        rt.pg, task.id, "e1", now=clock(), summary=said.text, summary_key=said.key,
        summary_params=said.params, expires_at=clock() + timedelta(hours=1), result_bytes=9,
    )  # fmt: skip
    return task.id


async def test_a_row_cancelled_while_finishing_says_so_in_each_language(
    page_as, world, rt, clock
) -> None:
    task_id = await _cancelled_while_finishing(rt, world, clock)
    english = (await (await page_as(world.staff)).hx_get(f"/tasks/{task_id}")).text
    assert "Cancelled while finishing; the file was discarded." in english
    assert "Download CSV" not in english and "/download" not in english
    await _chinese(rt, world.staff)
    ZH.missing.clear()
    row = (await (await page_as(world.staff)).hx_get(f"/tasks/{task_id}")).text
    assert "在完成时被取消；文件已丢弃。" in row and "Cancelled while" not in row  # noqa: RUF001
    assert "下载" not in row and "/download" not in row
    assert ZH.missing == set()


async def test_an_import_cancelled_while_finishing_shows_its_counts_and_why(
    page_as, world, rt, clock
) -> None:
    data = b"external_id,title,status,priority,assignee_email,creator_email\nK-1,Kept,OPEN,LOW,,\n"
    upload = await imports.store_upload(rt, world.admin, world.team, "k.csv", data)
    task = await imports.start_import(rt, world.admin, world.team, upload.id, "create")
    lease = timedelta(seconds=30)
    await ledger_run.claim(rt.pg, task.id, task.run, "e1", now=clock(), lease=lease)
    counts = {"created": 1, "updated": 0, "unchanged": 0, "rejected": 0}
    await ledger_run.pulse(rt.pg, task.id, "e1", now=clock(), lease=lease, stats=counts)
    await tasks.cancel_task(rt, world.admin, task.id)
    await ledger_run.complete(rt.pg, task.id, "e1", now=clock(), summary="x", stats=counts)
    await _chinese(rt, world.admin)
    row = (await (await page_as(world.admin)).hx_get(f"/tasks/{task.id}")).text
    assert "新建 1，更新 0，未变 0，拒绝 0。" in row  # noqa: RUF001
    assert "在完成时被取消；已导入的行仍保留。" in row  # noqa: RUF001


async def test_an_export_over_the_row_limit_says_why_in_chinese(page_as, world, rt) -> None:
    await bulk_tickets(rt, world.team, world.customer, 1_200)
    task_id = await export_over_the_limit(rt, world.staff, world.team, 1_000)
    await _chinese(rt, world.staff)
    row = (await (await page_as(world.staff)).hx_get(f"/tasks/{task_id}")).text
    assert "1,204 行超过了 1,000 行的上限；请缩小筛选范围。" in row  # noqa: RUF001
    assert "rows is more than" not in row
    stored = await tasks.get_task(rt, world.staff, task_id)
    assert stored.last_error.startswith("1,204 rows is more than the limit")  # English kept


async def test_quota_message_speaks_chinese(page_as, world, rt) -> None:
    await _chinese(rt, world.staff)
    for q in ("a", "b", "c"):
        await tasks.create_export(rt, world.staff, world.team, {"q": q})
    r = await (await page_as(world.staff)).hx_post("/exports", {"q": "d"})
    assert r.status_code == 429
    wanted = "你已有 3 个导出正在进行；请等待其完成后再试。"  # noqa: RUF001
    assert wanted in r.text and "exports running" not in r.text


def test_english_description_matches_the_desk_sentence() -> None:
    from desk.helpdesk.filters import parse_filter

    for raw in (
        {},
        {"priority": ["URGENT"]},
        {"status": ["OPEN", "PENDING"], "priority": ["HIGH", "URGENT"], "assignment": "me"},
        {"assignment": "unassigned", "q": "vpn"},
        {"assignment": "user", "assignee_id": 7},
    ):
        assert texts.describe_export(EN, "en", raw) == parse_filter(raw).describe()


def test_numbers_follow_the_locale() -> None:
    assert texts.number("en", 1350030) == "1,350,030"
    assert texts.number("zh_Hans", 1350030) == "1,350,030"
    assert texts.number("en", None) == ""


def test_a_row_without_a_key_shows_its_english_or_a_known_translation() -> None:
    assert texts.say(ZH, "zh_Hans", None, None, "Reminded the assignee.") == "已提醒处理人。"
    assert texts.say(ZH, "zh_Hans", None, None, "Something new.") == "Something new."
    assert (
        texts.say(ZH, "zh_Hans", "export.done", {"rows": 1350030}, "x") == "已导出 1,350,030 行。"
    )
