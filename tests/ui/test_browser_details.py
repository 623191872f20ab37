"""What a new user trips over, in a real browser (Debian's headless chromium) against a real
uvicorn server and, where it matters, a real worker: a double click is one export even when
the first finishes before the second would arrive, a toast closes and fades, on a phone a chip
shows the active task and jumps to it, the import form says which import runs, and a task
whose worker was killed says "Worker lost" until another worker resumes it.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.messages import message
from desk.helpdesk import notifications
from desk.imports import service as imports
from desk.reads import tasks as reads
from desk.work import tasks
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


async def _finished_exports(rt, world) -> int:
    page = await reads.list_tasks(rt.pg, world.staff, world.team, kind="EXPORT")
    return sum(1 for t in page.items if t.status == "COMPLETED")


async def test_double_click_is_one_export_even_when_the_first_finishes_first(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import Route, expect

    sent: list[str] = []
    disabled_while_posting: list[bool] = []

    async with browser_page(site) as page:
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        button = page.get_by_role("button", name="Export these tickets")

        async def hold(route: Route) -> None:
            sent.append(route.request.post_data or "")
            if len(sent) == 1:
                disabled_while_posting.append(await button.is_disabled())
            else:
                # A second post reaches the server only after the first export has finished:
                # the case where "one active export per filter" no longer protects anyone.
                await wait_for(
                    lambda: _finished_exports(rt, world), timeout=60, what="first export done"
                )
            await route.continue_()

        await page.route("**/exports", hold)
        with running_workers(settings, tmp_path):
            await button.dblclick()
            row = page.locator("#tasks .task").first
            await expect(row).to_have_attribute("data-status", "Completed", timeout=SLOW)
            await expect(button).to_be_enabled()
        await page.unroute("**/exports")
    assert disabled_while_posting == [True]
    assert "idempotency_key=" in sent[0]
    listed = await reads.list_tasks(rt.pg, world.staff, world.team, kind="EXPORT")
    assert len(listed.items) == 1, f"{len(sent)} posts made {len(listed.items)} exports"


async def _notify(rt, world, title: str) -> None:
    said = message(
        "reminder.notification", ticket=world.tickets["login"], title=title, status="OPEN"
    )
    async with rt.engine.begin() as conn:
        await notifications.insert_many(
            conn, user_ids=[world.staff], team_id=world.team, task_id=None, kind="REMINDER",
            text=said, link=f"/tickets/{world.tickets['login']}",
        )  # fmt: skip


async def test_toast_closes_with_its_button_and_fades_by_itself(site, rt, world) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        await expect(page.locator("#bell")).to_have_attribute(
            "hx-get", "/notifications/badge?seen=0"
        )
        toast = page.locator("#toast")
        await _notify(rt, world, "First")
        await expect(toast).to_contain_text("“First” is still open", timeout=SLOW)
        await page.get_by_role("button", name="Close this message").click()
        await expect(toast).to_be_hidden()
        await _notify(rt, world, "Second")
        await expect(toast).to_contain_text("“Second” is still open", timeout=SLOW)
        await expect(toast).to_be_hidden(timeout=SLOW)  # nobody touched it: it faded away


async def test_phone_chip_shows_the_active_task_and_jumps_to_it(site, rt, world) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        await page.set_viewport_size({"width": 390, "height": 844})
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        chip = page.get_by_test_id("task-chip")
        await expect(chip).to_be_hidden()
        await page.get_by_role("button", name="Export these tickets").click()  # no worker: queued
        await expect(chip).to_be_visible()
        await expect(chip).to_contain_text("1 active task")
        panel = page.locator("#tasks")
        assert not await panel.evaluate("e => e.getBoundingClientRect().top < innerHeight")
        task = (await reads.list_tasks(rt.pg, world.staff, world.team)).items[0]
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text(
                    "UPDATE background_task SET status = 'RUNNING', attempts = 1, progress = 0.42, "
                    "progress_current = 42, progress_total = 100, started_at = now(), "
                    "lease_until = now() + interval '10 minutes' WHERE id = :id"
                ),
                {"id": task.id},
            )
        await expect(chip).to_contain_text("1 active task · 42 %", timeout=SLOW)
        await chip.click()
        await expect(page.locator("#tasks-h")).to_be_in_viewport()


async def test_import_form_is_closed_while_an_import_runs(site, rt, world) -> None:
    from playwright.async_api import expect

    data = b"external_id,title\nE1,One\n"
    task = await imports.submit_import(rt, world.admin, world.team, "big.csv", data, "create")
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET status = 'RUNNING', progress = 0.42 WHERE id = :i"),
            {"i": task.id},
        )
    async with browser_page(site) as page:
        await sign_in(page, "zhou@acme.test")
        await page.wait_for_url("**/tickets")
        await page.goto("/imports")
        busy = page.get_by_test_id("import-busy")
        await expect(busy).to_contain_text(f"Import #{task.id} is running (42 %)")
        await expect(page.get_by_label("CSV file")).to_be_disabled()
        await expect(page.get_by_role("button", name="Start import")).to_be_disabled()
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text("UPDATE background_task SET status = 'COMPLETED' WHERE id = :i"),
                {"i": task.id},
            )
        await expect(busy).to_be_hidden(timeout=SLOW)
        await expect(page.get_by_label("CSV file")).to_be_enabled()


async def test_a_task_whose_worker_was_killed_says_so_and_resumes(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import expect

    # 80 steps of 0.1 s: a task still running when its worker is killed (as soon as the page
    # shows it running), and done soon after it resumes.
    task = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 80, "step_seconds": 0.1})
    async with browser_page(site) as page:
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")
        await page.goto("/tasks")
        row = page.locator(f"#task-{task.id}")
        with running_workers(settings, tmp_path, lease_seconds=3, heartbeat_ttl_seconds=3) as (
            worker,
        ):
            await expect(row).to_have_attribute("data-status", "Running", timeout=SLOW)
            worker.kill()
            await expect(row).to_have_attribute("data-status", "Worker lost", timeout=SLOW)
            await expect(row.get_by_test_id("worker-lost")).to_contain_text(
                "resumes when a worker is back"
            )
            await expect(page.get_by_test_id("no-worker")).to_be_visible(timeout=SLOW)
        with running_workers(settings, tmp_path, lease_seconds=3):
            await expect(row).to_have_attribute("data-status", "Completed", timeout=60_000)
