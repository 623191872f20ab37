"""The console's live overview in a real browser (Debian's headless chromium) against a real
server and worker: counts change without a reload as work is accepted and done, pushed by the
change stream (ui/static/ops.js, ui/console/live.py) and not by a timed poll, or by a slower poll
when the stream cannot be had; failures, a task's story and the phone layout render. Set
TASKDESK_SCREENSHOTS=docs to refresh docs/ops-*.png."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desk.core.clock import utcnow
from desk.work import tasks
from tests.console.conftest import fail
from tests.helpers import running_workers, wait_for
from tests.ui.browser import browser_page, give_passwords, needs_chromium, running_server, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SLOW = 30_000  # ms: a worker has to start, or the fallback poll come round
MARK = "x-live-refresh"  # on ops.js's reads of the live block; htmx's own poll lacks it


@pytest.fixture
async def site(rt, world, operator, settings, tmp_path):
    rt.clock = utcnow
    await give_passwords(rt)
    with running_server(settings, tmp_path / "server.log") as url:
        yield url


async def shot(page, tmp_path: Path, name: str, full_page: bool = True) -> None:
    folder = os.environ.get("TASKDESK_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    await page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=full_page)


async def test_the_overview_follows_the_work_without_reload(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import expect

    failed = await tasks.create_export(rt, world.staff, world.team, {"q": "broken"})
    await fail(rt, failed.id or 0, "Ticket 42 is locked by 'a migration'")
    async with browser_page(site) as page:
        reads = []  # the live block's reads
        page.on("request", lambda r: reads.append(r) if "/ops?watch=" in r.url else None)
        await sign_in(page, "ops@site.test")
        await page.wait_for_url("**/tickets")
        await page.goto("/ops")
        queued = page.get_by_test_id("total-queued")
        await expect(queued).to_have_text("0")
        await expect(page.locator("html")).to_have_attribute("data-live-state", "stream")
        await page.evaluate("window.__sameDocument = true")
        for _ in range(3):
            await tasks.submit_noop(rt, world.staff, world.team, {"steps": 2})
        await tasks.create_export(rt, world.admin, world.team, {})
        await expect(queued).to_have_text("4", timeout=SLOW)  # no worker yet: they wait
        with running_workers(settings, tmp_path):
            done = page.get_by_test_id("total-completed")
            await expect(done).to_have_text("4", timeout=SLOW)
            await expect(queued).to_have_text("0")
            await expect(page.locator(".chart rect.ok").first).to_be_visible()
            await expect(page.get_by_test_id("total-failed")).to_have_text("1")
            assert await page.evaluate("window.__sameDocument === true"), "no reload happened"
            assert reads and all(r.headers.get(MARK) == "1" for r in reads), "pushed, not polled"
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            await shot(page, tmp_path, "ops-overview")

            await page.goto("/ops/failures")
            await expect(page.locator(".group")).to_contain_text("Ticket N is locked by …")
            await shot(page, tmp_path, "ops-failures")
            await page.get_by_role("link", name="Retry all in this group").click()
            await expect(page.get_by_test_id("confirm-count")).to_contain_text("1 failed task")
            await page.get_by_role("button", name="Retry 1 tasks").click()
            await expect(page.get_by_test_id("group-done")).to_contain_text("1 task retried.")

            async def story_done():
                row = await tasks.get_task(rt, world.staff, failed.id or 0)
                return row.status == "COMPLETED"

            await wait_for(story_done, timeout=30, what="the retried export to complete")
            await page.goto(f"/ops/tasks/{failed.id}")
            await expect(page.get_by_test_id("story")).to_contain_text("Completed")
            await shot(page, tmp_path, "ops-task")
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.goto("/ops")
            await expect(page.get_by_test_id("total-completed")).to_have_text("5")
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, "the overview fits a phone without sideways scrolling"
            await shot(page, tmp_path, "ops-overview-phone", full_page=False)


async def test_without_its_stream_the_overview_polls(site, rt, world) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        # As if a proxy refused the stream: a 204 tells EventSource never to reconnect.
        await page.route("**/ops/live*", lambda route: route.fulfill(status=204))
        await sign_in(page, "ops@site.test")
        await page.wait_for_url("**/tickets")
        await page.goto("/ops")
        await expect(page.locator("html")).to_have_attribute("data-live-state", "polling")
        queued = page.get_by_test_id("total-queued")
        await expect(queued).to_have_text("0")
        await tasks.submit_noop(rt, world.staff, world.team, {"steps": 2})
        await expect(queued).to_have_text("1", timeout=SLOW)
