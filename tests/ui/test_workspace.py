"""The staff workspace: filters in the URL, paging and counts, Export (queued at once, attach on
a second click), the ticket form, reminders, notifications and the health badge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from desk.helpdesk import notifications
from desk.reads import tasks as reads
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import add_ticket


async def test_filters_live_in_the_url(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.get("/tickets?status=OPEN&priority=URGENT")
    assert "Printer on fire" in r.text and "Cannot log in" not in r.text
    assert "1 ticket matches" in r.text
    assert '<input type="hidden" name="status" value="OPEN">' in r.text  # Export uses them
    r = await page.hx_get("/tickets?assignment=me")
    assert r.headers["vary"] == "HX-Request" and "<html" not in r.text
    assert "Cannot log in" in r.text and "Printer on fire" not in r.text
    r = await page.get(f"/tickets?assignment=user:{world.staff}&q=LOG")
    assert "Cannot log in" in r.text and "1 ticket matches" in r.text


async def test_paging_with_counts(page_as, world, rt) -> None:
    for i in range(30):
        await add_ticket(rt, world.team, world.customer, f"Bulk {i:02d}")
    page = await page_as(world.staff)
    r = await page.get("/tickets?q=Bulk")
    assert "30 tickets match" in r.text and "showing 1\u201325" in r.text
    next_link = next(p for p in r.text.split('href="') if "after=" in p).split('"', 1)[0]
    r = await page.get(next_link.replace("&amp;", "&"))
    assert r.status_code == 200 and "showing 26\u201330" in r.text and "First page" in r.text


async def test_export_returns_at_once_and_attaches_on_a_second_click(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    r = await page.hx_post("/exports", {"status": "OPEN"})
    assert r.status_code == 202
    task = (await reads.list_tasks(rt.pg, world.staff, world.team)).items[0]
    assert task.status == "WAITING" and task.filters == {"assignment": "anyone", "status": ["OPEN"]}
    assert f"Export #{task.id} is queued" in r.text and 'href="/tasks"' in r.text
    assert 'id="tasks" hx-swap-oob="innerHTML"' in r.text
    assert f'id="task-{task.id}"' in r.text and "Queued" in r.text and "Open tickets" in r.text
    r = await page.hx_post("/exports", {"status": "OPEN"})
    assert r.status_code == 409
    assert f"Already exporting — following the existing task #{task.id}" in r.text
    assert len((await reads.list_tasks(rt.pg, world.staff, world.team)).items) == 1


async def test_export_quota_is_explained(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    for q in ("a", "b", "c"):
        await tasks.create_export(rt, world.staff, world.team, {"q": q})
    r = await page.hx_post("/exports", {"q": "d"})
    assert r.status_code == 429 and "exports running" in r.text


async def test_ticket_form_changes_fields(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    ticket = world.tickets["printer"]
    r = await page.hx_post(
        f"/tickets/{ticket}",
        {"status": "PENDING", "priority": "HIGH", "assignee_id": str(world.admin)},
    )
    assert r.status_code == 200 and "Saved." in r.text
    assert (
        '<option value="PENDING" selected>' in r.text
        and f'<option value="{world.admin}" selected>' in r.text
    )
    r = await page.hx_get(f"/tickets/{ticket}", headers={"HX-Target": "ticket-fields"})
    assert r.text.lstrip().startswith('<section id="ticket-fields"')


async def test_create_ticket_as_customer(page_as, world) -> None:
    lin = await page_as(world.customer)
    r = await lin.hx_post(
        "/tickets", {"title": "My screen is dark", "body": "Since Monday", "priority": "HIGH"}
    )
    assert r.status_code == 204
    r = await lin.get(r.headers["HX-Redirect"])
    assert "My screen is dark" in r.text and "Since Monday" in r.text


async def test_reminder_presets_in_the_users_timezone(page_as, world, rt, clock) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET timezone = 'Asia/Shanghai' WHERE id = :u"),
            {"u": world.staff},
        )
    clock.now = datetime(2026, 11, 29, 20, 30, tzinfo=UTC)  # 04:30 on the 30th in Shanghai
    page = await page_as(world.staff)
    ticket = world.tickets["login"]
    r = await page.hx_post(f"/tickets/{ticket}/reminder", {"preset": "tomorrow9"})
    assert r.status_code == 200 and "Reminder scheduled." in r.text
    pending = await reminders.pending_reminder(rt, world.staff, ticket)
    assert pending.run_at == datetime(2026, 12, 1, 1, 0, tzinfo=UTC)  # 09:00 on the 1st, +08:00
    assert (
        "Due 2026-12-01 09:00" in r.text and "Cancel reminder" in r.text and "Scheduled" in r.text
    )
    r = await page.hx_post(f"/tickets/{ticket}/reminder", {"preset": "1h"})
    assert (
        await reminders.pending_reminder(rt, world.staff, ticket)
    ).run_at == clock.now + timedelta(hours=1)
    assert "Superseded by a reminder" in r.text  # the earlier one, skipped, says why
    r = await page.hx_post(f"/tickets/{ticket}/reminder", {"preset": "1h"})
    assert r.status_code == 409 and "already exists; following it" in r.text
    r = await page.hx_post(
        f"/tickets/{ticket}/reminder", {"preset": "custom", "at": "2026-11-30T10:15:30"}
    )
    assert (await reminders.pending_reminder(rt, world.staff, ticket)).run_at == datetime(
        2026, 11, 30, 2, 15, 30, tzinfo=UTC
    )
    r = await page.hx_post(
        f"/tickets/{ticket}/reminder", {"preset": "custom", "at": "2026-11-29T10:00"}
    )
    assert (
        r.status_code == 422
        and "must be in the future" in r.text
        and 'aria-invalid="true"' in r.text
    )
    r = await page.hx_post(f"/tickets/{ticket}/reminder", {"preset": "custom", "at": "soon"})
    assert r.status_code == 422 and "pick a date and time" in r.text
    r = await page.hx_post(f"/tickets/{ticket}/reminder/cancel")
    assert r.status_code == 200 and "Reminder cancelled." in r.text
    assert await reminders.pending_reminder(rt, world.staff, ticket) is None


async def test_fired_and_skipped_reminders_show_on_the_ticket(page_as, world, rt, clock) -> None:
    ticket = world.tickets["login"]
    task = await reminders.schedule_reminder(rt, world.admin, ticket, in_minutes=1)
    clock.advance(61)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    chen = await page_as(world.staff)
    r = await chen.get(f"/tickets/{ticket}")
    assert "Earlier reminders" in r.text and "Reminded the assignee." in r.text
    # The assignee's bell: one unread, and a toast when it grew since the last poll.
    r = await chen.hx_get("/notifications/badge?seen=0")
    assert 'data-unread="1"' in r.text and 'id="toast"' in r.text and "Cannot log in" in r.text
    r = await chen.hx_get("/notifications/badge?seen=1")
    assert 'data-unread="1"' in r.text and 'id="toast"' not in r.text
    # Skipped: resolved before it was due.
    again = await reminders.schedule_reminder(rt, world.admin, ticket, in_minutes=1)
    await chen.hx_post(f"/tickets/{ticket}", {"status": "RESOLVED"})
    clock.advance(61)
    assert await execute(rt, registry(), again.id, again.run) == "done"
    r = await chen.get(f"/tickets/{ticket}")
    assert "Skipped" in r.text and "the ticket was resolved before the reminder was due" in r.text
    assert "reopen it to set a reminder" in r.text


async def test_notifications_list_and_mark_read(page_as, world, rt) -> None:
    async with rt.engine.begin() as conn:
        for text in ("First note", "Second note"):
            await notifications.insert_many(
                conn,
                user_ids=[world.staff],
                team_id=world.team,
                task_id=None,
                kind="REMINDER",
                text=text,
                link=f"/tickets/{world.tickets['login']}",
            )
    page = await page_as(world.staff)
    r = await page.get("/notifications")
    assert "First note" in r.text and "Second note" in r.text and r.text.count("Mark as read") == 2
    first = (await notifications.list_notifications(rt, world.staff)).items[-1]
    r = await page.hx_post("/notifications/read", {"id": str(first.id)})
    assert r.headers["HX-Trigger"] == "notifications-changed" and r.text.count("Mark as read") == 1
    assert await notifications.unread_count(rt, world.staff) == 1
    r = await page.hx_post("/notifications/read", {})
    assert await notifications.unread_count(rt, world.staff) == 0
    r = await page.hx_post("/notifications/read", {"id": "x"})
    assert r.status_code == 422
    # Someone else's notification id changes nothing.
    await (await page_as(world.customer)).hx_post("/notifications/read", {"id": str(first.id)})


async def test_health_badge_warns_without_a_worker(page_as, world) -> None:
    r = await (await page_as(world.staff)).hx_get("/health/badge")
    assert r.status_code == 200 and 'data-v="1-0"' in r.text  # the watcher's version of it
    assert "No worker is running: tasks will wait until one runs. Nothing is lost." in r.text
    assert 'role="alert"' in r.text


async def test_pages_watch_bell_health_and_list_with_one_watcher(page_as, world) -> None:
    r = await (await page_as(world.staff)).get("/tickets")
    assert r.text.count('id="watch"') == 1  # ui.js asks /watch for all of these at once
    assert 'data-seen="-1"' in r.text and 'id="health" class="health" data-v=""' in r.text
    assert 'data-list="tasks"' in r.text  # the tasks panel looks for new tasks
    assert "every " not in r.text and "load delay" not in r.text  # no timers of their own
    assert "X-CSRF-Token" in r.text and 'lang="en"' in r.text


async def test_history_restore_gets_the_whole_page(page_as, world) -> None:
    """The back button after a filtered (htmx) list asks for the page, not the fragment."""
    page = await page_as(world.staff)
    r = await page.hx_get("/tickets?status=OPEN", headers={"HX-History-Restore-Request": "true"})
    assert "<html" in r.text and 'id="ticket-list"' in r.text
