"""The demo as a newcomer sees it, in a real browser: Chen (staff) and Zhou (admin, in Chinese)
on the seeded "Acme Support" data, with tasks in several real states. These pictures are the
README's screenshots: set TASKDESK_SCREENSHOTS=docs to write them there."""

from __future__ import annotations

import os
import re

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.seed.demo import DEMO_PASSWORD, seed_demo
from desk.work import reminders, tasks
from tests.helpers import running_workers
from tests.ui.browser import browser_page, needs_chromium, running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]
SLOW = 30_000


async def _ids(rt) -> dict[str, int]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT id, email FROM app_user"))
        people = {r.email.split("@")[0]: r.id for r in rows}
        team = (
            await conn.execute(sa.text("SELECT id FROM team WHERE name = 'Acme Support'"))
        ).scalar_one()
        ticket = (
            await conn.execute(
                sa.text(
                    "SELECT id FROM ticket WHERE team_id = :t AND assignee_id = :c AND status = 'OPEN' "
                    "ORDER BY id LIMIT 1"
                ),
                {"t": team, "c": people["chen"]},
            )
        ).scalar_one()
    return {"team": team, "ticket": ticket, **people}


async def _shot(page, tmp_path, name: str, *, full_page: bool = True) -> None:
    folder = os.environ.get("TASKDESK_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    await page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=full_page)


async def _sign_in(page, email: str, password: str) -> None:
    await page.goto("/login")
    await page.locator("#email").fill(email)
    await page.locator("#password").fill(password)
    await page.locator("form.login button[type=submit]").click()
    await page.wait_for_url("**/tickets")


async def test_demo_workspace_tasks_and_ticket(rt, settings, tmp_path) -> None:
    from playwright.async_api import expect

    rt.clock = utcnow
    await seed_demo(rt)
    ids = await _ids(rt)
    async with rt.engine.begin() as conn:  # the README shows Chen's pages in English
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'en' WHERE id = :u"), {"u": ids["chen"]}
        )
    chen, team, ticket = ids["chen"], ids["team"], ids["ticket"]
    # Before any worker runs: two exports wait, one is cancelled, a reminder is rescheduled.
    await tasks.create_export(rt, chen, team, {"status": ["OPEN"]})
    await tasks.create_export(rt, chen, team, {"priority": ["URGENT", "HIGH"], "assignment": "me"})
    cancelled = await tasks.create_export(rt, chen, team, {"q": "printer"})
    await tasks.cancel_task(rt, chen, cancelled.id)
    await reminders.schedule_reminder(rt, chen, ticket, in_minutes=60, note="Call back")
    await reminders.schedule_reminder(rt, chen, ticket, in_minutes=24 * 60, note="Call back")

    with (
        running_server(settings, tmp_path / "server.log") as url,
        running_workers(settings, tmp_path),
    ):
        async with browser_page(url) as page:
            await _sign_in(page, "chen@acme.test", DEMO_PASSWORD)
            await page.goto("/tickets?status=OPEN&status=PENDING")
            # The test's own exports and reminders: the demo's time rules and SLA timers run too.
            ours = page.locator(".kind", has_text=re.compile(r"^(Export|Reminder) "))
            rows = page.locator("#tasks .task").filter(has=ours)
            await expect(rows.filter(has_text="Completed")).to_have_count(2, timeout=SLOW)
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            await expect(page.locator("#ticket-list .count")).to_contain_text("tickets match")
            await _shot(page, tmp_path, "workspace", full_page=False)

            await page.goto("/tasks")
            await expect(page.locator(".task").filter(has=ours)).to_have_count(5)
            await expect(page.locator(".task").filter(has_text="Superseded")).to_have_count(1)
            await _shot(page, tmp_path, "tasks")

            await page.goto(f"/tickets/{ticket}")
            await expect(page.locator("#reminders")).to_contain_text("Call back")
            await expect(page.get_by_role("button", name="Cancel reminder")).to_be_visible()
            await _shot(page, tmp_path, "ticket")

        async with browser_page(url) as page:  # Zhou works in Chinese
            await _sign_in(page, "zhou@acme.test", DEMO_PASSWORD)
            await expect(page.get_by_role("heading", name="工单")).to_be_visible()
            await expect(page.locator("html")).to_have_attribute("lang", "zh-Hans")
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.reload()
            await expect(page.locator("#health")).to_contain_text("工作进程", timeout=SLOW)
            # Chen's reminder for tomorrow is active, and the team's next time-rule run (the demo
            # has time rules): the phone's chip points at the panel.
            chip = page.get_by_test_id("task-chip")
            await expect(chip).to_contain_text("2 个进行中的任务", timeout=SLOW)
            await _shot(page, tmp_path, "workspace-zh-phone", full_page=False)
