"""The conversation in a real browser (Debian's headless chromium), a real server, a real
worker and a real SMTP server, as the issue's newcomer tries it: Lin opens a ticket with a
screenshot; Chen, with it open, sees Lin's next message arrive without a reload, adds a note Lin
never sees, replies and marks it pending; the reply reaches Lin by e-mail, threaded; Lin writes
back and the ticket reopens."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from tests.helpers import WorkerProcess, wait_for
from tests.smtp_server import SmtpServer
from tests.ui.browser import browser_page, give_passwords, needs_chromium, running_server, sign_in
from tests.ui.test_browser import mark_document, same_document

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SLOW = 30_000  # ms: a worker process has to start, or the feed come round
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99"
    b"=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


async def _newest_ticket(rt, creator: int) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT max(id) FROM ticket WHERE creator_id = :c")
        return int((await conn.execute(q, {"c": creator})).scalar_one())


async def test_lin_and_chen_talk_through_a_ticket(
    rt, world, settings, smtp: SmtpServer, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    rt.clock = utcnow
    await give_passwords(rt)
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(PNG)
    worker = WorkerProcess(settings, tmp_path / "worker.log", smtp_url=smtp.url)
    try:
        with running_server(settings, tmp_path / "server.log") as url:
            async with browser_page(url) as lin, browser_page(url) as chen:
                await sign_in(lin, "lin@acme.test")
                await lin.wait_for_url("**/tickets")
                await lin.goto("/tickets/new")
                await lin.get_by_label("Title").fill("Printer shows error 42")
                await lin.get_by_label("What happened?").fill("See the screenshot.")
                await lin.get_by_label("Attachments (optional)").set_input_files(str(shot))
                await lin.get_by_role("button", name="Create ticket").click()
                await expect(lin.locator(".thread")).to_contain_text("See the screenshot.")
                ticket = await _newest_ticket(rt, world.customer)
                await expect(lin.locator(".thread")).to_contain_text("screenshot.png")

                await sign_in(chen, "chen@acme.test")
                await chen.wait_for_url("**/tickets")
                await chen.goto(f"/tickets/{ticket}")
                await expect(chen.locator(".thread")).to_contain_text("screenshot.png")
                await mark_document(chen)

                await lin.get_by_label("Your reply").fill("It happens every morning.")
                await lin.get_by_role("button", name="Reply", exact=True).click()
                await expect(chen.locator(".thread")).to_contain_text(
                    "It happens every morning.", timeout=SLOW
                )
                assert await same_document(chen)  # pushed, not reloaded

                await chen.get_by_label("Internal note").check()
                await chen.get_by_label("Message").fill("Known firmware bug, see KB-7.")
                await chen.get_by_role("button", name="Add note").click()
                await expect(chen.locator(".thread")).to_contain_text("KB-7")
                await chen.get_by_label("Internal note").uncheck()
                await chen.get_by_label("Message").fill("Please update the firmware.")
                await chen.get_by_role("button", name="Reply and mark pending").click()
                await expect(chen.locator(".thread")).to_contain_text("update the firmware")

                await lin.reload()
                await expect(lin.locator(".thread")).to_contain_text("update the firmware")
                assert "KB-7" not in await lin.content()

                async def reached_lin() -> bool:
                    return any(m["To"] == "lin@acme.test" for m in smtp.messages())

                await wait_for(reached_lin, timeout=60, what="the reply e-mailed to Lin")
                mail = next(m for m in smtp.messages() if m["To"] == "lin@acme.test")
                assert f"[#{ticket}]" in mail["Subject"] and mail["In-Reply-To"]
                assert "KB-7" not in mail.as_string()

                await lin.get_by_label("Your reply").fill("Updated, still broken.")
                await lin.get_by_role("button", name="Reply", exact=True).click()
                await expect(lin.locator(".thread")).to_contain_text("still broken")
                await lin.reload()
                await expect(lin.locator(".badge").first).to_have_text("Open")
    finally:
        worker.stop()
