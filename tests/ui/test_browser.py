"""The pages in a real browser (Debian's headless chromium) against a real uvicorn server and a
real worker process: export and follow it, double click, reload mid-task, a reminder reaching
its assignee, a customer's view, and the health warning when the worker stops.

Set TASKDESK_SCREENSHOTS=docs to refresh the README's screenshots.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from desk.core.clock import utcnow
from desk.reads import tasks as reads
from desk.work import reminders
from tests.helpers import running_workers, wait_for
from tests.ui.browser import browser_page, give_passwords, needs_chromium, running_server, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SLOW = 30_000  # ms: a worker process has to start, or a poll come round


@pytest.fixture
async def site(rt, world, settings, tmp_path):
    """The server's URL; the test's runtime uses real time, like the server and worker."""
    rt.clock = utcnow
    await give_passwords(rt)
    with running_server(settings, tmp_path / "server.log") as url:
        yield url


async def shot(page, tmp_path: Path, name: str) -> None:
    folder = os.environ.get("TASKDESK_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    await page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


async def mark_document(page) -> None:
    await page.evaluate("window.__sameDocument = true")


async def same_document(page) -> bool:
    """True while no reload or navigation happened since mark_document."""
    return bool(await page.evaluate("window.__sameDocument === true"))


async def test_export_follows_the_task_to_a_download(site, rt, world, settings, tmp_path) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        await page.get_by_label("Open", exact=True).check()
        await expect(page.locator("#ticket-list .count")).to_contain_text("3 tickets match")
        assert "status=OPEN" in page.url  # shareable
        await mark_document(page)
        await page.get_by_role("button", name="Export these tickets").click()
        row = page.locator("#tasks .task").first
        await expect(row).to_have_attribute("data-status", "Queued")
        await expect(page.locator("#export-msg")).to_contain_text("is queued")
        assert await same_document(page)

        await page.reload()  # no worker yet: the row is still there and still polling
        row = page.locator("#tasks .task").first
        await expect(row).to_have_attribute("data-status", "Queued")
        await expect(row).to_have_attribute("data-poll", "")
        await mark_document(page)
        with running_workers(settings, tmp_path):
            await expect(row).to_have_attribute("data-status", "Completed", timeout=SLOW)
            assert await same_document(page)
            await expect(row).to_contain_text("3 rows exported.")
            await expect(row).not_to_have_attribute("data-poll", "")
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            await shot(page, tmp_path, "workspace")

            async with page.expect_download() as info:
                await row.get_by_role("link", name="Download CSV").click()
            download = await info.value
            raw = await asyncio.to_thread(Path(await download.path()).read_bytes)
            data = raw.decode("utf-8-sig")
            rows = list(csv.reader(io.StringIO(data)))
            assert rows[0][:4] == ["id", "title", "status", "priority"]
            assert sorted(r[1] for r in rows[1:]) == sorted(
                ["Cannot log in", "Printer on fire", '\'=HYPERLINK("http://x","click")']
            )
            assert {r[2] for r in rows[1:]} == {"OPEN"}

            await page.goto("/tasks")
            await expect(page.locator(".task").first).to_have_attribute("data-status", "Completed")
            await shot(page, tmp_path, "tasks")


async def test_double_click_export_makes_one_task(site, rt, world, tmp_path) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        button = page.get_by_role("button", name="Export these tickets")
        await button.dblclick()
        await expect(page.locator("#export-msg")).not_to_be_empty()
        await expect(page.locator("#tasks .task")).to_have_count(1)
        await button.click()
        await expect(page.locator("#export-msg")).to_contain_text(
            "Already exporting — following the existing task"
        )
        await expect(page.locator("#tasks .task")).to_have_count(1)
    assert len((await reads.list_tasks(rt.pg, world.staff, world.team)).items) == 1


async def test_reminder_reaches_the_assignee_without_reload(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import expect

    ticket = world.tickets["login"]  # assigned to Chen
    with running_workers(settings, tmp_path):
        async with browser_page(site) as page:
            await sign_in(page, "chen@acme.test")
            await page.wait_for_url("**/tickets")
            await page.goto(f"/tickets/{ticket}")
            due = datetime.now(UTC) + timedelta(seconds=6)  # Chen's time zone is UTC
            await page.get_by_label("Or at a time of your choice").fill(
                due.strftime("%Y-%m-%dT%H:%M:%S")
            )
            await page.get_by_role("button", name="Set reminder").click()
            reminders_box = page.locator("#reminders")
            await expect(reminders_box).to_contain_text("Reminder scheduled.")
            pending = reminders_box.locator(".task").first
            await expect(pending).to_contain_text("Due ")
            await expect(pending).to_have_attribute("data-poll", "")
            await mark_document(page)
            await expect(page.locator("#bell .count")).to_have_text("1", timeout=SLOW)
            await expect(page.locator("#toast")).to_contain_text("Cannot log in")
            await expect(reminders_box).to_contain_text("Reminded the assignee.", timeout=SLOW)
            assert await same_document(page)
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            await shot(page, tmp_path, "ticket")

            await page.locator("#bell").click()
            await expect(page.locator(".note.unread")).to_have_count(1)
            await page.get_by_role("button", name="Mark all as read").click()
            await expect(page.locator(".note.unread")).to_have_count(0)
            await expect(page.locator("#bell .count")).to_have_text("0")


async def test_customer_sees_own_tickets_and_no_reminders(site, rt, world, tmp_path) -> None:
    from playwright.async_api import expect

    await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=60)
    async with browser_page(site) as page:
        await sign_in(page, "lin@acme.test")
        await page.wait_for_url("**/tickets")
        await expect(page.get_by_role("heading", name="My tickets")).to_be_visible()
        table = page.locator("#ticket-list table")
        await expect(table).to_contain_text("Cannot log in")
        await expect(table).not_to_contain_text("Printer on fire")  # Wang's
        await page.get_by_role("link", name="Cannot log in").click()
        await expect(page.get_by_role("heading", name="Details")).to_be_visible()
        await expect(page.locator("body")).not_to_contain_text("Remind")
        await page.goto("/tasks")
        await expect(page.locator("main")).not_to_contain_text("Reminder")
        await page.goto(f"/tickets/{world.tickets['printer']}")
        await expect(page.get_by_role("heading", name="Not found")).to_be_visible()


async def test_health_warning_when_the_worker_stops(site, rt, world, settings, tmp_path) -> None:
    from playwright.async_api import expect

    with running_workers(settings, tmp_path) as (worker,):
        async with browser_page(site) as page:
            await sign_in(page, "chen@acme.test")
            await page.wait_for_url("**/tickets")
            await page.reload()  # until the worker registered, the first badge may say none
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            await mark_document(page)
            worker.terminate()
            await wait_for(lambda: _stopped(worker), timeout=30, what="worker exit")
            warning = page.get_by_test_id("no-worker")
            await expect(warning).to_be_visible(timeout=SLOW)
            await expect(warning).to_contain_text("tasks will wait until one runs")
            assert await same_document(page)


async def _stopped(worker) -> bool:
    return not worker.alive()
