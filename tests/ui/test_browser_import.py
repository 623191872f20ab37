"""The import page in a real browser (Debian's headless chromium) against a real uvicorn server
and a real worker process: Zhou uploads a CSV with one bad row, the Queued row appears without a
reload, it completes on its own, and the rejected-rows report names the bad row.

Set TASKDESK_SCREENSHOTS=docs to refresh docs/import.png.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
from pathlib import Path

import pytest

from desk.core.clock import utcnow
from desk.helpdesk import tickets
from desk.helpdesk.filters import parse_filter
from desk.imports import service as imports
from tests.helpers import running_workers
from tests.ui.browser import (
    browser_page,
    give_passwords,
    hide,
    needs_chromium,
    running_server,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SLOW = 30_000  # ms: a worker process has to start, or a poll come round
CSV = (
    b"external_id,title,status,priority,assignee_email\n"
    b"ZD-101,Printer jams on the 3rd floor,OPEN,HIGH,chen@acme.test\n"
    b"ZD-102,VPN drops every hour,PENDING,NORMAL,\n"
    b"ZD-103,Mystery ticket,DONE,LOW,\n"
)


@pytest.fixture
async def site(rt, world, settings, tmp_path):
    """The server's URL; the test's runtime uses real time, like the server and worker."""
    rt.clock = utcnow
    await give_passwords(rt)
    with running_server(settings, tmp_path / "server.log") as url:
        yield url


async def test_import_a_csv_with_one_bad_row(site, rt, world, settings, tmp_path) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        await sign_in(page, "zhou@acme.test")
        await page.wait_for_url("**/tickets")
        await page.get_by_role("link", name="Import tickets").click()
        await expect(page.get_by_role("heading", name="Import tickets", exact=True)).to_be_visible()
        await expect(page.locator("#tasks")).to_contain_text("No imports yet.")
        await page.evaluate("window.__sameDocument = true")

        await page.get_by_label("CSV file").set_input_files(
            {"name": "zendesk-export.csv", "mimeType": "text/csv", "buffer": CSV}
        )
        await expect(page.get_by_label("Create", exact=False).first).to_be_checked()
        await page.get_by_role("button", name="Start import").click()
        await expect(page.locator("#import-msg")).to_contain_text("is queued")
        row = page.locator("#tasks .task").first
        await expect(row).to_have_attribute("data-status", "Queued")
        await expect(row).to_contain_text("zendesk-export.csv")
        await expect(row).to_contain_text("add new tickets only")
        await expect(row).to_have_attribute("data-poll", "")

        with running_workers(settings, tmp_path):
            await expect(row).to_have_attribute("data-status", "Completed", timeout=SLOW)
            summary = row.get_by_test_id("import-summary")
            await expect(summary).to_have_text("2 created, 0 updated, 0 unchanged, 1 rejected.")
            await expect(row).not_to_have_attribute("data-poll", "")
            assert await page.evaluate("window.__sameDocument === true"), "the page reloaded"
            await expect(page.locator("#health")).to_contain_text("1 worker", timeout=SLOW)
            folder = os.environ.get("TASKDESK_SCREENSHOTS") or str(tmp_path)
            await page.screenshot(path=os.path.join(folder, "import.png"), full_page=True)

        async with page.expect_download() as info:
            await row.get_by_role("link", name="Download rejected rows").click()
        download = await info.value
        assert download.suggested_filename.endswith("-rejected-rows.csv")
        raw = await asyncio.to_thread(Path(await download.path()).read_bytes)
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"))))
        assert rows[0] == ["row", "column", "reason"]
        assert len(rows) == 2 and rows[1][:2] == ["4", "status"] and "DONE" in rows[1][2]

    page_of = await tickets.list_tickets(rt, world.admin, world.team, parse_filter({}), first=50)
    imported = {t.external_id: t for t in page_of.items if t.external_id}
    assert set(imported) == {"ZD-101", "ZD-102"}
    assert imported["ZD-101"].assignee_id == world.staff


async def test_a_hidden_tab_holds_the_controls_poll_and_sends_it_when_shown(
    site, rt, world
) -> None:
    """The form's controls follow a queued import on the rows' schedule (no worker runs here, so
    it stays queued); while the tab is hidden they ask nothing, and ask at once when shown."""
    from playwright.async_api import expect

    await imports.submit_import(rt, world.admin, world.team, "big.csv", CSV, "create")
    async with browser_page(site) as page:
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url))
        await page.clock.install()  # the page's timers run on a clock the test moves
        await sign_in(page, "zhou@acme.test")
        await page.wait_for_url("**/tickets")
        await page.goto("/imports")
        controls = page.locator("#import-controls")
        await expect(controls).to_have_attribute("data-poll-self", "")
        await expect(controls).to_have_attribute("hx-trigger", "load delay:1s, resume")

        def polls() -> int:
            return sum("/imports/controls?" in u for u in asked)

        await hide(page, True)
        before = polls()
        for _ in range(3):  # 30 s of page time: a visible page would have asked 5 times
            await page.clock.run_for(10_000)
            await page.wait_for_load_state("networkidle")
        assert polls() - before <= 1, asked  # one in flight when hidden, at most
        await expect(controls).to_have_attribute("data-poll-held", "")

        async with page.expect_request("**/imports/controls?*") as shown:
            await hide(page, False)
        assert "since=" in (await shown.value).url  # the same schedule, carried on
        await expect(controls).not_to_have_attribute("data-poll-held", "")
        await expect(controls).to_contain_text("is queued")
